//! What crosses the IPC boundary: the command and event contract, request/response and payload
//! types, and the error shape.
//!
//! Declared once here: [`contract!`] lists every command with its request and response type and
//! every event with its payload. `ts-rs` generates `ui/src/bindings/` from it (one file per type,
//! plus `Contract.ts`, the typed command/event map the UI's `call`/`listen` use); the test at the
//! bottom fails on any drift (refresh with `COUNTERSIGN_BLESS=1 cargo test -p countersign-desktop
//! bindings`). Times are Unix milliseconds. Nothing here is ever sent to the webview with a secret
//! in it: the only token-carrying types ([`ServerAddRequest`], [`ServerUpdateRequest`]) are
//! requests, deserialise-only, and redact themselves in `Debug`.

use countersign_core::secret::Sensitive;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use ts_rs::TS;

/// Declares the IPC contract once: command names with request and response types, event names
/// with payload types. Expands to [`COMMANDS`], the `event` name constants, and (in tests) the
/// generator of `ui/src/bindings/Contract.ts`.
macro_rules! contract {
    (
        commands { $($cmd:ident : $req:ty => $res:ty,)* }
        events { $($ev:ident = $evname:literal : $payload:ty,)* }
    ) => {
        /// Every command the webview may call, by name (each also needs an `allow-<name>` grant in
        /// `capabilities/main.json` and a line in `build.rs`; the IPC tests check both).
        pub const COMMANDS: &[&str] = &[$(stringify!($cmd)),*];

        /// Names of the events the shell emits to the webview (past-tense facts).
        pub mod event {
            $(
                #[doc = concat!("Payload: `", stringify!($payload), "`.")]
                pub const $ev: &str = $evname;
            )*
        }

        /// Visits every type the contract names.
        #[cfg(test)]
        fn visit_contract(v: &mut impl ts_rs::TypeVisitor) {
            $( v.visit::<$req>(); v.visit::<$res>(); )*
            $( v.visit::<$payload>(); )*
        }

        #[cfg(test)]
        pub(crate) fn contract_ts(cfg: &ts_rs::Config) -> String {
            let mut declared = Declared { cfg, names: Default::default(), export: false, error: None };
            visit_contract(&mut declared);
            let mut out = String::from("// Generated from src-tauri/src/ipc.rs (contract!). Do not edit: run\n// `COUNTERSIGN_BLESS=1 cargo test -p countersign-desktop bindings`.\n");
            for name in &declared.names {
                out.push_str(&format!("import type {{ {name} }} from \"./{name}\";\n"));
            }
            out.push_str("\n/** Every command: `req` is `null` when it takes no argument. */\nexport interface Commands {\n");
            $(
                out.push_str(&format!("  {}: {{ req: {}; res: {} }};\n", stringify!($cmd), <$req as TS>::name(cfg), <$res as TS>::name(cfg)));
            )*
            out.push_str("}\n\n/** Every event and its payload. */\nexport interface Events {\n");
            $(
                out.push_str(&format!("  {}: {};\n", $evname, <$payload as TS>::name(cfg)));
            )*
            out.push_str("}\n");
            out
        }

        #[cfg(test)]
        pub(crate) fn export_types(cfg: &ts_rs::Config) -> Result<(), String> {
            let mut declared = Declared { cfg, names: Default::default(), export: true, error: None };
            visit_contract(&mut declared);
            // Every command rejects with this shape.
            ts_rs::TypeVisitor::visit::<CommandError>(&mut declared);
            declared.error.map_or(Ok(()), Err)
        }
    };
}

/// Collects (and optionally exports) the declared types a type names, through its generics.
#[cfg(test)]
struct Declared<'a> {
    cfg: &'a ts_rs::Config,
    names: std::collections::BTreeSet<String>,
    export: bool,
    error: Option<String>,
}

