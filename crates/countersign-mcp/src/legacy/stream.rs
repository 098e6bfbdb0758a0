//! Reading what a legacy server sends on one HTTP response: a JSON body (one message) or an
//! event stream (any number of messages, priming events with empty data, `retry:`, event ids
//! to resume from), bounded as every other body is.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::Value;

use super::wire::{ServerRequest, Task};
use crate::response::{Framing, MAX_BODY_BYTES};
use crate::sse::{SseDecoder, SseEvent};
use crate::wire::RpcError;

/// The reconnection delay when the server named none (the SSE default is up to the client).
pub(crate) const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// The longest `retry:` we wait before reconnecting: a server's number meets time clamped.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(60);

/// One JSON-RPC message from the server, classified.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Incoming {
    /// A response to one of our requests.
    Response {
        /// Its id.
        id: Value,
        /// Its result or error.
        answer: Result<Value, RpcError>,
    },
    /// A request for us to answer.
    Request(ServerRequest),
    /// A notification.
    Notification {
        /// Its method.
        method: String,
        /// Its params.
        params: Option<Value>,
    },
}

impl Incoming {
    /// Classifies one message; `Err` says why it is not a JSON-RPC message.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("a message is not valid JSON: {e}"))?;
        let Value::Object(mut map) = value else {
            return Err("a JSON-RPC message must be an object".into());
        };
        let method = match map.remove("method") {
            Some(Value::String(m)) => Some(m),
            Some(_) => return Err("a JSON-RPC `method` must be a string".into()),
            None => None,
        };
        let id = map.remove("id");
        let params = map.remove("params");
        match (method, id) {
            (Some(method), Some(id)) if id.is_string() || id.is_number() => {
                Ok(Self::Request(ServerRequest { id, method, params }))
            }
            (Some(_), Some(_)) => Err("a JSON-RPC request id must be a string or number".into()),
            (Some(method), None) => Ok(Self::Notification { method, params }),
            (None, Some(id)) => {
                let answer = if let Some(error) = map.remove("error") {
                    Err(serde_json::from_value(error)
                        .map_err(|e| format!("malformed JSON-RPC error object: {e}"))?)
                } else if let Some(result) = map.remove("result") {
                    Ok(result)
                } else {
                    return Err("a JSON-RPC response must have `result` or `error`".into());
                };
                Ok(Self::Response { id, answer })
            }
            (None, None) => Err("a JSON-RPC message needs a `method` or an `id`".into()),
        }
    }

    /// The task of a `notifications/tasks/status`, if this is one and it is well-formed.
    pub(crate) fn task_status(&self) -> Option<Task> {
        match self {
            Self::Notification { method, params } if method == TASK_STATUS => {
                serde_json::from_value(params.clone()?).ok()
            }
            _ => None,
        }
    }
}

/// The method of the push notification of a task's state.
pub(crate) const TASK_STATUS: &str = "notifications/tasks/status";

/// Why reading a body stopped.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The body broke the rules (not JSON-RPC, not UTF-8, ...).
    Invalid(String),
    /// More than [`MAX_BODY_BYTES`] without a complete message.
    TooLarge,
    /// The connection failed mid-body.
    Transport(reqwest::Error),
}

