//! What the console shows and takes: the view types every face shares (the app's IPC, the
//! CLI's `--json`), and the one error shape that crosses to a window. Pure data: built from
//! ledger records by [`super::present`]. With the `ts` feature, ts-rs derives their TypeScript
//! (the desktop shell exports them to `ui/src/bindings/`). Times are Unix milliseconds. No view
//! ever carries a secret: the only token-carrying types ([`ServerAddRequest`],
//! [`ServerUpdateRequest`]) are requests, deserialise-only, and redact themselves in `Debug`.

pub use crate::decision::Decision;
pub use crate::diagnosis::Diagnosis;
pub use crate::ledger::audit::AuditAction;
use crate::ledger::events::EventKind;
pub use crate::ledger::events::TaskOrigin;
use crate::ledger::tasks::LedgerStatus;
pub use crate::secrets::SignInInfo;
use crate::sensitive::Sensitive;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Codes a window branches on; everything else is in `message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
    /// The server needs a person to sign in (OAuth), or the sign-in failed.
    SignIn,
    /// The person stopped it (a server check they cancelled while it waited).
    Cancelled,
    /// A bug on our side.
    Internal,
}

/// The only error shape that crosses IPC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[error("{code:?}: {message}")]
pub struct CommandError {
    /// What the UI branches on.
    pub code: ErrorCode,
    /// Human-readable, already safe to show as text.
    pub message: String,
    /// For failures talking to a server: what is wrong and what to do, in plain words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub diagnosis: Option<Diagnosis>,
    /// For a setting that cannot be used: its key (`dnd.from`, `poll_floor_ms`, …), so a form
    /// shows the message at that field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub field: Option<crate::settings::SettingKey>,
}

impl CommandError {
    /// Shorthand constructor.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            diagnosis: None,
            field: None,
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
        #[cfg_attr(feature = "ts", ts(optional))]
        pid: Option<u32>,
    },
}

/// One pending question, with what the inbox shows next to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
    #[cfg_attr(feature = "ts", ts(optional))]
    pub tool_name: Option<String>,
    /// When the question first reached us.
    pub requested_at_ms: i64,
    /// When the task's TTL runs out (absent = unlimited).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub expires_at_ms: Option<i64>,
    /// What is asked.
    pub request: InputKind,
}

/// What an input request asks for.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum InputKind {
    /// `elicitation/create` in form mode: render `requestedSchema` as a form.
    #[serde(rename_all = "camelCase")]
    Form {
        /// The question (server-provided: text only).
        message: String,
        /// The flat JSON schema, verbatim; the UI validates it defensively.
        #[cfg_attr(feature = "ts", ts(type = "unknown"))]
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
        #[cfg_attr(feature = "ts", ts(optional))]
        elicitation_id: Option<String>,
    },
    /// A request the console does not answer (sampling, roots, unknown modes): can be declined.
    Unsupported {
        /// The JSON-RPC method name.
        method: String,
    },
}

/// The user's answer to a question (the elicitation response, sent verbatim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum InputResponse {
    /// Accepted; `content` is absent for URL mode (accept = "consented").
    Accept {
        /// Form values keyed by property name.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "ts", ts(optional, type = "Record<string, unknown>"))]
        content: Option<serde_json::Map<String, Value>>,
    },
    /// Explicitly refused.
    Decline,
    /// Dismissed without a decision.
    Cancel,
}

/// One row of the task list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
    #[cfg_attr(feature = "ts", ts(optional))]
    pub tool_name: Option<String>,
    /// How it joined the ledger: a call made here, or adopted by id.
    pub origin: TaskOrigin,
    /// Current status: the Tasks extension's five, and two only the client concludes.
    pub status: LedgerStatus,
    /// Latest status message (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub status_message: Option<String>,
    /// When we first recorded it.
    pub created_at_ms: i64,
    /// When it last changed.
    pub updated_at_ms: i64,
    /// When it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub finished_at_ms: Option<i64>,
    /// Time to live; absent = unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub ttl_ms: Option<u64>,
    /// Questions of this task waiting in the inbox.
    pub pending_inputs: u32,
    /// Polling is failing with this message (the engine retries with backoff).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub poll_error: Option<String>,
    /// The person's last decision on this task's questions ("Completed · denied by you").
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub last_decision: Option<Decision>,
    /// A person asked for this task to be cancelled.
    pub cancelled_by_you: bool,
    /// Completed, but the tool reported an error (`isError: true` in its result).
    pub result_is_error: bool,
    /// How it ended beyond its status, in the person's terms ([`super::present::outcome`]):
    /// "denied by you", "tool reported an error", "by you" (a cancel they asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub outcome: Option<String>,
}

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
    #[cfg_attr(feature = "ts", ts(optional, type = "unknown"))]
    pub answer: Option<Value>,
    /// When it was answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub answered_at_ms: Option<i64>,
    /// Who answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub answered_by: Option<String>,
    /// When the server acknowledged the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub delivered_at_ms: Option<i64>,
}

/// `task_get` response: the row plus everything the ledger knows about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct TaskDetail {
    /// The row.
    pub task: TaskView,
    /// The server's URL.
    pub server_url: String,
    /// The call's arguments, when we made the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional, type = "Record<string, unknown>"))]
    pub arguments: Option<Value>,
    /// The `CallToolResult` of a completed task, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional, type = "unknown"))]
    pub result: Option<Value>,
    /// The JSON-RPC error of a failed task, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional, type = "unknown"))]
    pub error: Option<Value>,
    /// Its questions, in order of appearance.
    pub inputs: Vec<InputView>,
    /// Its timeline from the ledger, oldest first.
    pub events: Vec<EventView>,
}

/// How a fact reached us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// The global cursor.
    pub id: i64,
    /// When.
    pub at_ms: i64,
    /// The task row, if the event is about a task.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub task_row: Option<i64>,
    /// The server's task id.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub task_id: Option<String>,
    /// The server row.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub server_id: Option<i64>,
    /// The server name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub server_name: Option<String>,
    /// How it reached us.
    pub via: EventVia,
    /// What happened: the ledger's own event, exactly as stored (its TypeScript is generated
    /// from `EventKind`, so the window's mirror cannot drift).
    pub fact: EventKind,
}

/// Reachability of a server as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Reachability {
    /// Not contacted yet.
    Unknown,
    /// The last discovery or poll succeeded.
    Reachable,
    /// The engine could not reach it (see `message`).
    Unreachable,
    /// It refuses its token and the token cannot be refreshed (or the person signed out): a
    /// person must sign in again; its tasks wait, unpolled, with their state (see `message`).
    SignInNeeded,
}

/// A server's reachability, with when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ServerHealth {
    /// The verdict.
    pub state: Reachability,
    /// When it was reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub at_ms: Option<i64>,
    /// Why not, when unreachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub message: Option<String>,
}

/// The tasks a server lists for adoption (`tasks/list`, 2025-11-25 servers).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AdoptableTasks {
    /// The tasks, as the server listed them.
    pub tasks: Vec<AdoptableTask>,
    /// What the list can and cannot show, for the person reading it.
    pub note: String,
}

/// One task a server listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AdoptableTask {
    /// The server's task id.
    pub task_id: String,
    /// Its status as listed.
    pub status: String,
    /// Its status message (untrusted text).
    pub status_message: Option<String>,
    /// When the server created it.
    pub created_at: String,
    /// The ledger row when it is tracked already.
    pub tracked: Option<i64>,
}

/// One registered server.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
    #[cfg_attr(feature = "ts", ts(optional))]
    pub discovered_at_ms: Option<i64>,
    /// "name version" from the server's identity (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub identity: Option<String>,
    /// `serverInfo`, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional, type = "unknown"))]
    pub server_info: Option<Value>,
    /// Capabilities from `server/discover`, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional, type = "unknown"))]
    pub capabilities: Option<Value>,
    /// Whether it declares the Tasks extension.
    pub supports_tasks: bool,
    /// The generation of MCP it speaks, once checked: `modern` (2026-07-28) or `legacy`
    /// (2025-11-25 and earlier, with a session).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional, type = "\"modern\" | \"legacy\""))]
    pub era: Option<crate::mcp::Era>,
    /// The protocol version in use with it, once checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub protocol_version: Option<String>,
    /// Reachability.
    pub health: ServerHealth,
    /// Whether an OAuth sign-in is current (signed in, not signed out or refused since).
    pub signed_in: bool,
    /// Who is signed in and until when, while signed in (this process's copy of the keyring's
    /// non-secret parts); nothing of a token is here.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub sign_in: Option<SignInInfo>,
    /// A stdio server's command and, where this process runs its engine, its process.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub stdio: Option<StdioView>,
}

/// A stdio server as its page shows it: what runs, never a secret value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct StdioView {
    /// The command line (program and arguments, quoted as a shell would need).
    pub command: String,
    /// The working directory, when one is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub cwd: Option<String>,
    /// Names of the plain environment variables given.
    pub env: Vec<String>,
    /// Names of the variables whose values are in the OS keyring.
    pub secret_env: Vec<String>,
    /// The process, when the engine that runs it is in this process.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub process: Option<StdioProcessView>,
}

/// The engine's process of a stdio server, now. Read back too: the resident, which runs the
/// engine, sends it to the window over its control socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct StdioProcessView {
    /// Its pid, while one runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub pid: Option<u32>,
    /// Processes started by this engine.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub starts: u64,
    /// Exits (and failed starts) in the last ten minutes.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub recent_exits: usize,
    /// How the last one ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub last_exit: Option<String>,
    /// It keeps exiting: shown, not hidden.
    pub crash_loop: bool,
    /// The end of its stderr (bounded), with Countersign's notes.
    pub log: Vec<String>,
}

/// A stdio server to register: `countersign servers add NAME -- COMMAND [ARGS…]`, or the app's
/// Add server form with "Command".
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct StdioAddRequest {
    /// Unique display name.
    pub name: String,
    /// The program.
    pub program: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Plain variables, `KEY` → value.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Secret variables: kept in the OS keyring only.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(type = "Array<[string, string]>"))]
    pub secret_env: Vec<(String, SecretText)>,
    /// The working directory.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub cwd: Option<String>,
    /// Start it and ask what it is first, refusing one that does not answer.
    pub discover: bool,
}

/// `server_add` request (deserialise-only: it may carry a token).
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ServerAddRequest {
    /// Unique display name.
    pub name: String,
    /// MCP endpoint (http or https).
    pub url: String,
    /// Bearer token, stored only in the OS keyring.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional, type = "string"))]
    pub token: Option<SecretText>,
    /// Ask `server/discover` first and refuse an unreachable server.
    pub discover: bool,
}

/// What to do with a server's token.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum TokenChange {
    /// Leave it as it is.
    Keep,
    /// Store (or replace) this one.
    Set {
        /// The new token.
        #[cfg_attr(feature = "ts", ts(type = "string"))]
        token: SecretText,
    },
    /// Delete it from the keyring.
    Clear,
}

/// `server_update` request (deserialise-only: it may carry a token).
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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

/// One tool offered by a server.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    /// Tool name.
    pub name: String,
    /// Human title (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub title: Option<String>,
    /// Description (server-provided: text only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub description: Option<String>,
    /// JSON schema of the arguments, verbatim.
    #[cfg_attr(feature = "ts", ts(type = "unknown"))]
    pub input_schema: Value,
    /// `execution.taskSupport`: required, optional or forbidden.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub task_support: Option<String>,
}

/// One question of an MRTR `input_required` answer to `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CallQuestion {
    /// The server's key.
    pub key: String,
    /// What is asked.
    pub request: InputKind,
}

