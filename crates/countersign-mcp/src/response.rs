//! Turning one HTTP response into the JSON-RPC answer to our request, whatever the server framed.
//!
//! A server may answer with `application/json` or `text/event-stream` (notifications first, then
//! the response), with JSON-RPC errors under any HTTP status. [`ResponseReader`] is fed the body
//! chunk by chunk and stops at the first message answering our id, so a server that keeps an SSE
//! stream open after answering does not hang us. It never panics on any byte sequence (see the
//! property tests below and `fuzz_decode`).

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::error::Error;
use super::sse::SseDecoder;
use super::wire::RpcError;

pub use super::MAX_BODY_BYTES;

/// How the body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    Json,
    Sse,
}

impl Framing {
    /// Picks the framing from `Content-Type`; `None` for anything else.
    pub(crate) fn from_content_type(content_type: Option<&str>) -> Option<Self> {
        let essence = content_type?
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/json" => Some(Self::Json),
            "text/event-stream" => Some(Self::Sse),
            _ if essence.ends_with("+json") => Some(Self::Json),
            _ => None,
        }
    }
}

/// What one JSON-RPC message on the wire turned out to be.
#[derive(Debug)]
pub(crate) enum Message {
    /// The answer to our request: its result, still as JSON text, or an error.
    Response(Result<Box<RawValue>, RpcError>),
    /// A notification (e.g. `notifications/progress`), passed to the caller's sink.
    Notification(Value),
    /// Anything else (another id, a server-to-client request): ignored.
    Other,
}

/// The members of a JSON-RPC message that say what it is, borrowed from its text. The result is
/// kept as text rather than built into a `Value` tree: a caller that only needs to know whether
/// it changed (a poll) hashes the text, and building the tree was a good part of an unchanged
/// poll's CPU.
#[derive(Deserialize)]
struct Members<'a> {
    /// `Some` when present, also when `null` (a JSON-RPC error about an unreadable request
    /// carries `"id": null`).
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Classifies one JSON-RPC message (its text) relative to our request id. `what` names the text
/// in the error when it is not JSON ("response", "an SSE event").
pub(crate) fn classify(text: &str, id: &Value, what: &str) -> Result<Message, String> {
    // Checked first: serde would also read a struct from a JSON array.
    if !text.trim_start().starts_with('{') {
        return Err(match serde_json::from_str::<&RawValue>(text) {
            Ok(_) => "a JSON-RPC message must be an object".into(),
            Err(e) => format!("{what} is not valid JSON: {e}"),
        });
    }
    let members: Members<'_> =
        serde_json::from_str(text).map_err(|e| format!("{what} is not valid JSON: {e}"))?;
    let has_method = members.method.is_some();
    let ours = match members.id {
        None if has_method => {
            let notification =
                serde_json::from_str(text).map_err(|e| format!("{what} is not valid JSON: {e}"))?;
            return Ok(Message::Notification(notification));
        }
        Some(_) if has_method => return Ok(Message::Other),
        Some(msg_id) => {
            (msg_id.get() == "null" && members.error.is_some())
                || serde_json::from_str::<Value>(msg_id.get()).is_ok_and(|v| v == *id)
        }
        None => return Err("a JSON-RPC response must have an `id`".into()),
    };
    if !ours {
        return Ok(Message::Other);
    }
    if let Some(error) = members.error {
        let error: RpcError = serde_json::from_str(error.get())
            .map_err(|e| format!("malformed JSON-RPC error object: {e}"))?;
        Ok(Message::Response(Err(error)))
    } else if let Some(result) = members.result {
        Ok(Message::Response(Ok(result.to_owned())))
    } else {
        Err("a JSON-RPC response must have `result` or `error`".into())
    }
}

/// A result's text as a `Value` (for every method but the poll, which looks at the text first).
pub(crate) fn to_value(result: &RawValue) -> Result<Value, String> {
    serde_json::from_str(result.get()).map_err(|e| format!("response is not valid JSON: {e}"))
}

/// Why a body yields no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The body is not a valid answer (the reason says how).
    Invalid(String),
    /// The body crossed a size limit before completing a message.
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

impl From<String> for Fault {
    fn from(reason: String) -> Self {
        Self::Invalid(reason)
    }
}

impl From<&str> for Fault {
    fn from(reason: &str) -> Self {
        Self::Invalid(reason.into())
    }
}

impl From<super::sse::TooLarge> for Fault {
    fn from(e: super::sse::TooLarge) -> Self {
        Self::TooLarge { limit: e.limit }
    }
}

