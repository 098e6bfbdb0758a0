//! The gateway's Streamable HTTP endpoint on 127.0.0.1: `POST /mcp/<server-name>`, one path per
//! registered upstream server, a bearer token per agent.
//!
//! A thin axum forwarder rather than rmcp's server: every method but `tools/call` and the
//! `tasks/*` of Countersign's own tasks passes through verbatim (`tools/list` schemas included),
//! which a typed server handler cannot do without decoding and re-encoding every message, and
//! Countersign's tasks live in the ledger, not in an in-memory task manager. See ARCHITECTURE.md.
//!
//! Both protocol generations agents speak:
//! - **2026-07-28, stateless**: no `initialize`; `server/discover` is the upstream's, with the
//!   tasks and tool-approval extensions added (Countersign serves tasks for the calls it holds
//!   whatever the upstream does). An agent that declares the tasks extension in
//!   `_meta["io.modelcontextprotocol/clientCapabilities"]` gets a task of Countersign's own for
//!   a call that needs a person; `tasks/get` reads it from the ledger.
//! - **2025-11-25 sessions**: `initialize` opens a session (`Mcp-Session-Id`); no tasks. A call
//!   that needs a person is held (the reply is an SSE stream with keep-alive comments) for at
//!   most [`GatewayConfig::hold`], then answered with an `isError` result saying it awaits
//!   approval and that the identical call may be repeated; the approval is bound to (agent,
//!   server, tool, argument digest), so the identical retry after it runs once.
//!
//! Upstreams of both generations: a 2026-07-28 server through a client of the gateway's own; a
//! 2025-11-25 server through its legacy [`Peer`], within the session the engine keeps in the
//! ledger. A 2026-07-28 agent in front of the latter is translated for: `server/discover` from
//! the session's `initialize`, `resultType` on results, a task tool's SEP-1686 task shown and
//! driven as a 2026-07-28 task (`task_json`, `legacy_task_request`).

mod listen;
mod request;
mod sender;
mod session;
mod session_tasks;

use request::{Admitted, Request};
use session::Session;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use countersign_core::console::gateway::{AgentCall, Gate, PolicyInput};
use countersign_core::console::{self, Console};
use countersign_core::gateway::outcome::{
    self, Disposition, TASKS_EXTENSION, TOOL_APPROVAL_EXTENSION,
};
use countersign_core::ledger::agents::AgentRecord;
use countersign_core::ledger::gated::{GatedMode, ToolInfo};
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::mcp::headers::header_params;
use countersign_core::mcp::wire::{CallOutcome, HeaderParam, Task, TaskState};
use countersign_core::mcp::{self, Era, Peer, ToolCall};

const SESSION_HEADER: &str = "mcp-session-id";
/// How often the gateway looks for approvals given in another process (the CLI, the app) and
/// how often a held request looks at its call.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another process runs the engine on this ledger; the gateway must run beside the engine
    /// (it sends approved calls and concludes interrupted ones), so it runs there.
    #[error("another Countersign process (pid {pid:?}) runs the engine on this ledger; run the gateway there, or stop it first")]
    EngineElsewhere {
        /// That process, when known.
        pid: Option<u32>,
    },
    /// The console failed (ledger, engine).
    #[error(transparent)]
    Console(#[from] console::Error),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// How the gateway runs.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Where to listen (127.0.0.1; port 0 = any free port).
    pub addr: SocketAddr,
    /// How long a request of an agent without tasks is held waiting for a decision before it
    /// is told to repeat the call: below common client time-outs (the TypeScript SDK's 60 s).
    pub hold: Duration,
    /// Keep-alive comment interval on held requests.
    pub keep_alive: Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            hold: Duration::from_secs(45),
            keep_alive: Duration::from_secs(10),
        }
    }
}