type Body =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// One response body, read message by message. For an event stream it remembers the last
/// event id and the server's `retry:`, so a dropped stream can be resumed with `Last-Event-ID`.
pub(crate) struct Inbound {
    body: Body,
    framing: Framing,
    json: Vec<u8>,
    sse: SseDecoder,
    events: Vec<SseEvent>,
    queue: VecDeque<Incoming>,
    /// The id of the last event read (priming events included).
    pub(crate) last_event_id: Option<String>,
    /// The server's last `retry:`, clamped.
    pub(crate) retry: Option<Duration>,
    ended: bool,
    /// A stdio server's messages for this stream, already framed and classified.
    channel: Option<tokio::sync::mpsc::Receiver<Incoming>>,
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbound")
            .field("framing", &self.framing)
            .field("last_event_id", &self.last_event_id)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Inbound {
    pub(crate) fn new(response: reqwest::Response, framing: Framing) -> Self {
        Self {
            body: Box::pin(response.bytes_stream()),
            framing,
            json: Vec::new(),
            sse: SseDecoder::new(),
            events: Vec::new(),
            queue: VecDeque::new(),
            last_event_id: None,
            retry: None,
            ended: false,
            channel: None,
        }
    }

    /// The messages a stdio process routes to one request (or to the session stream).
    pub(crate) fn channel(rx: tokio::sync::mpsc::Receiver<Incoming>) -> Self {
        Self {
            body: Box::pin(futures_util::stream::empty()),
            framing: Framing::Json,
            json: Vec::new(),
            sse: SseDecoder::new(),
            events: Vec::new(),
            queue: VecDeque::new(),
            last_event_id: None,
            retry: None,
            ended: false,
            channel: Some(rx),
        }
    }

    /// The delay before reconnecting: the server's `retry:`, or [`DEFAULT_RETRY`].
    pub(crate) fn reconnect_delay(&self) -> Duration {
        self.retry.unwrap_or(DEFAULT_RETRY)
    }

    /// The next message; `Ok(None)` when the body ended. Never holds more than
    /// [`MAX_BODY_BYTES`] of an incomplete message.
    pub(crate) async fn next(&mut self) -> Result<Option<Incoming>, Fault> {
        if let Some(rx) = &mut self.channel {
            return Ok(rx.recv().await);
        }
        loop {
            if let Some(message) = self.queue.pop_front() {
                return Ok(Some(message));
            }
            if self.ended {
                return Ok(None);
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.feed(&chunk)?,
                Some(Err(e)) => {
                    self.ended = true;
                    return Err(Fault::Transport(e));
                }
                None => {
                    self.ended = true;
                    self.finish()?;
                }
            }
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Result<(), Fault> {
        match self.framing {
            Framing::Json => {
                if self.json.len().saturating_add(chunk.len()) > MAX_BODY_BYTES {
                    return Err(Fault::TooLarge);
                }
                self.json.extend_from_slice(chunk);
                Ok(())
            }
            Framing::Sse => {
                self.sse
                    .feed(chunk, &mut self.events)
                    .map_err(|_| Fault::TooLarge)?;
                self.take_events()
            }
        }
    }

    fn finish(&mut self) -> Result<(), Fault> {
        match self.framing {
            Framing::Json => {
                let json = std::mem::take(&mut self.json);
                if json.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                let text = std::str::from_utf8(&json)
                    .map_err(|e| Fault::Invalid(format!("the body is not UTF-8: {e}")))?;
                self.queue
                    .push_back(Incoming::parse(text).map_err(Fault::Invalid)?);
                Ok(())
            }
            Framing::Sse => {
                self.sse.finish(&mut self.events);
                self.take_events()
            }
        }
    }

    fn take_events(&mut self) -> Result<(), Fault> {
        for event in std::mem::take(&mut self.events) {
            if event.id.is_some() {
                self.last_event_id = event.id;
            }
            if let Some(ms) = event.retry_ms {
                self.retry = Some(Duration::from_millis(ms).min(MAX_RETRY));
            }
            // A priming event carries an id and empty data: a resumption point, no message.
            if event.data.trim().is_empty() {
                continue;
            }
            self.queue
                .push_back(Incoming::parse(&event.data).map_err(Fault::Invalid)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_told_apart_by_method_and_id() {
        let request = Incoming::parse(
            r#"{"method":"elicitation/create","params":{"message":"m"},"jsonrpc":"2.0","id":0}"#,
        )
        .expect("request");
        assert!(
            matches!(&request, Incoming::Request(r) if r.id == json!(0) && r.method == "elicitation/create")
        );
        let response = Incoming::parse(r#"{"result":{"content":[]},"jsonrpc":"2.0","id":9}"#)
            .expect("response");
        assert_eq!(
            response,
            Incoming::Response {
                id: json!(9),
                answer: Ok(json!({"content": []}))
            }
        );
        let error = Incoming::parse(r#"{"jsonrpc":"2.0","id":11,"error":{"code":-32602,"message":"MCP error -32602: Cannot cancel task in terminal status: completed"}}"#).expect("error");
        assert!(matches!(error, Incoming::Response { answer: Err(e), .. } if e.code == -32602));
        let status = Incoming::parse(r#"{"method":"notifications/tasks/status","params":{"taskId":"0bd2e175e2b5ecd84081505d4174a33e","status":"input_required","ttl":300000,"createdAt":"2026-12-07T02:07:35.379Z","lastUpdatedAt":"2026-12-07T02:07:37.384Z","pollInterval":1000,"statusMessage":"Found multiple interpretations for \"python\". Requesting clarification..."},"jsonrpc":"2.0"}"#).expect("notification");
        let task = status.task_status().expect("a task status");
        assert_eq!(task.status, super::super::wire::TaskStatus::InputRequired);
        for bad in [
            "[]",
            "{}",
            r#"{"id":{},"method":"x"}"#,
            r#"{"id":1}"#,
            "nope",
        ] {
            assert!(Incoming::parse(bad).is_err(), "{bad}");
        }
    }
}
