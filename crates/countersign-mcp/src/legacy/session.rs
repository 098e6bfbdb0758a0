//! The HTTP side of a legacy session: every message is a POST to the one endpoint with the
//! session's headers; the server's optional GET stream; DELETE to end it. Here too: the
//! initialize handshake, and telling "the server no longer knows this session" apart from
//! every other failure.

use std::sync::atomic::Ordering;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::{json, Map, Value};

use super::stream::{Fault, Inbound, Incoming};
use super::wire::{InitializeResult, ServerRequest};
use super::{invalid, legacy_client_capabilities, LegacyClient, LEGACY_VERSIONS};
use crate::error::{Error, Result};
use crate::response::{rpc_error, Framing};

const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// The longest session id we keep (the spec allows visible ASCII of any length; we bound it).
const MAX_SESSION_ID: usize = 1024;

/// How long the stdio detection waits for an answer to `server/discover`: silence means a
/// legacy server (some wait for `initialize` before answering anything).
pub(crate) const STDIO_PROBE_TIME: Duration = Duration::from_secs(10);

/// What the server sends when it no longer knows a session: 404 (the spec), or 400 with one of
/// these (server-everything's express wrapper, the TypeScript SDK's transport).
const EXPIRED_MESSAGES: [&str; 4] = [
    "no valid session id provided",
    "server not initialized",
    "session not found",
    "mcp-session-id header is required",
];

/// What a POST got back.
pub(crate) enum Posted {
    /// 202: a notification or response was taken.
    Accepted,
    /// A body to read messages from, and the response's headers.
    Body(Inbound, HeaderMap),
}

impl LegacyClient {
    /// Sends one request and waits for its answer, within the request timeout. Server requests
    /// that arrive meanwhile are refused at once (nothing of ours waits on them), notifications
    /// are dropped (task status comes from polling or the GET stream).
    pub(crate) async fn request(&self, method: &str, params: Map<String, Value>) -> Result<Value> {
        let timeout = self.inner.options.request_timeout;
        match tokio::time::timeout(timeout, self.request_untimed(method, params)).await {
            Ok(answer) => answer,
            Err(_) => Err(Error::Timeout {
                url: self.url().into(),
                after: timeout,
            }),
        }
    }

    async fn request_untimed(&self, method: &str, params: Map<String, Value>) -> Result<Value> {
        let id = self.next_id();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let task_id = params_task_id(&body);
        let Posted::Body(mut inbound, _) = self.post(method, &body, false).await? else {
            return Err(invalid(method, "202 Accepted in answer to a request"));
        };
        let mut resumed = false;
        loop {
            match inbound.next().await {
                Ok(Some(Incoming::Response { id: got, answer })) if got == json!(id) => {
                    return answer.map_err(|error| rpc_error(method, task_id.as_deref(), error));
                }
                Ok(Some(Incoming::Request(request))) => self.refuse(&request).await,
                Ok(Some(_)) => {}
                Ok(None) | Err(Fault::Transport(_))
                    if !resumed && inbound.last_event_id.is_some() =>
                {
                    // The stream dropped before our answer: resume it once from the last event.
                    resumed = true;
                    tokio::time::sleep(inbound.reconnect_delay()).await;
                    let last = inbound.last_event_id.clone();
                    match self.get(last.as_deref()).await? {
                        Some(next) => inbound = next,
                        None => return Err(self.ended_early(method)),
                    }
                }
                Ok(None) => return Err(self.ended_early(method)),
                Err(fault) => return Err(self.fault(method, fault)),
            }
        }
    }

    /// POSTs a notification or a response to the server's request (expects 202).
    pub(crate) async fn send_message(&self, message: Value) -> Result<()> {
        let what = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("response")
            .to_owned();
        match self.post(&what, &message, false).await? {
            Posted::Accepted => Ok(()),
            // Some servers answer 200 with an empty body: taken all the same.
            Posted::Body(..) => Ok(()),
        }
    }

