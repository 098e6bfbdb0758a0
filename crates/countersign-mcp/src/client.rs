//! The stateless MCP client: one POST per request, no session, `_meta` and headers on every call.

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

/// A keyed 64-bit hash of a `tasks/get` result's text (see [`Client::poll_task`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest(u64);

impl Digest {
    fn of(text: &str) -> Self {
        use std::hash::BuildHasher as _;
        // SipHash with keys drawn once per process: what a server sends cannot be chosen to
        // collide with its previous answer.
        static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
        Self(KEYS.get_or_init(std::hash::RandomState::new).hash_one(text))
    }
}

/// What one poll found (see [`Client::poll_task`]).
#[derive(Debug)]
pub enum Polled {
    /// The result's text is the same as the last one's.
    Unchanged,
    /// A different result, and its digest for the next poll.
    Changed(Task, Digest),
}

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

/// The arguments of one `tools/call`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Option<Map<String, Value>>,
    /// MRTR: answers to the `inputRequests` of the previous attempt.
    pub input_responses: Option<Map<String, Value>>,
    /// MRTR: the `requestState` of the previous attempt, echoed unchanged.
    pub request_state: Option<String>,
}

impl ToolCall {
    /// A first attempt with these arguments.
    pub fn new(name: impl Into<String>, arguments: Option<Map<String, Value>>) -> Self {
        Self {
            name: name.into(),
            arguments,
            ..Self::default()
        }
    }

