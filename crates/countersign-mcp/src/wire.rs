//! The JSON shapes of MCP 2026-07-28 and the Tasks extension that the console reads and writes.
//!
//! Parsing is strict where the spec is (a `completed` task always carries a result, so the type
//! cannot represent one that does not) and lenient where real peers differ from each other (a
//! missing `resultType` means `complete`; unknown fields are kept in `meta`/`raw` and ignored).
//! Server-provided values that the UI shows (results, schemas) are kept verbatim as JSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol revision this client speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";
/// The Tasks extension identifier.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// `_meta` key of the protocol version on every request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client capabilities on every request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client identity on every request.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the server identity on results.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Most questions one task (or one MRTR answer) may ask at once. A person answers a handful;
/// thousands are a flood, refused whole with a clear error rather than stored and notified.
pub const MAX_INPUT_REQUESTS: usize = 100;
/// Largest one question may be, as JSON (its message and form schema).
pub const MAX_INPUT_REQUEST_BYTES: usize = 64 * 1024;
/// Longest input-request key.
pub const MAX_INPUT_KEY_BYTES: usize = 1024;
/// Largest millisecond count kept from a server (`ttlMs`, `pollIntervalMs`): SQLite's largest
/// integer, so a stored number never changes sign.
pub const MAX_SERVER_MS: u64 = i64::MAX as u64;

/// A JSON-RPC error object, as a server sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// The server's message (untrusted text).
    #[serde(default)]
    pub message: String,
    /// Optional structured detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The status of a task, without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The server is working on it.
    Working,
    /// The server waits for answers to `inputRequests`.
    InputRequired,
    /// Finished with a tool result (which may have `isError: true`).
    Completed,
    /// Finished with a JSON-RPC error.
    Failed,
    /// Cancelled; carries no result.
    Cancelled,
}

impl TaskStatus {
    /// Terminal states never change again: polling stops for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request a server makes of the client inside `inputRequests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    /// `elicitation/create`, or a deprecated method the console does not serve.
    pub method: String,
    /// The request's params, verbatim.
    #[serde(default)]
    pub params: Value,
}

/// The `elicitation/create` request inside an [`InputRequest`], typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicitation {
    /// Ask the user to fill in a form described by a restricted JSON schema.
    Form {
        /// What the server asks (untrusted text).
        message: String,
        /// The flat object schema of the answer, verbatim.
        requested_schema: Value,
    },
    /// Ask the user to visit a URL (e.g. an OAuth consent page).
    Url {
        /// What the server asks (untrusted text).
        message: String,
        /// Where to send the user; only `http`/`https` are ever opened.
        url: String,
        /// The server's id for this elicitation, if it sent one.
        elicitation_id: Option<String>,
    },
}

