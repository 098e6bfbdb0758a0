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

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, watch};

use countersign_core::console::gateway::{AgentCall, Claim, Gate, PolicyInput};
use countersign_core::console::{self, Console};
use countersign_core::gateway::outcome::{
    self, Disposition, TASKS_EXTENSION, TOOL_APPROVAL_EXTENSION,
};
use countersign_core::gateway::TASK_PREFIX;
use countersign_core::ledger::agents::AgentRecord;
use countersign_core::ledger::gated::{GatedMode, GatedRecord, GatedState, ToolInfo};
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::mcp::headers::{check_param_headers, header_params};
use countersign_core::mcp::sse::SseDecoder;
use countersign_core::mcp::subscription::{DEFAULT_IDLE_TIMEOUT, META_SUBSCRIPTION_ID};
use countersign_core::mcp::wire::HeaderParam;
use countersign_core::mcp::{self, Client, RelayedListen};

/// The session-era protocol versions the gateway answers `initialize` with (the agent's own
/// when it is one of these, else the newest).
const SESSION_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// The stateless protocol version.
const STATELESS_VERSION: &str = "2026-07-28";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const SESSION_HEADER: &str = "mcp-session-id";
/// How often the gateway looks for approvals given in another process (the CLI, the app) and
/// how often a held request looks at its call.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);
/// How often undecided calls are checked for expiry.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(5);
/// Most sessions kept (the oldest is dropped beyond; its agent re-initializes).
const MAX_SESSIONS: usize = 4096;

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
            .route("/mcp/{server}", post(handle).delete(end_session))
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
        let sender = tokio::spawn(send_approved(shared, stopped));
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

