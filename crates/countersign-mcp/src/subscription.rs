//! `subscriptions/listen` with the Tasks extension's `notifications.taskIds`: the request, and
//! the decoding of its long-lived response stream into typed [`ListenEvent`]s.
//!
//! The stream (MCP 2026-07-28 `basic/patterns/subscriptions`, SEP-2663 "Task Status
//! Notifications") carries, in order: `notifications/subscriptions/acknowledged` (the subset of
//! the filter the server agreed to), then `notifications/tasks` (a full task, identical to what
//! `tasks/get` would return) on every change, each tagged with
//! `_meta["io.modelcontextprotocol/subscriptionId"]` = the listen request's JSON-RPC id; `: ping`
//! comments keep it alive. It ends with the JSON-RPC response to the listen request (a graceful
//! closure), a `notifications/cancelled` naming the request, or an abrupt drop.
//!
//! The decoder is strict where leniency would lose a change silently: a task notification before
//! the acknowledgement, one tagged for another subscription, or one that does not parse is an
//! error, so the caller treats the stream as broken and falls back to polling, instead of
//! believing a task is covered while its changes are being dropped.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::response::{classify, to_value, Message};
use super::sse::SseDecoder;
use super::wire::{RpcError, Task};

/// The method.
pub const LISTEN_METHOD: &str = "subscriptions/listen";
/// The `_meta` key that ties every message on a stream to its listen request.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// How long a listen stream may stay silent (no event, no `: ping`) before it counts as dead.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// What one listen stream asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenRequest {
    /// The tasks whose changes to receive (`notifications.taskIds`).
    pub task_ids: Vec<String>,
    /// Silence (no bytes at all, keep-alive comments included) after which the stream is given
    /// up as dead. Not sent: it bounds how long a half-open connection can go unnoticed.
    pub idle_timeout: Duration,
}

impl ListenRequest {
    /// Listens for changes of these tasks, with the default idle timeout.
    pub fn tasks(task_ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            task_ids: task_ids.into_iter().map(Into::into).collect(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// The request's `params` without `_meta` (the client adds that).
    pub fn params(&self) -> Map<String, Value> {
        let mut params = Map::new();
        params.insert("notifications".into(), json!({ "taskIds": self.task_ids }));
        params
    }
}

/// One thing a listen stream said.
#[derive(Debug, Clone, PartialEq)]
pub enum ListenEvent {
    /// The subscription is open; the server will send changes of these tasks (the subset of the
    /// requested ids it agreed to; ids it did not name will not be reported on this stream).
    Acknowledged {
        /// The acknowledged `taskIds`; `None` when the acknowledgement has no `taskIds` at all,
        /// which is how a server says it does not do task notifications (unsupported types are
        /// omitted), as opposed to `Some([])`: it does, but for none of these tasks.
        task_ids: Option<Vec<String>>,
    },
    /// A task changed: its full state, as `tasks/get` would have returned it.
    Task(Task),
    /// The server ended the subscription on purpose (e.g. it is shutting down). Nothing follows.
    Closed,
}

/// Why a stream cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StreamFault {
    /// The server broke the protocol (the reason says how).
    Invalid(String),
    /// The stream sent more than the decoder's limit without completing a message.
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The server answered the listen request with a JSON-RPC error.
    Rpc(RpcError),
}

/// Turns the bytes (or messages) of one listen response into events.
#[derive(Debug)]
pub(crate) struct ListenDecoder {
    id: Value,
    sse: SseDecoder,
    acknowledged: bool,
    closed: bool,
}

impl ListenDecoder {
    /// A decoder for the stream answering request `id`.
    pub(crate) fn new(id: Value) -> Self {
        Self {
            id,
            sse: SseDecoder::new(),
            acknowledged: false,
            closed: false,
        }
    }

    /// Decodes one chunk of an event-stream body.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<Vec<ListenEvent>, StreamFault> {
        let mut events = Vec::new();
        self.sse
            .feed(chunk, &mut events)
            .map_err(|e| StreamFault::TooLarge { limit: e.limit })?;
        self.messages(events)
    }

    /// The body ended: whatever its last bytes completed.
    pub(crate) fn finish(&mut self) -> Result<Vec<ListenEvent>, StreamFault> {
        let mut events = Vec::new();
        self.sse.finish(&mut events);
        self.messages(events)
    }