    /// The retry that answers an MRTR `input_required`: same name and arguments, the answers,
    /// and the server's state byte-for-byte (or none if it sent none).
    pub fn retry_with(&self, answered: &InputRequired, responses: Map<String, Value>) -> Self {
        Self {
            name: self.name.clone(),
            arguments: self.arguments.clone(),
            input_responses: Some(responses),
            request_state: answered.request_state.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct ToolHeaders {
    params: HashMap<String, Vec<HeaderParam>>,
    excluded: HashMap<String, String>,
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
fn redirect_policy() -> reqwest::redirect::Policy {
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

fn redirected(method: &str, status: u16, headers: &reqwest::header::HeaderMap) -> Error {
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

    /// The protocol version in use.
    pub fn protocol_version(&self) -> String {
        self.inner
            .version
            .read()
            .map(|v| v.clone())
            .unwrap_or_else(|_| PROTOCOL_VERSION.into())
    }

    /// `server/discover`: versions, capabilities, instructions and identity.
    pub async fn discover(&self) -> Result<Discovery> {
        let result = self
            .request("server/discover", Map::new(), None, Vec::new())
            .await?;
        reject_task_handle("server/discover", &result)?;
        Discovery::parse(&result).map_err(|reason| invalid("server/discover", reason))
    }

    /// `tools/list`, all pages. Tools with invalid `x-mcp-header` annotations are excluded (and
    /// logged); the result says which and why.
    pub async fn list_tools(&self) -> Result<ToolList> {
        const MAX_PAGES: usize = 1000;
        let mut list = ToolList::default();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut params = Map::new();
            if let Some(c) = &cursor {
                params.insert("cursor".into(), Value::String(c.clone()));
            }
            let result = self.request("tools/list", params, None, Vec::new()).await?;
            reject_task_handle("tools/list", &result)?;
            let tools = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("tools/list", "the result has no `tools` array"))?;
            for tool in tools {
                match parse_tool(tool) {
                    Ok(tool) => list.tools.push(tool),
                    Err(excluded) => {
                        tracing::warn!(tool = %excluded.name, reason = %excluded.reason, "excluding tool");
                        list.excluded.push(excluded);
                    }
                }
            }
            cursor = match result.get("nextCursor") {
                Some(Value::String(c)) if !c.is_empty() => Some(c.clone()),
                _ => None,
            };
            if cursor.is_none() {
                break;
            }
        }
        if let Ok(mut cache) = self.inner.tools.write() {
            for tool in &list.tools {
                cache.excluded.remove(&tool.name);
                cache
                    .params
                    .insert(tool.name.clone(), tool.header_params.clone());
            }
            for tool in &list.excluded {
                cache.params.remove(&tool.name);
                cache
                    .excluded
                    .insert(tool.name.clone(), tool.reason.clone());
            }
        }
        Ok(list)
    }

    /// `tools/call`: a result, an MRTR question, or a task handle. Arguments declared with
    /// `x-mcp-header` (as learnt from the last `tools/list`) are mirrored into headers.
    pub async fn call_tool(&self, call: &ToolCall) -> Result<CallOutcome> {
        let header_params = {
            let cache = self
                .inner
                .tools
                .read()
                .map_err(|_| Error::InvalidRequest("tool cache poisoned".into()))?;
            if let Some(reason) = cache.excluded.get(&call.name) {
                return Err(Error::InvalidRequest(format!(
                    "tool {:?} was excluded: {reason}",
                    call.name
                )));
            }
            cache.params.get(&call.name).cloned().unwrap_or_default()
        };
        let mut params = Map::new();
        params.insert("name".into(), Value::String(call.name.clone()));
        if let Some(arguments) = &call.arguments {
            params.insert("arguments".into(), Value::Object(arguments.clone()));
        }
        if let Some(responses) = &call.input_responses {
            params.insert("inputResponses".into(), Value::Object(responses.clone()));
        }
        if let Some(state) = &call.request_state {
            params.insert("requestState".into(), Value::String(state.clone()));
        }
        let extra = param_headers(&header_params, call.arguments.as_ref());
        let result = self
            .request("tools/call", params, Some(&call.name), extra)
            .await?;
        interpret_call_result(&result).map_err(|reason| invalid("tools/call", reason))
    }

    /// `resources/list` (first page), verbatim.
    pub async fn list_resources(&self) -> Result<Value> {
        self.plain_request("resources/list", Map::new(), None).await
    }

    /// `resources/read` of one URI, verbatim (`Mcp-Name` carries the URI).
    pub async fn read_resource(&self, uri: &str) -> Result<Value> {
        let mut params = Map::new();
        params.insert("uri".into(), Value::String(uri.into()));
        self.plain_request("resources/read", params, Some(uri))
            .await
    }

    /// `prompts/list` (first page), verbatim.
    pub async fn list_prompts(&self) -> Result<Value> {
        self.plain_request("prompts/list", Map::new(), None).await
    }

    /// `prompts/get` with arguments, verbatim (`Mcp-Name` carries the prompt name).
    pub async fn get_prompt(&self, name: &str, arguments: Map<String, Value>) -> Result<Value> {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.into()));
        params.insert("arguments".into(), Value::Object(arguments));
        self.plain_request("prompts/get", params, Some(name)).await
    }

    async fn plain_request(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
    ) -> Result<Value> {
        let result = self.request(method, params, name, Vec::new()).await?;
        reject_task_handle(method, &result)?;
        Ok(result)
    }

    /// Sends `method` with `params` as the agent sent them and returns the result verbatim,
    /// task handles included: the gateway's pass-through. The agent's `_meta` is replaced by
    /// this client's own (its protocol version, capabilities and identity), except the client
    /// capabilities it declares (`_meta["io.modelcontextprotocol/clientCapabilities"]`), which
    /// go upstream instead of ours: the upstream decides what it may ask of, or must refuse to,
    /// the agent (-32021 for a task-only tool to an agent without tasks); `Mcp-Name` is set
    /// as for the typed methods, and a `tools/call` mirrors its `x-mcp-header` arguments as
    /// learnt from the last `tools/list`.
    pub async fn forward(&self, method: &str, params: Map<String, Value>) -> Result<Value> {
        let name_field = match method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            m if m.starts_with("tasks/") => Some("taskId"),
            _ => None,
        };
        let name = name_field
            .and_then(|f| params.get(f))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let extra = match (method, name.as_deref()) {
            ("tools/call", Some(tool)) => {
                let header_params = self
                    .inner
                    .tools
                    .read()
                    .ok()
                    .and_then(|cache| cache.params.get(tool).cloned())
                    .unwrap_or_default();
                let arguments = params.get("arguments").and_then(Value::as_object);
                param_headers(&header_params, arguments)
            }
            _ => Vec::new(),
        };
        self.request(method, params, name.as_deref(), extra).await
    }

    /// `tasks/get`: the task's current state with its payload.
    pub async fn get_task(&self, task_id: &str) -> Result<Task> {
        let result = self.task_request("tasks/get", task_id, Map::new()).await?;
        interpret_task_result(task_id, &result).map_err(|reason| invalid("tasks/get", reason))
    }

