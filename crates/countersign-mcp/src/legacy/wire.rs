//! The 2025-11-25 Tasks wire (SEP-1686): the JSON shapes a legacy server sends and takes.
//!
//! Distinct from the modern [`crate::wire`] types: a legacy task has no payload in its status
//! (the result comes from `tasks/result`, questions arrive as server requests), and its status
//! names are snake_case.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `_meta` key that ties a message to a task (`{"taskId": ...}`).
pub const META_RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// A tool's `execution.taskSupport`: whether it may, must or must not be called as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// Must be called with `params.task`; a plain call fails.
    Required,
    /// May be called either way.
    Optional,
    /// Must be called plainly (also what an absent `execution` means).
    #[default]
    Forbidden,
}

/// One tool of `tools/list`, with what the Tasks client needs read out of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// `execution.taskSupport` (absent or unknown: [`TaskSupport::Forbidden`]).
    pub task_support: TaskSupport,
    /// The whole definition as sent (schema, annotations, title, ...).
    pub definition: Map<String, Value>,
}

impl Tool {
    /// Reads one `tools/list` entry; `None` for an entry without a non-empty string name.
    pub(crate) fn parse(value: &Value) -> Option<Self> {
        let definition = value.as_object()?;
        let name = definition.get("name")?.as_str().filter(|n| !n.is_empty())?;
        let task_support = definition
            .get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(|s| TaskSupport::deserialize(s).ok())
            .unwrap_or_default();
        Some(Self {
            name: name.to_owned(),
            task_support,
            definition: definition.clone(),
        })
    }
}

/// A task's status (SEP-1686 `TaskStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for an answer: call `tasks/result` to receive the server's question.
    InputRequired,
    /// Done; `tasks/result` returns the tool's result.
    Completed,
    /// Failed; `tasks/result` returns the error (or an `isError` result).
    Failed,
    /// Cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Whether the status can never change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// A task as `tasks/get`, `tasks/list`, `tasks/cancel`, a `CreateTaskResult` and
/// `notifications/tasks/status` carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The server's id for it (opaque).
    pub task_id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// Human-readable progress (untrusted text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// ISO 8601, as sent.
    pub created_at: String,
    /// ISO 8601, as sent: what deduplicates status notifications.
    pub last_updated_at: String,
    /// Lifetime in ms from `createdAt`; `None` (JSON `null`) is unlimited.
    #[serde(default)]
    pub ttl: Option<u64>,
    /// The polling interval the server suggests, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<u64>,
}

impl Task {
    /// The suggested polling interval, clamped to `[floor, ceiling]` (a server's number meets
    /// time only through a checked conversion).
    pub fn poll_interval_within(&self, floor: Duration, ceiling: Duration) -> Option<Duration> {
        self.poll_interval
            .map(|ms| Duration::from_millis(ms).clamp(floor, ceiling))
    }
}

/// What a `tools/call` returned: a task handle when the call was task-augmented and the server
/// took it as a task, or the tool's result.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// `CreateTaskResult {task}`: follow it with `tasks/get` and fetch it with `tasks/result`.
    Task(Task),
    /// The `CallToolResult` (`isError` included).
    Result(crate::wire::ToolResult),
}

impl ToolOutcome {
    /// Reads a `tools/call` result.
    pub(crate) fn parse(result: Value) -> Result<Self, String> {
        let Value::Object(mut map) = result else {
            return Err("the result must be an object".into());
        };
        match map.remove("task") {
            Some(task) => serde_json::from_value(task)
                .map(Self::Task)
                .map_err(|e| format!("malformed task in CreateTaskResult: {e}")),
            None => Ok(Self::Result(crate::wire::ToolResult(map))),
        }
    }
}

/// `params.task` of a task-augmented request: the lifetime we ask for (the server may choose
/// another).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskMetadata {
    /// Requested lifetime in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
}

/// One page of `tasks/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPage {
    /// The session's tasks on this page.
    pub tasks: Vec<Task>,
    /// Pass back to get the next page; `None` on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What `tasks/cancel` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The server moved the task to `cancelled`; this is its state.
    Cancelled(Task),
    /// The task had already reached a terminal status (the server's -32602 "terminal status"):
    /// nothing to cancel, and not a failure.
    AlreadyFinished {
        /// The server's words (untrusted text).
        message: String,
    },
}

