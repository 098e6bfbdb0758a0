//! The stateless MCP client: one POST per request, no session, `_meta` and headers on every call.
//!
//! This file holds the client itself and the one path every request takes (encode, POST, read the
//! JSON or SSE answer, type the failure). Around it, by what the caller does:
//! - `client/calls.rs`: the typed calls (`discover`, `list_tools`, `call_tool`, `get_task`, ...);
//! - `client/poll.rs`: the poll fast path, `poll_task` with its [`Digest`];
//! - `client/forward.rs`: the gateway's pass-through (`forward`, `relay_listen`);
//! - `client/listen.rs`: `subscriptions/listen` ([`Listening`]);
//! - `client/envelope.rs`: the request body, written straight into bytes.

mod calls;
mod envelope;
mod forward;
mod listen;
mod poll;

pub use calls::ToolCall;
pub use forward::RelayedListen;
pub use listen::Listening;
pub use poll::{Digest, Polled};

use calls::ToolHeaders;
use envelope::{Envelope, FixedMeta};
use listen::OpenedListen;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures_util::StreamExt as _;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde::ser::{Serialize, SerializeMap as _, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::error::{Error, Result};
use super::headers::{encode_header_value, header_params, param_headers};
use super::http1::{self, Http1};
use super::response::{parse_retry_after, rpc_error, to_value, Framing, ResponseReader};
use super::subscription::{ListenDecoder, ListenEvent, ListenRequest, StreamFault, LISTEN_METHOD};
use super::wire::{
    interpret_call_result, interpret_task_result, result_type, CallOutcome, Discovery,
    ExcludedTool, HeaderParam, InputRequired, Task, Tool, ToolList, META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO, META_PROTOCOL_VERSION, PROTOCOL_VERSION, TASKS_EXTENSION,
};
use crate::sensitive::Sensitive;

/// How to reach one server.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The Streamable HTTP endpoint, exactly as configured (it may have no `/mcp` path).
    pub url: String,
    /// A bearer token for the `Authorization` header, if the server needs one.
    pub bearer_token: Option<Sensitive<String>>,
}

impl Endpoint {
    /// An endpoint without credentials.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            bearer_token: None,
        }
    }

    /// Adds a bearer token.
    pub fn with_token(mut self, token: Option<Sensitive<String>>) -> Self {
        self.bearer_token = token;
        self
    }
}

/// Client tuning.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `clientInfo.name`.
    pub client_name: String,
    /// `clientInfo.version`.
    pub client_version: String,
    /// Limit for one whole request (connect + answer).
    pub request_timeout: Duration,
    /// Limit for the TCP/TLS connect.
    pub connect_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            client_name: "countersign".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Checks a server URL before anything is sent to or stored for it: `http` or `https`, and no
/// user name or password in it (`http://user:pass@host/` would be sent as Basic auth and kept
/// in plain text wherever the URL goes: the servers table, events, the audit log). Tokens
/// belong in the OS keyring. The error never repeats the credentials.
pub fn check_server_url(url: &str) -> Result<reqwest::Url> {
    let parsed = reqwest::Url::parse(url).map_err(|e| Error::InvalidUrl {
        url: redact_userinfo(url),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Error::InvalidUrl {
            url: redact_userinfo(url),
            reason: "only http and https are supported".into(),
        });
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Error::InvalidUrl {
            url: redact_userinfo(url),
            reason: "it contains a user name or password; Countersign sends no credentials in URLs: remove them and give the server's token instead (it is kept in the OS keyring)".into(),
        });
    }
    Ok(parsed)
}

/// `url` with anything between `://` and the last `@` of the authority replaced by `***`.
fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Redirects: followed only on the same origin (scheme, host and port) as the request that
/// was redirected, at most [`MAX_REDIRECTS`](super::error::MAX_REDIRECTS) times. Anything else
/// is not followed, and the 3xx answer becomes [`Error::Redirected`] naming the target: a
/// redirect to another origin would re-send the whole request (a `307` keeps the body) to a
/// server the user never added, and its answer would be taken as our server's.
pub(crate) fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .last()
            .is_some_and(|from| from.origin() == attempt.url().origin());
        if same_origin && attempt.previous().len() <= super::error::MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