impl Fault {
    /// The typed client error for `method`.
    pub(crate) fn into_error(self, method: &str) -> Error {
        match self {
            Self::Invalid(reason) => Error::InvalidResponse {
                method: method.into(),
                reason,
            },
            Self::TooLarge { limit } => Error::ResponseTooLarge {
                method: method.into(),
                limit,
            },
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(reason) => f.write_str(reason),
            Self::TooLarge { limit } => {
                write!(f, "more than {limit} bytes without a complete message")
            }
        }
    }
}

/// The answer to our request: the result's text, or the JSON-RPC error.
pub(crate) type Answer = Result<Box<RawValue>, RpcError>;

/// Incremental reader of one response body.
#[derive(Debug)]
pub(crate) struct ResponseReader {
    framing: Framing,
    id: Value,
    buffer: Vec<u8>,
    sse: SseDecoder,
    events: Vec<super::sse::SseEvent>,
    /// Notifications seen before the answer, in order.
    pub(crate) notifications: Vec<Value>,
}

impl ResponseReader {
    pub(crate) fn new(framing: Framing, id: Value) -> Self {
        Self {
            framing,
            id,
            buffer: Vec::new(),
            sse: SseDecoder::new(),
            events: Vec::new(),
            notifications: Vec::new(),
        }
    }

    /// Feeds a chunk; returns the answer as soon as it is complete.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<Option<Answer>, Fault> {
        match self.framing {
            Framing::Json => {
                if self.buffer.len().saturating_add(chunk.len()) > MAX_BODY_BYTES {
                    return Err(Fault::TooLarge {
                        limit: MAX_BODY_BYTES,
                    });
                }
                self.buffer.extend_from_slice(chunk);
                Ok(None)
            }
            Framing::Sse => {
                self.sse.feed(chunk, &mut self.events)?;
                Ok(self.drain_events()?)
            }
        }
    }

    /// The body ended: the answer, or why there is none.
    pub(crate) fn finish(&mut self) -> Result<Answer, Fault> {
        match self.framing {
            Framing::Json => {
                if self.buffer.iter().all(u8::is_ascii_whitespace) {
                    return Err("empty response body".into());
                }
                let text = std::str::from_utf8(&self.buffer)
                    .map_err(|e| format!("response is not valid JSON: not UTF-8 ({e})"))?;
                match classify(text, &self.id, "response")? {
                    Message::Response(answer) => Ok(answer),
                    Message::Notification(_) | Message::Other => Err(Fault::Invalid(
                        "the JSON body does not answer our request id".into(),
                    )),
                }
            }
            Framing::Sse => {
                self.sse.finish(&mut self.events);
                match self.drain_events()? {
                    Some(answer) => Ok(answer),
                    None => Err(Fault::Invalid(
                        "the event stream ended without answering our request".into(),
                    )),
                }
            }
        }
    }

    fn drain_events(&mut self) -> Result<Option<Answer>, String> {
        for event in std::mem::take(&mut self.events) {
            if event.data.trim().is_empty() {
                continue; // priming events carry an id and no payload
            }
            match classify(&event.data, &self.id, "an SSE event")? {
                Message::Response(answer) => return Ok(Some(answer)),
                Message::Notification(n) => self.notifications.push(n),
                Message::Other => {}
            }
        }
        Ok(None)
    }
}

/// Maps a JSON-RPC error to the typed client error for `method` (and `task_id` on `tasks/*`).
pub(crate) fn rpc_error(method: &str, task_id: Option<&str>, error: RpcError) -> Error {
    let message = error.message.clone();
    match error.code {
        -32020 => Error::HeaderMismatch {
            method: method.into(),
            message,
        },
        -32021 => Error::MissingCapability {
            method: method.into(),
            required: error
                .data
                .as_ref()
                .and_then(|d| d.get("requiredCapabilities"))
                .cloned()
                .or(error.data.clone())
                .unwrap_or(Value::Null),
            message,
        },
        -32022 => Error::UnsupportedVersion {
            requested: super::wire::PROTOCOL_VERSION.into(),
            supported: supported_versions(error.data.as_ref()),
        },
        -32601 => Error::MethodNotFound {
            method: method.into(),
        },
        -32602 => match task_id {
            // tasks/get and tasks/cancel take nothing but the id we know is well-formed, so an
            // invalid-params answer means the server does not know the task. tasks/update also
            // carries answers, so only a message that says so counts as "unknown task" there.
            Some(id) if method != "tasks/update" || mentions_missing_task(&message) => {
                Error::UnknownTask {
                    task_id: id.into(),
                    message,
                }
            }
            _ => Error::InvalidParams {
                method: method.into(),
                message,
                data: error.data,
            },
        },
        _ => Error::Rpc {
            method: method.into(),
            error,
        },
    }
}

