//! A hostile MCP Tasks server for tests: it misbehaves on purpose, per tool and per task.
//!
//! Every server a user adds is untrusted input, so the engine and the CLI are tried against a
//! server that says whatever a test scripts: huge `Retry-After`s, `pollIntervalMs: 0`, numbers
//! past `u64`, endless SSE data, redirects to another origin, escape sequences in status text,
//! 100,000 questions at once. It speaks raw HTTP/1.1 over TCP, so any byte sequence can be sent,
//! including ones a well-behaved HTTP library would refuse to produce.
//!
//! Routing: `tools/call` of tool `N` and every `tasks/*` request for a task id starting with
//! `N.` go to tool `N`'s closure, which sees the request and how many earlier requests had the
//! same method and the same task (or tool): one closure scripts a whole task's life.
//! `server/discover` and `tools/list` answer correctly unless a test overrides them with
//! [`Builder::on`]; any other method is "method not found".
//!
//! Every loop that sends data is bounded in time ([`STREAM_LIMIT`]), so a test that forgets to
//! close a connection cannot keep the server busy forever.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The longest any one response stream (endless data, a hang) lasts.
pub const STREAM_LIMIT: Duration = Duration::from_secs(90);

/// One JSON-RPC request as the hostile server received it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The JSON-RPC method.
    pub method: String,
    /// The JSON-RPC id (`null` for a notification).
    pub id: Value,
    /// The params, `{}` when absent.
    pub params: Value,
    /// The HTTP request headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The tool this request belongs to (from `name` or the task id's prefix), if any.
    pub tool: Option<String>,
    /// How many earlier requests had this method and this task id (or tool, for `tools/call`).
    pub nth: usize,
}

impl Request {
    /// `params.taskId`, if present.
    pub fn task_id(&self) -> Option<&str> {
        self.params.get("taskId").and_then(Value::as_str)
    }

    /// A header's value (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A fresh task id routed back to this request's tool: `<tool>.<nth>`.
    pub fn new_task_id(&self) -> String {
        format!("{}.{}", self.tool.as_deref().unwrap_or("anon"), self.nth)
    }
}

/// What happens after the events of an SSE reply.
#[derive(Debug, Clone)]
pub enum SseEnd {
    /// The stream ends properly (last chunk); the connection stays usable.
    Close,
    /// The stream stays open and silent until the client goes away (or [`STREAM_LIMIT`]).
    Hang,
    /// These bytes are sent again and again until the client goes away (or [`STREAM_LIMIT`]).
    Endless(Vec<u8>),
}

/// What the hostile server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 application/json` with this JSON-RPC result.
    Result(Value),
    /// `200 application/json` with this JSON-RPC error.
    Error {
        /// The error code.
        code: i64,
        /// The message.
        message: String,
        /// Optional data.
        data: Option<Value>,
    },
    /// Exactly this status, these headers and this body (`Content-Length` added if missing).
    Http {
        /// The HTTP status.
        status: u16,
        /// Header lines, sent as given.
        headers: Vec<(String, String)>,
        /// The body.
        body: Vec<u8>,
    },
    /// `200 text/event-stream`, chunked: each string is one event's `data:` payload (sent as
    /// given, so a test can put raw bytes in it), then [`SseEnd`].
    Sse {
        /// The events' data.
        events: Vec<String>,
        /// What follows them.
        then: SseEnd,
    },
    /// These bytes as the whole response; then the connection is closed.
    Raw(Vec<u8>),
    /// No answer at all; the connection stays open until the client gives up.
    Hang,
}

impl Reply {
    /// A JSON-RPC error.
    pub fn error(code: i64, message: &str) -> Reply {
        Reply::Error {
            code,
            message: message.to_owned(),
            data: None,
        }
    }

    /// An HTTP status with a plain-text body and extra headers.
    pub fn status(status: u16, headers: &[(&str, &str)]) -> Reply {
        Reply::Http {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body: Vec::new(),
        }
    }
}

/// A task object (`tasks/get` result fields) with the given id and status; extend it freely.
pub fn task(id: &str, status: &str) -> Value {
    // No `createdAt`: the TTL then runs from when we first saw the task, whenever a test runs.
    json!({
        "taskId": id,
        "status": status,
        "ttlMs": 600_000,
        "pollIntervalMs": 300,
        "resultType": "complete",
    })
}

