//! Direct mode against a server of the 2025-11-25 generation (a session, SEP-1686 Tasks): the
//! same commands, output, answers and exit codes as against a modern server.
//!
//! A task-augmented call (`params.task`) returns a task, polled with `tasks/get` at the
//! server's `pollInterval` under the scheduler's floor and ceiling. Its questions do not come
//! in its status: when it is `input_required`, `tasks/result` is opened and each
//! `elicitation/create` on it is shown to the same answer policy as a modern `inputRequests`
//! entry (viewed as an [`InputRequest`]); other server requests were already refused by the
//! stream and are noted. The result, or the task's error, arrives on the same stream.
//!
//! The server binds a task to the session that created it, and each command opens its own
//! session (closed with `DELETE` when the command ends): `task get|cancel` of a task created
//! elsewhere can only say that the server does not show it, and `task answer` cannot work.

use std::io::IsTerminal as _;

use countersign_core::mcp::legacy::{
    CancelOutcome, ElicitAction, LegacyClient, ServerRequest, Task, TaskMetadata, TaskResultEvent,
    TaskStatus, TaskSupport, ToolOutcome,
};
use countersign_core::mcp::{self, InputRequest, InputRequests, ServerProfile, ToolResult};
use countersign_core::scheduler;
use serde_json::{json, Map, Value};

use super::{ask_one, input_needed, print_result, report_complete, AnswerPolicy, Poller};
use crate::terminal::{self, say, tell};
use crate::{
    CliError, EXIT_CANCELLED, EXIT_COMPLETED, EXIT_FAILED, EXIT_INPUT_NEEDED, EXIT_TOOL_ERROR,
    EXIT_WORKING,
};

/// The lifetime asked for a task (`params.task.ttl`); the server may choose another.
const TASK_TTL_MS: u64 = 300_000;

/// Said when a task is left running at the end of a command (`--no-follow`).
const SESSION_ENDS: &str = "note: a 2025-11-25 server binds a task to the session that created it, and this command's session ends when it exits: no later command can follow, answer or cancel this task";

/// Said when the server does not know a task id.
const OWN_TASKS_ONLY: &str = "note: a 2025-11-25 server only shows a session its own tasks; this command opened a new session, so a task created by another command or client cannot be seen from here";

/// Ends the session (`DELETE`, best-effort: a session the server could not end expires there)
/// and passes `outcome` on.
pub(super) async fn close<T>(
    session: &LegacyClient,
    outcome: Result<T, CliError>,
) -> Result<T, CliError> {
    let _ = session.close().await;
    outcome
}

/// `discover` of a legacy server: what `initialize` said.
pub(crate) fn discover(session: &LegacyClient, profile: &ServerProfile, json_out: bool) {
    let info = session.session();
    if json_out {
        terminal::json(&json!({
            "era": profile.era,
            "protocolVersion": profile.protocol_version,
            "capabilities": profile.capabilities,
            "serverInfo": profile.server_info,
        }));
        return;
    }
    say!("era:        legacy ({})", profile.protocol_version);
    let label = profile.server_info.as_ref().and_then(|i| {
        let name = i.get("name")?.as_str()?;
        Some(match i.get("version").and_then(Value::as_str) {
            Some(v) => format!("{name} {v}"),
            None => name.to_owned(),
        })
    });
    say!(
        "server:     {}",
        label.unwrap_or_else(|| "(unnamed)".into())
    );
    say!("versions:   {}", profile.protocol_version);
    say!(
        "tasks:      {}",
        if info.supports_tool_tasks() {
            "yes (2025-11-25 Tasks; a session sees only its own tasks)"
        } else {
            "no"
        }
    );
    let caps: Vec<&str> = profile
        .capabilities
        .as_object()
        .map(|c| c.keys().map(String::as_str).collect())
        .unwrap_or_default();
    say!("capabilities: {}", caps.join(", "));
}

/// `tools` of a legacy server, with each tool's task support.
pub(crate) async fn tools(session: &LegacyClient, json_out: bool) -> Result<u8, CliError> {
    let tools = session.list_tools().await?;
    if json_out {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| Value::Object(t.definition.clone()))
            .collect();
        terminal::json(&json!({"tools": tools, "excluded": []}));
        return Ok(EXIT_COMPLETED);
    }
    for tool in &tools {
        let support = match tool.task_support {
            TaskSupport::Required => " [task: required]",
            TaskSupport::Optional => " [task: optional]",
            TaskSupport::Forbidden => "",
        };
        say!("{}{support}", tool.name);
        say!(
            "    {}",
            tool.definition
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
        );
    }
    Ok(EXIT_COMPLETED)
}

