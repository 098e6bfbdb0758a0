//! Streamable HTTP, stateless: one POST carries one JSON-RPC request and gets one reply.
//!
//! Order of checks (the same as the conformance suite's reference mock): bearer token, Origin,
//! `Accept`, `Content-Type`, JSON, JSON-RPC envelope, `MCP-Protocol-Version` present, `_meta`
//! complete, header equals `_meta` version, version supported, `Mcp-Method`, method known,
//! `Mcp-Name`, `Mcp-Param-*`. Only then does the method run.

pub(crate) mod headers;
mod sse;

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{
    HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, ORIGIN, RETRY_AFTER, WWW_AUTHENTICATE,
};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::app::App;
use crate::clock::scaled;
use crate::config::{Era, ResponseMode};
use crate::dispatch::{self, Reply};
use crate::error::{Error, Result};
use crate::fault::Fault;
use crate::legacy;
use crate::tools::SyncRun;
use crate::wire::{Incoming, Outgoing, RequestMeta, RpcRequest, PROTOCOL_VERSION};

/// Marks a response that must not be sent: the connection is closed instead.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HangUp;

/// What a glance at the body tells before any validation: enough to count the request and
/// to pick a fault by method.
pub(crate) struct Glance {
    pub(crate) parsed: std::result::Result<Value, serde_json::Error>,
    method: Option<String>,
    id: Value,
}

impl Glance {
    fn of(body: &[u8]) -> Self {
        let parsed: std::result::Result<Value, _> = serde_json::from_slice(body);
        let field = |name: &str| {
            parsed
                .as_ref()
                .ok()
                .and_then(|value| value.get(name))
                .cloned()
        };
        // A client's response to a server request (legacy era) has no method of its own.
        let method = match field("method") {
            Some(method) => method.as_str().map(str::to_owned),
            None if field("result").is_some() || field("error").is_some() => {
                Some("<response>".to_owned())
            }
            None => None,
        };
        Self {
            method,
            id: field("id")
                .filter(|id| id.is_string() || id.is_number())
                .unwrap_or(Value::Null),
            parsed,
        }
    }

    fn param(&self, name: &str) -> Option<&Value> {
        self.parsed.as_ref().ok()?.get("params")?.get(name)
    }
}

/// The axum handler of `POST /mcp` (and `POST /`).
pub(crate) async fn handle(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let glance = Glance::of(&body);
    app.stats.request(glance.method.as_deref());
    if let Some(fault) = app.faults.take(glance.method.as_deref()) {
        app.stats.fault();
        match fault {
            Fault::Delay(delay) => tokio::time::sleep(delay).await,
            Fault::Hangup => {
                app.stats.hangup();
                let mut response = Response::new(Body::empty());
                response.extensions_mut().insert(HangUp);
                return response;
            }
            other => {
                let response = fault_response(&app, other, &glance);
                app.stats.response(response.status().as_u16());
                return response;
            }
        }
    }
    let response = match app.config.era {
        Era::Modern => process(&app, &headers, glance).await,
        Era::Legacy => legacy::post(&app, &headers, glance).await,
    };
    app.stats.response(response.status().as_u16());
    response
}

async fn process(app: &App, headers: &HeaderMap, glance: Glance) -> Response {
    if let Some(response) = check_token(app, headers) {
        return response;
    }
    if let Some(origin) = headers.get(ORIGIN) {
        if !origin.to_str().is_ok_and(headers::origin_is_local) {
            return json_response(
                StatusCode::FORBIDDEN,
                &json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Forbidden: Origin not allowed"}}),
            );
        }
    }
    if !headers::accepts_json_and_sse(headers.get_all(ACCEPT)) {
        return text_response(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: Client must accept both application/json and text/event-stream",
        );
    }
    if !headers::is_json(headers.get(CONTENT_TYPE)) {
        return text_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let value = match glance.parsed {
        Ok(value) => value,
        Err(error) => {
            return error_response(
                Value::Null,
                &Error::Parse {
                    detail: error.to_string(),
                },
            )
        }
    };
    let request = match Incoming::parse(value) {
        Ok(Incoming::Request(request)) => request,
        Ok(Incoming::Notification) => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::ACCEPTED;
            return response;
        }
        Err(error) => return error_response(Value::Null, &error),
    };
    let meta = match validate(app, headers, &request) {
        Ok(meta) => meta,
        Err(error) => return error_response(request.id, &error),
    };
    let outcome = dispatch::dispatch(app, &request, &meta);
    reply(app, request.id, &meta, outcome).await
}

