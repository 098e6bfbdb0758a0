//! JSON shapes of MCP `2026-07-28` and the Tasks extension, as this server writes and reads them.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

pub use crate::PROTOCOL_VERSION;
/// Identifier of the Tasks extension.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub(crate) const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// Syslog severities of `notifications/message`, least severe first.
pub(crate) const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];
pub(crate) const SERVER_NAME: &str = "countersign-demo";
pub(crate) const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Status of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Being processed.
    Working,
    /// Waiting for the client to answer `inputRequests` through `tasks/update`.
    InputRequired,
    /// Finished with a tool result (which may have `isError: true`).
    Completed,
    /// Finished with a JSON-RPC error.
    Failed,
    /// Cancelled through `tasks/cancel`.
    Cancelled,
}

impl TaskStatus {
    /// Whether nothing can change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// The `resultType` discriminator of every result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum ResultType {
    #[serde(rename = "complete")]
    Complete,
    #[serde(rename = "task")]
    Task,
}

/// One content block of a tool result. The demo tools only produce text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum Content {
    Text { text: String },
}

/// A `CallToolResult`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolResult {
    pub(crate) content: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) structured_content: Option<Value>,
    pub(crate) is_error: bool,
    pub(crate) result_type: ResultType,
}

impl ToolResult {
    pub(crate) fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![Content::Text { text: text.into() }],
            structured_content: None,
            is_error: false,
            result_type: ResultType::Complete,
        }
    }

    /// A tool execution error: the call ran and reports failure (`isError: true`).
    pub(crate) fn error(text: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(text)
        }
    }

    pub(crate) fn with_structured(mut self, value: Value) -> Self {
        self.structured_content = Some(value);
        self
    }
}

/// The `error` member of a JSON-RPC error response (also the `error` of a failed task).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ErrorObject {
    pub(crate) code: i64,
    pub(crate) message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<Value>,
}

/// A JSON-RPC response or notification ready to be written.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Outgoing {
    Result {
        jsonrpc: &'static str,
        id: Value,
        result: Value,
    },
    Error {
        jsonrpc: &'static str,
        id: Value,
        error: ErrorObject,
    },
    Notification {
        jsonrpc: &'static str,
        method: &'static str,
        params: Value,
    },
}

impl Outgoing {
    pub(crate) fn result(id: Value, result: Value) -> Self {
        Self::Result {
            jsonrpc: "2.0",
            id,
            result,
        }
    }

    pub(crate) fn error(id: Value, error: &Error) -> Self {
        Self::Error {
            jsonrpc: "2.0",
            id,
            error: error.to_object(),
        }
    }

    pub(crate) fn log(level: &'static str, message: &str) -> Self {
        Self::Notification {
            jsonrpc: "2.0",
            method: "notifications/message",
            params: json!({"level": level, "logger": "countersign-demo", "data": message}),
        }
    }

    pub(crate) fn progress(token: &Value, progress: u64, total: u64, message: &str) -> Self {
        Self::Notification {
            jsonrpc: "2.0",
            method: "notifications/progress",
            params: json!({
                "progressToken": token,
                "progress": progress,
                "total": total,
                "message": message,
            }),
        }
    }

    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        // Serializing these shapes (strings, numbers and `Value`s) cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The empty acknowledgement of `tasks/update` and `tasks/cancel`.
pub(crate) fn ack() -> Value {
    json!({ "resultType": "complete" })
}

/// A task as `tasks/get` (`resultType: "complete"`, with its payload) or a `CreateTaskResult`
/// (`resultType: "task"`, no payload) shows it. Built only by the task store, which guarantees
/// exactly one payload matching the status.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaskView<'a> {
    pub(crate) task_id: &'a str,
    pub(crate) status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status_message: Option<&'a str>,
    pub(crate) created_at: String,
    pub(crate) last_updated_at: String,
    /// `null` means unlimited, so it is always written.
    pub(crate) ttl_ms: Option<u64>,
    pub(crate) poll_interval_ms: u64,
    pub(crate) result_type: ResultType,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_requests: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<&'a ToolResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<&'a ErrorObject>,
}

impl TaskView<'_> {
    pub(crate) fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A parsed JSON-RPC request (notifications and responses are told apart by the transport).
#[derive(Debug, Clone)]
pub(crate) struct RpcRequest {
    pub(crate) id: Value,
    pub(crate) method: String,
    pub(crate) params: Option<Map<String, Value>>,
}