/// A request the server sends us (on a `tasks/result` stream, the GET stream, or a response
/// stream): `elicitation/create`, `sampling/createMessage`, `roots/list`, or anything else.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerRequest {
    /// Its JSON-RPC id (string or number, in the server's own id space).
    pub id: Value,
    /// The method.
    pub method: String,
    /// The params, if any.
    pub params: Option<Value>,
}

impl ServerRequest {
    /// The method of a form or URL question for a person.
    pub const ELICITATION: &'static str = "elicitation/create";

    /// The task this request belongs to, from `params._meta["io.modelcontextprotocol/related-task"]`.
    pub fn related_task(&self) -> Option<&str> {
        self.params
            .as_ref()?
            .get("_meta")?
            .get(META_RELATED_TASK)?
            .get("taskId")?
            .as_str()
    }
}

/// A person's answer to an `elicitation/create` (its `ElicitResult`).
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAction {
    /// Accepted, with the form's content (empty for a URL elicitation).
    Accept(Map<String, Value>),
    /// Declined.
    Decline,
    /// Dismissed without a choice.
    Cancel,
}

impl ElicitAction {
    /// The `ElicitResult` object, with the related-task `_meta` when `task_id` is given.
    pub fn to_result(&self, task_id: Option<&str>) -> Map<String, Value> {
        let mut result = Map::new();
        let action = match self {
            Self::Accept(content) => {
                result.insert("content".into(), Value::Object(content.clone()));
                "accept"
            }
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        };
        result.insert("action".into(), Value::String(action.into()));
        if let Some(task_id) = task_id {
            result.insert("_meta".into(), related_task_meta(task_id));
        }
        result
    }
}

/// `{"io.modelcontextprotocol/related-task": {"taskId": ...}}`.
pub(crate) fn related_task_meta(task_id: &str) -> Value {
    serde_json::json!({ META_RELATED_TASK: { "taskId": task_id } })
}