    /// Whether the stream has been closed gracefully.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    fn messages(
        &mut self,
        events: Vec<super::sse::SseEvent>,
    ) -> Result<Vec<ListenEvent>, StreamFault> {
        let mut out = Vec::new();
        for event in events {
            if event.data.trim().is_empty() {
                continue; // priming events carry an id and no payload
            }
            if let Some(event) = self.message(&event.data, "an SSE event")? {
                out.push(event);
            }
        }
        Ok(out)
    }

    /// Interprets one JSON-RPC message of the stream; `None` for messages that do not concern
    /// this subscription (other notification types, other ids). `what` names the text in the
    /// error when it is not JSON.
    pub(crate) fn message(
        &mut self,
        text: &str,
        what: &str,
    ) -> Result<Option<ListenEvent>, StreamFault> {
        if self.closed {
            return Ok(None); // nothing after the closing response counts
        }
        match classify(text, &self.id, what).map_err(StreamFault::Invalid)? {
            Message::Response(Err(error)) => Err(StreamFault::Rpc(error)),
            Message::Response(Ok(result)) => {
                let result = to_value(&result).map_err(StreamFault::Invalid)?;
                if let Some(tag) = result
                    .get("_meta")
                    .and_then(|m| m.get(META_SUBSCRIPTION_ID))
                {
                    if !same_id(tag, &self.id) {
                        return Err(StreamFault::Invalid(format!(
                            "the closing result names subscription {tag}, not {}",
                            self.id
                        )));
                    }
                }
                self.closed = true;
                Ok(Some(ListenEvent::Closed))
            }
            Message::Notification(notification) => self.notification(notification),
            Message::Other => Ok(None),
        }
    }

    fn notification(&mut self, notification: Value) -> Result<Option<ListenEvent>, StreamFault> {
        let method = notification
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = match notification.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params.clone(),
            Some(_) => {
                return Err(StreamFault::Invalid(format!(
                    "{method}: `params` must be an object"
                )))
            }
        };
        match method {
            "notifications/subscriptions/acknowledged" => {
                self.check_tag(method, &params)?;
                if self.acknowledged {
                    return Err(StreamFault::Invalid(
                        "a second acknowledgement on one stream".into(),
                    ));
                }
                let task_ids = acknowledged_task_ids(&params).map_err(StreamFault::Invalid)?;
                self.acknowledged = true;
                Ok(Some(ListenEvent::Acknowledged { task_ids }))
            }
            "notifications/tasks" => {
                self.check_tag(method, &params)?;
                if !self.acknowledged {
                    return Err(StreamFault::Invalid(
                        "notifications/tasks before notifications/subscriptions/acknowledged"
                            .into(),
                    ));
                }
                let task = task_of(params).map_err(|reason| {
                    StreamFault::Invalid(format!(
                        "notifications/tasks carries an invalid task: {reason}"
                    ))
                })?;
                Ok(Some(ListenEvent::Task(task)))
            }
            // A server tearing a subscription down may say so this way (cancellation pattern).
            "notifications/cancelled" => match params.get("requestId") {
                Some(request) if same_id(request, &self.id) => {
                    self.closed = true;
                    Ok(Some(ListenEvent::Closed))
                }
                _ => Ok(None),
            },
            // Types we did not ask for: the server must not send them, and they cannot hide a
            // task change, so they are ignored.
            _ => Ok(None),
        }
    }

    /// A message tagged for another subscription means the server mixed streams up: nothing on
    /// this one can be trusted to be complete. An absent tag is tolerated (on HTTP the stream
    /// itself identifies the subscription).
    fn check_tag(&self, method: &str, params: &Map<String, Value>) -> Result<(), StreamFault> {
        match params
            .get("_meta")
            .and_then(|m| m.get(META_SUBSCRIPTION_ID))
        {
            Some(tag) if !same_id(tag, &self.id) => Err(StreamFault::Invalid(format!(
                "{method} tagged for subscription {tag} arrived on the stream of subscription {}",
                self.id
            ))),
            _ => Ok(()),
        }
    }
}

/// JSON-RPC ids compare by value; a server that echoes our numeric id as a string still means
/// the same request.
fn same_id(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(s), Value::Number(n)) | (Value::Number(n), Value::String(s)) => {
            *s == n.to_string()
        }
        _ => a == b,
    }
}

fn acknowledged_task_ids(params: &Map<String, Value>) -> Result<Option<Vec<String>>, String> {
    let notifications = match params.get("notifications") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(n)) => n,
        Some(_) => return Err("the acknowledged `notifications` must be an object".into()),
    };
    match notifications.get("taskIds") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| {
                id.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "acknowledged `taskIds` must be strings".to_owned())
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err("acknowledged `taskIds` must be an array".into()),
    }
}