/// What a POST body turned out to be.
#[derive(Debug)]
pub(crate) enum Incoming {
    Request(RpcRequest),
    /// A notification: accepted with 202 and no body.
    Notification,
}

impl Incoming {
    pub(crate) fn parse(body: Value) -> Result<Self> {
        let invalid = |detail: &str| Error::InvalidRequest {
            detail: detail.to_owned(),
        };
        let Value::Object(mut object) = body else {
            return Err(if body.is_array() {
                invalid("batches are not supported")
            } else {
                invalid("the body must be a JSON-RPC request object")
            });
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid("jsonrpc must be \"2.0\""));
        }
        let Some(Value::String(method)) = object.remove("method") else {
            return Err(
                if object.contains_key("result") || object.contains_key("error") {
                    invalid("clients must not send JSON-RPC responses")
                } else {
                    invalid("method must be a string")
                },
            );
        };
        let params = match object.remove("params") {
            None => None,
            Some(Value::Object(params)) => Some(params),
            Some(_) => return Err(invalid("params must be an object")),
        };
        match object.remove("id") {
            None => Ok(Self::Notification),
            Some(id @ (Value::String(_) | Value::Number(_))) => {
                Ok(Self::Request(RpcRequest { id, method, params }))
            }
            Some(_) => Err(invalid("id must be a string or a number")),
        }
    }
}

/// Capabilities a request declared in `_meta["io.modelcontextprotocol/clientCapabilities"]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClientCaps {
    pub(crate) tasks: bool,
    pub(crate) elicitation_form: bool,
    pub(crate) elicitation_url: bool,
    pub(crate) sampling: bool,
}

impl ClientCaps {
    pub(crate) fn from_object(caps: &Map<String, Value>) -> Self {
        let tasks = caps
            .get("extensions")
            .and_then(Value::as_object)
            .is_some_and(|extensions| extensions.contains_key(TASKS_EXTENSION));
        let elicitation = caps.get("elicitation").and_then(Value::as_object);
        // `elicitation: {}` predates the form/url split and means form mode.
        let elicitation_form = elicitation
            .is_some_and(|modes| modes.contains_key("form") || !modes.contains_key("url"));
        let elicitation_url = elicitation.is_some_and(|modes| modes.contains_key("url"));
        Self {
            tasks,
            elicitation_form,
            elicitation_url,
            sampling: caps.get("sampling").is_some_and(Value::is_object),
        }
    }
}

/// The validated per-request envelope of `params._meta`.
#[derive(Debug, Clone)]
pub(crate) struct RequestMeta {
    pub(crate) protocol_version: String,
    pub(crate) caps: ClientCaps,
    pub(crate) progress_token: Option<Value>,
    /// Index in [`LOG_LEVELS`] of the least severe level the client wants; `None`: no logs.
    pub(crate) log_level: Option<usize>,
}