impl InputRequest {
    /// The typed elicitation, or `None` for other methods or malformed params.
    pub fn elicitation(&self) -> Option<Elicitation> {
        if self.method != "elicitation/create" {
            return None;
        }
        let params = self.params.as_object()?;
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match params.get("mode").and_then(Value::as_str).unwrap_or("form") {
            "url" => Some(Elicitation::Url {
                message,
                url: params.get("url")?.as_str()?.to_owned(),
                elicitation_id: params
                    .get("elicitationId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            }),
            "form" => Some(Elicitation::Form {
                message,
                requested_schema: params
                    .get("requestedSchema")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
            }),
            _ => None,
        }
    }
}

/// The map of open input requests, keyed by the server's opaque, never-reused keys.
pub type InputRequests = BTreeMap<String, InputRequest>;

/// A user's answer to one elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ElicitationResponse {
    /// The user accepted; for forms, with the content they entered.
    Accept {
        /// The form content (absent for URL mode).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Map<String, Value>>,
    },
    /// The user declined.
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
}

/// A `CallToolResult`, kept verbatim so nothing the server sent is lost in display or storage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolResult(pub Map<String, Value>);

impl ToolResult {
    /// `isError: true` marks a tool-level failure (the call itself succeeded).
    pub fn is_error(&self) -> bool {
        self.0
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The content blocks, if any.
    pub fn content(&self) -> &[Value] {
        self.0
            .get("content")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The structured content, if any.
    pub fn structured_content(&self) -> Option<&Value> {
        self.0.get("structuredContent")
    }

    /// All text blocks joined with newlines: a plain rendering for terminals and notifications.
    pub fn text(&self) -> String {
        self.content()
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Parses a `CallToolResult` (the `resultType` marker is dropped).
    pub fn parse(value: &Value) -> Result<Self, String> {
        let map = value.as_object().ok_or("a tool result must be an object")?;
        if let Some(content) = map.get("content") {
            if !content.is_array() {
                return Err("tool result `content` must be an array".into());
            }
        }
        if let Some(flag) = map.get("isError") {
            if !flag.is_boolean() {
                return Err("tool result `isError` must be a boolean".into());
            }
        }
        let mut map = map.clone();
        map.remove("resultType");
        Ok(Self(map))
    }
}

/// The state of a task and the payload that comes with it: a completed task always has a result,
/// a failed one always an error, and only `input_required` carries questions.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskState {
    /// Still running.
    Working,
    /// Waiting for answers; the map may be empty in a `CreateTaskResult`, which carries no payload.
    InputRequired {
        /// The open questions.
        input_requests: InputRequests,
    },
    /// Finished with a result.
    Completed {
        /// The tool result (may be `isError`).
        result: ToolResult,
    },
    /// Finished with a JSON-RPC error.
    Failed {
        /// The error.
        error: RpcError,
    },
    /// Cancelled.
    Cancelled,
}

impl TaskState {
    /// The bare status.
    pub fn status(&self) -> TaskStatus {
        match self {
            Self::Working => TaskStatus::Working,
            Self::InputRequired { .. } => TaskStatus::InputRequired,
            Self::Completed { .. } => TaskStatus::Completed,
            Self::Failed { .. } => TaskStatus::Failed,
            Self::Cancelled => TaskStatus::Cancelled,
        }
    }
}

/// A task as the server last described it (`tasks/get`, or the handle from `tools/call`).
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The server's task id (opaque).
    pub task_id: String,
    /// Status and payload.
    pub state: TaskState,
    /// Human-readable progress (untrusted text).
    pub status_message: Option<String>,
    /// When the server created it (ISO 8601, as sent).
    pub created_at: Option<String>,
    /// When the server last changed it (fastmcp: the time of each poll).
    pub last_updated_at: Option<String>,
    /// Lifetime from `createdAt`; `None` = unlimited.
    pub ttl_ms: Option<u64>,
    /// How often the server wants to be polled, if it says.
    pub poll_interval_ms: Option<u64>,
    /// `_meta` of the result, verbatim.
    pub meta: Option<Map<String, Value>>,
    /// Whether this came from a full `tasks/get` (payload known) or a bare handle (no payload).
    pub detail: TaskDetail,
    /// The status the server reported when it differs from `state` — only for a handle that
    /// is already terminal but, being a handle, carries no result or error to build the state from.
    pub handle_status: Option<TaskStatus>,
    /// Advisory fields (`ttlMs`, `pollIntervalMs`) the server sent in an unusable form, and what
    /// was done with each (ignored or clamped). A bad hint never costs the task handle itself:
    /// `taskId` and `status` are what matter. Empty for a well-formed task.
    pub ignored: Vec<IgnoredField>,
}

/// An advisory field of a task that was not taken as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredField {
    /// The field (`ttlMs`, `pollIntervalMs`).
    pub field: &'static str,
    /// What was sent, shortened for display.
    pub sent: String,
    /// What we did: `ignored`, or `clamped to N`.
    pub outcome: String,
}

impl std::fmt::Display for IgnoredField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` {} was {}", self.field, self.sent, self.outcome)
    }
}

/// How much of the task the server included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskDetail {
    /// A `CreateTaskResult` (or a `tasks/get` in a state with no payload).
    Handle,
    /// A full `tasks/get` answer.
    Full,
}

impl Task {
    /// The bare status of the typed state.
    pub fn status(&self) -> TaskStatus {
        self.state.status()
    }

    /// The status exactly as the server reported it (differs from [`Task::status`] only for a
    /// terminal handle, whose payload the first `tasks/get` fetches).
    pub fn reported_status(&self) -> TaskStatus {
        self.handle_status.unwrap_or_else(|| self.status())
    }

    /// Parses a `CreateTaskResult` (`resultType: "task"`): a handle; payload fields are not expected.
    pub fn parse_handle(value: &Value) -> Result<Self, String> {
        Self::parse(value, TaskDetail::Handle)
    }

    /// Parses a `tasks/get` result: exactly the payload its status calls for.
    pub fn parse_full(value: &Value) -> Result<Self, String> {
        Self::parse(value, TaskDetail::Full)
    }

    fn parse(value: &Value, detail: TaskDetail) -> Result<Self, String> {
        let map = value.as_object().ok_or("a task must be a JSON object")?;
        let task_id = match map.get("taskId") {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            Some(Value::String(_)) => return Err("`taskId` is empty".into()),
            Some(_) => return Err("`taskId` must be a string".into()),
            None => return Err("the task has no `taskId`".into()),
        };
        let status_text = match map.get("status") {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err("`status` must be a string".into()),
            None => return Err("the task has no `status`".into()),
        };
        let status = TaskStatus::parse(status_text)
            .ok_or_else(|| format!("unknown task status {status_text:?}"))?;
        let full = detail == TaskDetail::Full;
        let mut ignored = Vec::new();
        let state = match status {
            TaskStatus::Working => TaskState::Working,
            TaskStatus::Cancelled => TaskState::Cancelled,
            TaskStatus::InputRequired => {
                let input_requests = match map.get("inputRequests") {
                    Some(v) => parse_input_requests(v)?,
                    None if full => {
                        return Err("an `input_required` task must carry `inputRequests`".into())
                    }
                    None => InputRequests::new(),
                };
                TaskState::InputRequired { input_requests }
            }
            TaskStatus::Completed => match map.get("result") {
                Some(result) => TaskState::Completed {
                    result: ToolResult::parse(result)?,
                },
                None if full => return Err("a `completed` task must carry `result`".into()),
                // A handle carries no payload: until the first poll fetches it the state is
                // unknown beyond "not running"; `reported_status` keeps what the server said.
                None => TaskState::Working,
            },
            TaskStatus::Failed => match map.get("error") {
                Some(error) => TaskState::Failed {
                    error: serde_json::from_value(error.clone())
                        .map_err(|e| format!("a failed task's `error` is malformed: {e}"))?,
                },
                None if full => return Err("a `failed` task must carry `error`".into()),
                None => TaskState::Working,
            },
        };
        Ok(Self {
            task_id,
            status_message: optional_string(map, "statusMessage")?,
            created_at: optional_string(map, "createdAt")?,
            last_updated_at: optional_string(map, "lastUpdatedAt")?,
            ttl_ms: advisory_ms(map, "ttlMs", &mut ignored),
            poll_interval_ms: advisory_ms(map, "pollIntervalMs", &mut ignored),
            ignored,
            meta: map.get("_meta").and_then(Value::as_object).cloned(),
            detail,
            handle_status: (state.status() != status).then_some(status),
            state,
        })
    }

    /// The task as `tasks/get` would return it (for storage and display).
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("taskId".into(), Value::String(self.task_id.clone()));
        map.insert(
            "status".into(),
            Value::String(self.reported_status().as_str().into()),
        );
        if let Some(m) = &self.status_message {
            map.insert("statusMessage".into(), Value::String(m.clone()));
        }
        if let Some(t) = &self.created_at {
            map.insert("createdAt".into(), Value::String(t.clone()));
        }
        if let Some(t) = &self.last_updated_at {
            map.insert("lastUpdatedAt".into(), Value::String(t.clone()));
        }
        map.insert(
            "ttlMs".into(),
            self.ttl_ms.map(Value::from).unwrap_or(Value::Null),
        );
        if let Some(p) = self.poll_interval_ms {
            map.insert("pollIntervalMs".into(), Value::from(p));
        }
        match &self.state {
            TaskState::InputRequired { input_requests } => {
                map.insert(
                    "inputRequests".into(),
                    serde_json::to_value(input_requests).unwrap_or(Value::Null),
                );
            }
            TaskState::Completed { result } => {
                map.insert("result".into(), Value::Object(result.0.clone()));
            }
            TaskState::Failed { error } => {
                map.insert(
                    "error".into(),
                    serde_json::to_value(error).unwrap_or(Value::Null),
                );
            }
            TaskState::Working | TaskState::Cancelled => {}
        }
        Value::Object(map)
    }
}

fn optional_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

/// An advisory millisecond count: a usable number is kept (whole floats like `500.0` too, as
/// some servers serialise integers that way), one past [`MAX_SERVER_MS`] is clamped to it, and
/// anything else (negative, fractional, a string) is ignored; both are noted in `ignored`.
fn advisory_ms(
    map: &Map<String, Value>,
    key: &'static str,
    ignored: &mut Vec<IgnoredField>,
) -> Option<u64> {
    let value = match map.get(key) {
        None | Some(Value::Null) => return None,
        Some(v) => v,
    };
    let mut note = |outcome: String| {
        let sent = crate::text::truncate(&value.to_string(), 40);
        ignored.push(IgnoredField {
            field: key,
            sent,
            outcome,
        });
    };
    let clamped = |n: u64| (n > MAX_SERVER_MS).then_some(MAX_SERVER_MS);
    match (value.as_u64(), value.as_f64()) {
        (Some(n), _) => match clamped(n) {
            Some(max) => {
                note(format!("clamped to {max}"));
                Some(max)
            }
            None => Some(n),
        },
        (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 && f < MAX_SERVER_MS as f64 => {
            Some(f as u64)
        }
        (None, Some(f)) if f >= MAX_SERVER_MS as f64 => {
            note(format!("clamped to {MAX_SERVER_MS}"));
            Some(MAX_SERVER_MS)
        }
        _ => {
            note("ignored".into());
            None
        }
    }
}

/// Parses an `inputRequests` map; every entry must have a string `method`. A flood is refused
/// whole: more than [`MAX_INPUT_REQUESTS`] entries, a key over [`MAX_INPUT_KEY_BYTES`] or a
/// request over [`MAX_INPUT_REQUEST_BYTES`].
pub fn parse_input_requests(value: &Value) -> Result<InputRequests, String> {
    let map = value
        .as_object()
        .ok_or("`inputRequests` must be an object")?;
    if map.len() > MAX_INPUT_REQUESTS {
        return Err(format!(
            "the server asks {} questions at once; Countersign accepts at most {MAX_INPUT_REQUESTS} per task",
            map.len()
        ));
    }
    let mut out = InputRequests::new();
    for (key, request) in map {
        if key.len() > MAX_INPUT_KEY_BYTES {
            return Err(format!(
                "an input-request key is {} bytes long; at most {MAX_INPUT_KEY_BYTES} are accepted",
                key.len()
            ));
        }
        let size = serde_json::to_vec(request)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_INPUT_REQUEST_BYTES {
            return Err(format!(
                "input request {key:?} is {size} bytes; at most {MAX_INPUT_REQUEST_BYTES} are accepted per question"
            ));
        }
        let parsed: InputRequest = serde_json::from_value(request.clone())
            .map_err(|e| format!("input request {key:?} is malformed: {e}"))?;
        out.insert(key.clone(), parsed);
    }
    Ok(out)
}

/// An MRTR `InputRequiredResult` in answer to `tools/call`: answer by re-sending the call.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequired {
    /// The questions.
    pub input_requests: InputRequests,
    /// Opaque state to echo unchanged on the retry (absent = send none).
    pub request_state: Option<String>,
}

/// The three ways a server can answer `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The tool ran synchronously.
    Complete(ToolResult),
    /// The server needs answers before it will run the tool (MRTR).
    InputRequired(InputRequired),
    /// The server created a durable task; poll it.
    Task(Task),
}

/// A tool definition from `tools/list`; the schema is kept verbatim (no `$ref` is ever fetched).
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The tool name.
    pub name: String,
    /// The whole definition as the server sent it.
    pub definition: Map<String, Value>,
    /// Arguments mirrored into `Mcp-Param-*` headers: (argument path, header name).
    pub header_params: Vec<HeaderParam>,
}

