//! The legacy era: MCP 2025-11-25 (and 2025-06-18, 2025-03-26) over Streamable HTTP, with its
//! session, and the SEP-1686 Tasks of that generation.
//!
//! [`LegacyClient::connect`] initializes a session (`initialize`, `notifications/initialized`);
//! every later request carries `Mcp-Session-Id` and `MCP-Protocol-Version`. The session is
//! plain data ([`LegacySession`]) so a caller can store it and [`LegacyClient::resume`] it after a
//! restart; when the server no longer knows it, requests fail with [`Error::SessionExpired`] and
//! the caller initializes again.
//!
//! - `legacy/session.rs`: the HTTP exchanges (POST, GET, DELETE), `initialize`, and telling
//!   "session unknown" apart from other failures;
//! - `legacy/stream.rs`: reading JSON or SSE bodies message by message (priming events skipped,
//!   `retry:` and event ids kept for resumption), bounded by [`crate::MAX_BODY_BYTES`] per event;
//! - `legacy/result.rs`: the `tasks/result` stream ([`TaskResult`]) and the GET stream
//!   ([`SessionStream`]), which the caller drives;
//! - [`wire`]: the 2025-11-25 Tasks JSON shapes.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::client::{ClientOptions, Endpoint};
use crate::error::{Error, Result};
use crate::sensitive::Sensitive;

mod result;
mod session;
pub(crate) mod stream;
pub mod wire;

pub use result::{SessionEvent, SessionStream, TaskResult, TaskResultEvent};
pub use wire::{
    CancelOutcome, ElicitAction, ServerRequest, Task, TaskMetadata, TaskPage, TaskStatus,
    TaskSupport, Tool, ToolOutcome, META_RELATED_TASK,
};

/// The legacy protocol versions this client speaks, newest first: the one it asks for, then
/// the older answers it accepts.
pub const LEGACY_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The most requests a server may send us on one stream (a `tasks/result` or the GET stream):
/// a person answers a handful of questions per task, and a server that floods them is cut off
/// with a typed error instead of filling an inbox.
pub const MAX_SERVER_REQUESTS_PER_STREAM: usize = 64;

/// How many times a dropped stream is reopened in a row without a message in between.
pub const MAX_RECONNECTS: usize = 5;

/// What the client declares at `initialize`: both elicitation modes (the questions of an
/// `input_required` task), and `tasks` with no sub-capability. Calling tools as tasks needs no
/// client capability; `tasks.list`, `tasks.cancel` and `tasks.requests` would declare that we
/// *run* tasks for the server (receive task-augmented elicitations and serve `tasks/get` on
/// them), which we do not: declaring them would make servers such as server-everything offer
/// tools that then wait on us in vain. Nothing is declared that the client cannot do.
pub fn legacy_client_capabilities() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "tasks": {}})
}

/// A legacy session as the caller stores it: enough to keep using it after a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacySession {
    /// `Mcp-Session-Id`, when the server issued one (a stateless server issues none).
    pub session_id: Option<String>,
    /// The negotiated version (one of [`LEGACY_VERSIONS`]).
    pub protocol_version: String,
    /// The server's `capabilities`, verbatim.
    pub server_capabilities: Value,
    /// The server's `serverInfo`, verbatim.
    pub server_info: Value,
}

impl LegacySession {
    /// Whether the server declared `tasks.requests.tools.call` (it takes task-augmented calls).
    pub fn supports_tool_tasks(&self) -> bool {
        self.server_capabilities
            .pointer("/tasks/requests/tools/call")
            .is_some()
    }

    /// Whether the server declared `tasks.list`.
    pub fn supports_task_list(&self) -> bool {
        self.server_capabilities.pointer("/tasks/list").is_some()
    }

    /// Whether the server declared `tasks.cancel`.
    pub fn supports_task_cancel(&self) -> bool {
        self.server_capabilities.pointer("/tasks/cancel").is_some()
    }
}

/// A client for one legacy server and one session. Cheap to clone; clones share the session
/// and the connection pool.
#[derive(Debug, Clone)]
pub struct LegacyClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Requests: bounded by the request timeout.
    http: reqwest::Client,
    /// Streams (`tasks/result`, GET): no whole-request timeout, their own pool.
    streams: reqwest::Client,
    url: reqwest::Url,
    endpoint: Endpoint,
    options: ClientOptions,
    token: RwLock<Option<Sensitive<String>>>,
    session: RwLock<LegacySession>,
    next_id: AtomicU64,
    /// A stdio server's process: every message goes on its stdin instead of over HTTP.
    stdio: Option<crate::stdio::StdioProcess>,
}

impl LegacyClient {
    /// Opens a session: `initialize` with the newest version both sides speak, then
    /// `notifications/initialized`.
    pub async fn connect(endpoint: Endpoint, options: ClientOptions) -> Result<Self> {
        let client = Self::unconnected(endpoint, options)?;
        client.initialize().await?;
        Ok(client)
    }