    /// `tasks/get` for a poller that remembers the last answer's [`Digest`]: when the result's
    /// text is the same, says so without reading it further (no `Value` tree, no task to
    /// compare downstream). The digest is keyed per process, so a server cannot aim for a
    /// collision.
    pub async fn poll_task(&self, task_id: &str, last: Option<Digest>) -> Result<Polled> {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(task_id.into()));
        let result = self
            .request_raw("tasks/get", params, Some(task_id), Vec::new())
            .await?;
        let digest = Digest::of(result.get());
        if last == Some(digest) {
            return Ok(Polled::Unchanged);
        }
        let value = to_value(&result).map_err(|reason| invalid("tasks/get", reason))?;
        let task = interpret_task_result(task_id, &value)
            .map_err(|reason| invalid("tasks/get", reason))?;
        Ok(Polled::Changed(task, digest))
    }

    /// `tasks/update`: delivers answers keyed by input-request key.
    pub async fn update_task(&self, task_id: &str, responses: Map<String, Value>) -> Result<()> {
        let mut params = Map::new();
        params.insert("inputResponses".into(), Value::Object(responses));
        let result = self.task_request("tasks/update", task_id, params).await?;
        expect_ack("tasks/update", &result)
    }

    /// `tasks/cancel`: asks the server to stop (cooperative: the task may still complete).
    pub async fn cancel_task(&self, task_id: &str) -> Result<()> {
        let result = self
            .task_request("tasks/cancel", task_id, Map::new())
            .await?;
        expect_ack("tasks/cancel", &result)
    }

    async fn task_request(
        &self,
        method: &str,
        task_id: &str,
        mut params: Map<String, Value>,
    ) -> Result<Value> {
        params.insert("taskId".into(), Value::String(task_id.into()));
        self.request(method, params, Some(task_id), Vec::new())
            .await
    }

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
        let url = self.inner.endpoint.url.clone();
        let message = error_chain(&error);
        if error.is_timeout() {
            Error::Timeout {
                url,
                after: self.inner.options.request_timeout,
            }
        } else if is_tls(&message) {
            Error::Tls { url, message }
        } else if error.is_connect() {
            Error::Connect { url, message }
        } else {
            Error::Transport { url, message }
        }
    }
}

impl Client {
    /// Opens a `subscriptions/listen` stream for task status notifications: a long-lived POST
    /// with no whole-request timeout. Getting the response headers is bounded by the request
    /// timeout; after that the stream is bounded by `request.idle_timeout` of silence. Errors
    /// before the stream opens are typed as for every other request (-32601 →
    /// [`Error::MethodNotFound`], -32021 → [`Error::MissingCapability`], ...); errors and events
    /// after it opens come from [`Listening::next`].
    pub async fn listen(&self, request: &ListenRequest) -> Result<Listening> {
        let OpenedListen {
            id,
            response,
            framing,
        } = self.open_listen(&request.params()).await?;
        let mut listening = Listening {
            id,
            url: self.inner.endpoint.url.clone(),
            body: Box::pin(futures_util::stream::empty()),
            decoder: ListenDecoder::new(Value::from(id)),
            queue: std::collections::VecDeque::new(),
            idle_timeout: request.idle_timeout,
            ended: false,
            client: self.clone(),
        };
        match framing {
            Framing::Sse => listening.body = Box::pin(response.bytes_stream()),
            // A JSON body is a single message: an error (some servers send -32601 with 200), or
            // a result, which means the subscription ended as soon as it began.
            Framing::Json => {
                let text = self.read_listen_body(response).await;
                match listening.decoder.message(&text, "response") {
                    Ok(Some(event)) => listening.queue.push_back(Ok(event)),
                    Ok(None) => {
                        return Err(invalid(
                            LISTEN_METHOD,
                            "the JSON body does not answer the listen request",
                        ))
                    }
                    Err(fault) => return Err(stream_fault(fault)),
                }
                listening.ended = true;
            }
        }
        Ok(listening)
    }

