//! What crosses the IPC boundary: command requests/responses, event payloads and the error shape.
//!
//! Declared once here; `ts-rs` generates `ui/src/bindings/` from these types and the test at the
//! bottom fails on any drift (refresh with `COUNTERSIGN_BLESS=1 cargo test -p countersign-desktop
//! bindings`). Nothing here may carry a secret: tokens never cross IPC.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

/// Names of the events the shell emits to the webview (past-tense facts).
pub mod event {
    /// Payload [`super::InputRequestView`]: a new input request reached the inbox.
    pub const INPUT_REQUESTED: &str = "input_requested";
    /// Payload [`super::InputAnswered`]: an input request left the inbox (answered or withdrawn).
    pub const INPUT_ANSWERED: &str = "input_answered";
    /// Payload [`super::TaskView`]: a task's state changed.
    pub const TASK_UPDATED: &str = "task_updated";
    /// Payload [`super::AuditEntry`]: an entry was appended to the audit log.
    pub const AUDIT_APPENDED: &str = "audit_appended";
    /// Payload [`super::InputFocusRequested`]: the user clicked a notification for this input.
    pub const INPUT_FOCUS_REQUESTED: &str = "input_focus_requested";
    /// Payload [`super::ShellState`]: pending count or do-not-disturb changed.
    pub const SHELL_STATE_CHANGED: &str = "shell_state_changed";
    /// Payload: number of missed events. The webview fell behind and must re-read its lists.
    pub const EVENTS_DROPPED: &str = "events_dropped";
}

/// Codes the UI branches on; everything else is in `message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// No such input, task, server or tool.
    NotFound,
    /// The input was already answered (here, from a notification, or by another client).
    AlreadyAnswered,
    /// The request was malformed (e.g. `accept` without content for a form).
    InvalidInput,
    /// The engine cannot do this now (not connected, server unreachable, not implemented yet).
    Unavailable,
    /// A server answered with an error.
    Server,
    /// A bug on our side.
    Internal,
}

/// The only error shape that crosses IPC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct CommandError {
    /// What the UI branches on.
    pub code: ErrorCode,
    /// Human-readable, already safe to show as text.
    pub message: String,
}

impl CommandError {
    /// Shorthand constructor.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// `app_info` response.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AppInfo {
    /// Crate version.
    pub version: String,
    /// Which engine answers the commands (`standalone` until the core engine is wired).
    pub engine: String,
    /// Shell state at the time of the call.
    pub shell: ShellState,
}

/// State owned by the shell itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ShellState {
    /// Inputs waiting for the user.
    pub pending: u32,
    /// Do-not-disturb: no desktop notifications while on.
    pub dnd: bool,
    /// Whether the notification daemon supports action buttons.
    pub notification_actions: bool,
}

/// One pending input request (an MCP `inputRequests` entry, or an MRTR request before a task).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputRequestView {
    /// Opaque key, unique over the task's life: the inbox's identity for this request.
    pub key: String,
    /// The task that asks, if any (MRTR requests before a task have none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub task_id: Option<String>,
    /// Our id of the server that asks.
    pub server_id: String,
    /// Display name of the server (server-provided: text only).
    pub server_name: String,
    /// The tool whose call led to this request.
    pub tool_name: String,
    /// When the request reached us (RFC 3339).
    pub received_at: String,
    /// What is asked.
    pub request: InputKind,
}

/// What an input request asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum InputKind {
    /// `elicitation/create` in form mode: render `requestedSchema` as a form.
    #[serde(rename_all = "camelCase")]
    Form {
        /// The question (server-provided: text only).
        message: String,
        /// The flat JSON schema, passed through verbatim; the UI validates it defensively.
        #[ts(type = "unknown")]
        requested_schema: Value,
    },
    /// `elicitation/create` in URL mode: ask consent before opening `url`.
    #[serde(rename_all = "camelCase")]
    Url {
        /// Why (server-provided: text only).
        message: String,
        /// The target, shown with its full host before anything opens.
        url: String,
        /// Server's id for this elicitation, if given.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        elicitation_id: Option<String>,
    },
    /// A method the console does not answer (deprecated sampling/roots): shown, can only be declined.
    Unsupported {
        /// The JSON-RPC method name.
        method: String,
    },
}

