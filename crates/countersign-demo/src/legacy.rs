//! The 2025-11-25 era (`--era 2025-11-25`, [`Era::Legacy`](crate::config::Era::Legacy)): the
//! same tools and task engine served the way a server on the TypeScript SDK 1.32.2 serves them
//! (`@modelcontextprotocol/server-everything`), so clients and the benchmark can be measured
//! against that generation without Node.
//!
//! Streamable HTTP with a session: `initialize` opens one and answers with `Mcp-Session-Id`;
//! every later POST, GET and DELETE must carry it (none: 400 `-32000`; unknown: 404 `-32001`,
//! the SDK's bodies). Notifications and the client's responses are answered 202. `DELETE` ends
//! the session. `GET` opens the session's stream, which carries `notifications/tasks/status`
//! (the task as params) on every status change of the session's tasks, driven by the same
//! pusher as `subscriptions/listen`.
//!
//! Tasks are SEP-1686's: `tools/call` with `params.task` gives `{task}`; `tasks/get` the flat
//! task (`ttl`, `pollInterval` in ms); `tasks/list` the session's tasks, ten a page;
//! `tasks/cancel` the cancelled task, or -32602 for a terminal one; `tasks/result` blocks until
//! the task ends and, while it waits for input, carries each question as an
//! `elicitation/create` request (server-side ids, related-task `_meta`) on its SSE response,
//! resumed by the client's POSTed response. A task belongs to the session that created it.
//!
//! - `session`: the session map and what a session holds;
//! - `methods`: `initialize`, `tools/*`, `tasks/get|list|cancel`;
//! - `result`: `tasks/result` and the client's responses to the server's questions;
//! - `wire`: the era's JSON shapes and SSE framing.
//!
//! The entry point of a POST is [`post`], called by the transport after its counters and
//! faults, so both eras share them; GET and DELETE are routed here only in this era.

mod methods;
mod result;
mod session;
pub(crate) mod wire;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE, ORIGIN};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value};

pub(crate) use session::Sessions;

use crate::app::App;
use crate::subscriptions::Frame;
use crate::transport::{check_token, headers, Glance};
use session::Session;
use wire::{refusal, response, MCP_SESSION_ID, VERSIONS};

/// The era's state beside the shared [`App`].
pub(crate) struct Legacy {
    pub(crate) sessions: Sessions,
    /// The `tools/list` result, built once.
    pub(crate) tools: Value,
}

impl Legacy {
    pub(crate) fn new(catalog: &crate::tools::Catalog) -> Self {
        Self {
            sessions: Sessions::default(),
            tools: wire::tools(catalog),
        }
    }

    /// Ends every session (shutdown), so no `tasks/result` keeps a connection open.
    pub(crate) fn end_all(&self) {
        for session in self.sessions.remove_all() {
            session.end();
        }
    }
}

/// A POST of this era, after the transport counted it and found no fault for it.
pub(crate) async fn post(app: &Arc<App>, headers: &HeaderMap, glance: Glance) -> Response {
    if let Some(refused) = check_common(app, headers) {
        return refused;
    }
    let accept = headers::accepts_json_and_sse(headers.get_all(ACCEPT));
    if !accept {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            -32000,
            "Not Acceptable: Client must accept both application/json and text/event-stream",
        );
    }
    if !headers::is_json(headers.get(CONTENT_TYPE)) {
        return refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            -32000,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let Ok(value) = glance.parsed else {
        return refusal(StatusCode::BAD_REQUEST, -32700, "Parse error: Invalid JSON");
    };
    let Some(message) = Message::parse(value) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32700,
            "Parse error: Invalid JSON-RPC message",
        );
    };
    if let Message::Request { id, method, params } = &message {
        if method == "initialize" {
            if known_session(app, headers).is_some() {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    "Invalid Request: Server already initialized",
                );
            }
            return methods::initialize(app, id.clone(), params.as_ref());
        }
    }
    let session = match session_of(app, headers) {
        Ok(session) => session,
        Err(refused) => return refused.response(),
    };
    match message {
        Message::Notification => accepted(),
        Message::Response { id, answer } => {
            result::answered(app, &session, &id, answer);
            accepted()
        }
        Message::Request { id, method, params } => {
            methods::dispatch(app, &session, id, &method, params).await
        }
    }
}