/// `call` on a legacy server: as a task when the tool allows it, followed to its end unless
/// `no_follow`.
pub(super) async fn call(
    session: &LegacyClient,
    tool: &str,
    arguments: Option<Map<String, Value>>,
    policy: &AnswerPolicy,
    no_follow: bool,
    json_out: bool,
) -> Result<u8, CliError> {
    let support = session
        .list_tools()
        .await?
        .into_iter()
        .find(|t| t.name == tool)
        .map(|t| t.task_support)
        .unwrap_or_default();
    let task = match support {
        TaskSupport::Required | TaskSupport::Optional => Some(TaskMetadata {
            ttl: Some(TASK_TTL_MS),
        }),
        TaskSupport::Forbidden => None,
    };
    let task = match session.call_tool(tool, arguments, task).await? {
        ToolOutcome::Result(result) => return Ok(report_complete(&result, json_out)),
        ToolOutcome::Task(task) => task,
    };
    if no_follow {
        if json_out {
            terminal::json(&task_json(&task));
        } else {
            say!("task {} {}", task.task_id, status_name(task.status));
        }
        tell!("{SESSION_ENDS}");
        return Ok(EXIT_COMPLETED);
    }
    if !json_out {
        print_task_line(&task);
    }
    follow(session, task, policy, json_out).await
}

/// Polls the task until it needs `tasks/result` (a question, or its end).
async fn follow(
    session: &LegacyClient,
    first: Task,
    policy: &AnswerPolicy,
    json_out: bool,
) -> Result<u8, CliError> {
    let task_id = first.task_id.clone();
    let mut seen = Seen::new(&first, json_out);
    let mut poller = Poller::new(first.poll_interval);
    loop {
        let task = poller.next(|| session.get_task(&task_id)).await?;
        poller.pace(task.poll_interval);
        seen.show(&task);
        match task.status {
            TaskStatus::Working => {}
            TaskStatus::Cancelled => return Ok(report_cancelled(&task_id, json_out)),
            TaskStatus::InputRequired | TaskStatus::Completed | TaskStatus::Failed => {
                return fetch_result(session, &task_id, policy, json_out, seen).await;
            }
        }
    }
}

/// The status lines already printed, so each change is printed once.
struct Seen {
    last: (TaskStatus, Option<String>),
    quiet: bool,
}

impl Seen {
    fn new(first: &Task, quiet: bool) -> Self {
        Self {
            last: (first.status, first.status_message.clone()),
            quiet,
        }
    }

    fn show(&mut self, task: &Task) {
        let now = (task.status, task.status_message.clone());
        if now != self.last && !self.quiet {
            print_task_line(task);
        }
        self.last = now;
    }
}

/// Drives `tasks/result`: answers the task's questions, then reports its end.
async fn fetch_result(
    session: &LegacyClient,
    task_id: &str,
    policy: &AnswerPolicy,
    json_out: bool,
    mut seen: Seen,
) -> Result<u8, CliError> {
    // The stream stays open while the task runs; silence past the scheduler's longest wait
    // is a timeout, as a poll answer that never came would be.
    let mut stream = session
        .task_result(task_id, scheduler::MAX_SERVER_WAIT)
        .await?;
    loop {
        let event = match stream.next().await {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                return ended_with_error(session, task_id, e, json_out, &mut seen).await
            }
            None => {
                return Err(mcp::Error::InvalidResponse {
                    method: "tasks/result".into(),
                    reason: "the stream ended without the task's result".into(),
                }
                .into())
            }
        };
        match event {
            TaskResultEvent::Request(request) => {
                let (key, view) = as_input_request(&request);
                let response = match policy.automatic(&view) {
                    Some(response) => response,
                    None if view.elicitation().is_some() && !std::io::stdin().is_terminal() => {
                        let mut open = InputRequests::new();
                        open.insert(key, view);
                        tell!("{SESSION_ENDS}");
                        return input_needed(json_out, Some(task_id), &open);
                    }
                    None => ask_one(session.url(), &view)?,
                };
                let action = elicit_action(&response);
                stream.answer_elicitation(&request, &action).await?;
                if !json_out {
                    say!(
                        "  answered {key}: {}",
                        response
                            .get("action")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                    );
                }
            }
            TaskResultEvent::Refused(request) => tell!(
                "note: the server asked for {} on task {task_id}; Countersign does not support it and refused",
                request.method
            ),
            TaskResultEvent::Status(task) => seen.show(&task),
            TaskResultEvent::Completed(result) => {
                return Ok(report_end(session, task_id, &result, json_out, &mut seen).await)
            }
        }
    }
}

/// The result arrived: the task's final status decides the exit (a failed task may deliver its
/// error as an `isError` result).
async fn report_end(
    session: &LegacyClient,
    task_id: &str,
    result: &ToolResult,
    json_out: bool,
    seen: &mut Seen,
) -> u8 {
    let status = match session.get_task(task_id).await {
        Ok(task) => {
            seen.show(&task);
            task.status
        }
        Err(_) => TaskStatus::Completed,
    };
    match status {
        TaskStatus::Failed => {
            if json_out {
                terminal::json(&json!({"outcome": "failed", "taskId": task_id, "result": result}));
            } else {
                print_result(result);
            }
            EXIT_FAILED
        }
        TaskStatus::Cancelled => report_cancelled(task_id, json_out),
        _ => {
            let (outcome, code) = if result.is_error() {
                ("tool_error", EXIT_TOOL_ERROR)
            } else {
                ("completed", EXIT_COMPLETED)
            };
            if json_out {
                terminal::json(&json!({"outcome": outcome, "taskId": task_id, "result": result}));
            } else {
                print_result(result);
            }
            code
        }
    }
}

