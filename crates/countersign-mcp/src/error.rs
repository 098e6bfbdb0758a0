//! Every way a request to an MCP server can fail, as a type a caller can branch on.

use std::time::Duration;

use serde_json::Value;

use super::wire::RpcError;

/// The error of one MCP request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configured URL is not a usable http(s) URL.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No TCP connection could be made (refused, unreachable, DNS).
    #[error("cannot connect to {url}: {message}")]
    Connect {
        /// The endpoint.
        url: String,
        /// The transport's explanation.
        message: String,
    },
    /// The TLS handshake or certificate check failed.
    #[error("TLS failure talking to {url}: {message}")]
    Tls {
        /// The endpoint.
        url: String,
        /// The TLS library's explanation.
        message: String,
    },
    /// The server did not answer in time.
    #[error("{url} did not answer within {after:?}")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The limit that ran out.
        after: Duration,
    },
    /// The connection broke mid-request or mid-response.
    #[error("transport error talking to {url}: {message}")]
    Transport {
        /// The endpoint.
        url: String,
        /// The transport's explanation.
        message: String,
    },
    /// HTTP 406: the server refused our `Accept` header.
    #[error("server answered 406 Not Acceptable to {method}")]
    NotAcceptable {
        /// The JSON-RPC method sent.
        method: String,
    },
    /// HTTP 401/403: missing or wrong credentials.
    #[error("server refused the credentials for {method} (HTTP {status})")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// The method sent.
        method: String,
        /// The `WWW-Authenticate` challenge, if any.
        www_authenticate: Option<String>,
    },
    /// A redirect we do not follow: to another origin (the request, its body and our
    /// credentials would go to a server the user never added), or past [`MAX_REDIRECTS`] on
    /// the same one.
    #[error("server redirected {method} (HTTP {status}) to {location}; Countersign follows no redirect to another origin and at most {MAX_REDIRECTS} on the same one: update the server's URL if it moved")]
    Redirected {
        /// The method sent.
        method: String,
        /// The 3xx status.
        status: u16,
        /// The `Location` the server named (as sent, shortened).
        location: String,
    },
    /// HTTP 429: slow down; retry no sooner than `retry_after` when the server says.
    #[error("server is rate-limiting {method}{}", retry_after.map(|d| format!(" (retry after {}s)", d.as_secs())).unwrap_or_default())]
    RateLimited {
        /// The method sent.
        method: String,
        /// From `Retry-After`, if present and parseable.
        retry_after: Option<Duration>,
    },
    /// Any other HTTP failure without a JSON-RPC error body (5xx, proxies, 404 pages).
    #[error("HTTP {status} from server for {method}: {body}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The method sent.
        method: String,
        /// The start of the body, for the message.
        body: String,
        /// From `Retry-After`, if present (503 may carry it).
        retry_after: Option<Duration>,
    },
    /// -32020: the server says our headers and body disagree.
    #[error("header mismatch for {method}: {message}")]
    HeaderMismatch {
        /// The method sent.
        method: String,
        /// The server's message.
        message: String,
    },
    /// -32021: the server needs a client capability we did not declare.
    #[error("server requires capabilities {required} for {method}: {message}")]
    MissingCapability {
        /// The method sent.
        method: String,
        /// `data.requiredCapabilities`, verbatim.
        required: Value,
        /// The server's message.
        message: String,
    },
    /// -32022: the server does not speak our protocol version (after the one retry).
    #[error("server does not support protocol version {requested}; it supports {supported:?}")]
    UnsupportedVersion {
        /// What we asked for.
        requested: String,
        /// `data.supported`.
        supported: Vec<String>,
    },
    /// -32601: the server has no such method.
    #[error("server does not implement {method}")]
    MethodNotFound {
        /// The method sent.
        method: String,
    },
    /// -32602 from `tasks/*` for a task the server no longer knows: the handle is gone (not failed).
    #[error("server does not know task {task_id}: {message}")]
    UnknownTask {
        /// The task id asked about.
        task_id: String,
        /// The server's message.
        message: String,
    },
    /// -32602 for anything else.
    #[error("invalid params for {method}: {message}")]
    InvalidParams {
        /// The method sent.
        method: String,
        /// The server's message.
        message: String,
        /// `data`, verbatim.
        data: Option<Value>,
    },
    /// Any other JSON-RPC error.
    #[error("{method} failed with JSON-RPC error {}: {}", error.code, error.message)]
    Rpc {
        /// The method sent.
        method: String,
        /// The error, verbatim.
        error: RpcError,
    },
    /// The server answered with something that is not a valid answer to this method.
    #[error("invalid response to {method}: {reason}")]
    InvalidResponse {
        /// The method sent.
        method: String,
        /// What was wrong.
        reason: String,
    },
    /// The server sent more than we buffer for one message: a JSON body over the limit, or an
    /// event stream with more than the limit of bytes before completing an event.
    #[error("response to {method} too large: more than {limit} bytes without a complete message")]
    ResponseTooLarge {
        /// The method sent.
        method: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// A legacy (2025-era) server no longer knows our session: HTTP 404, or a 400 saying there
    /// is no valid session (server-everything) or that the server is not initialized. The
    /// session's tasks are gone with it; initialize a new session to go on.
    #[error("{url} no longer knows our session (HTTP {status}): {message}; a new session must be initialized")]
    SessionExpired {
        /// The endpoint.
        url: String,
        /// 404 or 400.
        status: u16,
        /// The start of the server's answer.
        message: String,
    },
    /// A legacy server's task that belonged to a session the server has ended: the new session
    /// cannot see it, so it can no longer be followed.
    #[error("the server ended the session")]
    SessionEnded {
        /// The task asked about.
        task_id: String,
    },
    /// A stdio server that answered the era probe as a 2026-07-28 server: Countersign follows
    /// that generation over HTTP only.
    #[error("{url} speaks MCP 2026-07-28 on stdio; Countersign speaks 2026-07-28 over HTTP and 2025-11-25 on stdio")]
    ModernStdio {
        /// The server (`stdio:NAME`).
        url: String,
    },
    /// A stdio server's task whose process ended: the process kept it in memory, so the new
    /// process does not know it.
    #[error("the server process ended")]
    ProcessEnded {
        /// The task asked about.
        task_id: String,
    },
    /// An answer to a legacy server's question that the server no longer waits for: the
    /// question came on a stream that closed (with an earlier engine), and an answer sent now
    /// would go nowhere.
    #[error("question withdrawn by the server: it no longer waits for an answer to {key}")]
    NotWaiting {
        /// The question's key.
        key: String,
    },
    /// The caller asked for something this client refuses to send.
    #[error("{0}")]
    InvalidRequest(String),
}