/// A `tools/call` result carrying `task` as a task handle (`resultType: "task"`).
pub fn created(mut task: Value) -> Value {
    if let Some(map) = task.as_object_mut() {
        map.insert("resultType".into(), json!("task"));
    }
    task
}

/// A completed task carrying a text result.
pub fn completed(id: &str, text: &str) -> Value {
    let mut t = task(id, "completed");
    t["result"] = json!({"content": [{"type": "text", "text": text}], "isError": false});
    t
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// Scripts a hostile server.
#[derive(Default)]
pub struct Builder {
    tools: Vec<(String, Handler)>,
    methods: HashMap<String, Handler>,
}

impl Builder {
    /// Tool `name`: its calls and its tasks' requests go to `handler`.
    pub fn tool(
        mut self,
        name: &str,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> Self {
        self.tools.push((name.to_owned(), Arc::new(handler)));
        self
    }

    /// Any request of `method` not routed to a tool goes to `handler` (overrides the defaults
    /// for `server/discover` and `tools/list`).
    pub fn on(
        mut self,
        method: &str,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> Self {
        self.methods.insert(method.to_owned(), Arc::new(handler));
        self
    }

    /// Listens on a free loopback port.
    pub async fn start(self) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("the hostile server cannot bind a loopback port: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("no local address: {e}"))
            .port();
        let inner = Arc::new(Inner {
            tools: self.tools,
            methods: self.methods,
            counts: Mutex::default(),
            log: Mutex::default(),
            connections: AtomicUsize::new(0),
        });
        let accept = tokio::spawn(accept_loop(inner.clone(), listener));
        Hostile {
            port,
            inner,
            accept,
        }
    }
}

/// A running hostile server; stops accepting when dropped.
pub struct Hostile {
    port: u16,
    inner: Arc<Inner>,
    accept: JoinHandle<()>,
}

impl Hostile {
    /// Starts scripting a server.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The MCP endpoint: `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many requests of `method` arrived.
    pub fn count(&self, method: &str) -> usize {
        lock(&self.inner.log)
            .iter()
            .filter(|(m, _)| m == method)
            .count()
    }

    /// Every request received, as (method, arrival), in order.
    pub fn log(&self) -> Vec<(String, Instant)> {
        lock(&self.inner.log).clone()
    }

    /// How many TCP connections were accepted.
    pub fn connections(&self) -> usize {
        self.inner.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

struct Inner {
    tools: Vec<(String, Handler)>,
    methods: HashMap<String, Handler>,
    counts: Mutex<HashMap<(String, String), usize>>,
    log: Mutex<Vec<(String, Instant)>>,
    connections: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    fn tool_named(&self, name: &str) -> Option<&Handler> {
        self.tools.iter().find(|(n, _)| n == name).map(|(_, h)| h)
    }

    /// The tool that owns a task id: the longest tool name `N` such that the id starts `N.`.
    fn tool_of_task(&self, task_id: &str) -> Option<&(String, Handler)> {
        self.tools
            .iter()
            .filter(|(n, _)| {
                task_id.len() > n.len()
                    && task_id.starts_with(n.as_str())
                    && task_id.as_bytes()[n.len()] == b'.'
            })
            .max_by_key(|(n, _)| n.len())
    }

    fn answer(
        &self,
        method: String,
        id: Value,
        params: Value,
        headers: Vec<(String, String)>,
    ) -> Reply {
        let (tool, handler): (Option<String>, Option<Handler>) = if method == "tools/call" {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            (Some(name.to_owned()), self.tool_named(name).cloned())
        } else if let Some(task_id) = params.get("taskId").and_then(Value::as_str) {
            match self.tool_of_task(task_id) {
                Some((n, h)) => (Some(n.clone()), Some(h.clone())),
                None => (None, None),
            }
        } else {
            (None, None)
        };
        let key = params
            .get("taskId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| tool.clone())
            .unwrap_or_default();
        let nth = {
            let mut counts = lock(&self.counts);
            let n = counts.entry((method.clone(), key)).or_insert(0);
            *n += 1;
            *n - 1
        };
        lock(&self.log).push((method.clone(), Instant::now()));
        let request = Request {
            method,
            id,
            params,
            headers,
            tool,
            nth,
        };
        if let Some(handler) = handler {
            return handler(&request);
        }
        if let Some(handler) = self.methods.get(&request.method) {
            return handler(&request);
        }
        match request.method.as_str() {
            "server/discover" => Reply::Result(json!({
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "1.0.0"}},
                "resultType": "complete",
            })),
            "tools/list" => Reply::Result(json!({
                "tools": self.tools.iter().map(|(name, _)| json!({
                    "name": name,
                    "inputSchema": {"type": "object"},
                })).collect::<Vec<_>>(),
                "resultType": "complete",
            })),
            "tools/call" => Reply::error(-32602, "unknown tool"),
            m if m.starts_with("tasks/") => Reply::error(-32602, "unknown task"),
            _ => Reply::error(-32601, "method not found"),
        }
    }
}

async fn accept_loop(inner: Arc<Inner>, listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        inner.connections.fetch_add(1, Ordering::SeqCst);
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve(inner.clone(), stream));
    }
}

/// One connection: requests in order (keep-alive), each answered as scripted.
async fn serve(inner: Arc<Inner>, mut stream: TcpStream) {
    let mut buffer: Vec<u8> = Vec::with_capacity(8192);
    loop {
        let Some((head, body)) = read_request(&mut stream, &mut buffer).await else {
            return;
        };
        let mut lines = head.split("\r\n");
        let _request_line = lines.next();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| {
                let (k, v) = line.split_once(':')?;
                Some((k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            })
            .collect();
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        let reply = inner.answer(method, id.clone(), params, headers);
        if !write_reply(&mut stream, &id, reply).await {
            return;
        }
    }
}

/// Reads one request (head up to the blank line, then `Content-Length` bytes of body).
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        read_more(stream, buffer).await?;
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length: usize = head
        .split("\r\n")
        .find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        read_more(stream, buffer).await?;
    }
    let request: Vec<u8> = buffer.drain(..head_end + length).collect();
    Some((head, request[head_end..].to_vec()))
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Writes `reply`; false when the connection is finished (closed by either side).
async fn write_reply(stream: &mut TcpStream, id: &Value, reply: Reply) -> bool {
    match reply {
        Reply::Result(result) => write_json(stream, &rpc_result(id, result)).await,
        Reply::Error {
            code,
            message,
            data,
        } => {
            let mut error = json!({"code": code, "message": message});
            if let Some(data) = data {
                error["data"] = data;
            }
            write_json(stream, &json!({"jsonrpc": "2.0", "id": id, "error": error})).await
        }
        Reply::Http {
            status,
            headers,
            body,
        } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            let mut has_length = false;
            for (k, v) in &headers {
                has_length |= k.eq_ignore_ascii_case("content-length");
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            if !has_length {
                head.push_str(&format!("Content-Length: {}\r\n", body.len()));
            }
            head.push_str("\r\n");
            let mut bytes = head.into_bytes();
            bytes.extend_from_slice(&body);
            stream.write_all(&bytes).await.is_ok()
        }
        Reply::Sse { events, then } => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err() {
                return false;
            }
            for data in events {
                if !write_chunk(
                    stream,
                    format!("event: message\ndata: {data}\n\n").as_bytes(),
                )
                .await
                {
                    return false;
                }
            }
            match then {
                SseEnd::Close => stream.write_all(b"0\r\n\r\n").await.is_ok(),
                SseEnd::Hang => {
                    hang(stream).await;
                    false
                }
                SseEnd::Endless(bytes) => {
                    let until = Instant::now() + STREAM_LIMIT;
                    while Instant::now() < until {
                        if !write_chunk(stream, &bytes).await {
                            break;
                        }
                    }
                    false
                }
            }
        }
        Reply::Raw(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
            false
        }
        Reply::Hang => {
            hang(stream).await;
            false
        }
    }
}

async fn write_json(stream: &mut TcpStream, message: &Value) -> bool {
    let body = message.to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    stream.write_all(&bytes).await.is_ok()
}

async fn write_chunk(stream: &mut TcpStream, data: &[u8]) -> bool {
    if data.is_empty() {
        return true;
    }
    let mut bytes = format!("{:x}\r\n", data.len()).into_bytes();
    bytes.extend_from_slice(data);
    bytes.extend_from_slice(b"\r\n");
    stream.write_all(&bytes).await.is_ok()
}

/// Keeps the connection open and silent until the client closes it (or [`STREAM_LIMIT`]).
async fn hang(stream: &mut TcpStream) {
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(STREAM_LIMIT, async {
        loop {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}