fn mentions_missing_task(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    [
        "not found",
        "unknown task",
        "no such task",
        "does not exist",
        "expired",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// `data.supported` of a -32022 error.
pub(crate) fn supported_versions(data: Option<&Value>) -> Vec<String> {
    data.and_then(|d| d.get("supported"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Parses `Retry-After`: delay-seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Decodes a complete response the way the client does, then reads the result as each method
/// would: for property tests and fuzzing. Never panics, whatever the bytes.
pub fn fuzz_decode(content_type: Option<&str>, body: &[u8]) -> Result<Value, String> {
    let id = Value::from(1);
    let framing = Framing::from_content_type(content_type).unwrap_or(Framing::Json);
    let mut reader = ResponseReader::new(framing, id);
    let answer = match reader.feed(body).map_err(|f| f.to_string())? {
        Some(answer) => answer,
        None => reader.finish().map_err(|f| f.to_string())?,
    };
    let result = answer.map_err(|e| rpc_error("tasks/get", Some("t"), e).to_string())?;
    let result = to_value(&result)?;
    let _ = super::wire::interpret_call_result(&result);
    let _ = super::wire::interpret_task_result("t", &result);
    let _ = super::wire::Discovery::parse(&result);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn read(framing: Framing, body: &[u8]) -> Result<Result<Value, RpcError>, String> {
        let mut reader = ResponseReader::new(framing, json!(7));
        let answer = match reader.feed(body).map_err(|f| f.to_string())? {
            Some(answer) => answer,
            None => reader.finish().map_err(|f| f.to_string())?,
        };
        Ok(answer.map(|raw| to_value(&raw).expect("a result's text is JSON")))
    }

    #[test]
    fn a_json_body_over_the_limit_is_too_large() {
        let mut reader = ResponseReader::new(Framing::Json, json!(7));
        let chunk = vec![b' '; 1024 * 1024];
        let fault = (0..=MAX_BODY_BYTES / chunk.len())
            .find_map(|_| reader.feed(&chunk).err())
            .expect("the limit is reached");
        assert_eq!(
            fault,
            Fault::TooLarge {
                limit: MAX_BODY_BYTES
            }
        );
        assert!(reader.buffer.len() <= MAX_BODY_BYTES);
    }

    #[test]
    fn an_sse_body_without_a_complete_event_is_too_large_at_the_json_limit() {
        let mut reader = ResponseReader::new(Framing::Sse, json!(7));
        let chunk =
            b"data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n".repeat(16 * 1024);
        reader
            .feed(b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n")
            .expect("a notification");
        let fault = (0..=MAX_BODY_BYTES / chunk.len())
            .find_map(|_| reader.feed(&chunk).err())
            .expect("the limit is reached");
        assert_eq!(
            fault,
            Fault::TooLarge {
                limit: MAX_BODY_BYTES
            }
        );
        assert_eq!(fault.into_error("tools/call").code(), "response_too_large");
    }

    #[test]
    fn reads_a_json_result() {
        let answer = read(
            Framing::Json,
            br#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete"}}"#,
        );
        assert_eq!(answer, Ok(Ok(json!({"resultType": "complete"}))));
    }

    #[test]
    fn reads_an_sse_result_after_notifications_and_pings() {
        let body = b": ping\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"x\":1}}\r\n\r\n";
        let mut reader = ResponseReader::new(Framing::Sse, json!(7));
        let answer = reader
            .feed(body)
            .expect("decodes")
            .expect("answered")
            .expect("a result");
        assert_eq!(to_value(&answer), Ok(json!({"x": 1})));
        assert_eq!(reader.notifications.len(), 1);
    }

    #[test]
    fn stops_at_the_answer_even_if_the_stream_stays_open() {
        let mut reader = ResponseReader::new(Framing::Sse, json!(7));
        assert!(reader
            .feed(b"data: {\"jsonrpc\":\"2.0\",\"id\":7,")
            .expect("partial")
            .is_none());
        let answer = reader
            .feed(b"\"result\":{}}\n\n: still open\n")
            .expect("decodes")
            .expect("answered")
            .expect("a result");
        assert_eq!(answer.get(), "{}");
    }

    #[test]
    fn reads_errors_and_ignores_other_ids() {
        let body = b"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32602,\"message\":\"unknown task: x\"}}\n\n";
        let answer = read(Framing::Sse, body).expect("decodes");
        assert_eq!(
            answer,
            Err(RpcError {
                code: -32602,
                message: "unknown task: x".into(),
                data: None
            })
        );
    }

    #[test]
    fn an_error_with_a_null_id_is_ours_and_other_ids_are_not() {
        let null_id = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#;
        assert!(matches!(read(Framing::Json, null_id), Ok(Err(e)) if e.code == -32700));
        // "7" (a string) is not 7; a result with a null id is not an answer.
        assert!(
            read(Framing::Json, br#"{"jsonrpc":"2.0","id":"7","result":{}}"#)
                .unwrap_err()
                .contains("does not answer")
        );
        assert!(
            read(Framing::Json, br#"{"jsonrpc":"2.0","id":null,"result":{}}"#)
                .unwrap_err()
                .contains("does not answer")
        );
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        assert!(read(Framing::Json, b"").unwrap_err().contains("empty"));
        assert!(read(Framing::Json, b"{\"jsonrpc\":\"2.0\",\"id\":7,\"res")
            .unwrap_err()
            .contains("not valid JSON"));
        assert!(read(Framing::Json, b"[1,2]")
            .unwrap_err()
            .contains("object"));
        assert!(read(Framing::Json, b"{\"jsonrpc\":\"2.0\",\"id\":7}")
            .unwrap_err()
            .contains("result"));
        assert!(read(Framing::Sse, b"data: {}\n\n")
            .unwrap_err()
            .contains("id"));
        assert!(read(Framing::Sse, b": nothing\n\n")
            .unwrap_err()
            .contains("ended"));
        assert!(read(
            Framing::Json,
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":\"x\"}}"
        )
        .unwrap_err()
        .contains("malformed"));
    }

    #[test]
    fn maps_each_error_code_to_its_type() {
        let e = |code: i64, data: Option<Value>| RpcError {
            code,
            message: "m".into(),
            data,
        };
        assert!(matches!(
            rpc_error("tools/call", None, e(-32020, None)),
            Error::HeaderMismatch { .. }
        ));
        match rpc_error(
            "tasks/get",
            Some("t"),
            e(
                -32021,
                Some(
                    json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}),
                ),
            ),
        ) {
            Error::MissingCapability { required, .. } => assert_eq!(
                required,
                json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
            ),
            other => panic!("unexpected {other:?}"),
        }
        match rpc_error(
            "tools/list",
            None,
            e(-32022, Some(json!({"supported": ["2025-11-25"]}))),
        ) {
            Error::UnsupportedVersion { supported, .. } => assert_eq!(supported, ["2025-11-25"]),
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            rpc_error("tasks/list", None, e(-32601, None)),
            Error::MethodNotFound { .. }
        ));
        assert!(matches!(
            rpc_error("tasks/get", Some("t"), e(-32602, None)),
            Error::UnknownTask { .. }
        ));
        assert!(matches!(
            rpc_error("tasks/update", Some("t"), e(-32602, None)),
            Error::InvalidParams { .. }
        ));
        assert!(matches!(
            rpc_error(
                "tasks/update",
                Some("t"),
                RpcError {
                    code: -32602,
                    message: "Task t not found".into(),
                    data: None
                }
            ),
            Error::UnknownTask { .. }
        ));
        assert!(matches!(
            rpc_error("tools/call", None, e(-32603, None)),
            Error::Rpc { .. }
        ));
    }

    #[test]
    fn parses_retry_after_seconds_and_dates() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse_retry_after(&date, now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("soon", now), None);
    }

    proptest! {
        /// No byte sequence a server can send panics the parser, in either framing.
        #[test]
        fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..1024), sse in any::<bool>()) {
            let _ = fuzz_decode(Some(if sse { "text/event-stream" } else { "application/json" }), &body);
        }

        /// Structured-but-hostile JSON (random shapes in the response slots) never panics either.
        #[test]
        fn hostile_json_never_panics(value in arb_json(), id in prop_oneof![Just(json!(1)), Just(json!(null)), Just(json!("1"))], sse in any::<bool>()) {
            let message = json!({"jsonrpc": "2.0", "id": id, "result": value.clone(), "error": value});
            let text = message.to_string();
            let body = if sse { format!("data: {text}\n\n") } else { text };
            let _ = fuzz_decode(Some(if sse { "text/event-stream" } else { "application/json" }), body.as_bytes());
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z_]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(
                    "(code|message|data|taskId|status|[a-z]{1,4})",
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