/// `tool_call`/`tool_call_answer` response: what the server decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolCallOutcome {
    /// A plain `CallToolResult`, verbatim.
    Complete {
        /// The result.
        #[cfg_attr(feature = "ts", ts(type = "unknown"))]
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
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CallAnswer {
    /// The question's key.
    pub key: String,
    /// The answer.
    pub response: InputResponse,
}

/// One human decision from the audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Row id.
    pub id: i64,
    /// When.
    pub at_ms: i64,
    /// The OS user.
    pub actor: String,
    /// What the person did.
    pub action: AuditAction,
    /// Server name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub server: Option<String>,
    /// The server's task id.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub task_id: Option<String>,
    /// The question's key.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub input_key: Option<String>,
    /// The question's message, for answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub question: Option<String>,
    /// The exact response sent, for answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional, type = "unknown"))]
    pub answer: Option<Value>,
    /// How long the question waited for the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub waited_ms: Option<i64>,
    /// What the person decided, for answers ("approved", "denied", "declined", …); "cancelled the
    /// task" is `action == "cancel"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub decision: Option<Decision>,
    /// Everything recorded, verbatim.
    #[cfg_attr(feature = "ts", ts(type = "unknown"))]
    pub detail: Value,
}

/// Export formats of the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum AuditFormat {
    /// An array of records.
    Json,
    /// RFC 4180, with a header row.
    Csv,
}