/// A client for one upstream server and what its last `tools/list` said about each tool.
#[derive(Clone)]
struct Link {
    url: String,
    client: Client,
    tools: Arc<RwLock<HashMap<String, Arc<Listed>>>>,
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

struct Session {
    agent_id: i64,
    server: String,
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
            .filter(|l| l.url == server.url)
        {
            return Ok(link);
        }
        let client = self.console.client(server).await?;
        let link = Link {
            url: server.url.clone(),
            client,
            tools: Arc::default(),
        };
        // Learn which arguments go into headers and what each tool says it does.
        if let Ok(list) = link.client.list_tools().await {
            remember_tools(&link, list.tools.iter().map(|t| &t.definition));
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

/// What one request says about its sender.
struct Request {
    id: Value,
    method: String,
    params: Map<String, Value>,
    /// A 2026-07-28 request (no session): stricter checks, HTTP statuses on errors.
    stateless: bool,
}

impl Request {
    fn declares_tasks(&self) -> bool {
        self.params
            .get("_meta")
            .and_then(|m| m.get(META_CAPABILITIES))
            .and_then(|c| c.get("extensions"))
            .and_then(|e| e.get(TASKS_EXTENSION))
            .is_some()
    }

    fn stateless(&self, headers: &HeaderMap) -> bool {
        let header = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let meta = self
            .params
            .get("_meta")
            .and_then(|m| m.get(META_VERSION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        [header, meta]
            .iter()
            .flatten()
            .any(|v| v.as_str() >= STATELESS_VERSION)
    }

    /// A 2026-07-28 request's own consistency (SEP-2575, SEP-2243): `_meta` with the protocol
    /// version and the client's capabilities; the `MCP-Protocol-Version`, `Mcp-Method` and
    /// `Mcp-Name` headers, when sent, agreeing with the body; a version the gateway speaks;
    /// none of the methods 2026-07-28 removed. The upstream checks its own copy, which the
    /// gateway's client writes from the body, so the agent's headers are checked here.
    fn check_stateless(&self, headers: &HeaderMap) -> Result<(), Response> {
        let header = |name: &str| {
            headers
                .get(name)
                .map(|v| v.to_str().map(str::trim).unwrap_or("\u{fffd}"))
        };
        let invalid = |what: &str| {
            Err(json_reply(
                StatusCode::BAD_REQUEST,
                rpc_error(
                    &self.id,
                    -32602,
                    &format!("Invalid params: {what} is required"),
                    None,
                ),
            ))
        };
        let Some(meta) = self.params.get("_meta").and_then(Value::as_object) else {
            return invalid("_meta");
        };
        let Some(version) = meta.get(META_VERSION).and_then(Value::as_str) else {
            return invalid(&format!("_meta[\"{META_VERSION}\"]"));
        };
        if !meta.get(META_CAPABILITIES).is_some_and(Value::is_object) {
            return invalid(&format!("_meta[\"{META_CAPABILITIES}\"]"));
        }
        let mismatch = |what: &str| {
            Err(error_reply(
                self,
                -32020,
                &format!("Header mismatch: {what} does not match the request body"),
                None,
            ))
        };
        if header("mcp-protocol-version").is_some_and(|h| h != version) {
            return mismatch("MCP-Protocol-Version");
        }
        if header("mcp-method") != Some(self.method.as_str()) {
            return mismatch("Mcp-Method (missing or different)");
        }
        // The name a request routes by must come as `Mcp-Name` too (plain, or the
        // `=?base64?…?=` form), equal to the body's.
        let routing = match self.method.as_str() {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
            _ => None,
        };
        if let Some(name) = routing
            .and_then(|f| self.params.get(f))
            .and_then(Value::as_str)
        {
            match header("mcp-name").map(countersign_core::mcp::headers::decode_header_value) {
                Some(Some(sent)) if sent == name => {}
                _ => return mismatch("Mcp-Name (missing or different)"),
            }
        }
        if version != STATELESS_VERSION {
            return Err(error_reply(
                self,
                -32022,
                &format!("Unsupported protocol version {version}"),
                Some(json!({"supported": [STATELESS_VERSION], "requested": version})),
            ));
        }
        if matches!(
            self.method.as_str(),
            "initialize"
                | "ping"
                | "logging/setLevel"
                | "resources/subscribe"
                | "resources/unsubscribe"
        ) {
            return Err(error_reply(
                self,
                -32601,
                &format!(
                    "Method not found: {} is not part of MCP 2026-07-28",
                    self.method
                ),
                None,
            ));
        }
        Ok(())
    }

    /// The `_meta.progressToken` the agent sent, if any (a string or a number).
    fn progress_token(&self) -> Option<Value> {
        self.params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned()
    }

    /// The params to send upstream. The agent's `_meta` is the agent's (its version, identity);
    /// the gateway's client sends its own, but with the capabilities of the agent it speaks
    /// for (`mcp::Client::forward`): the upstream must know what this agent can do to serve
    /// or refuse it as it would the agent itself. A 2026-07-28 agent's are the ones it
    /// declares. A session agent's are tasks only: the gateway waits for an upstream task on
    /// its behalf, but cannot put an upstream's questions (MRTR) to it, as 2025-11-25 has no
    /// such round, so the upstream must not plan on asking (it refuses with -32021 instead,
    /// which the agent understands). Approved calls are the gateway's own and go through the
    /// console, whose questions go to the person.
    fn upstream_params(&self) -> Map<String, Value> {
        let mut params = self.params.clone();
        let meta = params.remove("_meta");
        let capabilities = if self.stateless {
            meta.as_ref()
                .and_then(|m| m.get(META_CAPABILITIES))
                .cloned()
        } else {
            Some(json!({"extensions": {TASKS_EXTENSION: {}}}))
        };
        if let Some(capabilities) = capabilities {
            params.insert("_meta".into(), json!({ META_CAPABILITIES: capabilities }));
        }
        params
    }

    /// A 2026-07-28 `tools/call`'s `Mcp-Param-*` headers against its arguments, as a server
    /// checks them (SEP-2243): the gateway's client writes the upstream's copy from the body,
    /// so a mismatch the agent sent would otherwise go unseen. 400 and -32020 when they differ.
    fn check_param_headers(
        &self,
        listed: Option<&Listed>,
        headers: &HeaderMap,
    ) -> Result<(), Response> {
        let Some(listed) = listed.filter(|l| !l.header_params.is_empty()) else {
            return Ok(());
        };
        let arguments = self.params.get("arguments").and_then(Value::as_object);
        let sent = |name: &str| {
            let mut values = headers.get_all(name).iter();
            let first = values.next()?;
            // Sent twice, or not visible ASCII: a value that cannot decode.
            Some(match (first.to_str(), values.next()) {
                (Ok(value), None) => value,
                _ => "\u{fffd}",
            })
        };
        check_param_headers(&listed.header_params, arguments, sent).map_err(|mismatch| {
            error_reply(self, -32020, &format!("Header mismatch: {mismatch}"), None)
        })
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

// ---- the handler --------------------------------------------------------------------------

async fn handle(
    State(shared): State<Arc<Shared>>,
    Path(server_name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(token) = bearer(&headers) else {
        return unauthorized("a bearer token is required (countersign agents add NAME)");
    };
    let message: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => {
            return json_reply(
                StatusCode::BAD_REQUEST,
                rpc_error(&Value::Null, -32700, &format!("Parse error: {e}"), None),
            )
        }
    };
    let method = message.get("method").and_then(Value::as_str);
    let tool = match method {
        Some("tools/call") => message
            .get("params")
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str),
        _ => None,
    };
    // One read for the agent, the server and the policy: every request shares one reader.
    let admission = match shared.console.admit(token, &server_name, tool).await {
        Ok(admission) => admission,
        Err(e) => {
            return json_reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                console_error(&Value::Null, &e),
            )
        }
    };
    let Some(agent) = admission.agent else {
        return unauthorized("unknown or revoked agent token");
    };
    let Some(server) = admission.server else {
        return json_reply(
            StatusCode::NOT_FOUND,
            rpc_error(
                &Value::Null,
                -32602,
                &format!("no server named {server_name:?} is registered in Countersign"),
                None,
            ),
        );
    };
    let Some(method) = method else {
        // A response to a request of ours: the gateway sends none.
        return StatusCode::ACCEPTED.into_response();
    };
    let Some(id) = message.get("id").cloned() else {
        // A notification (`notifications/initialized`, cancellations): nothing to answer.
        return StatusCode::ACCEPTED.into_response();
    };
    let params = match message.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            return json_reply(
                StatusCode::BAD_REQUEST,
                rpc_error(&id, -32602, "params must be an object", None),
            )
        }
    };
    let mut request = Request {
        id,
        method: method.to_owned(),
        params,
        stateless: false,
    };
    let session = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    if session.is_none() && request.stateless(&headers) {
        request.stateless = true;
        if let Err(refused) = request.check_stateless(&headers) {
            return refused;
        }
    }

    if request.method == "initialize" {
        return initialize(&shared, &agent, &server, &request);
    }
    let mode = match session {
        Some(session) => {
            let known = shared.sessions.lock().ok().is_some_and(|s| {
                s.get(session)
                    .is_some_and(|s| s.agent_id == agent.id && s.server == server.name)
            });
            if !known {
                return json_reply(
                    StatusCode::NOT_FOUND,
                    rpc_error(&request.id, -32001, "Session not found; initialize again", None),
                );
            }
            GatedMode::Held
        }
        None if request.stateless => {
            if request.declares_tasks() {
                GatedMode::Task
            } else {
                GatedMode::Held
            }
        }
        None => {
            return json_reply(
                StatusCode::BAD_REQUEST,
                rpc_error(
                    &request.id,
                    -32600,
                    "Bad Request: send initialize first (2025-11-25) or MCP-Protocol-Version 2026-07-28",
                    None,
                ),
            )
        }
    };

    let link = match shared.link(&server).await {
        Ok(link) => link,
        Err(e) => return json_reply(StatusCode::OK, console_error(&request.id, &e)),
    };
    let task_id = request
        .params
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|t| t.starts_with(TASK_PREFIX))
        .map(str::to_owned);
    if request.stateless
        && matches!(
            request.method.as_str(),
            "tasks/get" | "tasks/update" | "tasks/cancel"
        )
        && !request.declares_tasks()
    {
        return tasks_required(
            &request,
            "tasks/* needs the tasks extension (io.modelcontextprotocol/tasks) declared in _meta",
        );
    }
    match (request.method.as_str(), task_id) {
        ("ping", _) => json_reply(StatusCode::OK, rpc_result(&request.id, json!({}))),
        ("server/discover", _) => discover(&link, &request).await,
        ("tools/list", _) => {
            let reply = link
                .client
                .forward("tools/list", request.upstream_params())
                .await;
            if let Ok(result) = &reply {
                if let Some(tools) = result.get("tools").and_then(Value::as_array) {
                    remember_tools(&link, tools.iter().filter_map(Value::as_object));
                }
            }
            forwarded(&request, reply)
        }
        ("tools/call", _) => {
            if request.stateless {
                let tool = request.params.get("name").and_then(Value::as_str);
                let listed = tool.and_then(|t| link.tools.read().ok()?.get(t).cloned());
                if let Err(refused) = request.check_param_headers(listed.as_deref(), &headers) {
                    return refused;
                }
            }
            let policy = admission.policy.unwrap_or_default();
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
            match shared.console.withdraw_gated(agent.id, &task_id).await {
                Ok(Some(_)) => json_reply(
                    StatusCode::OK,
                    rpc_result(&request.id, json!({"resultType": "complete"})),
                ),
                Ok(None) => unknown_task(&request),
                Err(e) => json_reply(StatusCode::OK, console_error(&request.id, &e)),
            }
        }
        // Countersign's tasks ask the agent nothing (the upstream's questions go to the
        // person), so there is nothing to update: acknowledged, as for answered keys.
        ("tasks/update", Some(task_id)) => {
            match shared.console.agent_task(agent.id, &task_id).await {
                Ok(Some(_)) => json_reply(
                    StatusCode::OK,
                    rpc_result(&request.id, json!({"resultType": "complete"})),
                ),
                Ok(None) => unknown_task(&request),
                Err(e) => json_reply(StatusCode::OK, console_error(&request.id, &e)),
            }
        }
        ("subscriptions/listen", _) => listen(&shared, &link, &request).await,
        (method, _) => {
            let reply = link.client.forward(method, request.upstream_params()).await;
            forwarded(&request, reply)
        }
    }
}

// ---- subscriptions/listen -----------------------------------------------------------------

/// `subscriptions/listen`, relayed to the upstream as a stream: the agent's filter goes up, each
/// message comes back retagged with the agent's own subscription id (the agent's request id;
/// the upstream knows the gateway's), the upstream's closing response or cancellation ends the
/// relay. Bounded as the engine's own listen is: at most [`DEFAULT_IDLE_TIMEOUT`] of upstream
/// silence (its keep-alives count), an event no larger than a response body; the agent hears
/// the gateway's keep-alives. An agent that hangs up drops the relay at the next write, which
/// closes the upstream connection, which ends the subscription there.
///
/// Countersign's own tasks (`csg-…`) are not the upstream's: their ids are kept out of the
/// upstream's filter, so its acknowledgement leaves them out and the agent polls them with
/// `tasks/get` (notifications are optional, polling is what every agent does anyway).
async fn listen(shared: &Shared, link: &Link, request: &Request) -> Response {
    let mut params = request.upstream_params();
    if let Some(ids) = params
        .get_mut("notifications")
        .and_then(|n| n.get_mut("taskIds"))
        .and_then(Value::as_array_mut)
    {
        ids.retain(|id| !id.as_str().is_some_and(|id| id.starts_with(TASK_PREFIX)));
    }
    match link.client.relay_listen(params).await {
        Err(e) => forwarded(request, Err(e)),
        Ok(RelayedListen::Message { id, text }) => match serde_json::from_str::<Value>(&text) {
            Ok(message) => {
                let (message, _) = retag(message, id, &request.id);
                json_reply(error_status(&message, request.stateless), message)
            }
            Err(_) => json_reply(
                StatusCode::BAD_GATEWAY,
                rpc_error(
                    &request.id,
                    -32603,
                    "the upstream answered subscriptions/listen with a body that is not JSON",
                    None,
                ),
            ),
        },
        Ok(RelayedListen::Stream { id, body }) => {
            let relay = Relay {
                body,
                decoder: SseDecoder::new(),
                upstream_id: id,
                agent_id: request.id.clone(),
                queue: std::collections::VecDeque::new(),
                ended: false,
            };
            let stream = futures_util::stream::unfold(relay, |mut relay| async move {
                let event = relay.next().await?;
                Some((Ok::<_, Infallible>(event), relay))
            });
            Sse::new(stream)
                .keep_alive(
                    KeepAlive::new()
                        .interval(shared.config.keep_alive)
                        .text("keep-alive"),
                )
                .into_response()
        }
    }
}

/// One relayed listen stream.
struct Relay {
    body: futures_util::stream::BoxStream<'static, mcp::Result<Bytes>>,
    decoder: SseDecoder,
    upstream_id: u64,
    agent_id: Value,
    queue: std::collections::VecDeque<Event>,
    /// The upstream closed the subscription, broke the stream's rules, or went silent.
    ended: bool,
}

impl Relay {
    /// The next message for the agent; `None` when the relay is over.
    async fn next(&mut self) -> Option<Event> {
        use futures_util::StreamExt as _;
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            let mut events = Vec::new();
            match tokio::time::timeout(DEFAULT_IDLE_TIMEOUT, self.body.next()).await {
                Ok(Some(Ok(bytes))) => {
                    if self.decoder.feed(&bytes, &mut events).is_err() {
                        tracing::warn!(
                            "an upstream listen event passed the size limit; the relay ends"
                        );
                        self.ended = true;
                    }
                }
                Ok(None) => {
                    self.decoder.finish(&mut events);
                    self.ended = true;
                }
                Ok(Some(Err(e))) => {
                    tracing::debug!("the upstream listen stream broke: {e}");
                    self.ended = true;
                }
                Err(_) => {
                    tracing::debug!("the upstream listen stream went silent; the relay ends");
                    self.ended = true;
                }
            }
            for event in events {
                let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                    continue;
                };
                // A request on a listen stream could not be answered through the relay.
                if message.get("method").is_some() && message.get("id").is_some() {
                    continue;
                }
                let (message, last) = retag(message, self.upstream_id, &self.agent_id);
                self.queue
                    .push_back(Event::default().event("message").data(message.to_string()));
                if last {
                    self.ended = true;
                    break;
                }
            }
        }
    }
}