#[cfg(test)]
impl ts_rs::TypeVisitor for Declared<'_> {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if T::output_path().is_some() {
            self.names.insert(T::ident(self.cfg));
            if self.export {
                if let Err(e) = T::export_all(self.cfg) {
                    self.error
                        .get_or_insert(format!("{}: {e}", T::ident(self.cfg)));
                }
            }
        }
        T::visit_generics(self);
    }
}

contract! {
    commands {
        app_info: () => AppInfo,
        ui_painted: () => (),
        notify_dnd_set: DndRequest => ShellState,
        view_set: ViewRequest => (),
        input_list: () => Vec<InputRequestView>,
        input_answer: InputAnswerRequest => (),
        task_list: TaskListRequest => Vec<TaskView>,
        task_get: TaskRef => TaskDetail,
        task_cancel: TaskRef => (),
        task_adopt: TaskAdoptRequest => TaskView,
        server_list: () => Vec<ServerView>,
        server_add: ServerAddRequest => ServerView,
        server_update: ServerUpdateRequest => ServerView,
        server_remove: ServerRef => (),
        server_check: ServerRef => ServerView,
        tool_list: ServerRef => Vec<ToolView>,
        tool_call: ToolCallRequest => ToolCallOutcome,
        tool_call_answer: ToolCallAnswerRequest => ToolCallOutcome,
        audit_list: () => Vec<AuditEntry>,
        audit_export: AuditExportRequest => AuditExport,
        url_open: UrlOpenRequest => (),
    }
    events {
        EVENT_RECORDED = "event_recorded": EventView,
        TASK_UPDATED = "task_updated": TaskView,
        INBOX_CHANGED = "inbox_changed": Vec<InputRequestView>,
        SERVERS_CHANGED = "servers_changed": Vec<ServerView>,
        SHELL_STATE_CHANGED = "shell_state_changed": ShellState,
        INPUT_FOCUS_REQUESTED = "input_focus_requested": InputFocusRequested,
    }
}

/// Codes the UI branches on; everything else is in `message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// No such input, task, server or tool.
    NotFound,
    /// The question was already answered (here, from a notification, or by another client) or
    /// withdrawn by the server.
    AlreadyAnswered,
    /// The request was malformed or conflicts with the current state (duplicate name, task ended).
    InvalidInput,
    /// The server could not be reached (network, timeout, 5xx): trying again may work.
    Unavailable,
    /// The server refused (JSON-RPC error, HTTP 4xx, bad credentials, invalid answer).
    Server,
    /// The OS keyring is missing, locked or refused.
    Keyring,
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

/// A token typed by the user on its way to the keyring: deserialise-only, redacted in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText(pub Sensitive<String>);

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<'de> Deserialize<'de> for SecretText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| Self(Sensitive::new(s)))
    }
}

/// Whether this process runs the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EngineState {
    /// This app polls, delivers and notifies.
    Running {
        /// Unfinished tasks resumed at launch.
        resumed: u32,
    },
    /// Another process (e.g. `countersign watch`) holds `engine.lock`: this app shows the ledger
    /// and records actions, which that engine delivers; it does not poll or notify.
    Elsewhere {
        /// That process, if known.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        pid: Option<u32>,
    },
}

/// `app_info` response.
#[derive(Debug, Clone, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AppInfo {
    /// Crate version.
    pub version: String,
    /// The ledger's directory.
    pub data_dir: String,
    /// The OS user recorded in the audit log.
    pub user: String,
    /// Whether this process runs the engine.
    pub engine: EngineState,
    /// URL of the built-in demo server when started with `--demo`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub demo_url: Option<String>,
    /// Shell state at the time of the call.
    pub shell: ShellState,
}

/// State owned by the shell itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ShellState {
    /// Questions waiting for the user.
    pub pending: u32,
    /// Do-not-disturb: no desktop notifications while on.
    pub dnd: bool,
    /// Whether the notification daemon supports action buttons.
    pub notification_actions: bool,
}