/// The `InitializeResult`'s parts a client keeps.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitializeResult {
    pub(crate) protocol_version: String,
    #[serde(default)]
    pub(crate) capabilities: Value,
    #[serde(default)]
    pub(crate) server_info: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// From the trace: a `tasks/get` result (the Task flattened into the result).
    fn traced_task() -> Value {
        json!({"taskId":"0bd2e175e2b5ecd84081505d4174a33e","status":"working","ttl":300000,"createdAt":"2026-12-07T02:07:35.379Z","lastUpdatedAt":"2026-12-07T02:07:35.380Z","pollInterval":1000,"statusMessage":"Gathering sources..."})
    }

    #[test]
    fn a_traced_task_reads_and_prints_back_the_same_json() {
        let task: Task = serde_json::from_value(traced_task()).expect("the trace's task");
        assert_eq!(task.status, TaskStatus::Working);
        assert_eq!(task.ttl, Some(300_000));
        assert_eq!(task.poll_interval, Some(1000));
        assert_eq!(serde_json::to_value(&task).expect("prints"), traced_task());
    }

    #[test]
    fn every_status_has_its_snake_case_name() {
        for (status, name) in [
            (TaskStatus::Working, "working"),
            (TaskStatus::InputRequired, "input_required"),
            (TaskStatus::Completed, "completed"),
            (TaskStatus::Failed, "failed"),
            (TaskStatus::Cancelled, "cancelled"),
        ] {
            assert_eq!(serde_json::to_value(status).expect("prints"), json!(name));
        }
        let unknown = serde_json::from_value::<TaskStatus>(json!("paused"));
        assert!(
            unknown.is_err(),
            "an unknown status is an error, not a guess"
        );
    }

    #[test]
    fn a_null_ttl_is_unlimited_and_prints_as_null() {
        let mut value = traced_task();
        value["ttl"] = Value::Null;
        let task: Task = serde_json::from_value(value.clone()).expect("null ttl");
        assert_eq!(task.ttl, None);
        assert_eq!(serde_json::to_value(&task).expect("prints"), value);
    }

    #[test]
    fn a_negative_or_fractional_ttl_is_refused() {
        for bad in [json!(-1), json!(1.5), json!("300000")] {
            let mut value = traced_task();
            value["ttl"] = bad.clone();
            assert!(
                serde_json::from_value::<Task>(value).is_err(),
                "ttl {bad} must not be read as a lifetime"
            );
        }
    }

    #[test]
    fn the_poll_interval_is_clamped() {
        let mut task: Task = serde_json::from_value(traced_task()).expect("task");
        let (floor, ceiling) = (Duration::from_millis(500), Duration::from_secs(60));
        assert_eq!(
            task.poll_interval_within(floor, ceiling),
            Some(Duration::from_secs(1))
        );
        task.poll_interval = Some(1);
        assert_eq!(task.poll_interval_within(floor, ceiling), Some(floor));
        task.poll_interval = Some(u64::MAX);
        assert_eq!(task.poll_interval_within(floor, ceiling), Some(ceiling));
    }

    #[test]
    fn a_create_task_result_is_a_task_and_anything_else_a_tool_result() {
        let created = ToolOutcome::parse(json!({"task": traced_task()})).expect("CreateTaskResult");
        assert!(
            matches!(created, ToolOutcome::Task(t) if t.task_id == "0bd2e175e2b5ecd84081505d4174a33e")
        );
        let plain = json!({"content":[{"type":"text","text":"MCP error -32601: Tool simulate-research-query requires task augmentation (taskSupport: 'required')"}],"isError":true});
        match ToolOutcome::parse(plain.clone()).expect("CallToolResult") {
            ToolOutcome::Result(result) => {
                assert!(result.is_error());
                assert_eq!(Value::Object(result.0), plain);
            }
            other => panic!("expected a tool result, got {other:?}"),
        }
        assert!(ToolOutcome::parse(json!({"task": {"taskId": 1}})).is_err());
        assert!(ToolOutcome::parse(json!([1])).is_err());
    }

    #[test]
    fn task_support_is_read_from_execution_and_defaults_to_forbidden() {
        let traced = json!({"name":"simulate-research-query","title":"Simulate Research Query","inputSchema":{"type":"object","properties":{"topic":{"type":"string"},"ambiguous":{"type":"boolean","default":false}},"required":["topic"]},"annotations":{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false},"execution":{"taskSupport":"required"}});
        let tool = Tool::parse(&traced).expect("a tool");
        assert_eq!(tool.task_support, TaskSupport::Required);
        assert_eq!(Value::Object(tool.definition), traced);
        for (execution, expected) in [
            (json!({"taskSupport": "optional"}), TaskSupport::Optional),
            (json!({"taskSupport": "forbidden"}), TaskSupport::Forbidden),
            (json!({"taskSupport": "sometimes"}), TaskSupport::Forbidden),
            (json!({}), TaskSupport::Forbidden),
        ] {
            let tool = Tool::parse(&json!({"name": "t", "execution": execution})).expect("tool");
            assert_eq!(tool.task_support, expected, "{execution}");
        }
        assert!(Tool::parse(&json!({"name": ""})).is_none());
        assert!(Tool::parse(&json!({"title": "nameless"})).is_none());
    }

    #[test]
    fn the_task_metadata_is_the_ttl_alone() {
        let ttl = TaskMetadata { ttl: Some(60_000) };
        assert_eq!(
            serde_json::to_value(ttl).expect("prints"),
            json!({"ttl": 60000})
        );
        assert_eq!(
            serde_json::to_value(TaskMetadata::default()).expect("prints"),
            json!({})
        );
    }

    #[test]
    fn a_task_list_page_reads_the_trace() {
        let traced = json!({"tasks":[{"taskId":"0bd2e175e2b5ecd84081505d4174a33e","status":"completed","ttl":300000,"createdAt":"2026-12-07T02:07:35.379Z","lastUpdatedAt":"2026-12-07T02:07:39.396Z","pollInterval":1000,"statusMessage":"Generating report..."}],"_meta":{}});
        let page: TaskPage = serde_json::from_value(traced).expect("a page");
        assert_eq!(page.tasks.len(), 1);
        assert_eq!(page.tasks[0].status, TaskStatus::Completed);
        assert_eq!(page.next_cursor, None);
    }

    #[test]
    fn an_elicitation_names_its_task_and_the_answer_carries_it_back() {
        let request = ServerRequest {
            id: json!(0),
            method: ServerRequest::ELICITATION.into(),
            params: Some(
                json!({"message":"Please clarify","requestedSchema":{"type":"object"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"0bd2e175"}}}),
            ),
        };
        assert_eq!(request.related_task(), Some("0bd2e175"));
        let mut content = Map::new();
        content.insert("interpretation".into(), json!("programming"));
        assert_eq!(
            Value::Object(ElicitAction::Accept(content).to_result(Some("0bd2e175"))),
            json!({"action":"accept","content":{"interpretation":"programming"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"0bd2e175"}}})
        );
        assert_eq!(
            Value::Object(ElicitAction::Decline.to_result(None)),
            json!({"action": "decline"})
        );
    }
}