    /// Opens `subscriptions/listen` with `params` as an agent sent them, for the gateway to
    /// relay: the stream's bytes untouched (the caller decodes them), or the one JSON message
    /// that answered instead. `params._meta` may carry the agent's client capabilities (see
    /// [`Client::forward`]). Bounded as [`Client::listen`] is up to the response headers; the
    /// caller bounds the silence.
    pub async fn relay_listen(&self, params: Map<String, Value>) -> Result<RelayedListen> {
        let OpenedListen {
            id,
            response,
            framing,
        } = self.open_listen(&params).await?;
        Ok(match framing {
            Framing::Sse => {
                let client = self.clone();
                RelayedListen::Stream {
                    id,
                    body: Box::pin(
                        response
                            .bytes_stream()
                            .map(move |chunk| chunk.map_err(|e| client.transport_error(e))),
                    ),
                }
            }
            Framing::Json => RelayedListen::Message {
                id,
                text: self.read_listen_body(response).await,
            },
        })
    }

    /// A JSON answer to a listen request, read within the request timeout.
    async fn read_listen_body(&self, response: reqwest::Response) -> String {
        tokio::time::timeout(
            self.inner.options.request_timeout,
            self.read_body_text(ReplyBody::Reqwest(Box::pin(response.bytes_stream()))),
        )
        .await
        .unwrap_or_default()
    }

    /// Sends `subscriptions/listen` and reads the answer's status and headers: errors typed as
    /// for every other request, else the response with its framing.
    async fn open_listen(&self, params: &Map<String, Value>) -> Result<OpenedListen> {
        let method = LISTEN_METHOD;
        let inner = &self.inner;
        let version = self.protocol_version();
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let body = Envelope {
            id,
            method,
            params,
            version: &version,
            fixed: &inner.fixed_meta,
        }
        .encode()?;
        let headers = request_headers(method, None, &[], &version, self.bearer_token().as_ref())?;

        let timeout = inner.options.request_timeout;
        let url = inner.endpoint.url.clone();
        let send = inner
            .listen_http
            .post(inner.url.clone())
            .headers(headers)
            .body(body)
            .send();
        let response = match tokio::time::timeout(timeout, send).await {
            Err(_) => {
                return Err(Error::Timeout {
                    url,
                    after: timeout,
                })
            }
            Ok(response) => response.map_err(|e| self.transport_error(e))?,
        };
        let status = response.status().as_u16();
        let headers = response.headers();
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let retry_after = headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
        let www_authenticate = headers
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let framing = Framing::from_content_type(content_type.as_deref());

        if (300..400).contains(&status) {
            return Err(redirected(method, status, headers));
        }
        if status == 406 {
            return Err(Error::NotAcceptable {
                method: method.into(),
            });
        }
        if status == 429 {
            return Err(Error::RateLimited {
                method: method.into(),
                retry_after,
            });
        }
        if !(200..300).contains(&status) {
            let text = self.read_listen_body(response).await;
            return Err(failure(FailedAnswer {
                method,
                task_id: None,
                id,
                status,
                framing,
                body: &text,
                www_authenticate,
                retry_after,
            }));
        }

        let Some(framing) = framing else {
            return Err(invalid(
                method,
                format!(
                    "unexpected Content-Type {:?} (expected text/event-stream)",
                    content_type.unwrap_or_default()
                ),
            ));
        };
        Ok(OpenedListen {
            id,
            response,
            framing,
        })
    }
}

/// A listen request's answer, its status read.
struct OpenedListen {
    id: u64,
    response: reqwest::Response,
    framing: Framing,
}

/// What the upstream answered a relayed `subscriptions/listen` with ([`Client::relay_listen`]).
pub enum RelayedListen {
    /// An event stream: the bytes as they come. Dropping it closes the connection, which ends
    /// the subscription upstream.
    Stream {
        /// The JSON-RPC id the upstream knows the subscription by (its `subscriptionId`).
        id: u64,
        /// The body.
        body: futures_util::stream::BoxStream<'static, Result<bytes::Bytes>>,
    },
    /// A single JSON message (an error sent with 200, or a result: the subscription is over).
    Message {
        /// The JSON-RPC id of the request.
        id: u64,
        /// The body.
        text: String,
    },
}

impl std::fmt::Debug for RelayedListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stream { id, .. } => f
                .debug_struct("Stream")
                .field("id", id)
                .finish_non_exhaustive(),
            Self::Message { id, text } => f
                .debug_struct("Message")
                .field("id", id)
                .field("text", text)
                .finish(),
        }
    }
}