/// `notify_dnd_set` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct DndRequest {
    /// New do-not-disturb state.
    pub enabled: bool,
}

/// `view_set` request: what the window shows, so no notification interrupts the user about a
/// question they are already looking at.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ViewRequest {
    /// The task whose detail is open.
    #[serde(default)]
    #[ts(optional)]
    pub task_row: Option<i64>,
    /// The question open in the inbox (with `task_row`).
    #[serde(default)]
    #[ts(optional)]
    pub key: Option<String>,
}

/// One pending question, with what the inbox shows next to it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputRequestView {
    /// The task's ledger row: with `key`, the question's identity.
    pub task_row: i64,
    /// The server's key, unique within the task.
    pub key: String,
    /// The server's task id.
    pub task_id: String,
    /// Server name (as registered).
    pub server_name: String,
    /// The tool whose call started the task (absent for adopted tasks).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub tool_name: Option<String>,
    /// When the question first reached us.
    pub requested_at_ms: i64,
    /// When the task's TTL runs out (absent = unlimited).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub expires_at_ms: Option<i64>,
    /// What is asked.
    pub request: InputKind,
}

/// What an input request asks for.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum InputKind {
    /// `elicitation/create` in form mode: render `requestedSchema` as a form.
    #[serde(rename_all = "camelCase")]
    Form {
        /// The question (server-provided: text only).
        message: String,
        /// The flat JSON schema, verbatim; the UI validates it defensively.
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
    /// A request the console does not answer (sampling, roots, unknown modes): can be declined.
    Unsupported {
        /// The JSON-RPC method name.
        method: String,
    },
}

/// The user's answer to a question (the elicitation response, sent verbatim).
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

/// `input_answer` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputAnswerRequest {
    /// The task's row.
    pub task_row: i64,
    /// The question's key.
    pub key: String,
    /// The answer.
    pub response: InputResponse,
}

/// `input_focus_requested` payload: the user clicked a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputFocusRequested {
    /// The task's row.
    pub task_row: i64,
    /// The question to show.
    pub key: String,
}

/// A task's status: the Tasks extension's five, and two only the client concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for input (see the inbox).
    InputRequired,
    /// Terminal: has a result (which may be `isError`).
    Completed,
    /// Terminal: has a JSON-RPC error.
    Failed,
    /// Terminal.
    Cancelled,
    /// Outlived its TTL before finishing: polling stopped.
    Expired,
    /// The server no longer knows it.
    Lost,
}

/// One row of the task list.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    /// Ledger row id: the task's identity in the UI (servers may reuse task ids).
    pub row: i64,
    /// Server-assigned task id.
    pub task_id: String,
    /// Server name.
    pub server_name: String,
    /// The tool that started the task (absent when adopted by id).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub tool_name: Option<String>,
    /// `call` or `adopted`.
    pub origin: String,
    /// Current status.
    pub status: TaskStatus,
    /// Latest status message (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub status_message: Option<String>,
    /// When we first recorded it.
    pub created_at_ms: i64,
    /// When it last changed.
    pub updated_at_ms: i64,
    /// When it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub finished_at_ms: Option<i64>,
    /// Time to live; absent = unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub ttl_ms: Option<u64>,
    /// Questions of this task waiting in the inbox.
    pub pending_inputs: u32,
    /// Polling is failing with this message (the engine retries with backoff).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub poll_error: Option<String>,
}

/// `task_list` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskListRequest {
    /// At most this many, newest first (absent = all).
    #[serde(default)]
    #[ts(optional)]
    pub limit: Option<u32>,
}

/// `task_get`/`task_cancel` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskRef {
    /// Ledger row id.
    pub row: i64,
}