pub(crate) fn redirected(method: &str, status: u16, headers: &reqwest::header::HeaderMap) -> Error {
    let location = headers
        .get(reqwest::header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_else(|| "(no Location)".into());
    let location = crate::text::truncate(&location, 200);
    Error::Redirected {
        method: method.into(),
        status,
        location,
    }
}

/// A stateless MCP 2026-07-28 client for one server. Cheap to clone; clones share the connection
/// pool and the tool-header cache.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    endpoint: Endpoint,
    url: reqwest::Url,
    options: ClientOptions,
    next_id: AtomicU64,
    /// The version in use; changed at most once, by a -32022 retry.
    version: RwLock<String>,
    tools: RwLock<ToolHeaders>,
    notifications: Option<mpsc::UnboundedSender<Value>>,
    /// The bearer token in use: the endpoint's, replaced by [`Client::set_bearer_token`] when
    /// an OAuth sign-in or refresh brings a new one (clones share it).
    token: RwLock<Option<Sensitive<String>>>,
    /// The `_meta` entries every request carries unchanged, encoded once.
    fixed_meta: FixedMeta,
    /// For `subscriptions/listen` only: no whole-request timeout (the stream is meant to stay
    /// open), a separate pool so long-lived streams never hold connections requests wait for.
    listen_http: reqwest::Client,
    /// `tasks/get`'s own keep-alive connections, when the URL allows them ([`Http1::for_url`]).
    polls: Option<Http1>,
}

impl Client {
    /// A client for `endpoint` with default options.
    pub fn new(endpoint: Endpoint) -> Result<Self> {
        Self::with_options(endpoint, ClientOptions::default(), None)
    }

    /// A client with explicit options; notifications that arrive on response streams (e.g.
    /// `notifications/progress`) go to `notifications`, if given.
    pub fn with_options(
        endpoint: Endpoint,
        options: ClientOptions,
        notifications: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Self> {
        let url = check_server_url(&endpoint.url)?;
        let http = reqwest::Client::builder()
            .redirect(redirect_policy())
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| Error::Transport {
                url: endpoint.url.clone(),
                message: e.to_string(),
            })?;
        let listen_http = reqwest::Client::builder()
            .redirect(redirect_policy())
            .connect_timeout(options.connect_timeout)
            .tcp_keepalive(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| Error::Transport {
                url: endpoint.url.clone(),
                message: e.to_string(),
            })?;
        let fixed_meta = FixedMeta::new(&options)?;
        let polls = Http1::for_url(&url, options.connect_timeout);
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                listen_http,
                polls,
                token: RwLock::new(endpoint.bearer_token.clone()),
                fixed_meta,
                endpoint,
                url,
                options,
                next_id: AtomicU64::new(1),
                version: RwLock::new(PROTOCOL_VERSION.into()),
                tools: RwLock::new(ToolHeaders::default()),
                notifications,
            }),
        })
    }

    /// Replaces the bearer token sent with every request from now on (an OAuth sign-in or
    /// refresh); `None` sends none.
    pub fn set_bearer_token(&self, token: Option<Sensitive<String>>) {
        // A poisoned lock only means a panic elsewhere mid-write of an Option: the value is whole.
        *self.inner.token.write().unwrap_or_else(|e| e.into_inner()) = token;
    }

    /// The bearer token sent with requests now.
    pub fn bearer_token(&self) -> Option<Sensitive<String>> {
        self.inner
            .token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.inner.endpoint.url
    }

    /// The endpoint with the token in use now, for a client of the other era to the same server.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint::new(self.inner.endpoint.url.clone()).with_token(self.bearer_token())
    }

    /// The options this client was made with.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// The protocol version in use.
    pub fn protocol_version(&self) -> String {
        self.inner
            .version
            .read()
            .map(|v| v.clone())
            .unwrap_or_else(|_| PROTOCOL_VERSION.into())
    }
}