/// An open `subscriptions/listen` stream ([`Client::listen`]). Dropping it closes the
/// connection, which is how an HTTP client cancels a subscription.
pub struct Listening {
    id: u64,
    url: String,
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: ListenDecoder,
    /// Decoded but not yet returned; an `Err` is always last.
    queue: std::collections::VecDeque<Result<ListenEvent>>,
    idle_timeout: Duration,
    /// No more bytes will be read.
    ended: bool,
    client: Client,
}

impl std::fmt::Debug for Listening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listening")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Listening {
    /// The subscription id: the JSON-RPC id of the listen request.
    pub fn subscription_id(&self) -> u64 {
        self.id
    }

    /// The next event; `None` once the stream is over (after [`ListenEvent::Closed`] or an
    /// error). Never waits longer than the idle timeout for bytes: a silent stream ends with
    /// [`Error::Timeout`], one that stops without a closing response with [`Error::Transport`],
    /// a server that breaks the stream's rules with [`Error::InvalidResponse`].
    pub async fn next(&mut self) -> Option<Result<ListenEvent>> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                if item.is_err() {
                    self.queue.clear();
                    self.ended = true;
                }
                return Some(item);
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout(self.idle_timeout, self.body.next()).await {
                Err(_) => self.end_with(Error::Timeout {
                    url: self.url.clone(),
                    after: self.idle_timeout,
                }),
                Ok(Some(Ok(bytes))) => {
                    let decoded = self.decoder.feed(&bytes);
                    self.absorb(decoded);
                }
                Ok(Some(Err(e))) => {
                    let error = self.client.transport_error(e);
                    self.end_with(error);
                }
                Ok(None) => {
                    let decoded = self.decoder.finish();
                    self.absorb(decoded);
                    if !self.ended {
                        self.end_with(Error::Transport {
                            url: self.url.clone(),
                            message: "the listen stream ended without a closing response".into(),
                        });
                    }
                }
            }
        }
    }

    fn absorb(&mut self, decoded: std::result::Result<Vec<ListenEvent>, StreamFault>) {
        match decoded {
            Ok(events) => {
                self.queue.extend(events.into_iter().map(Ok));
                self.ended |= self.decoder.is_closed();
            }
            Err(fault) => self.end_with(stream_fault(fault)),
        }
    }

    fn end_with(&mut self, error: Error) {
        self.queue.push_back(Err(error));
        self.ended = true;
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

fn stream_fault(fault: StreamFault) -> Error {
    match fault {
        StreamFault::TooLarge { limit } => Error::ResponseTooLarge {
            method: LISTEN_METHOD.into(),
            limit,
        },
        StreamFault::Invalid(reason) => invalid(LISTEN_METHOD, reason),
        StreamFault::Rpc(error) => rpc_error(LISTEN_METHOD, None, error),
    }
}

/// What the client declares on every request: the Tasks extension and both elicitation modes,
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

/// The `_meta` entries that are the same on every request of a client (its capabilities and
/// `clientInfo`), encoded once when the client is built rather than rebuilt as `Value` trees on
/// every poll.
#[derive(Debug)]
struct FixedMeta {
    capabilities: Box<RawValue>,
    client_info: Box<RawValue>,
    /// `_meta`'s text up to the protocol version's value: `{"…protocolVersion":`.
    head: Box<[u8]>,
    /// `_meta`'s text after the protocol version: `,"…clientCapabilities":…,"…clientInfo":…}`.
    tail: Box<[u8]>,
}

impl FixedMeta {
    fn new(options: &ClientOptions) -> Result<Self> {
        let encode = |value: Value| {
            serde_json::value::to_raw_value(&value).map_err(|e| {
                Error::InvalidRequest(format!("the client's _meta could not be encoded: {e}"))
            })
        };
        let capabilities = encode(client_capabilities())?;
        let client_info =
            encode(json!({"name": options.client_name, "version": options.client_version}))?;
        let mut tail = Vec::new();
        for (key, value) in [
            (META_CLIENT_CAPABILITIES, &capabilities),
            (META_CLIENT_INFO, &client_info),
        ] {
            tail.push(b',');
            write_json(&mut tail, key)?;
            tail.push(b':');
            tail.extend_from_slice(value.get().as_bytes());
        }
        tail.push(b'}');
        let mut head = vec![b'{'];
        write_json(&mut head, META_PROTOCOL_VERSION)?;
        head.push(b':');
        Ok(Self {
            capabilities,
            client_info,
            head: head.into_boxed_slice(),
            tail: tail.into_boxed_slice(),
        })
    }
}

/// Appends `value`'s JSON text to `out`.
fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    serde_json::to_writer(out, value)
        .map_err(|e| Error::InvalidRequest(format!("a request could not be encoded: {e}")))
}