/// The running gateway.
pub struct Gateway {
    addr: SocketAddr,
    /// `gateway.url` in the data directory, removed at shutdown.
    url_file: Option<std::path::PathBuf>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Gateway {
    /// Starts the gateway on `console`, which must run the engine here: concludes calls a crash
    /// interrupted, then serves the endpoint and sends approved calls.
    pub async fn start(console: Arc<Console>, config: GatewayConfig) -> Result<Gateway, Error> {
        if let console::view::EngineState::Elsewhere { pid } = console.ensure_engine().await? {
            return Err(Error::EngineElsewhere { pid });
        }
        let concluded = console.conclude_interrupted_gated().await?;
        if concluded > 0 {
            tracing::warn!(
                concluded,
                "gated calls interrupted after they were sent are outcome_unknown"
            );
        }
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|source| Error::Bind {
                addr: config.addr,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: config.addr,
            source,
        })?;
        let shared = Arc::new(Shared {
            console,
            config,
            links: Mutex::default(),
            sessions: Mutex::default(),
        });
        let (stop, stopped) = watch::channel(false);
        let router = Router::new()
            .route("/mcp/{server}", post(handle).delete(session::end_session))
            .with_state(shared.clone());
        let mut serve_stop = stopped.clone();
        let server = tokio::spawn(async move {
            let shutdown = async move {
                let _ = serve_stop.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!("the gateway endpoint stopped: {e}");
            }
        });
        // Where `countersign connect` finds the running gateway (stale after a crash: connect
        // then says it cannot reach it).
        let url_file = shared.console.data_dir().join(crate::relay::URL_FILE);
        let url_file = match std::fs::write(&url_file, format!("http://{addr}/mcp/\n")) {
            Ok(()) => Some(url_file),
            Err(e) => {
                tracing::warn!("cannot write {}: {e}", url_file.display());
                None
            }
        };
        let sender = tokio::spawn(sender::send_approved(shared, stopped));
        Ok(Gateway {
            addr,
            url_file,
            stop,
            tasks: vec![server, sender],
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/mcp/` (append a server's name).
    pub fn base_url(&self) -> String {
        format!("http://{}/mcp/", self.addr)
    }

    /// Stops serving (held requests are dropped; their calls stay recorded).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Some(file) = &self.url_file {
            let _ = std::fs::remove_file(file);
        }
        for task in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

/// One upstream server as the gateway reaches it, and what its last `tools/list` said about
/// each tool. A 2026-07-28 server gets a client of the gateway's own; a 2025-11-25 server is
/// reached through its [`Peer`] (the engine's when it runs here), within the session stored in
/// the ledger, which the engine's tracking of the same server's tasks shares.
#[derive(Clone)]
struct Link {
    url: String,
    era: Option<Era>,
    peer: Peer,
    tools: Arc<RwLock<HashMap<String, Arc<Listed>>>>,
}

impl Link {
    fn is_legacy(&self) -> bool {
        matches!(self.peer, Peer::Legacy(_))
    }

    /// Sends `method` upstream with `params` as the agent sent them, the result verbatim. A
    /// 2025-11-25 server gets no `_meta`: its keys there are 2026-07-28's (version,
    /// capabilities), which that generation does not know and the session already settled.
    async fn forward(&self, method: &str, mut params: Map<String, Value>) -> mcp::Result<Value> {
        if self.is_legacy() {
            params.remove("_meta");
        }
        self.peer.forward(method, params).await
    }

    /// An upstream task's state as a 2026-07-28 `tasks/get` result shows it (a 2025-11-25
    /// task as the engine sees it: status from `tasks/get`, the result from `tasks/result`).
    async fn task(&self, task_id: &str) -> mcp::Result<Value> {
        match &self.peer {
            Peer::Modern(_) => {
                let mut params = Map::new();
                params.insert("taskId".into(), json!(task_id));
                self.forward("tasks/get", params).await
            }
            Peer::Legacy(_) => self.peer.get_task(task_id).await.map(|t| task_json(&t)),
        }
    }
}

/// What the upstream's `tools/list` said about one tool.
struct Listed {
    /// For the person deciding (and the read-only switch).
    info: ToolInfo,
    /// `execution.taskSupport` is `required`: a 2026-07-28 agent must declare tasks to call it.
    task_required: bool,
    /// The arguments its `x-mcp-header` annotations mirror into `Mcp-Param-*` headers (none
    /// when the annotations are invalid: the gateway's client then leaves the tool out).
    header_params: Vec<HeaderParam>,
}

struct Shared {
    console: Arc<Console>,
    config: GatewayConfig,
    links: Mutex<HashMap<i64, Link>>,
    sessions: Mutex<HashMap<String, Session>>,
}

impl Shared {
    /// The upstream client for `server` (built once; rebuilt when its URL changed), with the
    /// server's own token from the keyring: agents never see it.
    async fn link(&self, server: &ServerRecord) -> Result<Link, console::Error> {
        if let Some(link) = self
            .links
            .lock()
            .ok()
            .and_then(|l| l.get(&server.id).cloned())
            .filter(|l| l.url == server.url && l.era == server.era)
        {
            return Ok(link);
        }
        let peer = if server.era == Some(Era::Legacy) {
            self.console.peer(server).await?
        } else {
            Peer::Modern(self.console.client(server).await?)
        };
        let link = Link {
            url: server.url.clone(),
            era: server.era,
            peer,
            tools: Arc::default(),
        };
        // Learn which arguments go into headers and what each tool says it does.
        match &link.peer {
            Peer::Modern(client) => {
                if let Ok(list) = client.list_tools().await {
                    remember_tools(&link, list.tools.iter().map(|t| &t.definition));
                }
            }
            Peer::Legacy(_) => {
                if let Ok(list) = link.forward("tools/list", Map::new()).await {
                    if let Some(tools) = list.get("tools").and_then(Value::as_array) {
                        remember_tools(&link, tools.iter().filter_map(Value::as_object));
                    }
                }
            }
        }
        if let Ok(mut links) = self.links.lock() {
            links.insert(server.id, link.clone());
        }
        Ok(link)
    }
}

fn remember_tools<'a>(link: &Link, tools: impl Iterator<Item = &'a Map<String, Value>>) {
    if let Ok(mut map) = link.tools.write() {
        for tool in tools {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                let task_required = tool
                    .get("execution")
                    .and_then(|e| e.get("taskSupport"))
                    .and_then(Value::as_str)
                    == Some("required");
                map.insert(
                    name.to_owned(),
                    Arc::new(Listed {
                        info: countersign_core::gateway::tool_info(tool),
                        task_required,
                        header_params: header_params(tool.get("inputSchema")).unwrap_or_default(),
                    }),
                );
            }
        }
    }
}

// ---- replies ------------------------------------------------------------------------------

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn rpc_error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

fn json_reply(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn unauthorized(message: &str) -> Response {
    let mut response = json_reply(
        StatusCode::UNAUTHORIZED,
        rpc_error(&Value::Null, -32001, message, None),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"countersign-gateway\""),
    );
    response
}

/// An upstream failure as the agent's JSON-RPC error: a JSON-RPC error verbatim, anything else
/// as an internal error naming only the kind of failure (never the upstream URL or token).
fn upstream_error(id: &Value, e: &mcp::Error) -> Value {
    match e {
        mcp::Error::Rpc { error, .. } => {
            rpc_error(id, error.code, &error.message, error.data.clone())
        }
        // The client reads these JSON-RPC errors into variants of their own; the agent gets
        // the code (and data) the upstream sent.
        mcp::Error::MethodNotFound { .. } => rpc_error(id, -32601, "Method not found", None),
        mcp::Error::HeaderMismatch { message, .. } => rpc_error(id, -32020, message, None),
        mcp::Error::MissingCapability {
            required, message, ..
        } => rpc_error(
            id,
            -32021,
            message,
            Some(json!({"requiredCapabilities": required})),
        ),
        mcp::Error::UnknownTask { message, .. } => rpc_error(id, -32602, message, None),
        mcp::Error::InvalidParams { message, data, .. } => {
            rpc_error(id, -32602, message, data.clone())
        }
        e => rpc_error(id, -32603, &console::gateway::upstream_words(e), None),
    }
}

/// The HTTP status of a JSON-RPC error reply to a 2026-07-28 (stateless) request: 400 for the
/// errors about the request's headers, version or capabilities, 404 for an unknown method;
/// 200 otherwise, and always for session clients (to which 404 means "session gone").
fn error_status(reply: &Value, stateless: bool) -> StatusCode {
    match reply["error"]["code"].as_i64() {
        Some(-32022..=-32020) if stateless => StatusCode::BAD_REQUEST,
        Some(-32601) if stateless => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A JSON-RPC error reply with its HTTP status.
fn error_reply(request: &Request, code: i64, message: &str, data: Option<Value>) -> Response {
    let body = rpc_error(&request.id, code, message, data);
    json_reply(error_status(&body, request.stateless), body)
}

/// -32021 to a 2026-07-28 agent that did not declare the tasks extension but needs it.
fn tasks_required(request: &Request, why: &str) -> Response {
    error_reply(
        request,
        -32021,
        why,
        Some(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})),
    )
}

fn console_error(id: &Value, e: &console::Error) -> Value {
    match e {
        console::Error::Server(e) => upstream_error(id, e),
        e => rpc_error(
            id,
            -32603,
            &format!("Countersign could not serve this: {e}"),
            None,
        ),
    }
}

// ---- the handler --------------------------------------------------------------------------

/// `POST /mcp/<server>`: the request is admitted (agent, server, session or 2026-07-28), then
/// each method goes to the module that serves it; what the gateway does not serve itself passes
/// through to the upstream verbatim.
async fn handle(
    State(shared): State<Arc<Shared>>,
    Path(server_name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Admitted {
        agent,
        server,
        policy,
        request,
    } = match request::admit(&shared, &server_name, &headers, &body).await {
        Ok(admitted) => admitted,
        Err(reply) => return reply,
    };
    if request.method == "initialize" {
        return session::initialize(&shared, &agent, &server, &request);
    }
    let mode = match session::mode(&shared, &headers, &agent, &server, &request) {
        Ok(mode) => mode,
        Err(reply) => return reply,
    };
    let link = match shared.link(&server).await {
        Ok(link) => link,
        Err(e) => return json_reply(StatusCode::OK, console_error(&request.id, &e)),
    };
    let task_id = request.own_task_id();
    if request.stateless && request.is_tasks_method() && !request.declares_tasks() {
        return tasks_required(
            &request,
            "tasks/* needs the tasks extension (io.modelcontextprotocol/tasks) declared in _meta",
        );
    }
    if !request.stateless
        && matches!(
            request.method.as_str(),
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel"
        )
    {
        return session_tasks::handle(shared, &agent, &server, request).await;
    }
    match (request.method.as_str(), task_id) {
        ("ping", _) => json_reply(StatusCode::OK, rpc_result(&request.id, json!({}))),
        ("server/discover", _) => discover(&link, &request).await,
        ("tools/list", _) => {
            let taskable = session::declared_tasks(&shared, &headers);
            list_tools(&link, &request, taskable).await
        }
        ("tools/call", _) => {
            if request.stateless {
                let tool = request.params.get("name").and_then(Value::as_str);
                let listed = tool.and_then(|t| link.tools.read().ok()?.get(t).cloned());
                if let Err(refused) = request.check_param_headers(listed.as_deref(), &headers) {
                    return refused;
                }
            }
            let policy = policy.unwrap_or_default();
            call(shared, agent, server, link, request, mode, policy).await
        }
        ("tasks/get", Some(task_id)) => match shared.console.agent_task(agent.id, &task_id).await {
            Ok(Some(mut task)) => {
                task["resultType"] = json!("complete");
                json_reply(StatusCode::OK, rpc_result(&request.id, task))
            }
            Ok(None) => unknown_task(&request),
            Err(e) => json_reply(StatusCode::OK, console_error(&request.id, &e)),
        },
        ("tasks/cancel", Some(task_id)) => {
            let withdrawn = shared.console.withdraw_gated(agent.id, &task_id).await;
            task_acknowledged(&request, withdrawn.map(|call| call.map(|_| ())))
        }
        // Countersign's tasks ask the agent nothing (the upstream's questions go to the
        // person), so there is nothing to update: acknowledged, as for answered keys.
        ("tasks/update", Some(task_id)) => {
            let task = shared.console.agent_task(agent.id, &task_id).await;
            task_acknowledged(&request, task.map(|task| task.map(|_| ())))
        }
        // A 2026-07-28 agent's view of a 2025-11-25 server's task (an allowed call's).
        ("tasks/get" | "tasks/update" | "tasks/cancel", None)
            if request.stateless && link.is_legacy() =>
        {
            legacy_task_request(&link, &request).await
        }
        ("subscriptions/listen", _) => listen::listen(&shared, &link, &request).await,
        (method, _) => {
            let reply = link.forward(method, request.upstream_params()).await;
            forwarded(&request, reply)
        }
    }
}

/// `tasks/get`, `tasks/update` or `tasks/cancel` of a 2025-11-25 server's task, for a
/// 2026-07-28 agent: the task as that generation shows one (the questions of an
/// `input_required` task as `inputRequests`, answered by `tasks/update`; the result inline).
async fn legacy_task_request(link: &Link, request: &Request) -> Response {
    let Some(task_id) = request.params.get("taskId").and_then(Value::as_str) else {
        return error_reply(request, -32602, "Invalid params: taskId is required", None);
    };
    let acknowledged = |done: mcp::Result<()>| done.map(|()| json!({}));
    let reply = match request.method.as_str() {
        "tasks/get" => link.task(task_id).await,
        "tasks/update" => {
            let Some(responses) = request
                .params
                .get("inputResponses")
                .and_then(Value::as_object)
            else {
                return error_reply(
                    request,
                    -32602,
                    "Invalid params: inputResponses must be an object",
                    None,
                );
            };
            acknowledged(link.peer.update_task(task_id, responses.clone()).await)
        }
        _ => acknowledged(link.peer.cancel_task(task_id).await),
    };
    forwarded(request, reply)
}

/// A task as a 2026-07-28 `tasks/get` result (or, without its payload, a task handle) shows it.
fn task_json(task: &Task) -> Value {
    let mut map = Map::new();
    map.insert("taskId".into(), json!(task.task_id));
    map.insert("status".into(), json!(task.reported_status().as_str()));
    for (key, value) in [
        ("statusMessage", &task.status_message),
        ("createdAt", &task.created_at),
        ("lastUpdatedAt", &task.last_updated_at),
    ] {
        if let Some(value) = value {
            map.insert(key.into(), json!(value));
        }
    }
    for (key, value) in [
        ("ttlMs", task.ttl_ms),
        ("pollIntervalMs", task.poll_interval_ms),
    ] {
        if let Some(value) = value {
            map.insert(key.into(), json!(value));
        }
    }
    if let Some(meta) = &task.meta {
        map.insert("_meta".into(), Value::Object(meta.clone()));
    }
    match &task.state {
        TaskState::InputRequired { input_requests } => {
            map.insert("inputRequests".into(), json!(input_requests));
        }
        TaskState::Completed { result } => {
            map.insert("result".into(), Value::Object(result.0.clone()));
        }
        TaskState::Failed { error } => {
            map.insert("error".into(), json!(error));
        }
        TaskState::Working | TaskState::Cancelled => {}
    }
    Value::Object(map)
}

/// `tools/list`, forwarded; what it says about each tool is remembered for the calls. A session
/// agent is shown no tool's `execution.taskSupport`: its session has no tasks (the gateway
/// waits for an upstream's task on its behalf), and a client such as the TypeScript SDK's
/// refuses by itself to call a tool that says it runs only as a task.
/// `tools/list`, passed through. A session agent is shown no `taskSupport` of the upstream's
/// (the gateway follows the upstream's tasks itself); one that declared tasks sees every tool
/// as `optional`, since Countersign can hand it a task of its own for any call.
async fn list_tools(link: &Link, request: &Request, taskable: bool) -> Response {
    let mut reply = link.forward("tools/list", request.upstream_params()).await;
    if let Ok(result) = &mut reply {
        if let Some(tools) = result.get("tools").and_then(Value::as_array) {
            remember_tools(link, tools.iter().filter_map(Value::as_object));
        }
        if !request.stateless {
            let tools = result.get_mut("tools").and_then(Value::as_array_mut);
            for tool in tools.into_iter().flatten() {
                if taskable {
                    if let Some(tool) = tool.as_object_mut() {
                        let execution = tool.entry("execution").or_insert_with(|| json!({}));
                        if let Some(execution) = execution.as_object_mut() {
                            execution.insert("taskSupport".into(), json!("optional"));
                        }
                    }
                    continue;
                }
                let execution = tool.get_mut("execution").and_then(Value::as_object_mut);
                if let Some(execution) = execution {
                    execution.remove("taskSupport");
                    if execution.is_empty() {
                        tool.as_object_mut().map(|t| t.remove("execution"));
                    }
                }
            }
        }
    }
    forwarded(request, reply)
}

/// The reply to a `tasks/cancel` or `tasks/update` of one of Countersign's own tasks.
fn task_acknowledged(request: &Request, found: Result<Option<()>, console::Error>) -> Response {
    match found {
        Ok(Some(())) => json_reply(
            StatusCode::OK,
            rpc_result(&request.id, json!({"resultType": "complete"})),
        ),
        Ok(None) => unknown_task(request),
        Err(e) => json_reply(StatusCode::OK, console_error(&request.id, &e)),
    }
}

fn unknown_task(request: &Request) -> Response {
    json_reply(
        StatusCode::OK,
        rpc_error(&request.id, -32602, "Unknown task", None),
    )
}

/// The reply to a forwarded request. A 2026-07-28 agent's result has the fields that generation's
/// servers must send, which a 2025-11-25 upstream's results lack: its `resultType` (they are
/// complete) and, on the cacheable ones (listings, `resources/read`), how they may be cached
/// (`private`, for no time: the gateway knows nothing of the upstream's caching).
fn forwarded(request: &Request, reply: mcp::Result<Value>) -> Response {
    match reply {
        Ok(mut result) => {
            if let Some(result) = result.as_object_mut().filter(|_| request.stateless) {
                result
                    .entry("resultType")
                    .or_insert_with(|| json!("complete"));
                if matches!(
                    request.method.as_str(),
                    "tools/list"
                        | "prompts/list"
                        | "resources/list"
                        | "resources/templates/list"
                        | "resources/read"
                ) {
                    result
                        .entry("cacheScope")
                        .or_insert_with(|| json!("private"));
                    result.entry("ttlMs").or_insert_with(|| json!(0));
                }
            }
            json_reply(StatusCode::OK, rpc_result(&request.id, result))
        }
        Err(e) => {
            let body = upstream_error(&request.id, &e);
            json_reply(error_status(&body, request.stateless), body)
        }
    }
}

async fn discover(link: &Link, request: &Request) -> Response {
    let discovered = match &link.peer {
        Peer::Legacy(peer) => peer.session().await.map(|s| legacy_discover(&s)),
        Peer::Modern(_) => {
            link.forward("server/discover", request.upstream_params())
                .await
        }
    };
    match discovered {
        Ok(mut result) => {
            // Countersign serves tasks for the calls it holds, whatever the upstream does.
            if let Some(result) = result.as_object_mut() {
                let capabilities = result.entry("capabilities").or_insert_with(|| json!({}));
                if let Some(capabilities) = capabilities.as_object_mut() {
                    let extensions = capabilities
                        .entry("extensions")
                        .or_insert_with(|| json!({}));
                    if let Some(extensions) = extensions.as_object_mut() {
                        extensions.insert(TASKS_EXTENSION.into(), json!({}));
                        extensions.insert(TOOL_APPROVAL_EXTENSION.into(), json!({}));
                    }
                }
            }
            json_reply(StatusCode::OK, rpc_result(&request.id, result))
        }
        Err(e) => json_reply(StatusCode::OK, upstream_error(&request.id, &e)),
    }
}

/// What a 2025-11-25 server told the gateway at `initialize`, as a 2026-07-28 `server/discover`
/// result (the gateway speaks that generation to the agent and the server's to the server).
/// Its capabilities without `tasks` (that generation's task capability; the tasks extension
/// is added as for every server), its `serverInfo` where 2026-07-28 puts it.
fn legacy_discover(session: &mcp::LegacySession) -> Value {
    let mut capabilities = session
        .server_capabilities
        .as_object()
        .cloned()
        .unwrap_or_default();
    capabilities.remove("tasks");
    json!({
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": capabilities,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": session.server_info},
    })
}

// ---- tools/call ---------------------------------------------------------------------------

async fn call(
    shared: Arc<Shared>,
    agent: AgentRecord,
    server: ServerRecord,
    link: Link,
    request: Request,
    mode: GatedMode,
    policy: PolicyInput,
) -> Response {
    let Some(tool) = request
        .params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return json_reply(
            StatusCode::OK,
            rpc_error(&request.id, -32602, "tools/call needs a tool name", None),
        );
    };
    let arguments = match request.params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            return json_reply(
                StatusCode::OK,
                rpc_error(&request.id, -32602, "arguments must be an object", None),
            )
        }
    };
    let listed = link.tools.read().ok().and_then(|m| m.get(&tool).cloned());
    // The upstream would refuse a task-only tool to a 2026-07-28 agent without tasks; the
    // gateway's own client declares tasks, so it says so for the upstream (a session agent,
    // which cannot declare tasks, is served by the gateway waiting for the task instead).
    if request.stateless
        && !request.declares_tasks()
        && listed.as_ref().is_some_and(|l| l.task_required)
    {
        return tasks_required(
            &request,
            &format!("{tool} runs only as a task: declare the tasks extension (io.modelcontextprotocol/tasks)"),
        );
    }
    let gate = shared
        .console
        .gate(
            AgentCall {
                agent: &agent,
                server: &server,
                tool: &tool,
                arguments: &arguments,
                mode,
                tool_info: listed.as_deref().map(|l| &l.info),
            },
            &policy,
        )
        .await;
    // A session agent's task is Countersign's own, for a call a person decides; an allowed
    // call is answered as for any session agent.
    let session_task = session_tasks::asks_for_task(&request);
    let allow_mode = if session_task { GatedMode::Held } else { mode };
    match gate {
        Err(e) => json_reply(StatusCode::OK, console_error(&request.id, &e)),
        Ok(Gate::Allow) if link.is_legacy() => {
            allowed_legacy(
                &shared,
                link,
                request,
                allow_mode,
                ToolCall::new(tool, Some(arguments)),
            )
            .await
        }
        Ok(Gate::Allow) => {
            let reply = link.forward("tools/call", request.upstream_params()).await;
            match reply {
                // An agent without tasks cannot hold the upstream's task: wait for it here.
                Ok(result)
                    if allow_mode == GatedMode::Held
                        && result.get("resultType").and_then(Value::as_str) == Some("task") =>
                {
                    let task_id = result.get("taskId").and_then(Value::as_str);
                    held_upstream(&shared, link, &request, task_id.map(str::to_owned))
                }
                other => forwarded(&request, other),
            }
        }
        Ok(Gate::Denied(call)) => json_reply(
            StatusCode::OK,
            rpc_result(
                &request.id,
                outcome::refusal(
                    &outcome::not_run_text(&call),
                    Disposition::DeniedNotExecuted,
                ),
            ),
        ),
        Ok(Gate::Held(call)) if mode == GatedMode::Task && session_task => json_reply(
            StatusCode::OK,
            rpc_result(
                &request.id,
                session_tasks::created(&outcome::agent_task(&call, None)),
            ),
        ),
        Ok(Gate::Held(call)) if mode == GatedMode::Task => {
            let mut task = outcome::agent_task(&call, None);
            task["resultType"] = json!("task");
            json_reply(StatusCode::OK, rpc_result(&request.id, task))
        }
        Ok(Gate::Held(call)) => {
            let id = request.id.clone();
            let keep_alive = shared.config.keep_alive;
            session::held_reply(keep_alive, request.progress_token(), async move {
                rpc_result(&id, session::hold(shared, link, call).await)
            })
        }
    }
}

/// An allowed call to a 2025-11-25 server, sent through its peer: a tool that supports tasks
/// runs as that generation's task (`params.task`; a `required` one cannot run otherwise),
/// which a 2026-07-28 agent with tasks gets as a task handle (its `tasks/*` are translated, see
/// [`legacy_task_request`]) and the gateway waits for on behalf of an agent without tasks.
async fn allowed_legacy(
    shared: &Arc<Shared>,
    link: Link,
    request: Request,
    mode: GatedMode,
    call: ToolCall,
) -> Response {
    match link.peer.call_tool(&call).await {
        Ok(CallOutcome::Complete(result)) => forwarded(&request, Ok(Value::Object(result.0))),
        Ok(CallOutcome::Task(task)) if mode == GatedMode::Task => {
            let mut handle = task_json(&task);
            handle["resultType"] = json!("task");
            json_reply(StatusCode::OK, rpc_result(&request.id, handle))
        }
        Ok(CallOutcome::Task(task)) => held_upstream(shared, link, &request, Some(task.task_id)),
        // That generation has no such round; its peer never answers so.
        Ok(CallOutcome::InputRequired(_)) => json_reply(
            StatusCode::OK,
            rpc_error(
                &request.id,
                -32603,
                "the upstream asked questions before running the tool, which Countersign cannot relay on this path",
                None,
            ),
        ),
        Err(e) => forwarded(&request, Err(e)),
    }
}

/// The held reply of an allowed call whose upstream answered with a task, for an agent without
/// tasks: the gateway waits for the task within the hold.
fn held_upstream(
    shared: &Shared,
    link: Link,
    request: &Request,
    task_id: Option<String>,
) -> Response {
    let hold = shared.config.hold;
    let keep_alive = shared.config.keep_alive;
    let id = request.id.clone();
    session::held_reply(keep_alive, request.progress_token(), async move {
        rpc_result(&id, wait_upstream(&link, task_id.as_deref(), hold).await)
    })
}

/// The result an agent without tasks gets from a finished task view.
fn task_outcome(task: &Value) -> Value {
    match task["status"].as_str() {
        Some("completed") => task.get("result").cloned().unwrap_or_default(),
        Some("cancelled") => outcome::refusal(
            "The call was cancelled before it finished.",
            Disposition::DeniedNotExecuted,
        ),
        _ => outcome::refusal(
            &format!(
                "The call failed upstream: {}",
                task.get("error").map(Value::to_string).unwrap_or_default()
            ),
            Disposition::ExecutionError,
        ),
    }
}

/// Polls an upstream task (allowed call of an agent without tasks) until it ends or the hold is
/// over, and returns its result.
async fn wait_upstream(link: &Link, task_id: Option<&str>, hold: Duration) -> Value {
    let Some(task_id) = task_id else {
        return outcome::refusal(
            "the upstream answered with a task without an id",
            Disposition::OutcomeUnknown,
        );
    };
    let deadline = tokio::time::Instant::now() + hold;
    loop {
        match link.task(task_id).await {
            Ok(task) if matches!(task["status"].as_str(), Some("completed" | "failed" | "cancelled")) => {
                return task_outcome(&task)
            }
            Ok(_) if tokio::time::Instant::now() < deadline => {}
            Ok(_) => {
                return outcome::notice(&format!(
                    "The call is still running upstream as task {task_id}; it was not cut short. Do not repeat it."
                ))
            }
            Err(e) => return outcome::refusal(&console::gateway::upstream_words(&e), Disposition::OutcomeUnknown),
        }
        tokio::time::sleep(WATCH_INTERVAL * 5).await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{task_json, Task};

    /// A 2025-11-25 task, once its peer has read it as a 2026-07-28 task, goes to the agent as
    /// that generation's `tasks/get` result: every field it was read from, as it was.
    #[test]
    fn a_task_goes_to_the_agent_as_the_task_it_was_read_from() {
        for sent in [
            json!({"taskId": "t1", "status": "working", "statusMessage": "Gathering sources...",
                   "createdAt": "2026-12-07T10:00:00Z", "lastUpdatedAt": "2026-12-07T10:00:01Z",
                   "ttlMs": 300000, "pollIntervalMs": 1000}),
            json!({"taskId": "t2", "status": "input_required",
                   "inputRequests": {"7": {"method": "elicitation/create", "params": {"message": "Which?"}}}}),
            json!({"taskId": "t3", "status": "completed",
                   "result": {"content": [{"type": "text", "text": "# Research Report: rust"}]}}),
            json!({"taskId": "t4", "status": "failed", "error": {"code": -32603, "message": "boom"}}),
            json!({"taskId": "t5", "status": "cancelled"}),
        ] {
            let task = Task::parse_full(&sent).expect("a task");
            assert_eq!(task_json(&task), sent);
        }
    }

    /// A handle without its payload keeps the status the server reported.
    #[test]
    fn a_finished_handle_keeps_its_reported_status() {
        let sent = json!({"taskId": "t6", "status": "completed"});
        let task = Task::parse_handle(&sent).expect("a handle");
        assert_eq!(task_json(&task), sent);
    }
}