impl Tool {
    /// The human title, if any.
    pub fn title(&self) -> Option<&str> {
        self.definition.get("title").and_then(Value::as_str)
    }
    /// The description, if any.
    pub fn description(&self) -> Option<&str> {
        self.definition.get("description").and_then(Value::as_str)
    }
    /// The input schema, verbatim.
    pub fn input_schema(&self) -> Option<&Value> {
        self.definition.get("inputSchema")
    }
    /// `execution.taskSupport` as declared (e.g. "required", "optional", "forbidden").
    pub fn task_support(&self) -> Option<&str> {
        self.definition
            .get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
    }
}

/// One `x-mcp-header` declaration: the argument at `path` is mirrored into `Mcp-Param-{name}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// Property names from the top of `arguments` down to the value.
    pub path: Vec<String>,
    /// The header suffix as declared.
    pub name: String,
}

/// A tool the client refused to offer, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExcludedTool {
    /// The tool name.
    pub name: String,
    /// Why it was excluded.
    pub reason: String,
}

/// The answer to `tools/list`, after validation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolList {
    /// Usable tools, in server order.
    pub tools: Vec<Tool>,
    /// Tools whose `x-mcp-header` annotations break the rules.
    pub excluded: Vec<ExcludedTool>,
}

/// The answer to `server/discover`.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    /// Versions the server speaks.
    pub supported_versions: Vec<String>,
    /// Server capabilities, verbatim.
    pub capabilities: Map<String, Value>,
    /// Usage instructions (untrusted text).
    pub instructions: Option<String>,
    /// `_meta["io.modelcontextprotocol/serverInfo"]`, verbatim.
    pub server_info: Option<Value>,
    /// The whole result, verbatim.
    pub raw: Map<String, Value>,
}