/// One JSON-RPC request, written straight into the body's bytes: `params` as given, then the
/// `_meta` every request carries (protocol version, capabilities, `clientInfo`). Building a
/// `Value` tree for the body and printing it through `Display` was about a fifth of the CPU of
/// an unchanged poll. A `_meta` among `params` is not sent: only its client capabilities, when
/// it has them, are, instead of the client's own (the gateway forwarding an agent's request,
/// see [`Client::forward`]); its other entries are dropped, not merged.
struct Envelope<'a> {
    id: u64,
    method: &'a str,
    params: &'a Map<String, Value>,
    version: &'a str,
    fixed: &'a FixedMeta,
}

impl Envelope<'_> {
    /// The request's bytes, exactly as serde_json would print the request as a `Value` (the
    /// tests hold it to that), but with the fixed parts copied in rather than escaped again on
    /// every poll: only the id, the method, `params` and the protocol version go through serde.
    fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(128 + self.fixed.head.len() + self.fixed.tail.len());
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        write_json(&mut out, &self.id)?;
        out.extend_from_slice(b",\"method\":");
        write_json(&mut out, self.method)?;
        out.extend_from_slice(b",\"params\":{");
        for (key, value) in self.params.iter().filter(|(key, _)| *key != "_meta") {
            write_json(&mut out, key)?;
            out.push(b':');
            write_json(&mut out, value)?;
            out.push(b',');
        }
        out.extend_from_slice(b"\"_meta\":");
        // The gateway speaks for an agent: the agent's declared capabilities, not ours.
        let agents = self
            .params
            .get("_meta")
            .and_then(|meta| meta.get(META_CLIENT_CAPABILITIES));
        match agents {
            Some(_) => write_json(&mut out, &EnvelopeMeta(self))?,
            None => {
                out.extend_from_slice(&self.fixed.head);
                write_json(&mut out, self.version)?;
                out.extend_from_slice(&self.fixed.tail);
            }
        }
        out.extend_from_slice(b"}}");
        Ok(out)
    }
}

struct EnvelopeMeta<'a>(&'a Envelope<'a>);

impl Serialize for EnvelopeMeta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let envelope = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry(META_PROTOCOL_VERSION, envelope.version)?;
        // The gateway speaks for an agent: the agent's declared capabilities, not ours.
        match envelope
            .params
            .get("_meta")
            .and_then(|meta| meta.get(META_CLIENT_CAPABILITIES))
        {
            Some(agents) => map.serialize_entry(META_CLIENT_CAPABILITIES, agents)?,
            None => map.serialize_entry(META_CLIENT_CAPABILITIES, &*envelope.fixed.capabilities)?,
        }
        map.serialize_entry(META_CLIENT_INFO, &*envelope.fixed.client_info)?;
        map.end()
    }
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

fn reject_task_handle(method: &str, result: &Value) -> Result<()> {
    if !result.is_object() {
        return Err(invalid(method, "the result must be an object"));
    }
    match result_type(result).map_err(|r| invalid(method, r))? {
        "task" => Err(invalid(
            method,
            format!("a task handle in answer to {method}, which cannot create tasks"),
        )),
        _ => Ok(()),
    }
}

fn expect_ack(method: &str, result: &Value) -> Result<()> {
    reject_task_handle(method, result)?;
    match result_type(result).map_err(|r| invalid(method, r))? {
        "complete" => Ok(()),
        other => Err(invalid(method, format!("unexpected resultType {other:?}"))),
    }
}