impl Client {
    /// Sends one request and reads its result as a `Value`.
    async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra_headers: Vec<(String, String)>,
    ) -> Result<Value> {
        let result = self
            .request_raw(method, params, name, extra_headers)
            .await?;
        to_value(&result).map_err(|reason| invalid(method, reason))
    }

    /// Sends one request; its result as JSON text. On -32022 retries once with a version the
    /// server supports.
    async fn request_raw(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra_headers: Vec<(String, String)>,
    ) -> Result<Box<RawValue>> {
        let version = self.protocol_version();
        // Boxed for the same reason as the pooled request in `send_with`: the request's state is
        // ~2 KB, and the poll loop spawns one of these per poll.
        match Box::pin(self.send(method, &params, name, &extra_headers, &version)).await {
            Err(Error::UnsupportedVersion { supported, .. }) => {
                // Retry once with a version the server lists: ours if it is there (the first
                // rejection may have been transient), otherwise the server's first choice.
                let retry = if supported.contains(&version) {
                    version.clone()
                } else if let Some(first) = supported.first() {
                    first.clone()
                } else {
                    return Err(Error::UnsupportedVersion {
                        requested: version,
                        supported,
                    });
                };
                tracing::info!(from = %version, to = %retry, "server asked for another protocol version; retrying once");
                let result = Box::pin(self.send(method, &params, name, &extra_headers, &retry))
                    .await
                    .map_err(|e| match e {
                        Error::UnsupportedVersion { supported, .. } => Error::UnsupportedVersion {
                            requested: retry.clone(),
                            supported,
                        },
                        other => other,
                    })?;
                if let Ok(mut v) = self.inner.version.write() {
                    *v = retry;
                }
                Ok(result)
            }
            other => other,
        }
    }

    /// Sends one request; when it is refused (`401`/`403`) after the bearer token was replaced
    /// while it was out, sends it once more with the new token. An authorization server may
    /// revoke the old access token the moment a refresh issues the new one, so a request in
    /// flight at that moment is refused through no fault of ours; a refusal ran nothing, so
    /// sending again duplicates nothing.
    async fn send(
        &self,
        method: &str,
        params: &Map<String, Value>,
        name: Option<&str>,
        extra_headers: &[(String, String)],
        version: &str,
    ) -> Result<Box<RawValue>> {
        let token = self.bearer_token();
        match self
            .send_with(method, params, name, extra_headers, version, token.as_ref())
            .await
        {
            Err(Error::Unauthorized { .. }) if self.bearer_token() != token => {
                let token = self.bearer_token();
                tracing::debug!(
                    method,
                    "refused after a token refresh; sending once more with the new token"
                );
                self.send_with(method, params, name, extra_headers, version, token.as_ref())
                    .await
            }
            other => other,
        }
    }

    async fn send_with(
        &self,
        method: &str,
        params: &Map<String, Value>,
        name: Option<&str>,
        extra_headers: &[(String, String)],
        version: &str,
        token: Option<&Sensitive<String>>,
    ) -> Result<Box<RawValue>> {
        let inner = &self.inner;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let body = Envelope {
            id,
            method,
            params,
            version,
            fixed: &inner.fixed_meta,
        }
        .encode()?;

        let body = bytes::Bytes::from(body);
        let headers = || request_headers(method, name, extra_headers, version, token);
        let reply = match &inner.polls {
            Some(polls) if method == TASKS_GET => {
                let deadline = tokio::time::Instant::now() + inner.options.request_timeout;
                // Boxed: the request's state (hyper's futures among it) is ~1.8 KB, and every
                // future that awaits it inline, up to the poll loop's spawned task, would
                // otherwise grow by as much and be copied at each level on every poll.
                let again = || headers().ok();
                let reply = Box::pin(polls.post(headers()?, &again, body.clone(), deadline))
                    .await
                    .map_err(|f| self.pooled_error(f))?;
                if (300..400).contains(&reply.status) {
                    // Redirects follow reqwest's policy (same origin, at most 3): sent again
                    // there. Nothing ran for a redirect, and tasks/get is idempotent anyway.
                    self.post(headers()?, body).await?
                } else {
                    Reply::from(reply)
                }
            }
            _ => self.post(headers()?, body).await?,
        };
        let Reply {
            status,
            headers,
            body: mut stream,
        } = reply;

        let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let retry_after = || {
            headers
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()))
        };

        if (300..400).contains(&status) {
            return Err(redirected(method, status, &headers));
        }
        if status == 406 {
            return Err(Error::NotAcceptable {
                method: method.into(),
            });
        }
        if status == 429 {
            return Err(Error::RateLimited {
                method: method.into(),
                retry_after: retry_after(),
            });
        }
        let framing = Framing::from_content_type(content_type);
        let task_id = params.get("taskId").and_then(Value::as_str);

        if !(200..300).contains(&status) {
            // JSON-RPC errors come with 200, 400 or 404 depending on the peer: read them first.
            let body = self.read_body_text(stream).await;
            return Err(failure(FailedAnswer {
                method,
                task_id,
                id,
                status,
                framing,
                body: &body,
                www_authenticate: headers
                    .get(reqwest::header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                retry_after: retry_after(),
            }));
        }

        let Some(framing) = framing else {
            return Err(invalid(
                method,
                format!(
                    "unexpected Content-Type {:?} (expected application/json or text/event-stream)",
                    content_type.unwrap_or_default()
                ),
            ));
        };
        let mut reader = ResponseReader::new(framing, Value::from(id));
        let answer = loop {
            match stream.next().await {
                Some(Ok(chunk)) => {
                    let fed = reader.feed(&chunk).map_err(|f| f.into_error(method))?;
                    self.forward_notifications(&mut reader);
                    if let Some(answer) = fed {
                        drain_after_answer(stream).await;
                        break answer;
                    }
                }
                Some(Err(e)) => return Err(self.body_error(e)),
                None => {
                    let answer = reader.finish().map_err(|f| f.into_error(method))?;
                    self.forward_notifications(&mut reader);
                    break answer;
                }
            }
        };
        answer.map_err(|error| rpc_error(method, task_id, error))
    }

    fn forward_notifications(&self, reader: &mut ResponseReader) {
        let notifications = std::mem::take(&mut reader.notifications);
        if let Some(sink) = &self.inner.notifications {
            for n in notifications {
                let _ = sink.send(n);
            }
        }
    }

    /// POSTs through reqwest: every request but the pooled polls, and those when redirected.
    async fn post(&self, headers: HeaderMap, body: bytes::Bytes) -> Result<Reply> {
        let inner = &self.inner;
        let mut response = inner
            .http
            .post(inner.url.clone())
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| self.transport_error(e))?;
        Ok(Reply {
            status: response.status().as_u16(),
            headers: std::mem::take(response.headers_mut()),
            body: ReplyBody::Reqwest(Box::pin(response.bytes_stream())),
        })
    }

    fn pooled_error(&self, failure: http1::Failure) -> Error {
        let url = self.inner.endpoint.url.clone();
        match failure {
            http1::Failure::Connect(message) => Error::Connect { url, message },
            http1::Failure::Timeout => Error::Timeout {
                url,
                after: self.inner.options.request_timeout,
            },
            http1::Failure::Io(message) => Error::Transport { url, message },
        }
    }

    fn body_error(&self, error: BodyError) -> Error {
        match error {
            BodyError::Reqwest(e) => self.transport_error(e),
            BodyError::Pooled(f) => self.pooled_error(f),
        }
    }

    async fn read_body_text(&self, mut stream: ReplyBody) -> String {
        let mut body = Vec::new();
        while let Some(Ok(chunk)) = stream.next().await {
            if body.len() + chunk.len() > 1024 * 1024 {
                break;
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8_lossy(&body).into_owned()
    }

    fn transport_error(&self, error: reqwest::Error) -> Error {
        classify_transport(
            &self.inner.endpoint.url,
            error,
            self.inner.options.request_timeout,
        )
    }
}

/// The most of an event stream read after our answer arrived: a server that ends its stream
/// right after the answer (rmcp, most servers) gets its connection back into the pool; one that
/// keeps writing, or stays open past [`DRAIN_TIME`], loses it.
const DRAIN_BYTES: usize = 64 * 1024;
/// How long the rest of a stream may take to end after our answer.
const DRAIN_TIME: Duration = Duration::from_millis(500);
/// How long the caller itself waits for that end: usually the last chunk is already on its way,
/// and waiting for it means the very next request finds the connection in the pool. Past this,
/// the rest is drained in the background so a server that holds its streams open does not slow
/// our requests.
const DRAIN_INLINE: Duration = Duration::from_millis(10);

type Body =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// A response's status and head, its body still to read, from either path.
struct Reply {
    status: u16,
    headers: HeaderMap,
    body: ReplyBody,
}

impl From<http1::Reply> for Reply {
    fn from(reply: http1::Reply) -> Self {
        Self {
            status: reply.status,
            headers: reply.headers,
            body: ReplyBody::Pooled(reply.body),
        }
    }
}

enum ReplyBody {
    Reqwest(Body),
    Pooled(http1::Streaming),
}

enum BodyError {
    Reqwest(reqwest::Error),
    Pooled(http1::Failure),
}

impl ReplyBody {
    async fn next(&mut self) -> Option<std::result::Result<bytes::Bytes, BodyError>> {
        match self {
            Self::Reqwest(stream) => stream.next().await.map(|r| r.map_err(BodyError::Reqwest)),
            Self::Pooled(stream) => stream.next().await.map(|r| r.map_err(BodyError::Pooled)),
        }
    }
}

/// Reads the rest of an event stream whose answer we already have. Dropping a body before its
/// end closes the connection, and every SSE-replying poll would then pay a new TCP connect.
async fn drain_after_answer(mut stream: ReplyBody) {
    let mut read = 0usize;
    if tokio::time::timeout(DRAIN_INLINE, drain(&mut stream, &mut read))
        .await
        .is_ok()
    {
        return;
    }
    tokio::spawn(async move {
        // Ended, too long or too slow: either way the stream is dropped here.
        let _ = tokio::time::timeout(DRAIN_TIME, drain(&mut stream, &mut read)).await;
    });
}

/// Reads until the stream ends (or fails), or `read` passes [`DRAIN_BYTES`].
async fn drain(stream: &mut ReplyBody, read: &mut usize) {
    while let Some(Ok(chunk)) = stream.next().await {
        *read = read.saturating_add(chunk.len());
        if *read > DRAIN_BYTES {
            return;
        }
    }
}

/// nothing it cannot do.
pub fn client_capabilities() -> Value {
    json!({"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}, "url": {}}})
}

/// `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`: lower-case and static, so naming them costs
/// no parsing or allocation on each request (header names are case-insensitive on the wire).
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

fn insert_known(headers: &mut HeaderMap, name: HeaderName, value: &str) -> Result<()> {
    let value = HeaderValue::from_str(value)
        .map_err(|_| Error::InvalidRequest(format!("invalid value for header {name}")))?;
    headers.insert(name, value);
    Ok(())
}

/// The method whose requests may take the pooled path ([`Http1`]).
const TASKS_GET: &str = "tasks/get";

/// Every request's headers: content negotiation, version, method and name, the tool's
/// `Mcp-Param-*`, and the bearer token (marked sensitive, so never printed).
fn request_headers(
    method: &str,
    name: Option<&str>,
    extra_headers: &[(String, String)],
    version: &str,
    token: Option<&Sensitive<String>>,
) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    insert_known(&mut headers, MCP_PROTOCOL_VERSION, version)?;
    insert_known(&mut headers, MCP_METHOD, method)?;
    if let Some(name) = name {
        insert_known(&mut headers, MCP_NAME, &encode_header_value(name))?;
    }
    for (header, value) in extra_headers {
        insert_header(&mut headers, header, value)?;
    }
    if let Some(token) = token {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                Error::InvalidRequest(
                    "the bearer token has characters not allowed in a header".into(),
                )
            })?;
        value.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    Ok(headers)
}

fn insert_header(headers: &mut HeaderMap, name: &str, value: &str) -> Result<()> {
    let name = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| Error::InvalidRequest(format!("invalid header name {name:?}")))?;
    let value = HeaderValue::from_str(value)
        .map_err(|_| Error::InvalidRequest(format!("invalid value for header {name}")))?;
    headers.insert(name, value);
    Ok(())
}