    /// Answers a server request we do not serve with a JSON-RPC error, so nothing on the
    /// server waits for us. A failure to send is logged: the stream goes on.
    pub(crate) async fn refuse(&self, request: &ServerRequest) {
        let message = format!("Countersign does not support {}", request.method);
        if let Err(e) = self.respond_error(&request.id, -32601, &message).await {
            tracing::warn!(method = %request.method, error = %e, "could not refuse a server request");
        }
    }

    /// `initialize` and `notifications/initialized`; records the session. An answer with a
    /// version we do not speak ends the session and is [`Error::UnsupportedVersion`]. Called by
    /// [`LegacyClient::connect`]; on its own for a client made [`LegacyClient::unconnected`].
    pub async fn initialize(&self) -> Result<()> {
        let mut version = LEGACY_VERSIONS[0].to_owned();
        let mut retried = false;
        let (result, session_id) = loop {
            match self.initialize_with(&version).await {
                Ok(answer) => break answer,
                // A server that names the versions it speaks: the newest we share, once.
                Err(Error::InvalidParams { data, message, .. }) if !retried => {
                    let supported = crate::response::supported_versions(data.as_ref());
                    let Some(mutual) = LEGACY_VERSIONS
                        .iter()
                        .find(|v| supported.iter().any(|s| s == *v))
                    else {
                        return Err(Error::InvalidParams {
                            method: "initialize".into(),
                            message,
                            data,
                        });
                    };
                    retried = true;
                    version = (*mutual).to_owned();
                }
                Err(e) => return Err(e),
            }
        };
        let result: InitializeResult = serde_json::from_value(result)
            .map_err(|e| invalid("initialize", format!("malformed InitializeResult: {e}")))?;
        {
            let mut session = self
                .inner
                .session
                .write()
                .unwrap_or_else(|e| e.into_inner());
            session.session_id = session_id;
            session.protocol_version = result.protocol_version.clone();
            session.server_capabilities = result.capabilities;
            session.server_info = result.server_info;
        }
        if !LEGACY_VERSIONS.contains(&result.protocol_version.as_str()) {
            let _ = self.delete().await;
            return Err(Error::UnsupportedVersion {
                requested: version,
                supported: vec![result.protocol_version],
            });
        }
        self.send_message(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
    }

    /// The stdio detection: `server/discover` as a modern client sends it. A result (or
    /// -32022) naming 2026-07-28 and no session-era version is a modern-only server
    /// ([`Error::ModernStdio`]); a dual-era one, any other answer, or none within
    /// [`STDIO_PROBE_TIME`], goes on to `initialize`. A process that ends meanwhile is that
    /// error.
    pub(crate) async fn probe_stdio(&self) -> Result<()> {
        let method = "server/discover";
        let id = self.next_id();
        let options = &self.inner.options;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"_meta": {
            crate::wire::META_PROTOCOL_VERSION: crate::wire::PROTOCOL_VERSION,
            crate::wire::META_CLIENT_INFO: {"name": options.client_name, "version": options.client_version},
            crate::wire::META_CLIENT_CAPABILITIES: {},
        }}});
        let exchange = async {
            let Posted::Body(mut inbound, _) = self.post(method, &body, false).await? else {
                return Ok(None);
            };
            loop {
                match inbound.next().await {
                    Ok(Some(Incoming::Response { id: got, answer })) if got == json!(id) => {
                        return Ok(Some(answer));
                    }
                    Ok(Some(Incoming::Request(request))) => self.refuse(&request).await,
                    Ok(Some(_)) => {}
                    Ok(None) => return Err(self.ended_early(method)),
                    Err(fault) => return Err(self.fault(method, fault)),
                }
            }
        };
        let wait = STDIO_PROBE_TIME.min(options.request_timeout);
        let answer = match tokio::time::timeout(wait, exchange).await {
            Err(_) => return Ok(()), // silence: a legacy server waiting for `initialize`
            Ok(Err(e)) if matches!(e, Error::SessionExpired { .. }) => return Err(e),
            Ok(Err(_)) | Ok(Ok(None)) => return Ok(()),
            Ok(Ok(Some(answer))) => answer,
        };
        // Modern only when it names 2026-07-28 and none of ours: a dual-era server (the Python
        // SDK's, rmcp's) is spoken to in the session era, which it serves too.
        let modern_only = |versions: Option<&Value>| {
            let versions = versions.and_then(Value::as_array);
            let names = |v: &str| versions.is_some_and(|vs| vs.iter().any(|x| x == v));
            names(crate::wire::PROTOCOL_VERSION) && !LEGACY_VERSIONS.iter().any(|v| names(v))
        };
        let is_modern = match &answer {
            Ok(result) => modern_only(result.get("supportedVersions")),
            Err(error) => {
                error.code == -32022
                    && modern_only(error.data.as_ref().and_then(|d| d.get("supported")))
            }
        };
        if is_modern {
            return Err(Error::ModernStdio {
                url: self.url().into(),
            });
        }
        Ok(())
    }

    /// One `initialize` (without session headers): its result and the session id it issued.
    async fn initialize_with(&self, version: &str) -> Result<(Value, Option<String>)> {
        let method = "initialize";
        let id = self.next_id();
        let options = &self.inner.options;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {
            "protocolVersion": version,
            "capabilities": legacy_client_capabilities(),
            "clientInfo": {"name": options.client_name, "version": options.client_version},
        }});
        let exchange = async {
            let Posted::Body(mut inbound, headers) = self.post(method, &body, false).await? else {
                return Err(invalid(method, "202 Accepted in answer to initialize"));
            };
            let session_id = match headers.get(MCP_SESSION_ID) {
                None => None,
                Some(value) => Some(session_id(value)?),
            };
            loop {
                match inbound.next().await {
                    Ok(Some(Incoming::Response { id: got, answer })) if got == json!(id) => {
                        return answer
                            .map(|result| (result, session_id))
                            .map_err(|error| rpc_error(method, None, error));
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return Err(self.ended_early(method)),
                    Err(fault) => return Err(self.fault(method, fault)),
                }
            }
        };
        let timeout = options.request_timeout;
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Timeout {
                    url: self.url().into(),
                    after: timeout,
                })
            })
    }

    /// POSTs one message with the session's headers (none yet for `initialize`). `stream`
    /// picks the client without a whole-request timeout.
    pub(crate) async fn post(&self, method: &str, body: &Value, stream: bool) -> Result<Posted> {
        let inner = &self.inner;
        if let Some(process) = &inner.stdio {
            let sent = tokio::time::timeout(inner.options.request_timeout, process.send(body));
            return match sent.await {
                Ok(Ok(Some(rx))) => Ok(Posted::Body(Inbound::channel(rx), HeaderMap::new())),
                Ok(Ok(None)) => Ok(Posted::Accepted),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(Error::Timeout {
                    url: self.url().into(),
                    after: inner.options.request_timeout,
                }),
            };
        }
        let mut headers = self.headers(method != "initialize")?;
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let http = if stream { &inner.streams } else { &inner.http };
        let bytes = serde_json::to_vec(body)
            .map_err(|e| Error::InvalidRequest(format!("a request could not be encoded: {e}")))?;
        let send = http
            .post(inner.url.clone())
            .headers(headers)
            .body(bytes)
            .send();
        let response = self.within_timeout(send).await?;
        let status = response.status().as_u16();
        if status == 202 {
            return Ok(Posted::Accepted);
        }
        let task_id = params_task_id(body);
        let response = self.check(method, task_id.as_deref(), response).await?;
        let headers = response.headers().clone();
        if method != "initialize" {
            self.check_same_session(method, &headers)?;
        }
        let framing = framing(method, &headers)?;
        Ok(Posted::Body(Inbound::new(response, framing), headers))
    }

    /// Opens a GET stream: the standalone one, or, with `last_event_id`, the resumption of a
    /// dropped one. `None` when the server offers no GET stream (405).
    pub(crate) async fn get(&self, last_event_id: Option<&str>) -> Result<Option<Inbound>> {
        let inner = &self.inner;
        if let Some(process) = &inner.stdio {
            // One pipe carries everything: a "resumption" is the same stream again.
            return Ok(Some(Inbound::channel(process.session_stream()?)));
        }
        let mut headers = self.headers(true)?;
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(last) = last_event_id {
            let value = HeaderValue::from_str(last).map_err(|_| {
                invalid(
                    "GET",
                    "the server's event id cannot be sent back in a header",
                )
            })?;
            headers.insert(LAST_EVENT_ID, value);
        }
        let send = inner.streams.get(inner.url.clone()).headers(headers).send();
        let response = self.within_timeout(send).await?;
        if response.status().as_u16() == 405 {
            return Ok(None);
        }
        let response = self.check("GET", None, response).await?;
        let framing = framing("GET", response.headers())?;
        Ok(Some(Inbound::new(response, framing)))
    }

    /// `DELETE`: ends the session on the server. 405 and "no such session" are fine.
    pub(crate) async fn delete(&self) -> Result<()> {
        // A stdio session ends with its process, which its supervisor owns.
        if self.session().session_id.is_none() || self.inner.stdio.is_some() {
            return Ok(());
        }
        let inner = &self.inner;
        let headers = self.headers(true)?;
        let send = inner.http.delete(inner.url.clone()).headers(headers).send();
        let response = self.within_timeout(send).await?;
        match self.check("DELETE", None, response).await {
            Ok(_) | Err(Error::SessionExpired { .. }) => Ok(()),
            Err(Error::Http { status: 405, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The session's headers (`with_session`), and the bearer token.
    fn headers(&self, with_session: bool) -> Result<HeaderMap> {
        let mut headers = HeaderMap::new();
        if with_session {
            let session = self.session();
            if let Some(id) = &session.session_id {
                let value = HeaderValue::from_str(id).map_err(|_| {
                    Error::InvalidRequest("the session id is not a header value".into())
                })?;
                headers.insert(MCP_SESSION_ID, value);
            }
            let version = HeaderValue::from_str(&session.protocol_version).map_err(|_| {
                Error::InvalidRequest("the protocol version is not a header value".into())
            })?;
            headers.insert(MCP_PROTOCOL_VERSION, version);
        }
        let token = self
            .inner
            .token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
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

    /// Waits for a response's head within the request timeout (streams have no whole-request
    /// timeout, but their head must come in time).
    async fn within_timeout(
        &self,
        send: impl std::future::Future<Output = reqwest::Result<reqwest::Response>>,
    ) -> Result<reqwest::Response> {
        let timeout = self.inner.options.request_timeout;
        match tokio::time::timeout(timeout, send).await {
            Ok(response) => response.map_err(|e| self.transport_error(e)),
            Err(_) => Err(Error::Timeout {
                url: self.url().into(),
                after: timeout,
            }),
        }
    }

    /// A 2xx response passes; anything else becomes its typed error, "session unknown" first.
    async fn check(
        &self,
        method: &str,
        task_id: Option<&str>,
        response: reqwest::Response,
    ) -> Result<reqwest::Response> {
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let headers = response.headers().clone();
        if (300..400).contains(&status) {
            return Err(crate::client::redirected(method, status, &headers));
        }
        let has_session = self.session().session_id.is_some();
        let body = read_capped(response).await;
        if has_session && status == 404 {
            return Err(self.expired(status, &body));
        }
        if status == 400 || status == 404 {
            let lower = body.to_ascii_lowercase();
            if EXPIRED_MESSAGES.iter().any(|m| lower.contains(m)) && method != "initialize" {
                return Err(self.expired(status, &body));
            }
        }
        if status == 401 || status == 403 {
            return Err(Error::Unauthorized {
                status,
                method: method.into(),
                www_authenticate: headers
                    .get(reqwest::header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
            });
        }
        // A JSON-RPC error under any status (its id may be ours, null, or the server's guess).
        if let Ok(Incoming::Response {
            answer: Err(error), ..
        }) = Incoming::parse(body.trim())
        {
            return Err(rpc_error(method, task_id, error));
        }
        if status == 429 {
            return Err(Error::RateLimited {
                method: method.into(),
                retry_after: retry_after(&headers),
            });
        }
        Err(Error::Http {
            status,
            method: method.into(),
            body: crate::text::truncate(body.trim(), 300),
            retry_after: retry_after(&headers),
        })
    }

    /// A server that answers within our session under another session id is not following the
    /// protocol: which session our tasks live in would be anyone's guess.
    fn check_same_session(&self, method: &str, headers: &HeaderMap) -> Result<()> {
        let Some(theirs) = headers.get(MCP_SESSION_ID) else {
            return Ok(());
        };
        match self.session().session_id {
            Some(ours) if ours.as_bytes() != theirs.as_bytes() => Err(invalid(
                method,
                "the server answered under another Mcp-Session-Id than our session's",
            )),
            _ => Ok(()),
        }
    }

    fn expired(&self, status: u16, body: &str) -> Error {
        Error::SessionExpired {
            url: self.url().into(),
            status,
            message: crate::text::truncate(body.trim(), 300),
        }
    }

    pub(crate) fn ended_early(&self, method: &str) -> Error {
        if let Some(process) = &self.inner.stdio {
            if process.exit().is_some() || process.closed() {
                return process.ended_error();
            }
        }
        Error::Transport {
            url: self.url().into(),
            message: format!("the server ended its answer to {method} without answering"),
        }
    }

    pub(crate) fn fault(&self, method: &str, fault: Fault) -> Error {
        match fault {
            Fault::Invalid(reason) => invalid(method, reason),
            Fault::TooLarge => Error::ResponseTooLarge {
                method: method.into(),
                limit: crate::MAX_BODY_BYTES,
            },
            Fault::Transport(e) => self.transport_error(e),
        }
    }

    pub(crate) fn transport_error(&self, error: reqwest::Error) -> Error {
        crate::client::classify_transport(self.url(), error, self.inner.options.request_timeout)
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// `params.taskId` of a request body, for typing "task unknown" errors.
fn params_task_id(body: &Value) -> Option<String> {
    body.pointer("/params/taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| crate::response::parse_retry_after(v, std::time::SystemTime::now()))
}

/// A session id as the spec allows it: visible ASCII, and not longer than we keep.
fn session_id(value: &HeaderValue) -> Result<String> {
    let bytes = value.as_bytes();
    if bytes.is_empty()
        || bytes.len() > MAX_SESSION_ID
        || !bytes.iter().all(|b| (0x21..=0x7e).contains(b))
    {
        return Err(invalid(
            "initialize",
            "the Mcp-Session-Id is not 1 to 1024 visible ASCII characters",
        ));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

fn framing(method: &str, headers: &HeaderMap) -> Result<Framing> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    Framing::from_content_type(content_type).ok_or_else(|| {
        invalid(
            method,
            format!(
                "unexpected Content-Type {:?} (expected application/json or text/event-stream)",
                content_type.unwrap_or_default()
            ),
        )
    })
}

/// The body of a failed answer, at most 1 MiB of it.
async fn read_capped(response: reqwest::Response) -> String {
    use futures_util::StreamExt as _;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        if body.len() + chunk.len() > 1024 * 1024 {
            break;
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8_lossy(&body).into_owned()
}