impl Discovery {
    /// Whether the server declares the Tasks extension.
    pub fn supports_tasks(&self) -> bool {
        self.capabilities
            .get("extensions")
            .and_then(Value::as_object)
            .is_some_and(|e| e.contains_key(TASKS_EXTENSION))
    }

    /// The server's name and version, for display.
    pub fn server_label(&self) -> Option<String> {
        let info = self.server_info.as_ref()?;
        let name = info.get("name").and_then(Value::as_str)?;
        Some(match info.get("version").and_then(Value::as_str) {
            Some(v) => format!("{name} {v}"),
            None => name.to_owned(),
        })
    }

    pub(crate) fn parse(value: &Value) -> Result<Self, String> {
        let raw = value
            .as_object()
            .ok_or("the discover result must be an object")?
            .clone();
        let supported_versions = match raw.get("supportedVersions") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or("`supportedVersions` must hold strings")
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("`supportedVersions` must be an array".into()),
            None => Vec::new(),
        };
        let capabilities = match raw.get("capabilities") {
            Some(Value::Object(c)) => c.clone(),
            Some(_) => return Err("`capabilities` must be an object".into()),
            None => Map::new(),
        };
        Ok(Self {
            supported_versions,
            capabilities,
            instructions: raw
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned),
            // The spec puts the identity in `_meta`; some servers put `serverInfo` in the body.
            server_info: raw
                .get("_meta")
                .and_then(|m| m.get(META_SERVER_INFO))
                .or_else(|| raw.get("serverInfo"))
                .cloned(),
            raw,
        })
    }
}