/// The task in a `notifications/tasks`' params: the subscription tag is transport metadata, not
/// part of the task, so it is removed (an otherwise empty `_meta` with it) before parsing, and the
/// result equals what `tasks/get` gives.
fn task_of(mut params: Map<String, Value>) -> Result<Task, String> {
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        meta.remove(META_SUBSCRIPTION_ID);
        if meta.is_empty() {
            params.remove("_meta");
        }
    }
    params.remove("resultType");
    Task::parse_full(&Value::Object(params))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TaskState, TaskStatus};

    fn decode(id: Value, body: &[u8]) -> Result<Vec<ListenEvent>, StreamFault> {
        let mut decoder = ListenDecoder::new(id);
        let mut events = decoder.feed(body)?;
        events.extend(decoder.finish()?);
        Ok(events)
    }

    fn sse(messages: &[Value]) -> Vec<u8> {
        messages
            .iter()
            .flat_map(|m| format!("data: {m}\n\n").into_bytes())
            .collect()
    }

    #[test]
    fn the_request_carries_the_task_ids_filter() {
        let request = ListenRequest::tasks(["t-1", "t-2"]);
        assert_eq!(
            Value::Object(request.params()),
            json!({"notifications": {"taskIds": ["t-1", "t-2"]}})
        );
        assert_eq!(request.idle_timeout, DEFAULT_IDLE_TIMEOUT);
    }

    #[test]
    fn reads_acknowledgement_task_changes_and_graceful_closure() {
        let body = sse(&[
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7},
                              "notifications": {"taskIds": ["t-1"]}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/tasks",
                   "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7},
                              "taskId": "t-1", "status": "input_required",
                              "statusMessage": "waiting for approval",
                              "createdAt": "2026-12-02T09:36:05.000000Z",
                              "lastUpdatedAt": "2026-12-02T09:36:06.500000Z",
                              "ttlMs": 900000, "pollIntervalMs": 1000,
                              "inputRequests": {"t-1:approval-1": {"method": "elicitation/create",
                                  "params": {"mode": "form", "message": "Approve?",
                                             "requestedSchema": {"type": "object", "properties": {"approve": {"type": "boolean"}}}}}}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/tasks",
                   "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7},
                              "taskId": "t-1", "status": "completed",
                              "createdAt": "2026-12-02T09:36:05.000000Z",
                              "lastUpdatedAt": "2026-12-02T09:36:09.000000Z",
                              "ttlMs": 900000, "pollIntervalMs": 1000,
                              "result": {"content": [{"type": "text", "text": "done"}], "isError": false}}}),
            json!({"jsonrpc": "2.0", "id": 7,
                   "result": {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}),
        ]);
        let events = decode(json!(7), &body).expect("a well-formed stream");
        assert_eq!(events.len(), 4, "{events:?}");
        assert_eq!(
            events[0],
            ListenEvent::Acknowledged {
                task_ids: Some(vec!["t-1".into()])
            }
        );
        let ListenEvent::Task(asking) = &events[1] else {
            panic!("a task: {events:?}")
        };
        assert_eq!(asking.task_id, "t-1");
        assert_eq!(asking.status(), TaskStatus::InputRequired);
        assert_eq!(
            asking.meta, None,
            "the subscription tag is not part of the task"
        );
        assert_eq!(
            asking.status_message.as_deref(),
            Some("waiting for approval")
        );
        match &asking.state {
            TaskState::InputRequired { input_requests } => {
                assert_eq!(
                    input_requests.keys().collect::<Vec<_>>(),
                    ["t-1:approval-1"]
                )
            }
            other => panic!("input_required expected, got {other:?}"),
        }
        let ListenEvent::Task(done) = &events[2] else {
            panic!("a task: {events:?}")
        };
        assert_eq!(done.status(), TaskStatus::Completed);
        assert_eq!(
            done.to_json(),
            json!({"taskId": "t-1", "status": "completed",
                   "createdAt": "2026-12-02T09:36:05.000000Z", "lastUpdatedAt": "2026-12-02T09:36:09.000000Z",
                   "ttlMs": 900000, "pollIntervalMs": 1000,
                   "result": {"content": [{"type": "text", "text": "done"}], "isError": false}}),
            "the pushed task equals what tasks/get gives"
        );
        assert_eq!(events[3], ListenEvent::Closed);
    }

    #[test]
    fn tolerates_crlf_pings_untagged_messages_string_ids_and_other_meta() {
        let body = b": ping\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{\"taskIds\":[\"a\"],\"toolsListChanged\":true}}}\r\n\r\n: ping\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"3\",\"x.example/trace\":\"abc\"},\"taskId\":\"a\",\"status\":\"working\",\"createdAt\":\"2026-01-01T00:00:00Z\",\"lastUpdatedAt\":\"2026-01-01T00:00:01Z\",\"ttlMs\":null}}\r\n\r\n";
        let events = decode(json!(3), body).expect("lenient where nothing can be lost");
        assert_eq!(
            events[0],
            ListenEvent::Acknowledged {
                task_ids: Some(vec!["a".into()])
            }
        );
        let ListenEvent::Task(task) = &events[1] else {
            panic!("a task: {events:?}")
        };
        assert_eq!(task.status(), TaskStatus::Working);
        assert_eq!(
            task.meta,
            Some(
                json!({"x.example/trace": "abc"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
            )
        );
    }

    #[test]
    fn an_acknowledgement_without_task_ids_declines_task_notifications() {
        let body = sse(&[
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 1}, "notifications": {}}}),
        ]);
        assert_eq!(
            decode(json!(1), &body),
            Ok(vec![ListenEvent::Acknowledged { task_ids: None }])
        );
    }

    #[test]
    fn ignores_what_does_not_concern_the_subscription() {
        let body = sse(&[
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 1}, "notifications": {"taskIds": []}}}),
            json!({"jsonrpc": "2.0", "id": 99, "result": {}}),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}),
        ]);
        assert_eq!(
            decode(json!(1), &body),
            Ok(vec![ListenEvent::Acknowledged {
                task_ids: Some(vec![])
            }])
        );
    }

    #[test]
    fn a_cancellation_naming_the_listen_request_closes_it() {
        let body = sse(&[
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"notifications": {"taskIds": ["a"]}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4, "reason": "shutdown"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": {"taskId": "a", "status": "working"}}),
        ]);
        let events = decode(json!(4), &body).expect("closes cleanly");
        assert_eq!(
            events.last(),
            Some(&ListenEvent::Closed),
            "nothing after the closure counts: {events:?}"
        );
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn errors_answering_the_listen_request_are_typed() {
        let body = sse(&[
            json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "Method not found"}}),
        ]);
        assert_eq!(
            decode(json!(5), &body),
            Err(StreamFault::Rpc(RpcError {
                code: -32601,
                message: "Method not found".into(),
                data: None
            }))
        );
    }

    #[test]
    fn a_change_that_could_be_lost_breaks_the_stream() {
        let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                         "params": {"notifications": {"taskIds": ["a"]}}});
        let cases = [
            // before the acknowledgement
            vec![
                json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": {"taskId": "a", "status": "working"}}),
            ],
            // tagged for another subscription
            vec![
                ack.clone(),
                json!({"jsonrpc": "2.0", "method": "notifications/tasks",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 8}, "taskId": "a", "status": "working"}}),
            ],
            // a completed task without its result
            vec![
                ack.clone(),
                json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": {"taskId": "a", "status": "completed"}}),
            ],
            // malformed acknowledgement
            vec![
                json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"notifications": {"taskIds": "a"}}}),
            ],
            // a second acknowledgement
            vec![ack.clone(), ack.clone()],
            // params not an object
            vec![
                ack,
                json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": [1]}),
            ],
        ];
        for messages in cases {
            assert!(
                matches!(
                    decode(json!(1), &sse(&messages)),
                    Err(StreamFault::Invalid(_))
                ),
                "must be rejected: {messages:?}"
            );
        }
        assert!(matches!(
            decode(json!(1), b"data: {not json\n\n"),
            Err(StreamFault::Invalid(_))
        ));
    }

    #[test]
    fn events_split_at_any_byte_decode_the_same() {
        let body = sse(&[
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"notifications": {"taskIds": ["a"]}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": {"taskId": "a", "status": "cancelled"}}),
        ]);
        let whole = decode(json!(1), &body).expect("decodes");
        for cut in 0..body.len() {
            let mut decoder = ListenDecoder::new(json!(1));
            let mut events = decoder.feed(&body[..cut]).expect("first half");
            events.extend(decoder.feed(&body[cut..]).expect("second half"));
            events.extend(decoder.finish().expect("end"));
            assert_eq!(events, whole, "cut at {cut}");
        }
    }
}