/// `task_adopt` request: start tracking a task created elsewhere.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskAdoptRequest {
    /// Server row id.
    pub server_id: i64,
    /// The server's task id.
    pub task_id: String,
}

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum InputState {
    /// Waiting for a person.
    Pending,
    /// Answered; not yet acknowledged by the server.
    Answered,
    /// The server acknowledged the answer.
    Delivered,
    /// The server dropped it before anyone answered.
    Superseded,
}

/// One question of a task, with its answer.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputView {
    /// The key.
    pub key: String,
    /// Where it stands.
    pub state: InputState,
    /// When it appeared.
    pub requested_at_ms: i64,
    /// What was asked.
    pub request: InputKind,
    /// The exact response recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "unknown")]
    pub answer: Option<Value>,
    /// When it was answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub answered_at_ms: Option<i64>,
    /// Who answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub answered_by: Option<String>,
    /// When the server acknowledged the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub delivered_at_ms: Option<i64>,
}

/// `task_get` response: the row plus everything the ledger knows about it.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskDetail {
    /// The row.
    pub task: TaskView,
    /// The server's URL.
    pub server_url: String,
    /// The call's arguments, when we made the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "Record<string, unknown>")]
    pub arguments: Option<Value>,
    /// The `CallToolResult` of a completed task, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "unknown")]
    pub result: Option<Value>,
    /// The JSON-RPC error of a failed task, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "unknown")]
    pub error: Option<Value>,
    /// Its questions, in order of appearance.
    pub inputs: Vec<InputView>,
    /// Its timeline from the ledger, oldest first.
    pub events: Vec<EventView>,
}

/// How a fact reached us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum EventVia {
    /// A `tasks/get` poll.
    Poll,
    /// A push notification.
    Push,
    /// The answer to `tools/call`.
    Call,
    /// A person (this app or the CLI).
    User,
    /// The engine itself.
    Engine,
}

/// One ledger event (the timeline and the change feed).
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// The global cursor.
    pub id: i64,
    /// When.
    pub at_ms: i64,
    /// The task row, if the event is about a task.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub task_row: Option<i64>,
    /// The server's task id.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub task_id: Option<String>,
    /// The server row.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub server_id: Option<i64>,
    /// The server name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub server_name: Option<String>,
    /// How it reached us.
    pub via: EventVia,
    /// What happened.
    pub fact: Fact,
}