/// The user's answer to an input request (elicitation response).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum InputResponse {
    /// Accepted; `content` is absent for URL mode (accept = "consented").
    Accept {
        /// Form values keyed by property name.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional, type = "Record<string, unknown>")]
        content: Option<serde_json::Map<String, Value>>,
    },
    /// Explicitly refused.
    Decline,
    /// Dismissed without a decision.
    Cancel,
}

impl InputResponse {
    /// The elicitation `action` string.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Accept { .. } => "accept",
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        }
    }
}

/// `input_answer` request.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputAnswerRequest {
    /// The input's key.
    pub key: String,
    /// The answer.
    pub response: InputResponse,
}

/// `input_answered` payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputAnswered {
    /// The input's key.
    pub key: String,
    /// `accept`, `decline`, `cancel`, or `withdrawn` when the task ended first.
    pub outcome: String,
}

/// `input_focus_requested` payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputFocusRequested {
    /// The input to show.
    pub key: String,
}

/// Task status as the Tasks extension defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for input (see the inbox).
    InputRequired,
    /// Terminal: has a result (which may be `isError`).
    Completed,
    /// Terminal: has an error.
    Failed,
    /// Terminal.
    Cancelled,
}

/// One row of the task list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    /// Server-assigned task id.
    pub task_id: String,
    /// Our id of the server.
    pub server_id: String,
    /// Display name of the server.
    pub server_name: String,
    /// The tool that started the task.
    pub tool_name: String,
    /// Current status.
    pub status: TaskStatus,
    /// Latest status message (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub status_message: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub last_updated_at: String,
    /// Time to live from `createdAt`; absent = unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub ttl_ms: Option<u64>,
    /// Inputs of this task waiting in the inbox.
    pub pending_inputs: u32,
}

/// `task_get` response: the row plus what the ledger knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskDetail {
    /// The row.
    pub task: TaskView,
    /// `CallToolResult` (completed) or JSON-RPC error object (failed), verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "unknown")]
    pub outcome: Option<Value>,
    /// The task's timeline, oldest first.
    pub timeline: Vec<AuditEntry>,
}

/// `task_get` / `task_cancel` request.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskRef {
    /// Task id.
    pub task_id: String,
}

/// Reachability of a server as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ServerHealth {
    /// Not contacted yet.
    Unknown,
    /// Last request succeeded.
    Ok,
    /// Last request failed (see `lastError`).
    Error,
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerView {
    /// Our id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Endpoint URL exactly as configured.
    pub url: String,
    /// Last seen health.
    pub health: ServerHealth,
    /// Whether a bearer token is stored in the OS keyring (never the token itself).
    pub has_token: bool,
    /// Last error, if `health` is `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub last_error: Option<String>,
}

/// `tool_list` request.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerRef {
    /// Server id.
    pub server_id: String,
}

/// One tool offered by a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    /// Tool name.
    pub name: String,
    /// Description (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub description: Option<String>,
    /// JSON schema of the arguments, verbatim.
    #[ts(type = "unknown")]
    pub input_schema: Value,
}

/// `tool_call` request.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRequest {
    /// Server id.
    pub server_id: String,
    /// Tool name.
    pub name: String,
    /// Arguments object.
    #[ts(type = "Record<string, unknown>")]
    pub arguments: serde_json::Map<String, Value>,
}

/// `tool_call` response: what the server decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolCallOutcome {
    /// A plain `CallToolResult`, verbatim.
    Complete {
        /// The result.
        #[ts(type = "unknown")]
        result: Value,
    },
    /// The server created a task (already persisted in the ledger).
    Task {
        /// The task row.
        task: TaskView,
    },
    /// MRTR: inputs were added to the inbox; the call resumes when they are answered.
    InputRequired {
        /// Keys of the new inbox entries.
        keys: Vec<String>,
    },
}

/// `audit_list` request: entries after a cursor.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditQuery {
    /// Return entries with `seq > after` (absent = from the start).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub after: Option<u64>,
    /// At most this many.
    pub limit: u32,
}

/// One audit/timeline entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Monotonic cursor.
    pub seq: u64,
    /// RFC 3339.
    pub at: String,
    /// Machine-readable kind, e.g. `input_answered`, `task_created`, `task_cancel_requested`.
    pub kind: String,
    /// Server involved, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub server_id: Option<String>,
    /// Task involved, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub task_id: Option<String>,
    /// One line for humans (may quote server text: render as text).
    pub summary: String,
}