/// `GET`: the session's stream of `notifications/tasks/status` (one per session, as the SDK).
pub(crate) async fn get(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    app.stats.request(Some("GET"));
    let response = if app.config.legacy_get_stream {
        open_stream(&app, &headers)
    } else {
        refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            -32000,
            "Method not allowed: this server offers no GET stream",
        )
    };
    app.stats.response(response.status().as_u16());
    response
}

fn open_stream(app: &Arc<App>, headers: &HeaderMap) -> Response {
    if let Some(refused) = check_common(app, headers) {
        return refused;
    }
    let accepts_sse = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("text/event-stream"));
    if !accepts_sse {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            -32000,
            "Not Acceptable: Client must accept text/event-stream",
        );
    }
    let session = match session_of(app, headers) {
        Ok(session) => session,
        Err(refused) => return refused.response(),
    };
    let hub = &app.hub;
    let opened = session.open_stream(
        |key| hub.is_open(key),
        |tasks| {
            let seeds = tasks
                .iter()
                .filter_map(|task| {
                    let version = app.store.version_owned(task, session.serial)?;
                    Some((task.clone(), version))
                })
                .collect();
            let subscription = hub.subscribe_session(seeds);
            (subscription.key(), subscription)
        },
    );
    let Some(subscription) = opened else {
        return refusal(
            StatusCode::CONFLICT,
            -32000,
            "Conflict: Only one SSE stream is allowed per session",
        );
    };
    let keepalive = app.config.listen_keepalive;
    let stream = futures_util::stream::unfold(subscription, move |mut subscription| async move {
        let frame = tokio::select! {
            frame = subscription.frames.recv() => frame,
            () = tokio::time::sleep(keepalive) => {
                return Some((Ok::<_, std::convert::Infallible>(Bytes::from_static(wire::PING)), subscription));
            }
        };
        match frame {
            Some(Frame::Message(message)) => {
                let json = serde_json::to_vec(&message).unwrap_or_default();
                Some((Ok(Bytes::from(wire::event(&json))), subscription))
            }
            // Closed (session ended, shutdown) or dropped: the stream ends.
            Some(Frame::Close) | None => None,
        }
    });
    response(
        StatusCode::OK,
        "text/event-stream",
        Body::from_stream(stream),
        Some(&session.header),
    )
}

/// `DELETE`: ends the session; its GET stream and waiting `tasks/result` streams end too.
pub(crate) async fn delete(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    app.stats.request(Some("DELETE"));
    let response = if let Some(refused) = check_common(&app, &headers) {
        refused
    } else {
        match session_of(&app, &headers) {
            Err(refused) => refused.response(),
            Ok(session) => {
                app.legacy.sessions.remove(&session.id);
                if let Some(key) = session.end() {
                    app.hub.close(key);
                }
                let mut response = Response::new(Body::empty());
                *response.status_mut() = StatusCode::OK;
                response
            }
        }
    };
    app.stats.response(response.status().as_u16());
    response
}

/// The bearer token and the Origin, as the modern era checks them.
fn check_common(app: &App, headers: &HeaderMap) -> Option<Response> {
    if let Some(response) = check_token(app, headers) {
        return Some(response);
    }
    let origin = headers.get(ORIGIN)?;
    if origin.to_str().is_ok_and(headers::origin_is_local) {
        return None;
    }
    Some(refusal(
        StatusCode::FORBIDDEN,
        -32000,
        "Forbidden: Origin not allowed",
    ))
}

fn known_session(app: &App, headers: &HeaderMap) -> Option<Arc<Session>> {
    let id = headers.get(MCP_SESSION_ID)?.to_str().ok()?;
    app.legacy.sessions.find(id)
}