/// What happened: the ledger's event kinds (`countersign_core::ledger::EventKind`), mirrored
/// field for field in the IPC's camelCase with typed statuses. The conversion in `views.rs`
/// matches exhaustively, so a new core event cannot be forgotten here.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fact {
    /// A server was registered.
    ServerAdded {
        /// Its name.
        name: String,
        /// Its URL.
        url: String,
    },
    /// A server was removed (its tasks with it).
    ServerRemoved {
        /// Its name.
        name: String,
    },
    /// A `tools/call` is about to be sent.
    CallStarted {
        /// The intent id.
        intent: i64,
        /// The tool.
        tool: String,
    },
    /// A call's outcome never reached us (the process died while it was in flight).
    CallOutcomeUnknown {
        /// The intent id.
        intent: i64,
        /// The tool.
        tool: String,
    },
    /// A call finished without creating a task.
    CallFinished {
        /// The intent id.
        intent: i64,
        /// The tool.
        tool: String,
        /// `completed`, `tool_error`, `input_required` or `failed`.
        outcome: String,
    },
    /// A task joined the ledger.
    #[serde(rename_all = "camelCase")]
    TaskCreated {
        /// The server's task id.
        task_id: String,
        /// Its first status.
        status: TaskStatus,
        /// The tool, when we made the call.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        tool: Option<String>,
        /// `call` or `adopted`.
        origin: String,
    },
    /// Status and/or status message changed.
    #[serde(rename_all = "camelCase")]
    TaskUpdated {
        /// The new status.
        status: TaskStatus,
        /// The status before.
        previous_status: TaskStatus,
        /// The new message (server-provided: text only).
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        status_message: Option<String>,
    },
    /// A question appeared (once per key, ever).
    InputRequested {
        /// The key.
        key: String,
        /// What is asked.
        request: InputKind,
    },
    /// A person answered (recorded before it is sent).
    InputAnswered {
        /// The key.
        key: String,
        /// accept, decline or cancel.
        action: String,
        /// The exact response sent.
        #[ts(type = "unknown")]
        response: Value,
        /// Who answered.
        by: String,
    },
    /// A question vanished from the server's list without an answer.
    InputSuperseded {
        /// The key.
        key: String,
    },
    /// `tasks/update` was acknowledged.
    UpdateAcknowledged {
        /// Keys delivered.
        keys: Vec<String>,
    },
    /// `tasks/update` was refused for good.
    UpdateFailed {
        /// Keys not delivered.
        keys: Vec<String>,
        /// Why.
        message: String,
    },
    /// A person asked to cancel.
    CancelRequested {
        /// Who.
        by: String,
    },
    /// `tasks/cancel` was acknowledged (the task may still complete).
    CancelAcknowledged,
    /// `tasks/cancel` was refused for good.
    CancelFailed {
        /// Why.
        message: String,
    },
    /// Delivering an answer or a cancel failed for a passing reason; it is being retried.
    #[serde(rename_all = "camelCase")]
    DeliveryRetrying {
        /// `update` or `cancel`.
        delivery: String,
        /// A stable error code.
        code: String,
        /// The message.
        message: String,
        /// When the next attempt is due.
        retry_in_ms: u64,
    },
    /// A poll failed; polling backs off.
    #[serde(rename_all = "camelCase")]
    PollFailed {
        /// A stable error code (`connect`, `http`, …).
        code: String,
        /// The message.
        message: String,
        /// When the next attempt is due.
        retry_in_ms: u64,
    },
    /// Polling works again after failures.
    PollRecovered {
        /// How many polls failed in a row.
        failures: u32,
    },
    /// The task reached a terminal state.
    TaskFinished {
        /// completed, failed or cancelled.
        status: TaskStatus,
        /// The tool result, when completed.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional, type = "unknown")]
        result: Option<Value>,
        /// The JSON-RPC error, when failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[ts(optional, type = "unknown")]
        error: Option<Value>,
    },
    /// The task outlived its TTL.
    #[serde(rename_all = "camelCase")]
    TaskExpired {
        /// The TTL it had.
        ttl_ms: u64,
    },
    /// The server no longer knows the task.
    TaskLost {
        /// The server's message.
        message: String,
    },
    /// A server's URL, token flag or poll floor changed.
    ServerUpdated {
        /// Its name.
        name: String,
        /// Its URL now.
        url: String,
    },
    /// A server described itself again.
    #[serde(rename_all = "camelCase")]
    ServerDiscovered {
        /// Its name.
        name: String,
        /// Whether it declares the Tasks extension.
        supports_tasks: bool,
    },
    /// The server sent something we did not take as sent (ignored or clamped).
    ServerDataIgnored {
        /// What kind of thing.
        code: String,
        /// What was sent and what we did.
        message: String,
    },
    /// A server stopped answering.
    ServerUnreachable {
        /// Why.
        message: String,
    },
    /// A server answers again.
    ServerRecovered,
    /// The engine started and resumed unfinished tasks.
    EngineStarted {
        /// How many.
        resumed: u32,
    },
}

/// Reachability of a server as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum Reachability {
    /// Not contacted yet.
    Unknown,
    /// The last discovery or poll succeeded.
    Reachable,
    /// The engine could not reach it (see `message`).
    Unreachable,
}

/// A server's reachability, with when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerHealth {
    /// The verdict.
    pub state: Reachability,
    /// When it was reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub at_ms: Option<i64>,
    /// Why not, when unreachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub message: Option<String>,
}