/// `url_open` request: open an http(s) URL in the default browser (URL-mode elicitation, after
/// the user saw the host and consented).
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct UrlOpenRequest {
    /// Absolute `http:` or `https:` URL.
    pub url: String,
}

/// `notify_dnd_set` request.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct DndRequest {
    /// New do-not-disturb state.
    pub enabled: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::{Path, PathBuf};

    #[test]
    fn input_response_matches_the_elicitation_wire_shape() {
        let accept = InputResponse::Accept {
            content: Some(serde_json::Map::from_iter([(
                "approve".to_owned(),
                json!(true),
            )])),
        };
        assert_eq!(
            serde_json::to_value(&accept).unwrap(),
            json!({"action":"accept","content":{"approve":true}})
        );
        assert_eq!(
            serde_json::to_value(InputResponse::Decline).unwrap(),
            json!({"action":"decline"})
        );
        let consented: InputResponse = serde_json::from_value(json!({"action":"accept"})).unwrap();
        assert_eq!(
            consented,
            InputResponse::Accept { content: None },
            "URL-mode consent has no content"
        );
        for r in [accept, InputResponse::Decline, InputResponse::Cancel] {
            let back: InputResponse =
                serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
            assert_eq!(back, r);
        }
    }

    #[test]
    fn command_error_is_code_and_message() {
        let e = CommandError::new(ErrorCode::AlreadyAnswered, "answered from a notification");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"code":"already_answered","message":"answered from a notification"})
        );
    }

    #[test]
    fn form_request_pins_camel_case_and_mode_tag() {
        let v = InputKind::Form {
            message: "Go?".into(),
            requested_schema: json!({"type":"object"}),
        };
        assert_eq!(
            serde_json::to_value(&v).unwrap(),
            json!({"mode":"form","message":"Go?","requestedSchema":{"type":"object"}})
        );
    }

    fn export_bindings(dir: &Path) {
        let cfg = ts_rs::Config::new()
            .with_out_dir(dir)
            .with_large_int("number");
        macro_rules! export {
            ($($t:ty),* $(,)?) => {$(
                <$t as TS>::export_all(&cfg).unwrap_or_else(|e| panic!("export {}: {e}", stringify!($t)));
            )*};
        }
        export!(
            CommandError,
            AppInfo,
            ShellState,
            InputRequestView,
            InputResponse,
            InputAnswerRequest,
            InputAnswered,
            InputFocusRequested,
            TaskView,
            TaskDetail,
            TaskRef,
            ServerView,
            ServerRef,
            ToolView,
            ToolCallRequest,
            ToolCallOutcome,
            AuditQuery,
            AuditEntry,
            DndRequest,
            UrlOpenRequest,
        );
    }

    fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "ts"))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out.into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap_or_default();
                (PathBuf::from(p.file_name().unwrap_or_default()), bytes)
            })
            .collect()
    }

    /// The UI's types are generated from these; a stale copy would let the two sides drift.
    #[test]
    fn bindings_are_fresh() {
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/src/bindings");
        if std::env::var_os("COUNTERSIGN_BLESS").is_some() {
            if let Ok(rd) = std::fs::read_dir(&committed) {
                for e in rd.filter_map(Result::ok) {
                    if e.path().extension().is_some_and(|x| x == "ts") {
                        std::fs::remove_file(e.path()).unwrap();
                    }
                }
            }
            export_bindings(&committed);
            return;
        }
        let fresh =
            std::env::temp_dir().join(format!("countersign-bindings-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&fresh);
        export_bindings(&fresh);
        let (want, have) = (files(&fresh), files(&committed));
        let _ = std::fs::remove_dir_all(&fresh);
        let names = |v: &[(PathBuf, Vec<u8>)]| v.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        assert_eq!(names(&have), names(&want), "ui/src/bindings is stale: run `COUNTERSIGN_BLESS=1 cargo test -p countersign-desktop bindings`");
        for ((name, w), (_, h)) in want.iter().zip(&have) {
            assert!(w == h, "ui/src/bindings/{} is stale: run `COUNTERSIGN_BLESS=1 cargo test -p countersign-desktop bindings`", name.display());
        }
    }
}