    /// A client with no session yet, for a caller that has to be able to repeat the handshake
    /// with the same client (a sign-in on `401` hands it the token, then
    /// [`LegacyClient::initialize`] runs again). Sends nothing.
    pub fn unconnected(endpoint: Endpoint, options: ClientOptions) -> Result<Self> {
        Self::build(
            endpoint,
            options,
            LegacySession {
                session_id: None,
                protocol_version: LEGACY_VERSIONS[0].into(),
                server_capabilities: Value::Null,
                server_info: Value::Null,
            },
        )
    }

    /// Takes up a stored session without sending anything. If the server no longer knows it,
    /// the first request fails with [`Error::SessionExpired`].
    pub fn resume(
        endpoint: Endpoint,
        options: ClientOptions,
        session: LegacySession,
    ) -> Result<Self> {
        if !LEGACY_VERSIONS.contains(&session.protocol_version.as_str()) {
            return Err(Error::UnsupportedVersion {
                requested: session.protocol_version,
                supported: LEGACY_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
            });
        }
        Self::build(endpoint, options, session)
    }

    /// Opens a session with a stdio server's running process: with `probe`, the specification's
    /// stdio detection first (`server/discover`; any answer that is not a modern server's, or
    /// none within the probe time, means a legacy server; a modern one is
    /// [`Error::ModernStdio`]), then `initialize`. [`crate::stdio::StdioServer::connect`] is
    /// the usual way in.
    pub async fn connect_stdio(
        process: crate::stdio::StdioProcess,
        label: &str,
        options: ClientOptions,
        probe: bool,
    ) -> Result<Self> {
        let session = LegacySession {
            session_id: None,
            protocol_version: LEGACY_VERSIONS[0].into(),
            server_capabilities: Value::Null,
            server_info: Value::Null,
        };
        let http = reqwest::Client::new();
        let client = Self {
            inner: Arc::new(Inner {
                streams: http.clone(),
                http,
                url: reqwest::Url::parse("stdio:server")
                    .map_err(|e| Error::InvalidRequest(format!("stdio placeholder URL: {e}")))?,
                token: RwLock::new(None),
                endpoint: Endpoint::new(label),
                options,
                session: RwLock::new(session),
                next_id: AtomicU64::new(1),
                stdio: Some(process),
            }),
        };
        if probe {
            client.probe_stdio().await?;
        }
        client.initialize().await?;
        Ok(client)
    }