/// `tasks/result` answered with an error: the task's own failure when the task failed (or was
/// cancelled), the command's error otherwise.
async fn ended_with_error(
    session: &LegacyClient,
    task_id: &str,
    error: mcp::Error,
    json_out: bool,
    seen: &mut Seen,
) -> Result<u8, CliError> {
    let Ok(task) = session.get_task(task_id).await else {
        return Err(error.into());
    };
    seen.show(&task);
    match task.status {
        TaskStatus::Failed => {
            let (code, message) = match &error {
                mcp::Error::Rpc { error, .. } => (json!(error.code), error.message.clone()),
                other => (Value::Null, other.to_string()),
            };
            if json_out {
                terminal::json(&json!({"outcome": "failed", "taskId": task_id,
                    "error": {"code": code, "message": message}}));
            } else {
                say!("error {code}: {message}");
            }
            Ok(EXIT_FAILED)
        }
        TaskStatus::Cancelled => Ok(report_cancelled(task_id, json_out)),
        _ => Err(error.into()),
    }
}

fn report_cancelled(task_id: &str, json_out: bool) -> u8 {
    if json_out {
        terminal::json(&json!({"outcome": "cancelled", "taskId": task_id}));
    }
    EXIT_CANCELLED
}

/// A server request viewed as a modern `inputRequests` entry, so the same policy and prompt
/// answer it; keyed by the server's request id.
fn as_input_request(request: &ServerRequest) -> (String, InputRequest) {
    let key = match &request.id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let view = InputRequest {
        method: request.method.clone(),
        params: request.params.clone().unwrap_or(Value::Null),
    };
    (key, view)
}

/// The answer the policy or the prompt gave, as an `ElicitResult` action.
fn elicit_action(response: &Value) -> ElicitAction {
    match response.get("action").and_then(Value::as_str) {
        Some("accept") => ElicitAction::Accept(
            response
                .get("content")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        ),
        Some("cancel") => ElicitAction::Cancel,
        _ => ElicitAction::Decline,
    }
}

/// `task get` on a legacy server: only a task of this command's own session is visible, which
/// a fresh session has none of.
pub(super) async fn task_get(
    session: &LegacyClient,
    task_id: &str,
    json_out: bool,
) -> Result<u8, CliError> {
    let task = session.get_task(task_id).await.map_err(own_tasks_only)?;
    if json_out {
        terminal::json(&task_json(&task));
    } else {
        print_task_line(&task);
    }
    Ok(match task.status {
        TaskStatus::Completed => EXIT_COMPLETED,
        TaskStatus::Failed => EXIT_FAILED,
        TaskStatus::Cancelled => EXIT_CANCELLED,
        TaskStatus::InputRequired => EXIT_INPUT_NEEDED,
        TaskStatus::Working => EXIT_WORKING,
    })
}

/// `task cancel` on a legacy server; a task that already finished is not a failure.
pub(super) async fn task_cancel(
    session: &LegacyClient,
    task_id: &str,
    json_out: bool,
) -> Result<u8, CliError> {
    match session.cancel_task(task_id).await.map_err(own_tasks_only)? {
        CancelOutcome::Cancelled(_) => {
            if json_out {
                terminal::json(&json!({"taskId": task_id, "cancelRequested": true}));
            } else {
                say!("cancel requested for task {task_id}");
            }
        }
        CancelOutcome::AlreadyFinished { .. } => {
            if json_out {
                terminal::json(&json!({"taskId": task_id, "alreadyFinished": true}));
            } else {
                say!("task {task_id} already finished; nothing to cancel");
            }
        }
    }
    Ok(EXIT_COMPLETED)
}

/// `task answer` on a legacy server: the questions are asked on the session that created the
/// task, which is not this command's.
pub(super) fn answer_elsewhere(task_id: &str) -> CliError {
    CliError::Usage(format!(
        "task {task_id} is on a 2025-11-25 server, which asks a task's questions only on the session that created it: they cannot be answered outside that session (answer them with `countersign call … --accept JSON` or `--decline` as the call runs)"
    ))
}

/// Says why an unknown task is unknown, and keeps the error as it is.
fn own_tasks_only(e: mcp::Error) -> mcp::Error {
    if matches!(e, mcp::Error::UnknownTask { .. }) {
        tell!("{OWN_TASKS_ONLY}");
    }
    e
}

fn task_json(task: &Task) -> Value {
    serde_json::to_value(task).unwrap_or(Value::Null)
}

fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
    }
}

fn print_task_line(task: &Task) {
    let status = status_name(task.status);
    match &task.status_message {
        Some(m) => say!("task {} {status}: {m}", task.task_id),
        None => say!("task {} {status}", task.task_id),
    }
}
