//! `text/event-stream` replies: one event per JSON-RPC message, `: ping` comments as
//! keep-alives, either rmcp's framing (`data:` lines, LF) or fastmcp's (`event: message`, CRLF).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use crate::clock::scaled;
use crate::subscriptions::{Frame, Subscription, META_SUBSCRIPTION_ID};
use crate::tools::SyncRun;
use crate::wire::Outgoing;

fn event(message: &Outgoing, crlf: bool) -> Bytes {
    let json = String::from_utf8(message.to_bytes()).unwrap_or_default();
    framed(&json, crlf)
}

fn framed(json: &str, crlf: bool) -> Bytes {
    Bytes::from(if crlf {
        format!("event: message\r\ndata: {json}\r\n\r\n")
    } else {
        format!("data: {json}\n\n")
    })
}

fn comment(crlf: bool) -> Bytes {
    Bytes::from_static(if crlf {
        b": ping\r\n\r\n"
    } else {
        b": ping\n\n"
    })
}

fn stream_response(body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A stream carrying exactly one message.
pub(super) fn single(message: &Outgoing, crlf: bool) -> Response {
    stream_response(Body::from(event(message, crlf)))
}

struct Progress {
    steps: VecDeque<(Duration, String)>,
    /// Send each step as an `info` `notifications/message` too.
    log: bool,
    total: u64,
    done: u64,
    token: Option<Value>,
    id: Value,
    result: Option<Value>,
    pending_sleep: Duration,
    opened: bool,
    time_scale: f64,
    crlf: bool,
}

/// A synchronous run: a `: ping` comment at once, then per step a `notifications/progress`
/// (when the request carried a `progressToken`) and an `info` `notifications/message` (when
/// its `_meta` log level lets `info` through), or a `: ping` when neither applies, then the
/// result. Dropping the body (the client went away) stops the run.
pub(super) fn streamed(
    id: Value,
    token: Option<Value>,
    log: bool,
    run: SyncRun,
    time_scale: f64,
    crlf: bool,
) -> Response {
    let SyncRun { steps, result } = run;
    let state = Progress {
        total: steps.len() as u64,
        steps: steps.into(),
        log,
        done: 0,
        token,
        id,
        result: Some(serde_json::to_value(result).unwrap_or(Value::Null)),
        pending_sleep: Duration::ZERO,
        opened: false,
        time_scale,
        crlf,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        if !state.opened {
            state.opened = true;
            return Some((Ok::<_, Infallible>(comment(state.crlf)), state));
        }
        if !state.pending_sleep.is_zero() {
            tokio::time::sleep(scaled(state.pending_sleep, state.time_scale)).await;
            state.pending_sleep = Duration::ZERO;
        }
        if let Some((duration, message)) = state.steps.pop_front() {
            state.pending_sleep = duration;
            let mut chunk = Vec::new();
            if let Some(token) = &state.token {
                let progress = Outgoing::progress(token, state.done, state.total, &message);
                chunk.extend_from_slice(&event(&progress, state.crlf));
            }
            if state.log {
                chunk.extend_from_slice(&event(&Outgoing::log("info", &message), state.crlf));
            }
            if chunk.is_empty() {
                chunk.extend_from_slice(&comment(state.crlf));
            }
            state.done += 1;
            return Some((Ok(Bytes::from(chunk)), state));
        }
        let result = state.result.take()?;
        let chunk = event(&Outgoing::result(state.id.clone(), result), state.crlf);
        Some((Ok(chunk), state))
    });
    stream_response(Body::from_stream(stream))
}

/// Messages a listen stream writes in one chunk at most.
const MAX_BATCH: usize = 256;

struct Listening {
    subscription: Subscription,
    keepalive: Duration,
    crlf: bool,
    done: bool,
}

/// A `subscriptions/listen` response: the subscription's messages as they come (the
/// acknowledgement first), a `: ping` after every `keepalive` of silence, and at the end either
/// the graceful closing result or, when the subscription was dropped, a body error, which makes
/// hyper cut the connection without finishing the response (an abrupt drop, as a client sees it
/// when a proxy or the network fails). Dropping the body (the client left) unsubscribes.
pub(super) fn listen(subscription: Subscription, keepalive: Duration, crlf: bool) -> Response {
    let state = Listening {
        subscription,
        keepalive,
        crlf,
        done: false,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        let frame = tokio::select! {
            frame = state.subscription.frames.recv() => frame,
            () = tokio::time::sleep(state.keepalive) => {
                let ping = comment(state.crlf);
                return Some((Ok(ping), state));
            }
        };
        let chunk = match frame {
            Some(Frame::Message(message)) => {
                // A burst (the current state of every task on a new subscription) goes out in
                // few writes: take what is already queued, up to a bound.
                let mut chunk = framed(&message.to_string(), state.crlf).to_vec();
                for _ in 0..MAX_BATCH {
                    match state.subscription.frames.try_recv() {
                        Ok(Frame::Message(message)) => {
                            chunk.extend_from_slice(&framed(&message.to_string(), state.crlf))
                        }
                        Ok(Frame::Close) => {
                            chunk.extend_from_slice(&closing(&mut state));
                            break;
                        }
                        // Empty, or dropped: the next turn sees the end.
                        Err(_) => break,
                    }
                }
                Ok(Bytes::from(chunk))
            }
            Some(Frame::Close) => Ok(closing(&mut state)),
            None => {
                state.done = true;
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "the subscription was dropped",
                ))
            }
        };
        Some((chunk, state))
    });
    stream_response(Body::from_stream(stream))
}

/// The graceful end of a subscription: the result answering the listen request.
fn closing(state: &mut Listening) -> Bytes {
    state.done = true;
    let id = state.subscription.id.clone();
    let result = json!({"resultType": "complete", "_meta": {META_SUBSCRIPTION_ID: id}});
    event(&Outgoing::result(id, result), state.crlf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn framing_follows_the_configured_peer_style() {
        let message = Outgoing::result(json!(1), json!({"resultType": "complete"}));
        assert_eq!(
            event(&message, false),
            Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"complete\"}}\n\n")
        );
        assert_eq!(
            event(&message, true),
            Bytes::from_static(
                b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"complete\"}}\r\n\r\n"
            )
        );
    }
}