/// An upstream listen-stream message as the agent's: the subscription id, the response's id and
/// a cancellation's `requestId` become the agent's request id. Also says whether it ends the
/// subscription (the response, or a cancellation of it).
fn retag(mut message: Value, upstream_id: u64, agent_id: &Value) -> (Value, bool) {
    let upstream = Value::from(upstream_id);
    if message.get("method").is_none() {
        if let Some(id) = message.get_mut("id") {
            *id = agent_id.clone();
        }
        return (message, true);
    }
    let cancels = message["method"] == "notifications/cancelled"
        && message["params"]["requestId"] == upstream;
    if cancels {
        message["params"]["requestId"] = agent_id.clone();
    }
    if let Some(tag) = message
        .get_mut("params")
        .and_then(|p| p.get_mut("_meta"))
        .and_then(|m| m.get_mut(META_SUBSCRIPTION_ID))
    {
        *tag = agent_id.clone();
    }
    (message, cancels)
}

fn unknown_task(request: &Request) -> Response {
    json_reply(
        StatusCode::OK,
        rpc_error(&request.id, -32602, "Unknown task", None),
    )
}

fn forwarded(request: &Request, reply: mcp::Result<Value>) -> Response {
    match reply {
        Ok(result) => json_reply(StatusCode::OK, rpc_result(&request.id, result)),
        Err(e) => {
            let body = upstream_error(&request.id, &e);
            json_reply(error_status(&body, request.stateless), body)
        }
    }
}