impl RequestMeta {
    pub(crate) fn parse(params: Option<&Map<String, Value>>) -> Result<Self> {
        let meta = params
            .and_then(|params| params.get("_meta"))
            .and_then(Value::as_object);
        let version = meta
            .and_then(|meta| meta.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        let caps = meta
            .and_then(|meta| meta.get(META_CLIENT_CAPABILITIES))
            .and_then(Value::as_object);
        match (version, caps) {
            (Some(version), Some(caps)) => Ok(Self {
                protocol_version: version.to_owned(),
                caps: ClientCaps::from_object(caps),
                progress_token: meta
                    .and_then(|meta| meta.get("progressToken"))
                    .filter(|token| token.is_string() || token.is_number())
                    .cloned(),
                log_level: meta
                    .and_then(|meta| meta.get(META_LOG_LEVEL))
                    .and_then(Value::as_str)
                    .and_then(|level| LOG_LEVELS.iter().position(|known| *known == level)),
            }),
            _ => {
                let mut missing = Vec::new();
                if version.is_none() {
                    missing.push(META_PROTOCOL_VERSION);
                }
                if caps.is_none() {
                    missing.push(META_CLIENT_CAPABILITIES);
                }
                Err(Error::InvalidMeta { missing })
            }
        }
    }
}

impl Error {
    /// The `error` member of the JSON-RPC response.
    pub(crate) fn to_object(&self) -> ErrorObject {
        ErrorObject {
            code: self.code(),
            message: self.to_string(),
            data: self.data(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_result_serializes_like_call_tool_result() {
        let result = ToolResult::error("lint failed").with_structured(json!({"errors": 3}));
        assert_eq!(
            serde_json::to_value(&result).ok(),
            Some(json!({
                "content": [{"type": "text", "text": "lint failed"}],
                "structuredContent": {"errors": 3},
                "isError": true,
                "resultType": "complete"
            }))
        );
    }

    #[test]
    fn create_task_result_is_flat_and_writes_null_ttl() {
        let view = TaskView {
            task_id: "t1",
            status: TaskStatus::Working,
            status_message: Some("stage 1/4: checkout"),
            created_at: "2026-12-02T09:36:05.000000Z".into(),
            last_updated_at: "2026-12-02T09:36:05.000000Z".into(),
            ttl_ms: None,
            poll_interval_ms: 1000,
            result_type: ResultType::Task,
            input_requests: None,
            result: None,
            error: None,
        };
        assert_eq!(
            view.to_value(),
            json!({
                "taskId": "t1",
                "status": "working",
                "statusMessage": "stage 1/4: checkout",
                "createdAt": "2026-12-02T09:36:05.000000Z",
                "lastUpdatedAt": "2026-12-02T09:36:05.000000Z",
                "ttlMs": null,
                "pollIntervalMs": 1000,
                "resultType": "task"
            })
        );
    }

    #[test]
    fn outgoing_shapes() {
        let error = Error::UnknownTask {
            task_id: "nope".into(),
        };
        assert_eq!(
            serde_json::from_slice::<Value>(&Outgoing::error(json!(7), &error).to_bytes()).ok(),
            Some(
                json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "Unknown task: nope"}})
            )
        );
        assert_eq!(
            serde_json::from_slice::<Value>(
                &Outgoing::progress(&json!("p-1"), 1, 4, "stage 1/4").to_bytes()
            )
            .ok(),
            Some(json!({
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": "p-1", "progress": 1, "total": 4, "message": "stage 1/4"}
            }))
        );
    }

    #[test]
    fn incoming_tells_requests_notifications_and_garbage_apart() {
        assert!(matches!(
            Incoming::parse(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})),
            Ok(Incoming::Request(RpcRequest { ref method, .. })) if method == "tools/list"
        ));
        assert!(matches!(
            Incoming::parse(json!({"jsonrpc": "2.0", "method": "notifications/cancelled"})),
            Ok(Incoming::Notification)
        ));
        for bad in [
            json!([]),
            json!({"jsonrpc": "1.0", "id": 1, "method": "x"}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            json!({"jsonrpc": "2.0", "id": null, "method": "x"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]}),
        ] {
            assert!(
                matches!(
                    Incoming::parse(bad.clone()),
                    Err(Error::InvalidRequest { .. })
                ),
                "{bad} should be an invalid request"
            );
        }
    }

    #[test]
    fn client_caps_read_extensions_and_elicitation_modes() {
        let caps = |value: Value| ClientCaps::from_object(value.as_object().unwrap_or(&Map::new()));
        assert_eq!(caps(json!({})), ClientCaps::default());
        assert_eq!(
            caps(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}})),
            ClientCaps {
                tasks: true,
                elicitation_form: true,
                elicitation_url: false,
                sampling: false
            }
        );
        assert_eq!(
            caps(json!({"elicitation": {"url": {}}})),
            ClientCaps {
                tasks: false,
                elicitation_form: false,
                elicitation_url: true,
                sampling: false
            }
        );
        assert_eq!(
            caps(json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}})),
            ClientCaps {
                tasks: false,
                elicitation_form: true,
                elicitation_url: true,
                sampling: true
            }
        );
    }

    #[test]
    fn meta_requires_version_and_capabilities() {
        let params = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        match RequestMeta::parse(params.as_object()) {
            Err(Error::InvalidMeta { missing }) => {
                assert_eq!(missing, vec![META_CLIENT_CAPABILITIES])
            }
            other => panic!("expected InvalidMeta, got {other:?}"),
        }
        let params = json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": "p-9"
        }});
        let meta = RequestMeta::parse(params.as_object()).ok();
        assert_eq!(
            meta.and_then(|meta| meta.progress_token),
            Some(json!("p-9"))
        );
    }
}
