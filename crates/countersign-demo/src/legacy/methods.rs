//! The era's methods: `initialize`, `ping`, `tools/list`, `tools/call` (plain or task),
//! `tasks/get`, `tasks/list` and `tasks/cancel`; `tasks/result` is in `result`. Errors raised
//! by a method travel as JSON-RPC errors with HTTP 200, as the SDK sends them.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::session::Session;
use super::wire::{self, mcp_error, refusal, response, VERSIONS};
use crate::app::App;
use crate::clock::scaled;
use crate::config::ResponseMode;
use crate::dispatch::short_id;
use crate::error::Error;
use crate::tasks::Cancelled;
use crate::tools::{Args, Call, InputNeed, Invocation, SyncRun, TaskSupport};
use crate::wire::{ClientCaps, ErrorObject, Outgoing};

/// Tasks per `tasks/list` page, as the SDK's in-memory store.
const PAGE: usize = 10;

type Answer = Result<Value, ErrorObject>;

/// `initialize`: opens a session speaking the requested version if this era has it, else the
/// newest; the session id comes back in `Mcp-Session-Id`.
pub(super) fn initialize(app: &App, id: Value, params: Option<&Map<String, Value>>) -> Response {
    let requested = params
        .and_then(|params| params.get("protocolVersion"))
        .and_then(Value::as_str);
    let version = VERSIONS
        .iter()
        .find(|version| Some(**version) == requested)
        .copied()
        .unwrap_or(VERSIONS[0]);
    let caps = params
        .and_then(|params| params.get("capabilities"))
        .and_then(Value::as_object)
        .map(ClientCaps::from_object)
        .unwrap_or_default();
    let Some(session) = app.legacy.sessions.open(caps) else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            "Service Unavailable: too many sessions",
        );
    };
    reply(app, &session, id, Ok(wire::initialize_result(version)))
}

/// A request of an open session.
pub(super) async fn dispatch(
    app: &Arc<App>,
    session: &Arc<Session>,
    id: Value,
    method: &str,
    params: Option<Map<String, Value>>,
) -> Response {
    let params = params.unwrap_or_default();
    let answer = match method {
        "ping" => Ok(json!({})),
        "tools/list" => Ok(app.legacy.tools.clone()),
        "tools/call" => call_tool(app, session, &params).await,
        "tasks/get" => task_id(&params).and_then(|task_id| {
            let task = app
                .store
                .get_owned(task_id, session.serial)
                .map_err(|_| mcp_error(-32602, "Failed to retrieve task: Task not found"))?;
            app.poll_gaps.polled(task_id);
            Ok(task)
        }),
        "tasks/list" => list_tasks(app, session, &params),
        "tasks/cancel" => task_id(&params).and_then(|task_id| cancel(app, session, task_id)),
        "tasks/result" => match task_id(&params) {
            Ok(task_id) => return super::result::open(app, session, id, task_id.to_owned()),
            Err(error) => Err(error),
        },
        _ => Err(ErrorObject {
            code: -32601,
            message: "Method not found".into(),
            data: None,
        }),
    };
    reply(app, session, id, answer)
}

/// The response to a request: JSON, or one SSE event when every reply is SSE (as the SDK's
/// default, and server-everything's).
pub(super) fn reply(app: &App, session: &Session, id: Value, answer: Answer) -> Response {
    let bytes = outgoing(id, answer).to_bytes();
    match app.config.response_mode {
        ResponseMode::Sse => response(
            StatusCode::OK,
            "text/event-stream",
            Body::from(wire::event(&bytes)),
            Some(&session.header),
        ),
        ResponseMode::Json | ResponseMode::Mixed => response(
            StatusCode::OK,
            "application/json",
            Body::from(bytes),
            Some(&session.header),
        ),
    }
}

pub(super) fn outgoing(id: Value, answer: Answer) -> Outgoing {
    match answer {
        Ok(result) => Outgoing::result(id, result),
        Err(error) => Outgoing::Error {
            jsonrpc: "2.0",
            id,
            error,
        },
    }
}

fn task_id(params: &Map<String, Value>) -> Result<&str, ErrorObject> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid_params("params.taskId must be a string"))
}

fn invalid_params(detail: &str) -> ErrorObject {
    ErrorObject {
        code: -32602,
        message: format!("Invalid params: {detail}"),
        data: None,
    }
}