/// Why a request names no usable session.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NoSession {
    /// No `Mcp-Session-Id`.
    Missing,
    /// An id this server does not hold (never issued, ended, or from before a restart).
    Unknown,
    /// An `MCP-Protocol-Version` this era does not speak (shown lossily).
    Version(String),
}

impl NoSession {
    /// The SDK's refusal.
    fn response(&self) -> Response {
        match self {
            Self::Missing => refusal(
                StatusCode::BAD_REQUEST,
                -32000,
                "Bad Request: Mcp-Session-Id header is required",
            ),
            Self::Unknown => refusal(StatusCode::NOT_FOUND, -32001, "Session not found"),
            Self::Version(version) => refusal(
                StatusCode::BAD_REQUEST,
                -32000,
                &format!(
                    "Bad Request: Unsupported protocol version: {version} (supported versions: {})",
                    VERSIONS.join(", ")
                ),
            ),
        }
    }
}

/// The request's session, with a protocol version header (if any) this era speaks.
fn session_of(app: &App, headers: &HeaderMap) -> Result<Arc<Session>, NoSession> {
    let id = headers.get(MCP_SESSION_ID).ok_or(NoSession::Missing)?;
    let session = id
        .to_str()
        .ok()
        .and_then(|id| app.legacy.sessions.find(id))
        .ok_or(NoSession::Unknown)?;
    if let Some(version) = headers.get("mcp-protocol-version") {
        let supported = version
            .to_str()
            .is_ok_and(|version| VERSIONS.contains(&version));
        if !supported {
            let shown = String::from_utf8_lossy(version.as_bytes()).into_owned();
            return Err(NoSession::Version(shown));
        }
    }
    Ok(session)
}

fn accepted() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

/// One JSON-RPC message a client POSTs.
enum Message {
    Request {
        id: Value,
        method: String,
        params: Option<Map<String, Value>>,
    },
    Notification,
    /// The client's answer to a request of ours: its `result`, or `Err` for an `error`.
    Response {
        id: Value,
        answer: Result<Value, Value>,
    },
}

impl Message {
    /// `None` for anything that is not one JSON-RPC 2.0 message (batches included: the era
    /// dropped them in 2025-06-18).
    fn parse(value: Value) -> Option<Self> {
        let Value::Object(mut object) = value else {
            return None;
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return None;
        }
        let id = object
            .remove("id")
            .map(|id| (id.is_string() || id.is_number()).then_some(id));
        match object.remove("method") {
            Some(Value::String(method)) => {
                let params = match object.remove("params") {
                    None => None,
                    Some(Value::Object(params)) => Some(params),
                    Some(_) => return None,
                };
                match id {
                    None => Some(Self::Notification),
                    Some(id) => Some(Self::Request {
                        id: id?,
                        method,
                        params,
                    }),
                }
            }
            Some(_) => None,
            None => {
                let id = id??;
                let answer = match (object.remove("result"), object.remove("error")) {
                    (Some(result), None) => Ok(result),
                    (None, Some(error)) => Err(error),
                    _ => return None,
                };
                Some(Self::Response { id, answer })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_requests_notifications_or_responses() {
        assert!(matches!(
            Message::parse(json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "t"}})),
            Some(Message::Request { ref method, .. }) if method == "tasks/get"
        ));
        assert!(matches!(
            Message::parse(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Some(Message::Notification)
        ));
        assert!(matches!(
            Message::parse(json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept"}})),
            Some(Message::Response { answer: Ok(_), .. })
        ));
        assert!(matches!(
            Message::parse(
                json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -1, "message": "no"}})
            ),
            Some(Message::Response { answer: Err(_), .. })
        ));
        for bad in [
            json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
            json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}),
            json!({"jsonrpc": "2.0", "id": 1}),
            json!({"jsonrpc": "2.0", "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}),
        ] {
            assert!(
                Message::parse(bad.clone()).is_none(),
                "{bad} must be refused"
            );
        }
    }
}