/// Transport-level validation, in the documented order.
fn validate(app: &App, headers: &HeaderMap, request: &RpcRequest) -> Result<RequestMeta> {
    let version_header = headers::single(headers, "mcp-protocol-version")?
        .ok_or_else(|| Error::header("missing MCP-Protocol-Version header"))?;
    let meta = RequestMeta::parse(request.params.as_ref())?;
    if version_header != meta.protocol_version {
        return Err(Error::header(format!(
            "MCP-Protocol-Version header {version_header:?} does not match \
             _meta[\"io.modelcontextprotocol/protocolVersion\"] {:?}",
            meta.protocol_version
        )));
    }
    if meta.protocol_version != PROTOCOL_VERSION {
        return Err(Error::UnsupportedVersion {
            requested: meta.protocol_version,
        });
    }
    let method_header = headers::single(headers, "mcp-method")?
        .ok_or_else(|| Error::header("missing Mcp-Method header"))?;
    if method_header != request.method {
        return Err(Error::header(format!(
            "Mcp-Method header {method_header:?} does not match the body method {:?}",
            request.method
        )));
    }
    if !dispatch::is_known(app, &request.method) {
        return Err(Error::MethodNotFound {
            method: request.method.clone(),
        });
    }
    if let Some(expected) = dispatch::routing_name(&request.method, request.params.as_ref())? {
        let header = headers::single(headers, "mcp-name")?.ok_or_else(|| {
            Error::header(format!("missing Mcp-Name header for {}", request.method))
        })?;
        let name = headers::decode(&header, "Mcp-Name")?;
        if name != expected {
            return Err(Error::header(format!(
                "Mcp-Name header {name:?} does not match the body value {expected:?}"
            )));
        }
        if request.method == "tools/call" {
            if let Some(entry) = app.catalog.get(expected) {
                let args = request
                    .params
                    .as_ref()
                    .and_then(|params| params.get("arguments"))
                    .and_then(Value::as_object);
                headers::check_params(headers, &entry.header_params, args)?;
            }
        }
    }
    Ok(meta)
}

pub(crate) fn check_token(app: &App, headers: &HeaderMap) -> Option<Response> {
    let expected = app.config.required_token.as_deref()?;
    let provided = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        })
        .map(str::trim);
    let challenge = match provided {
        Some(token) if headers::constant_time_eq(token.as_bytes(), expected.as_bytes()) => {
            return None
        }
        Some(_) => {
            "Bearer realm=\"countersign-demo\", error=\"invalid_token\", \
             error_description=\"The access token is invalid\""
        }
        None => "Bearer realm=\"countersign-demo\"",
    };
    let mut response = text_response(StatusCode::UNAUTHORIZED, "Unauthorized");
    response
        .headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    Some(response)
}

fn use_sse(mode: ResponseMode, meta: &RequestMeta, streams: bool) -> bool {
    match mode {
        ResponseMode::Json => false,
        ResponseMode::Sse => true,
        ResponseMode::Mixed => streams || meta.progress_token.is_some(),
    }
}