/// `DELETE /mcp/<server>` with a session id: the agent ends its session.
async fn end_session(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> StatusCode {
    let Some(token) = bearer(&headers) else {
        return StatusCode::UNAUTHORIZED;
    };
    let agent = match shared.console.authenticate_agent(token).await {
        Ok(Some(agent)) => agent,
        Ok(None) => return StatusCode::UNAUTHORIZED,
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR,
    };
    let Some(session) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return StatusCode::BAD_REQUEST;
    };
    let Ok(mut sessions) = shared.sessions.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR;
    };
    // Only the session's own agent ends it.
    if sessions
        .get(session)
        .is_some_and(|s| s.agent_id == agent.id)
    {
        sessions.remove(session);
        StatusCode::NO_CONTENT
    } else {
        StatusCode::NOT_FOUND
    }
}

fn initialize(
    shared: &Shared,
    agent: &AgentRecord,
    server: &ServerRecord,
    request: &Request,
) -> Response {
    let asked = request
        .params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = SESSION_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .copied()
        .unwrap_or(SESSION_VERSIONS[0]);
    // What the upstream offers, minus extensions (this generation has none, tasks included).
    let mut capabilities = Map::new();
    if let Some(Value::Object(upstream)) = &server.capabilities {
        for key in ["tools", "resources", "prompts", "completions", "logging"] {
            if let Some(value) = upstream.get(key) {
                capabilities.insert(key.into(), value.clone());
            }
        }
    }
    capabilities
        .entry("tools")
        .or_insert_with(|| json!({"listChanged": false}));
    let session = countersign_core::gateway::new_task_id().replacen(TASK_PREFIX, "css-", 1);
    if let Ok(mut sessions) = shared.sessions.lock() {
        if sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = sessions.keys().next().cloned() {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            session.clone(),
            Session {
                agent_id: agent.id,
                server: server.name.clone(),
            },
        );
    }
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": format!("countersign-gateway/{}", server.name), "version": env!("CARGO_PKG_VERSION")},
        "instructions": format!(
            "Countersign gateway for {}. Some tool calls need a person's approval; such a call answers that it awaits approval and has not run: repeat the identical call after approval.",
            server.name
        ),
    });
    let mut response = json_reply(StatusCode::OK, rpc_result(&request.id, result));
    if let Ok(value) = HeaderValue::from_str(&session) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