/// One registered server.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerView {
    /// Row id.
    pub id: i64,
    /// Unique display name.
    pub name: String,
    /// Endpoint URL exactly as configured.
    pub url: String,
    /// Whether a bearer token is stored in the OS keyring (never the token itself).
    pub has_token: bool,
    /// The user's minimum poll interval for this server (0 = the server's own pace).
    pub poll_floor_ms: u64,
    /// When it was added.
    pub created_at_ms: i64,
    /// When `server/discover` last succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub discovered_at_ms: Option<i64>,
    /// "name version" from the server's identity (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub identity: Option<String>,
    /// `serverInfo`, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "unknown")]
    pub server_info: Option<Value>,
    /// Capabilities from `server/discover`, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "unknown")]
    pub capabilities: Option<Value>,
    /// Whether it declares the Tasks extension.
    pub supports_tasks: bool,
    /// Reachability.
    pub health: ServerHealth,
}

/// `server_add` request (deserialise-only: it may carry a token).
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerAddRequest {
    /// Unique display name.
    pub name: String,
    /// MCP endpoint (http or https).
    pub url: String,
    /// Bearer token, stored only in the OS keyring.
    #[serde(default)]
    #[ts(optional, type = "string")]
    pub token: Option<SecretText>,
    /// Ask `server/discover` first and refuse an unreachable server.
    pub discover: bool,
}

/// What to do with a server's token.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum TokenChange {
    /// Leave it as it is.
    Keep,
    /// Store (or replace) this one.
    Set {
        /// The new token.
        #[ts(type = "string")]
        token: SecretText,
    },
    /// Delete it from the keyring.
    Clear,
}

/// `server_update` request (deserialise-only: it may carry a token).
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerUpdateRequest {
    /// Row id.
    pub id: i64,
    /// New endpoint URL.
    pub url: String,
    /// New per-server poll floor.
    pub poll_floor_ms: u64,
    /// Token change.
    pub token: TokenChange,
}

/// A request naming one server.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerRef {
    /// Row id.
    pub server_id: i64,
}

/// One tool offered by a server.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    /// Tool name.
    pub name: String,
    /// Human title (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub title: Option<String>,
    /// Description (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub description: Option<String>,
    /// JSON schema of the arguments, verbatim.
    #[ts(type = "unknown")]
    pub input_schema: Value,
    /// `execution.taskSupport`: required, optional or forbidden.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub task_support: Option<String>,
}

/// `tool_call` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRequest {
    /// Server row id.
    pub server_id: i64,
    /// Tool name.
    pub name: String,
    /// Arguments object.
    #[ts(type = "Record<string, unknown>")]
    pub arguments: serde_json::Map<String, Value>,
}

/// One question of an MRTR `input_required` answer to `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CallQuestion {
    /// The server's key.
    pub key: String,
    /// What is asked.
    pub request: InputKind,
}

/// `tool_call`/`tool_call_answer` response: what the server decided.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolCallOutcome {
    /// A plain `CallToolResult`, verbatim.
    Complete {
        /// The result.
        #[ts(type = "unknown")]
        result: Value,
    },
    /// The server created a task (already in the ledger; the engine follows it).
    Task {
        /// The task row.
        task: TaskView,
    },
    /// MRTR: the server asks first; answer with `tool_call_answer`, which re-sends the call.
    #[serde(rename_all = "camelCase")]
    InputRequired {
        /// Names this call for `tool_call_answer`.
        call_id: u64,
        /// The questions.
        questions: Vec<CallQuestion>,
    },
}

/// One answer to an MRTR question.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CallAnswer {
    /// The question's key.
    pub key: String,
    /// The answer.
    pub response: InputResponse,
}

/// `tool_call_answer` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallAnswerRequest {
    /// From [`ToolCallOutcome::InputRequired`].
    pub call_id: u64,
    /// One answer per question.
    pub answers: Vec<CallAnswer>,
}