/// The `resultType` of a result (`complete` when absent).
pub(crate) fn result_type(result: &Value) -> std::result::Result<&str, String> {
    match result.get("resultType") {
        None => Ok("complete"),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err("`resultType` must be a string".into()),
    }
}

/// Reads a `tools/call` result into its outcome.
pub fn interpret_call_result(result: &Value) -> std::result::Result<CallOutcome, String> {
    if !result.is_object() {
        return Err("the result must be an object".into());
    }
    match result_type(result)? {
        "complete" => Ok(CallOutcome::Complete(ToolResult::parse(result)?)),
        "task" => Ok(CallOutcome::Task(Task::parse_handle(result)?)),
        "input_required" => {
            let input_requests = parse_input_requests(
                result
                    .get("inputRequests")
                    .ok_or("an input_required result must carry `inputRequests`")?,
            )?;
            let request_state = match result.get("requestState") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err("`requestState` must be a string".into()),
            };
            Ok(CallOutcome::InputRequired(InputRequired {
                input_requests,
                request_state,
            }))
        }
        other => Err(format!("unknown resultType {other:?}")),
    }
}

/// Reads a `tasks/get` result: the full task, which must be the one asked for.
pub fn interpret_task_result(task_id: &str, result: &Value) -> std::result::Result<Task, String> {
    if !result.is_object() {
        return Err("the result must be an object".into());
    }
    match result_type(result)? {
        "complete" => {}
        "task" => return Err("a task handle in answer to tasks/get".into()),
        other => return Err(format!("unexpected resultType {other:?} for tasks/get")),
    }
    let task = Task::parse_full(result)?;
    if task.task_id != task_id {
        return Err(format!(
            "asked for task {task_id:?} but got {:?}",
            task.task_id
        ));
    }
    Ok(task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_fastmcp_input_required_task_exactly() {
        let task = Task::parse_full(&json!({
            "taskId": "Uk2c",
            "status": "input_required",
            "createdAt": "2026-12-02T09:36:04.644008+00:00",
            "lastUpdatedAt": "2026-12-02T09:36:04.650297+00:00",
            "ttlMs": 900000,
            "pollIntervalMs": 500,
            "resultType": "complete",
            "inputRequests": {"Uk2c:d59c0e9f6e18cc73": {"method": "elicitation/create", "params": {
                "mode": "form", "message": "Approve deployment of 'billing-api'?",
                "requestedSchema": {"type": "object", "properties": {"approve": {"type": "boolean"}}, "required": ["approve"]}}}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "peer-fastmcp-tasks", "version": "4.1.4"}}
        }))
        .expect("valid task");
        assert_eq!(task.status(), TaskStatus::InputRequired);
        assert_eq!(task.poll_interval_ms, Some(500));
        assert_eq!(task.ttl_ms, Some(900_000));
        let TaskState::InputRequired { input_requests } = &task.state else {
            panic!("expected input_required")
        };
        let request = &input_requests["Uk2c:d59c0e9f6e18cc73"];
        assert_eq!(
            request.elicitation(),
            Some(Elicitation::Form {
                message: "Approve deployment of 'billing-api'?".into(),
                requested_schema: json!({"type": "object", "properties": {"approve": {"type": "boolean"}}, "required": ["approve"]}),
            })
        );
    }

    #[test]
    fn parses_rmcp_failed_task_with_error_payload() {
        let task = Task::parse_full(&json!({
            "resultType": "complete", "taskId": "43cd", "status": "failed",
            "createdAt": "2026-12-02T09:36:12.282720247+00:00", "ttlMs": 300000, "pollIntervalMs": 500,
            "error": {"code": -32603, "data": {"attempt": 1}, "message": "flaky_job exploded (deliberate)"}
        }))
        .expect("valid task");
        assert_eq!(
            task.state,
            TaskState::Failed {
                error: RpcError {
                    code: -32603,
                    message: "flaky_job exploded (deliberate)".into(),
                    data: Some(json!({"attempt": 1})),
                }
            }
        );
    }

    #[test]
    fn a_completed_task_without_result_is_rejected() {
        let err = Task::parse_full(&json!({"taskId": "t", "status": "completed"})).unwrap_err();
        assert!(err.contains("result"), "{err}");
    }

    #[test]
    fn a_handle_never_needs_a_payload_and_null_ttl_is_unlimited() {
        let task = Task::parse_handle(
            &json!({"taskId": "t", "status": "working", "ttlMs": null, "resultType": "task"}),
        )
        .expect("valid handle");
        assert_eq!(task.ttl_ms, None);
        assert_eq!(task.detail, TaskDetail::Handle);
    }

    #[test]
    fn a_terminal_handle_keeps_the_status_the_server_reported() {
        let handle = Task::parse_handle(
            &json!({"taskId": "t", "status": "completed", "resultType": "task"}),
        )
        .expect("valid handle");
        assert_eq!(
            handle.status(),
            TaskStatus::Working,
            "no result yet: the first poll fetches it"
        );
        assert_eq!(handle.reported_status(), TaskStatus::Completed);
        assert_eq!(handle.to_json()["status"], json!("completed"));
        let live = Task::parse_handle(&json!({"taskId": "t", "status": "working"})).expect("valid");
        assert_eq!(live.handle_status, None);
    }

    #[test]
    fn unknown_status_and_wrong_types_are_rejected_with_a_reason() {
        for (value, needle) in [
            (json!({"taskId": "t", "status": "paused"}), "paused"),
            (json!({"taskId": 7, "status": "working"}), "taskId"),
            (json!({"taskId": "t"}), "status"),
            (
                json!({"taskId": "t", "status": "working", "statusMessage": 3}),
                "statusMessage",
            ),
            (json!(["not", "an", "object"]), "object"),
        ] {
            let err = Task::parse_full(&value).unwrap_err();
            assert!(err.contains(needle), "{err} should mention {needle}");
        }
    }

    #[test]
    fn bad_advisory_fields_are_ignored_or_clamped_and_noted_never_fatal() {
        for (field, sent, kept, outcome) in [
            ("pollIntervalMs", json!(-5), None, "ignored"),
            ("pollIntervalMs", json!("500"), None, "ignored"),
            ("pollIntervalMs", json!(2.5), None, "ignored"),
            (
                "pollIntervalMs",
                json!(1e19),
                Some(MAX_SERVER_MS),
                "clamped",
            ),
            ("ttlMs", json!(1e308), Some(MAX_SERVER_MS), "clamped"),
            ("ttlMs", json!(u64::MAX), Some(MAX_SERVER_MS), "clamped"),
            ("ttlMs", json!(-1), None, "ignored"),
            ("ttlMs", json!({"ms": 5}), None, "ignored"),
        ] {
            let mut value = json!({"taskId": "t", "status": "working", "resultType": "task"});
            value[field] = sent.clone();
            let task = Task::parse_handle(&value)
                .unwrap_or_else(|e| panic!("{field}: {sent} must not lose the handle: {e}"));
            assert_eq!(task.task_id, "t");
            let got = if field == "ttlMs" {
                task.ttl_ms
            } else {
                task.poll_interval_ms
            };
            assert_eq!(got, kept, "{field}: {sent}");
            assert_eq!(task.ignored.len(), 1, "{field}: {sent} is noted");
            assert_eq!(task.ignored[0].field, field);
            assert!(
                task.ignored[0].outcome.starts_with(outcome),
                "{:?}",
                task.ignored[0]
            );
        }
        let fine = Task::parse_handle(
            &json!({"taskId": "t", "status": "working", "ttlMs": 500.0, "pollIntervalMs": 250}),
        )
        .expect("valid");
        assert_eq!((fine.ttl_ms, fine.poll_interval_ms), (Some(500), Some(250)));
        assert!(
            fine.ignored.is_empty(),
            "whole floats are numbers, not noise"
        );
    }

    #[test]
    fn a_flood_of_questions_is_refused_whole_with_the_limit_named() {
        let ask = |n: usize| {
            let requests: Map<String, Value> = (0..n)
                .map(|i| {
                    (
                        format!("k{i}"),
                        json!({"method": "elicitation/create", "params": {"mode": "form", "message": "?", "requestedSchema": {"type": "object"}}}),
                    )
                })
                .collect();
            json!({"taskId": "t", "status": "input_required", "inputRequests": requests})
        };
        assert!(Task::parse_full(&ask(MAX_INPUT_REQUESTS)).is_ok());
        let err = Task::parse_full(&ask(100_000)).unwrap_err();
        assert!(
            err.contains("100000") && err.contains(&MAX_INPUT_REQUESTS.to_string()),
            "{err}"
        );
        let big = json!({"taskId": "t", "status": "input_required", "inputRequests": {
            "k": {"method": "elicitation/create", "params": {"mode": "form", "message": "x".repeat(MAX_INPUT_REQUEST_BYTES), "requestedSchema": {"type": "object"}}}
        }});
        let err = Task::parse_full(&big).unwrap_err();
        assert!(err.contains("at most"), "{err}");
        let long_key = json!({"taskId": "t", "status": "input_required", "inputRequests": {
            "k".repeat(MAX_INPUT_KEY_BYTES + 1): {"method": "elicitation/create", "params": {}}
        }});
        assert!(Task::parse_full(&long_key).unwrap_err().contains("key"));
    }

    #[test]
    fn task_json_round_trips_through_parse() {
        let original = json!({
            "taskId": "t1", "status": "completed", "statusMessage": "done",
            "createdAt": "2026-12-02T09:00:00Z", "lastUpdatedAt": "2026-12-02T09:00:01Z",
            "ttlMs": 1000, "pollIntervalMs": 250,
            "result": {"content": [{"type": "text", "text": "ok"}], "isError": false}
        });
        let task = Task::parse_full(&original).expect("valid");
        assert_eq!(task.to_json(), original);
    }

    #[test]
    fn elicitation_responses_have_the_exact_wire_shape() {
        let accept = ElicitationResponse::Accept {
            content: Some(
                json!({"approve": true})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        };
        assert_eq!(
            serde_json::to_value(&accept).ok(),
            Some(json!({"action": "accept", "content": {"approve": true}}))
        );
        assert_eq!(
            serde_json::to_value(ElicitationResponse::Decline).ok(),
            Some(json!({"action": "decline"}))
        );
        assert_eq!(
            serde_json::to_value(ElicitationResponse::Cancel).ok(),
            Some(json!({"action": "cancel"}))
        );
        let url_done: ElicitationResponse =
            serde_json::from_value(json!({"action": "accept"})).expect("valid");
        assert_eq!(url_done, ElicitationResponse::Accept { content: None });
    }

    #[test]
    fn url_elicitation_is_typed() {
        let request = InputRequest {
            method: "elicitation/create".into(),
            params: json!({"mode": "url", "message": "Sign in", "url": "https://example.com/x", "elicitationId": "e1"}),
        };
        assert_eq!(
            request.elicitation(),
            Some(Elicitation::Url {
                message: "Sign in".into(),
                url: "https://example.com/x".into(),
                elicitation_id: Some("e1".into())
            })
        );
    }

    #[test]
    fn tool_result_text_and_error_flag() {
        let result = ToolResult::parse(&json!({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "", "mimeType": "image/png"}, {"type": "text", "text": "b"}], "isError": true})).expect("valid");
        assert!(result.is_error());
        assert_eq!(result.text(), "a\nb");
    }
}