async fn discover(link: &Link, request: &Request) -> Response {
    match link
        .client
        .forward("server/discover", request.upstream_params())
        .await
    {
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
    match gate {
        Err(e) => json_reply(StatusCode::OK, console_error(&request.id, &e)),
        Ok(Gate::Allow) => {
            let reply = link
                .client
                .forward("tools/call", request.upstream_params())
                .await;
            match reply {
                // An agent without tasks cannot hold the upstream's task: wait for it here.
                Ok(result)
                    if mode == GatedMode::Held
                        && result.get("resultType").and_then(Value::as_str) == Some("task") =>
                {
                    let hold = shared.config.hold;
                    let keep_alive = shared.config.keep_alive;
                    let id = request.id.clone();
                    held_reply(keep_alive, request.progress_token(), async move {
                        rpc_result(&id, wait_upstream(&link, &result, hold).await)
                    })
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
        Ok(Gate::Held(call)) if mode == GatedMode::Task => {
            let mut task = outcome::agent_task(&call, None);
            task["resultType"] = json!("task");
            json_reply(StatusCode::OK, rpc_result(&request.id, task))
        }
        Ok(Gate::Held(call)) => {
            let id = request.id.clone();
            let keep_alive = shared.config.keep_alive;
            held_reply(keep_alive, request.progress_token(), async move {
                rpc_result(&id, hold(shared, link, call).await)
            })
        }
    }
}

/// The reply to a held request: an SSE stream with keep-alive comments until `answer` is ready,
/// then the answer as the one event. When the request carried `_meta.progressToken`, each
/// keep-alive interval also brings a `notifications/progress` for it (a client such as the
/// TypeScript SDK with `resetTimeoutOnProgress` then keeps waiting; comments reset no client's
/// time-out). A client that hangs up drops the hold (the call stays recorded; sending it is
/// never tied to the request's life).
fn held_reply(
    keep_alive: Duration,
    progress_token: Option<Value>,
    answer: impl std::future::Future<Output = Value> + Send + 'static,
) -> Response {
    type Answer = std::pin::Pin<Box<dyn std::future::Future<Output = Value> + Send>>;
    let message = |value: Value| Event::default().event("message").data(value.to_string());
    let answer: Answer = Box::pin(answer);
    let stream = futures_util::stream::unfold((Some(answer), 0u64), move |(answer, sent)| {
        let token = progress_token.clone();
        async move {
            let mut answer = answer?;
            let Some(token) = token else {
                let last = message(answer.await);
                return Some((Ok::<_, Infallible>(last), (None, sent)));
            };
            tokio::select! {
                value = &mut answer => Some((Ok(message(value)), (None, sent))),
                () = tokio::time::sleep(keep_alive) => {
                    let sent = sent + 1;
                    let note = json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": token,
                            "progress": sent,
                            "message": "waiting for a person to approve the call in Countersign",
                        },
                    });
                    Some((Ok(message(note)), (Some(answer), sent)))
                }
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
        .into_response()
}

/// Holds a call of an agent without tasks for at most the configured time: runs it once if it
/// is (or becomes) approved, tells the outcome if it was decided, else says it awaits approval.
async fn hold(shared: Arc<Shared>, link: Link, call: GatedRecord) -> Value {
    let deadline = tokio::time::Instant::now() + shared.config.hold;
    let mut call = call;
    loop {
        match call.state {
            GatedState::Approved => {
                // Sent from a task of its own: a hang-up must not cut a send in half.
                let (s, l, id) = (shared.clone(), link.clone(), call.id);
                let sent = tokio::spawn(async move { claim_and_run(&s, &l, id).await });
                match sent.await {
                    Ok(Some(done)) => call = done,
                    Ok(None) | Err(_) => match shared.console.gated_row(call.id).await {
                        Ok(now) => call = now,
                        Err(_) => {
                            return outcome::refusal(
                                &outcome::unknown_text(&call),
                                Disposition::OutcomeUnknown,
                            )
                        }
                    },
                }
                continue;
            }
            GatedState::Pending | GatedState::Running => {}
            _ => {
                let upstream = match (call.state, call.upstream_task) {
                    (GatedState::Done, Some(_)) => {
                        // The upstream answered with a task: wait for it within the hold.
                        loop {
                            match shared
                                .console
                                .agent_task(call.agent_id, &call.task_id)
                                .await
                            {
                                Ok(Some(task)) if task["status"] != "working" => break Some(task),
                                Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                                    tokio::time::sleep(WATCH_INTERVAL).await
                                }
                                _ => break None,
                            }
                        }
                    }
                    _ => None,
                };
                return match upstream {
                    Some(task) => task_outcome(&task),
                    None if call.upstream_task.is_some() => outcome::notice(&format!(
                        "{} was approved and is still running upstream; Countersign tracks it (task {}). Do not repeat the call.",
                        call.tool, call.task_id
                    )),
                    None => task_outcome(&outcome::agent_task(&call, None)),
                };
            }
        }
        if tokio::time::Instant::now() >= deadline {
            if call.questions.is_some() {
                return outcome::notice(&format!(
                    "{} was approved, but {} asked questions before running it, which a person must answer in Countersign. It has not run yet. Repeat the identical call later: it runs once, with the answers.",
                    call.tool, call.server
                ));
            }
            return outcome::notice(&outcome::awaiting_text(&call));
        }
        tokio::time::sleep(WATCH_INTERVAL).await;
        match shared.console.gated_row(call.id).await {
            Ok(now) => call = now,
            Err(e) => {
                return outcome::notice(&format!(
                    "Countersign could not read the state of the call to {} ({e}); it may still be waiting for approval. Ask again later.",
                    call.tool
                ))
            }
        }
    }
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
async fn wait_upstream(link: &Link, created: &Value, hold: Duration) -> Value {
    let Some(task_id) = created.get("taskId").and_then(Value::as_str) else {
        return outcome::refusal(
            "the upstream answered with a task without an id",
            Disposition::OutcomeUnknown,
        );
    };
    let deadline = tokio::time::Instant::now() + hold;
    let mut params = Map::new();
    params.insert("taskId".into(), json!(task_id));
    loop {
        match link.client.forward("tasks/get", params.clone()).await {
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

/// Claims an approved call and sends it once. `None` when it was not ours to send.
async fn claim_and_run(shared: &Shared, link: &Link, id: i64) -> Option<GatedRecord> {
    match shared.console.claim_gated(id).await {
        Ok(Claim::Run(call)) => match shared.console.run_gated(&call, &link.client).await {
            Ok(done) => Some(done),
            Err(e) => {
                // The row stays `running`: the next start calls it outcome_unknown.
                tracing::error!(task = %call.task_id, "recording a gated call's outcome failed: {e}");
                None
            }
        },
        Ok(Claim::Not(call)) => Some(call),
        Err(e) => {
            tracing::error!("claiming gated call #{id} failed: {e}");
            None
        }
    }
}

/// Sends approved calls of agents holding a task (the approval may come from any process), and
/// expires calls nobody decided in time.
async fn send_approved(shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let mut wake = shared.console.ledger().subscribe();
    let mut last_expiry = tokio::time::Instant::now() - EXPIRY_INTERVAL;
    let mut sending: HashSet<i64> = HashSet::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<i64>();
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            _ = wake.recv() => {}
            _ = tokio::time::sleep(WATCH_INTERVAL) => {}
        }
        while let Ok(id) = done_rx.try_recv() {
            sending.remove(&id);
        }
        if last_expiry.elapsed() >= EXPIRY_INTERVAL {
            last_expiry = tokio::time::Instant::now();
            if let Err(e) = shared.console.expire_gated().await {
                tracing::warn!("expiring gated calls failed: {e}");
            }
        }
        let approved = match shared.console.approved_task_calls().await {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!("reading approved gated calls failed: {e}");
                continue;
            }
        };
        // Calls whose upstream asked questions (MRTR) that a person answered, in any mode: the
        // next round goes out from here (a held request only watches its row).
        match shared.console.answered_gated_calls().await {
            Ok(answered) => {
                for call in answered {
                    spawn_for_call(&shared, &mut sending, &done_tx, call, Round::Answered);
                }
            }
            Err(e) => tracing::warn!("reading answered gated calls failed: {e}"),
        }
        for call in approved {
            spawn_for_call(&shared, &mut sending, &done_tx, call, Round::Approved);
        }
    }
}

/// Which round of a call the sender sends.
#[derive(Clone, Copy)]
enum Round {
    /// An approved call, not yet claimed: claimed, then sent once.
    Approved,
    /// A call whose upstream asked questions that the person answered: the next round.
    Answered,
}

/// Sends `call`'s `round` from a task of its own, so the sender's loop goes on meanwhile, unless
/// a task is already sending that call (`sending`); the task reports the call's id on `done` when
/// it ends, whatever became of it.
fn spawn_for_call(
    shared: &Arc<Shared>,
    sending: &mut HashSet<i64>,
    done: &mpsc::UnboundedSender<i64>,
    call: GatedRecord,
    round: Round,
) {
    if !sending.insert(call.id) {
        return;
    }
    let (shared, done) = (shared.clone(), done.clone());
    tokio::spawn(async move {
        match shared.console.server(call.server_id).await {
            Ok(server) => match shared.link(&server).await {
                Ok(link) => match round {
                    Round::Approved => {
                        claim_and_run(&shared, &link, call.id).await;
                    }
                    Round::Answered => {
                        if let Err(e) = shared.console.resend_gated(&call, &link.client).await {
                            // Taken but not recorded: the row stays `running` without
                            // questions, and the next start calls it outcome_unknown.
                            tracing::error!(task = %call.task_id, "recording a gated call's next round failed: {e}");
                        }
                    }
                },
                Err(e) => tracing::warn!(task = %call.task_id, "no upstream client: {e}"),
            },
            Err(e) => tracing::warn!(task = %call.task_id, "no server: {e}"),
        }
        let _ = done.send(call.id);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_listen_message_carries_the_agents_subscription_id() {
        let agent = json!("agent-7");
        let (ack, last) = retag(
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {META_SUBSCRIPTION_ID: 12}, "notifications": {}}}),
            12,
            &agent,
        );
        assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], agent);
        assert!(!last, "an acknowledgement opens the stream");
        let (cancel, last) = retag(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12}}),
            12,
            &agent,
        );
        assert_eq!(cancel["params"]["requestId"], agent);
        assert!(
            last,
            "the upstream's cancellation of the listen request ends the relay"
        );
        let (other, last) = retag(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}),
            12,
            &agent,
        );
        assert_eq!(other["params"]["requestId"], json!(3));
        assert!(!last, "a cancellation of something else is relayed as is");
        let (closing, last) = retag(
            json!({"jsonrpc": "2.0", "id": 12, "result": {}}),
            12,
            &agent,
        );
        assert_eq!(closing["id"], agent);
        assert!(last, "the response closes the subscription");
    }
}