/// One human decision from the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Row id.
    pub id: i64,
    /// When.
    pub at_ms: i64,
    /// The OS user.
    pub actor: String,
    /// `answer_accept`, `answer_decline`, `cancel`, `call`, `adopt`, `server_add`, …
    pub action: String,
    /// Server name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub server: Option<String>,
    /// The server's task id.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub task_id: Option<String>,
    /// The question's key.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub input_key: Option<String>,
    /// The question's message, for answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub question: Option<String>,
    /// The exact response sent, for answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "unknown")]
    pub answer: Option<Value>,
    /// How long the question waited for the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub waited_ms: Option<i64>,
    /// Everything recorded, verbatim.
    #[ts(type = "unknown")]
    pub detail: Value,
}

/// Export formats of the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum AuditFormat {
    /// An array of records.
    Json,
    /// RFC 4180, with a header row.
    Csv,
}

/// `audit_export` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditExportRequest {
    /// The format.
    pub format: AuditFormat,
}

/// `audit_export` response.
#[derive(Debug, Clone, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditExport {
    /// The file written (in the Downloads folder, else the data directory).
    pub path: String,
    /// How many records it holds.
    pub records: u32,
}

/// `url_open` request: open an http(s) URL in the default browser (URL-mode elicitation, after
/// the user saw the host and consented).
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct UrlOpenRequest {
    /// Absolute `http:` or `https:` URL.
    pub url: String,
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

    #[test]
    fn facts_are_tagged_by_kind_with_camel_case_fields() {
        let f = Fact::TaskUpdated {
            status: TaskStatus::InputRequired,
            previous_status: TaskStatus::Working,
            status_message: Some("waiting".into()),
        };
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"kind":"task_updated","status":"input_required","previousStatus":"working","statusMessage":"waiting"})
        );
        assert_eq!(
            serde_json::to_value(Fact::CancelAcknowledged).unwrap(),
            json!({"kind":"cancel_acknowledged"})
        );
    }

    #[test]
    fn tokens_deserialise_but_never_print() {
        let req: ServerAddRequest = serde_json::from_value(
            json!({"name":"s","url":"http://127.0.0.1:1/mcp","token":"hunter2","discover":false}),
        )
        .unwrap();
        assert_eq!(
            req.token.as_ref().map(|t| t.0.expose().as_str()),
            Some("hunter2")
        );
        assert!(
            !format!("{req:?}").contains("hunter2"),
            "a token must not reach logs through Debug"
        );
        let upd: ServerUpdateRequest = serde_json::from_value(
            json!({"id":1,"url":"http://h/mcp","pollFloorMs":0,"token":{"change":"set","token":"hunter2"}}),
        )
        .unwrap();
        assert!(!format!("{upd:?}").contains("hunter2"));
    }

    fn export_bindings(dir: &Path) {
        let cfg = ts_rs::Config::new()
            .with_out_dir(dir)
            .with_large_int("number");
        export_types(&cfg).unwrap_or_else(|e| panic!("export bindings: {e}"));
        std::fs::write(dir.join("Contract.ts"), contract_ts(&cfg)).expect("write Contract.ts");
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
            std::fs::create_dir_all(&committed).unwrap();
            export_bindings(&committed);
            return;
        }
        let fresh =
            std::env::temp_dir().join(format!("countersign-bindings-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&fresh);
        std::fs::create_dir_all(&fresh).unwrap();
        export_bindings(&fresh);
        let (want, have) = (files(&fresh), files(&committed));
        let _ = std::fs::remove_dir_all(&fresh);
        let names = |v: &[(PathBuf, Vec<u8>)]| v.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&have),
            names(&want),
            "ui/src/bindings is stale: run `cargo xtask bless`"
        );
        for ((name, w), (_, h)) in want.iter().zip(&have) {
            assert!(
                w == h,
                "ui/src/bindings/{} is stale: run `cargo xtask bless`",
                name.display()
            );
        }
    }
}