    fn build(endpoint: Endpoint, options: ClientOptions, session: LegacySession) -> Result<Self> {
        let url = crate::client::check_server_url(&endpoint.url)?;
        let transport = |e: reqwest::Error| Error::Transport {
            url: endpoint.url.clone(),
            message: e.to_string(),
        };
        let http = reqwest::Client::builder()
            .redirect(crate::client::redirect_policy())
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .pool_idle_timeout(std::time::Duration::from_secs(90))
            .build()
            .map_err(transport)?;
        let streams = reqwest::Client::builder()
            .redirect(crate::client::redirect_policy())
            .connect_timeout(options.connect_timeout)
            .tcp_keepalive(std::time::Duration::from_secs(30))
            .pool_idle_timeout(std::time::Duration::from_secs(90))
            .build()
            .map_err(transport)?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                streams,
                url,
                token: RwLock::new(endpoint.bearer_token.clone()),
                endpoint,
                options,
                session: RwLock::new(session),
                next_id: AtomicU64::new(1),
                stdio: None,
            }),
        })
    }

    /// The session as it stands, for the caller to store.
    pub fn session(&self) -> LegacySession {
        self.inner
            .session
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.inner.endpoint.url
    }

    /// Replaces the bearer token sent from now on (an OAuth sign-in or refresh).
    pub fn set_bearer_token(&self, token: Option<Sensitive<String>>) {
        *self.inner.token.write().unwrap_or_else(|e| e.into_inner()) = token;
    }

    /// `tools/list`, all pages, each tool with its `execution.taskSupport`. Entries without a
    /// name are skipped.
    pub async fn list_tools(&self) -> Result<Vec<Tool>> {
        const MAX_PAGES: usize = 1000;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut params = Map::new();
            if let Some(c) = cursor.take() {
                params.insert("cursor".into(), Value::String(c));
            }
            let result = self.request("tools/list", params).await?;
            let entries = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("tools/list", "the result has no `tools` array"))?;
            tools.extend(entries.iter().filter_map(Tool::parse));
            cursor = next_cursor(&result);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// `tools/call`; with `task`, task-augmented (`params.task`): the server answers with a
    /// task handle ([`ToolOutcome::Task`]), or, if it ran the call anyway, its result.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        task: Option<TaskMetadata>,
    ) -> Result<ToolOutcome> {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.into()));
        if let Some(arguments) = arguments {
            params.insert("arguments".into(), Value::Object(arguments));
        }
        if let Some(task) = task {
            params.insert("task".into(), json!(task));
        }
        let result = self.request("tools/call", params).await?;
        ToolOutcome::parse(result).map_err(|reason| invalid("tools/call", reason))
    }

    /// Any request, in this session, with `params` as given: the result verbatim (a JSON-RPC
    /// error as [`Error`]). The gateway's pass-through of a session agent's methods; server
    /// requests arriving meanwhile are refused, as for every request of this client.
    pub async fn forward(&self, method: &str, params: Map<String, Value>) -> Result<Value> {
        self.request(method, params).await
    }

    /// `tasks/get`: the task's state. A task the server does not know (in this session) is
    /// [`Error::UnknownTask`].
    pub async fn get_task(&self, task_id: &str) -> Result<Task> {
        let result = self.task_request("tasks/get", task_id).await?;
        read_task("tasks/get", task_id, result)
    }

    /// `tasks/list`, one page (`cursor` from the previous page's `next_cursor`). A session sees
    /// only its own tasks.
    pub async fn list_tasks(&self, cursor: Option<&str>) -> Result<TaskPage> {
        let mut params = Map::new();
        if let Some(c) = cursor {
            params.insert("cursor".into(), Value::String(c.into()));
        }
        let result = self.request("tasks/list", params).await?;
        serde_json::from_value(result).map_err(|e| invalid("tasks/list", e.to_string()))
    }

    /// `tasks/cancel`. A task that already reached a terminal status is
    /// [`CancelOutcome::AlreadyFinished`], not an error.
    pub async fn cancel_task(&self, task_id: &str) -> Result<CancelOutcome> {
        match self.task_request("tasks/cancel", task_id).await {
            Ok(result) => read_task("tasks/cancel", task_id, result).map(CancelOutcome::Cancelled),
            Err(Error::UnknownTask { message, .. } | Error::InvalidParams { message, .. })
                if message.to_ascii_lowercase().contains("terminal") =>
            {
                Ok(CancelOutcome::AlreadyFinished { message })
            }
            Err(other) => Err(other),
        }
    }

    /// Opens `tasks/result` for a task: the caller drives it ([`TaskResult::next`]), answers the
    /// server's questions on it, and gets the tool's result at the end. It waits as long as the
    /// task runs (up to `idle_timeout` of silence), so call it for a task in `input_required`
    /// or a terminal status.
    pub async fn task_result(
        &self,
        task_id: &str,
        idle_timeout: std::time::Duration,
    ) -> Result<TaskResult> {
        TaskResult::open(self.clone(), task_id, idle_timeout).await
    }

    /// Opens the optional GET stream on which the server sends what is not an answer to a
    /// request (`notifications/tasks/status`, requests of its own). `None` when the server
    /// offers none (405).
    pub async fn open_stream(
        &self,
        idle_timeout: std::time::Duration,
    ) -> Result<Option<SessionStream>> {
        SessionStream::open(self.clone(), idle_timeout).await
    }

    /// Sends the JSON-RPC result for a request the server sent us.
    pub async fn respond(&self, request_id: &Value, result: Map<String, Value>) -> Result<()> {
        self.send_message(json!({"jsonrpc": "2.0", "id": request_id, "result": result}))
            .await
    }

    /// Sends a JSON-RPC error for a request the server sent us.
    pub async fn respond_error(&self, request_id: &Value, code: i64, message: &str) -> Result<()> {
        self.send_message(json!({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}))
            .await
    }

    /// Ends the session (`DELETE`). A server that does not allow it (405) or no longer knows
    /// the session is not an error: either way the session is over for us.
    pub async fn close(&self) -> Result<()> {
        self.delete().await
    }

    async fn task_request(&self, method: &str, task_id: &str) -> Result<Value> {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(task_id.into()));
        self.request(method, params).await
    }
}

fn read_task(method: &str, task_id: &str, result: Value) -> Result<Task> {
    let task: Task = serde_json::from_value(result).map_err(|e| invalid(method, e.to_string()))?;
    if task.task_id != task_id {
        return Err(invalid(
            method,
            format!(
                "asked about task {task_id:?}, the answer is about {:?}",
                task.task_id
            ),
        ));
    }
    Ok(task)
}

fn next_cursor(result: &Value) -> Option<String> {
    match result.get("nextCursor") {
        Some(Value::String(c)) if !c.is_empty() => Some(c.clone()),
        _ => None,
    }
}

fn invalid(method: &str, reason: impl Into<String>) -> Error {
    Error::InvalidResponse {
        method: method.into(),
        reason: reason.into(),
    }
}