/// A non-2xx answer, as read off the wire.
struct FailedAnswer<'a> {
    method: &'a str,
    task_id: Option<&'a str>,
    id: u64,
    status: u16,
    framing: Option<Framing>,
    body: &'a str,
    www_authenticate: Option<String>,
    retry_after: Option<Duration>,
}

/// The typed error of a non-2xx answer: a JSON-RPC error whatever the status (peers send them
/// with 200, 400, 404 or 500), else 401/403 as `Unauthorized`, else a plain HTTP error.
fn failure(answer: FailedAnswer<'_>) -> Error {
    let FailedAnswer {
        method,
        task_id,
        id,
        status,
        framing,
        body,
        www_authenticate,
        retry_after,
    } = answer;
    if let Some(error) = framing
        .or(Some(Framing::Json))
        .and_then(|f| decode_rpc_error(f, &Value::from(id), body.as_bytes()))
    {
        return rpc_error(method, task_id, error);
    }
    if status == 401 || status == 403 {
        return Error::Unauthorized {
            status,
            method: method.into(),
            www_authenticate,
        };
    }
    Error::Http {
        status,
        method: method.into(),
        body: snippet(body),
        retry_after,
    }
}

fn decode_rpc_error(framing: Framing, id: &Value, body: &[u8]) -> Option<super::wire::RpcError> {
    let mut reader = ResponseReader::new(framing, id.clone());
    let answer = match reader.feed(body).ok()? {
        Some(answer) => answer,
        None => reader.finish().ok()?,
    };
    answer.err()
}