async fn reply(app: &App, id: Value, meta: &RequestMeta, outcome: Result<Reply>) -> Response {
    let mode = app.config.response_mode;
    match outcome {
        Err(error) if error.is_transport_level() || mode != ResponseMode::Sse => {
            error_response(id, &error)
        }
        // rmcp puts method-level errors inside the stream with HTTP 200.
        Err(error) => sse::single(&Outgoing::error(id, &error), app.config.sse_crlf),
        Ok(Reply::Result(result)) => {
            let message = Outgoing::result(id, result);
            if use_sse(mode, meta, false) {
                sse::single(&message, app.config.sse_crlf)
            } else {
                json_bytes(StatusCode::OK, message.to_bytes())
            }
        }
        // A listen stream is always an event stream, whatever the framing mode.
        Ok(Reply::Listen(subscription)) => sse::listen(
            subscription,
            app.config.listen_keepalive,
            app.config.sse_crlf,
        ),
        Ok(Reply::Sync(run)) => {
            if use_sse(mode, meta, true) {
                // Index 1 is "info", the level of the run's messages.
                let log = meta.log_level.is_some_and(|level| level <= 1);
                sse::streamed(
                    id,
                    meta.progress_token.clone(),
                    log,
                    run,
                    app.config.time_scale,
                    app.config.sse_crlf,
                )
            } else {
                let SyncRun { steps, result } = run;
                let total: Duration = steps.iter().map(|(duration, _)| *duration).sum();
                tokio::time::sleep(scaled(total, app.config.time_scale)).await;
                let result = serde_json::to_value(result).unwrap_or(Value::Null);
                json_bytes(StatusCode::OK, Outgoing::result(id, result).to_bytes())
            }
        }
    }
}

fn fault_response(app: &App, fault: Fault, glance: &Glance) -> Response {
    match fault {
        Fault::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            text_response(status, &format!("injected fault: HTTP {}", status.as_u16()))
        }
        Fault::TooManyRequests { retry_after_secs } => {
            let mut response = text_response(
                StatusCode::TOO_MANY_REQUESTS,
                &format!("Too Many Requests: retry after {retry_after_secs} s"),
            );
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs));
            response
        }
        Fault::MalformedJson => {
            let full =
                Outgoing::result(glance.id.clone(), json!({"resultType": "complete"})).to_bytes();
            let cut = full.len().saturating_sub(full.len() / 3).max(1);
            json_bytes(StatusCode::OK, full[..cut.min(full.len())].to_vec())
        }
        Fault::WrongShape => {
            let task_id = glance
                .param("taskId")
                .cloned()
                .unwrap_or_else(|| json!("wrong-shape"));
            let result = match glance.method.as_deref() {
                Some("tasks/get") => json!({
                    "resultType": "complete",
                    "taskId": task_id,
                    "createdAt": "2026-01-01T00:00:00.000000Z",
                    "lastUpdatedAt": "2026-01-01T00:00:00.000000Z",
                    "ttlMs": null
                }),
                Some("tools/call" | "tasks/update" | "tasks/cancel") => {
                    json!({"resultType": "task", "taskId": task_id})
                }
                Some("tools/list") => json!({"resultType": "complete", "tools": {"not": "a list"}}),
                Some("server/discover") => {
                    json!({"resultType": "complete", "supportedVersions": PROTOCOL_VERSION})
                }
                _ => json!({"resultType": "complete", "unexpected": true}),
            };
            let message = Outgoing::result(glance.id.clone(), result);
            if app.config.response_mode == ResponseMode::Sse {
                sse::single(&message, app.config.sse_crlf)
            } else {
                json_bytes(StatusCode::OK, message.to_bytes())
            }
        }
        // Handled before a response is built.
        Fault::Delay(_) | Fault::Hangup => {
            text_response(StatusCode::INTERNAL_SERVER_ERROR, "fault")
        }
    }
}

fn error_response(id: Value, error: &Error) -> Response {
    json_bytes(error.http_status(), Outgoing::error(id, error).to_bytes())
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    json_bytes(status, serde_json::to_vec(value).unwrap_or_default())
}

fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn text_response(status: StatusCode, text: &str) -> Response {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