/// `audit_export` response.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AuditExport {
    /// The file written (in the Downloads folder, else the data directory).
    pub path: String,
    /// How many records it holds.
    pub records: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}

// ---- the gateway ---------------------------------------------------------------------------

pub use crate::ledger::gated::{GatedMode, GatedState, ToolInfo};
pub use crate::ledger::rules::RuleAction;

/// An agent that may connect to the gateway (never its token: that is shown once, at creation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AgentView {
    /// Row id.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub id: i64,
    /// Its name.
    pub name: String,
    /// When it was added.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub created_at: i64,
    /// When its token was revoked (`agents remove`), if it was.
    #[cfg_attr(feature = "ts", ts(type = "number | null"))]
    pub revoked_at: Option<i64>,
}

/// One gateway rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RuleView {
    /// Row id (what `policy remove` takes).
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub id: i64,
    /// The agent it is for; `None`: every agent.
    pub agent: Option<String>,
    /// The server's name.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// What it does.
    pub action: RuleAction,
    /// Argument fields that must equal these values; `None`: any arguments.
    #[cfg_attr(feature = "ts", ts(type = "Record<string, unknown> | null"))]
    pub condition: Option<Value>,
    /// When it was set.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub created_at: i64,
}

/// A rule to set (`policy set SERVER TOOL ACTION [--agent NAME] [--when JSON]`, or "Always
/// allow" on an approval card).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RuleSetRequest {
    /// The server's name.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// What it does.
    pub action: RuleAction,
    /// Only for this agent (by name); `None`: every agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only when these argument fields have these values (a JSON object).
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(type = "Record<string, unknown> | null"))]
    pub condition: Option<Value>,
}