/// A reqwest failure as the client's error: timeout, TLS, connect or any other transport fault.
pub(crate) fn classify_transport(url: &str, error: reqwest::Error, timeout: Duration) -> Error {
    let url = url.to_owned();
    let message = error_chain(&error);
    if error.is_timeout() {
        Error::Timeout {
            url,
            after: timeout,
        }
    } else if is_tls(&message) {
        Error::Tls { url, message }
    } else if error.is_connect() {
        Error::Connect { url, message }
    } else {
        Error::Transport { url, message }
    }
}

fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.contains(&text) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}

fn is_tls(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["certificate", "tls", "ssl", "handshake"]
        .iter()
        .any(|n| lower.contains(n))
}

fn snippet(body: &str) -> String {
    const MAX: usize = 300;
    let trimmed = body.trim();
    if trimmed.chars().count() <= MAX {
        trimmed.to_owned()
    } else {
        format!("{}…", trimmed.chars().take(MAX).collect::<String>())
    }
}

fn invalid(method: &str, reason: impl Into<String>) -> Error {
    Error::InvalidResponse {
        method: method.into(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request refused because an OAuth refresh replaced the token while it was out (the
    /// authorization server revoked the old one as it issued the new one) is sent once more
    /// with the new token; a refusal of the token in use is not retried.
    #[tokio::test]
    async fn a_request_refused_after_its_token_was_swapped_is_sent_again_with_the_new_one() {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        let client =
            Client::new(Endpoint::new(url).with_token(Some(Sensitive::new("old".to_owned()))))
                .expect("client");
        let swapper = client.clone();
        let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(3) {
                let Ok(mut s) = stream else { continue };
                let mut buf = vec![0u8; 16384];
                let n = s.read(&mut buf).unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).to_lowercase();
                let bearer = request
                    .lines()
                    .find_map(|l| l.strip_prefix("authorization: bearer "))
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                let id = request
                    .split("\"id\":")
                    .nth(1)
                    .and_then(|rest| rest.split([',', '}']).next())
                    .unwrap_or("0")
                    .to_owned();
                log.lock().expect("log").push(bearer.clone());
                let reply = if bearer == "new" {
                    let body = format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete"}}}}"#
                    );
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    if bearer == "old" {
                        // The refresh lands while this request is out.
                        swapper.set_bearer_token(Some(Sensitive::new("new".to_owned())));
                    }
                    "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned()
                };
                let _ = s.write_all(reply.as_bytes());
            }
        });
        client
            .cancel_task("t-1")
            .await
            .expect("sent again with the new token");
        assert_eq!(*seen.lock().expect("log"), ["old", "new"]);

        // The token in use refused: no second request (nothing was swapped).
        client.set_bearer_token(Some(Sensitive::new("stale".to_owned())));
        let refused = client.cancel_task("t-1").await.expect_err("refused");
        assert!(matches!(refused, Error::Unauthorized { .. }), "{refused:?}");
        assert_eq!(
            seen.lock().expect("log").len(),
            3,
            "one request, not retried"
        );
    }
}