/// Redirects followed on the same origin before giving up.
pub const MAX_REDIRECTS: usize = 3;

/// Coarse classes of [`Error`] that decide what an engine does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Worth retrying later with backoff: the network, timeouts, 5xx, 429.
    Transient,
    /// The server forgot the task.
    Lost,
    /// Retrying the same request will fail the same way.
    Permanent,
}

impl Error {
    /// The endpoint, for the failures that carry it (the transport's).
    pub fn url(&self) -> Option<&str> {
        match self {
            Self::InvalidUrl { url, .. }
            | Self::SessionExpired { url, .. }
            | Self::Connect { url, .. }
            | Self::Tls { url, .. }
            | Self::Timeout { url, .. }
            | Self::Transport { url, .. } => Some(url),
            _ => None,
        }
    }

    /// How an engine should treat this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Connect { .. }
            | Self::Timeout { .. }
            | Self::Transport { .. }
            | Self::RateLimited { .. } => ErrorClass::Transient,
            Self::Http { status, .. } if *status >= 500 || *status == 408 => ErrorClass::Transient,
            // A malformed body is most often a proxy or a server mid-restart: try again later.
            Self::InvalidResponse { .. } => ErrorClass::Transient,
            // Likewise: a task whose state is briefly huge (or a stream gone wrong) may be fine
            // on the next try, and the backoff keeps a server that insists from costing much.
            Self::ResponseTooLarge { .. } => ErrorClass::Transient,
            // -32603 (internal error, e.g. under a 5xx) says nothing about the request itself.
            Self::Rpc { error, .. } if error.code == -32603 => ErrorClass::Transient,
            // The session's tasks went with it: for a task, the same as a forgotten handle.
            Self::UnknownTask { .. }
            | Self::SessionExpired { .. }
            | Self::SessionEnded { .. }
            | Self::ProcessEnded { .. } => ErrorClass::Lost,
            _ => ErrorClass::Permanent,
        }
    }

    /// The delay the server asked for, if it asked.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A short stable code for logs, events and the UI (`connect`, `rate_limited`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidUrl { .. } => "invalid_url",
            Self::Redirected { .. } => "redirected",
            Self::Connect { .. } => "connect",
            Self::Tls { .. } => "tls",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::NotAcceptable { .. } => "not_acceptable",
            Self::Unauthorized { .. } => "unauthorized",
            Self::RateLimited { .. } => "rate_limited",
            Self::Http { .. } => "http",
            Self::HeaderMismatch { .. } => "header_mismatch",
            Self::MissingCapability { .. } => "missing_capability",
            Self::UnsupportedVersion { .. } => "unsupported_version",
            Self::MethodNotFound { .. } => "method_not_found",
            Self::UnknownTask { .. } => "unknown_task",
            Self::InvalidParams { .. } => "invalid_params",
            Self::Rpc { .. } => "rpc",
            Self::InvalidResponse { .. } => "invalid_response",
            Self::ResponseTooLarge { .. } => "response_too_large",
            Self::SessionExpired { .. } => "session_expired",
            Self::SessionEnded { .. } => "session_ended",
            Self::ProcessEnded { .. } => "process_ended",
            Self::ModernStdio { .. } => "modern_stdio",
            Self::NotWaiting { .. } => "not_waiting",
            Self::InvalidRequest(_) => "invalid_request",
        }
    }
}

/// Result with the client's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