/// An agent's tool call that the gateway held for a person (or denied), for the inbox, the
/// Agents view and `countersign inbox`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct GatedCallView {
    /// Always `"tool_call"`: tells these apart from server questions in `inbox --json`.
    #[cfg_attr(feature = "ts", ts(type = "\"tool_call\""))]
    pub kind: &'static str,
    /// Countersign's task id for the call: what `countersign answer` takes.
    pub task_id: String,
    /// The agent.
    pub agent: String,
    /// The server's name.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The arguments exactly as the agent sent them (untrusted: show as text).
    #[cfg_attr(feature = "ts", ts(type = "Record<string, unknown>"))]
    pub arguments: Value,
    /// Where it stands.
    pub state: GatedState,
    /// How the agent waits: holding a task, or held and told to repeat the call.
    pub mode: GatedMode,
    /// Why it was declined or denied.
    pub reason: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// When it was recorded.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub created_at: i64,
    /// When it expires if nobody decides.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub expires_at: i64,
    /// When it was decided.
    #[cfg_attr(feature = "ts", ts(type = "number | null"))]
    pub decided_at: Option<i64>,
    /// The ledger row of the upstream task carrying the outcome, when there is one.
    #[cfg_attr(feature = "ts", ts(type = "number | null"))]
    pub upstream_task: Option<i64>,
    /// What the upstream's `tools/list` said about the tool when the call was recorded
    /// (title, description, annotations: the server's claims, shown as text).
    pub tool_info: Option<ToolInfo>,
}

/// An approved agent call whose upstream asks questions before running it (MRTR): the call,
/// and the round's questions, which the person answers in the inbox
/// ([`Console::answer_gated`](crate::console::Console::answer_gated)); the gateway then sends the
/// call again with the answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct GatedQuestionsView {
    /// The call (approved: its state is `running`, nothing ran upstream yet).
    pub call: GatedCallView,
    /// The upstream's questions, by key, as the window's forms read them.
    pub questions: Vec<CallQuestion>,
    /// `tools/call` requests sent for this call so far, the first included: a later round of
    /// questions on the same call is a new entry for the inbox and the notifier.
    pub round: u32,
}

/// One gated call from request to outcome: the call, and its timeline from the ledger (its own
/// `gated_call_changed` events: requested, decided, sent upstream, answered; then the upstream
/// task's events, when the upstream answered with a task), oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct GatedTimeline {
    /// The call as it stands.
    pub call: GatedCallView,
    /// Its result as the agent gets it, once known (a complete result; an upstream task's
    /// result is on the task).
    #[cfg_attr(feature = "ts", ts(type = "Record<string, unknown> | null"))]
    pub result: Option<Value>,
    /// The events.
    pub events: Vec<EventView>,
}

/// A person's decision on a gated call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct GatedDecision {
    /// Approve (the call runs once) or decline (it never runs).
    pub approve: bool,
    /// Why (shown to the agent on a decline).
    #[serde(default)]
    pub reason: Option<String>,
    /// Also create a rule allowing this tool for this agent from now on.
    #[serde(default)]
    pub always_allow: bool,
}

/// What signing in to a server will do, shown before the browser opens
/// ([`crate::console::Console::sign_in_plan`]): where the person will sign in, for which
/// scopes, as which client. Nothing secret.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SignInPlan {
    /// The server row.
    pub server_id: i64,
    /// The server's name.
    pub server: String,
    /// The host the browser will open (the authorization endpoint's): ASCII (punycode), with a
    /// port when not the default, never userinfo ([`crate::notice::link_host`]). Signing in
    /// with this plan refuses to open any other host.
    pub host: String,
    /// The authorization server's own host (its issuer), the same form; usually `host`.
    pub issuer_host: String,
    /// The scopes that will be asked for (may be empty: the server's default).
    pub scopes: Vec<String>,
    /// How Countersign will identify itself there.
    pub registration: SignInRegistration,
}

/// How a sign-in identifies Countersign to the authorization server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SignInRegistration {
    /// The client id the person gave.
    PreRegistered,
    /// The client of the earlier sign-in (kept through a sign-out).
    Kept,
    /// Countersign's client ID metadata document.
    MetadataDocument,
    /// A new dynamic registration.
    Dynamic,
}