fn list_tasks(app: &App, session: &Session, params: &Map<String, Value>) -> Answer {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => Some(0),
        Some(Value::String(cursor)) => cursor.parse::<usize>().ok(),
        Some(_) => None,
    };
    let page = start.and_then(|start| session.tasks_page(start, PAGE));
    let Some((ids, next)) = page else {
        let shown = params
            .get("cursor")
            .map(Value::to_string)
            .unwrap_or_default();
        return Err(mcp_error(
            -32602,
            format!("Failed to list tasks: Invalid cursor: {shown}"),
        ));
    };
    // Tasks past their TTL are gone from the store and drop out of the list.
    let tasks: Vec<Value> = ids
        .iter()
        .filter_map(|task_id| app.store.get_owned(task_id, session.serial).ok())
        .collect();
    let mut result = Map::new();
    result.insert("tasks".into(), Value::Array(tasks));
    if let Some(next) = next {
        result.insert("nextCursor".into(), Value::String(next.to_string()));
    }
    Ok(Value::Object(result))
}

fn cancel(app: &App, session: &Session, task_id: &str) -> Answer {
    match app.store.cancel_owned(task_id, session.serial) {
        Ok(Cancelled::Now(task)) => {
            app.hub.touched(task_id);
            session.changed.notify_waiters();
            Ok(task)
        }
        Ok(Cancelled::AlreadyTerminal(status)) => {
            let status = serde_json::to_value(status).unwrap_or(Value::Null);
            let status = status.as_str().unwrap_or("terminal");
            Err(mcp_error(
                -32602,
                format!("Cannot cancel task in terminal status: {status}"),
            ))
        }
        Err(_) => Err(mcp_error(-32602, format!("Task not found: {task_id}"))),
    }
}

/// `tools/call`. Refusals the SDK's `McpServer` turns into tool errors (unknown tool, a task
/// tool called plainly) are `isError` results here too.
async fn call_tool(app: &App, session: &Session, params: &Map<String, Value>) -> Answer {
    let empty = Map::new();
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid_params("params.name must be a string"))?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(args)) => args,
        Some(_) => return Err(invalid_params("params.arguments must be an object")),
    };
    // The SDK takes any truthy `task`; `{}` and `{ttl}` are what clients send.
    let as_task = params
        .get("task")
        .is_some_and(|task| !matches!(task, Value::Null | Value::Bool(false)));
    let Some(entry) = app.catalog.get(name) else {
        return Ok(wire::tool_error(format!(
            "MCP error -32602: Tool {name} not found"
        )));
    };
    let definition = &entry.definition;
    if definition.tasks == TaskSupport::Required && !as_task {
        return Ok(wire::tool_error(format!(
            "MCP error -32601: Tool {name} requires task augmentation (taskSupport: 'required')"
        )));
    }
    let missing = match definition.input {
        Some(InputNeed::Form) if !session.caps.elicitation_form => Some("form elicitation"),
        Some(InputNeed::Url) if !session.caps.elicitation_url => Some("URL elicitation"),
        Some(InputNeed::Sampling) if !session.caps.sampling => Some("sampling"),
        _ => None,
    };
    if let Some(missing) = missing {
        return Ok(wire::tool_error(format!(
            "Tool {name} asks its questions through {missing}, which the client did not declare at initialize"
        )));
    }
    let caps = ClientCaps {
        // A forbidden tool called as a task runs plainly, as the SDK runs it.
        tasks: as_task && definition.tasks != TaskSupport::Forbidden,
        ..session.caps
    };
    let call = Call {
        args: Args::new(args),
        caps,
        resume: None,
        call_id: short_id(),
        now: app.clock.now().wall,
    };
    match entry.tool.invoke(&call) {
        Err(error) => Err(error_object(&error)),
        Ok(Invocation::Complete(result)) => Ok(wire::tool_result(&result, None)),
        Ok(Invocation::Sync(SyncRun { steps, result })) => {
            let total: Duration = steps.iter().map(|(duration, _)| *duration).sum();
            tokio::time::sleep(scaled(total, app.config.time_scale)).await;
            Ok(wire::tool_result(&result, None))
        }
        // Mid-call questions (the modern era's multi-round trip) have no plain-call form here:
        // this era asks only through a task's `tasks/result`.
        Ok(Invocation::InputRequired(_)) => Ok(wire::tool_error(format!(
            "Tool {name} asks questions before it answers; in this era it can do that only as a task \
             (params.task) when its taskSupport allows"
        ))),
        Ok(Invocation::Task(program)) => {
            let created = app.store.create_owned(program, session.serial);
            app.poll_gaps.created(&created.value);
            let version = created.version;
            session.add_task(created.task_id, |key, task_id| {
                app.hub.add_task(key, task_id, version)
            });
            Ok(json!({ "task": created.value }))
        }
    }
}

pub(super) fn error_object(error: &Error) -> ErrorObject {
    ErrorObject {
        code: error.code(),
        message: error.to_string(),
        data: error.data(),
    }
}