fn parse_tool(value: &Value) -> std::result::Result<Tool, ExcludedTool> {
    let Some(definition) = value.as_object() else {
        return Err(ExcludedTool {
            name: String::new(),
            reason: "a tool definition must be an object".into(),
        });
    };
    let name = match definition.get("name") {
        Some(Value::String(n)) if !n.is_empty() => n.clone(),
        _ => {
            return Err(ExcludedTool {
                name: String::new(),
                reason: "a tool must have a non-empty string `name`".into(),
            })
        }
    };
    match header_params(definition.get("inputSchema")) {
        Ok(header_params) => Ok(Tool {
            name,
            definition: definition.clone(),
            header_params,
        }),
        Err(reason) => Err(ExcludedTool { name, reason }),
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

    /// The body the client sent before it encoded requests directly: the same keys in the same
    /// order, byte for byte.
    fn built_as_a_value(
        id: u64,
        method: &str,
        params: &Map<String, Value>,
        version: &str,
    ) -> Value {
        let mut params = params.clone();
        params.insert(
            "_meta".into(),
            json!({
                META_PROTOCOL_VERSION: version,
                META_CLIENT_CAPABILITIES: client_capabilities(),
                META_CLIENT_INFO: {"name": "countersign", "version": env!("CARGO_PKG_VERSION")},
            }),
        );
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    #[test]
    fn a_request_is_encoded_exactly_as_its_json_value_would_print() {
        let fixed = FixedMeta::new(&ClientOptions::default()).expect("encodable");
        let mut params = Map::new();
        params.insert("taskId".into(), json!("t-1"));
        params.insert(
            "inputResponses".into(),
            json!({"k": {"action": "accept", "content": {"n": 1.5, "s": "é\"\n"}}}),
        );
        let body = Envelope {
            id: 42,
            method: "tasks/update",
            params: &params,
            version: PROTOCOL_VERSION,
            fixed: &fixed,
        }
        .encode()
        .expect("encodable");
        let expected = built_as_a_value(42, "tasks/update", &params, PROTOCOL_VERSION).to_string();
        assert_eq!(String::from_utf8(body).expect("UTF-8"), expected);
    }

    #[test]
    fn capabilities_among_the_params_replace_the_clients_own_and_nothing_else_does() {
        let fixed = FixedMeta::new(&ClientOptions::default()).expect("encodable");
        let mut params = Map::new();
        params.insert("name".into(), json!("failing_job"));
        params.insert(
            "_meta".into(),
            json!({META_CLIENT_CAPABILITIES: {"sampling": {}}, META_PROTOCOL_VERSION: "1999-01-01"}),
        );
        let body = Envelope {
            id: 7,
            method: "tools/call",
            params: &params,
            version: PROTOCOL_VERSION,
            fixed: &fixed,
        }
        .encode()
        .expect("encodable");
        let sent: Value = serde_json::from_slice(&body).expect("valid JSON");
        let meta = &sent["params"]["_meta"];
        assert_eq!(
            meta[META_CLIENT_CAPABILITIES],
            json!({"sampling": {}}),
            "{sent}"
        );
        assert_eq!(
            meta[META_PROTOCOL_VERSION],
            json!(PROTOCOL_VERSION),
            "{sent}"
        );
        assert_eq!(
            meta[META_CLIENT_INFO]["name"],
            json!("countersign"),
            "{sent}"
        );
    }

    #[test]
    fn a_meta_among_the_params_is_not_sent_beside_the_clients_own() {
        let fixed = FixedMeta::new(&ClientOptions::default()).expect("encodable");
        let mut params = Map::new();
        params.insert("_meta".into(), json!({"stray": true}));
        params.insert("taskId".into(), json!("t-1"));
        let body = Envelope {
            id: 1,
            method: "tasks/get",
            params: &params,
            version: PROTOCOL_VERSION,
            fixed: &fixed,
        }
        .encode()
        .expect("encodable");
        let sent: Value = serde_json::from_slice(&body).expect("valid JSON");
        let meta = &sent["params"]["_meta"];
        assert_eq!(meta[META_PROTOCOL_VERSION], json!(PROTOCOL_VERSION));
        assert!(meta.get("stray").is_none(), "{sent}");
        assert_eq!(
            body.windows(b"\"_meta\"".len())
                .filter(|w| *w == b"\"_meta\"")
                .count(),
            1,
            "one _meta key: {sent}"
        );
    }
}
