//! 2025-11-25 Tasks (SEP-1686) served to session agents that ask for them (VS Code does): a
//! held call with `params.task` answers at once with a `CreateTaskResult` carrying Countersign's
//! task id, and the agent follows it with `tasks/get`, `tasks/result` (which waits until the
//! call is decided and done), `tasks/list` and `tasks/cancel`, all served from the ledger. The
//! task is the same one a 2026-07-28 agent polls ([`Console::agent_task`]); only its shape
//! differs: no result inline, `ttl`/`pollInterval`, the result from `tasks/result`.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Map, Value};

use countersign_core::console::Console;
use countersign_core::ledger::agents::AgentRecord;
use countersign_core::ledger::servers::ServerRecord;

use super::request::Request;
use super::{console_error, json_reply, rpc_error, rpc_result, session, Shared, WATCH_INTERVAL};

/// The `_meta` key that ties a result to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The most tasks one `tasks/list` returns (newest first; no cursor beyond them).
const MAX_LISTED: usize = 200;

/// What a session declares it can do with tasks (`initialize`'s capabilities): Countersign runs
/// tools as tasks for it, lists and cancels them.
pub(super) fn capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Whether a session agent's `tools/call` asks to run as a task (`params.task`).
pub(super) fn asks_for_task(request: &Request) -> bool {
    !request.stateless && request.params.get("task").is_some_and(Value::is_object)
}

/// A task as [`Console::agent_task`] shows it, in the 2025-11-25 shape (no payload).
pub(super) fn legacy_task(task: &Value) -> Value {
    let mut out = Map::new();
    for key in [
        "taskId",
        "status",
        "statusMessage",
        "createdAt",
        "lastUpdatedAt",
    ] {
        if let Some(value) = task.get(key) {
            out.insert(key.into(), value.clone());
        }
    }
    if let Some(ttl) = task.get("ttlMs") {
        out.insert("ttl".into(), ttl.clone());
    }
    if let Some(interval) = task.get("pollIntervalMs") {
        out.insert("pollInterval".into(), interval.clone());
    }
    Value::Object(out)
}

/// The `CreateTaskResult` of a held call.
pub(super) fn created(task: &Value) -> Value {
    json!({"task": legacy_task(task)})
}

fn is_terminal(task: &Value) -> bool {
    matches!(
        task.get("status").and_then(Value::as_str),
        Some("completed" | "failed" | "cancelled")
    )
}

fn not_found(request: &Request, task_id: &str) -> Response {
    json_reply(
        StatusCode::OK,
        rpc_error(
            &request.id,
            -32602,
            &format!("Failed to retrieve task: Task not found ({task_id})"),
            None,
        ),
    )
}

/// `tasks/get`, `tasks/result`, `tasks/list` or `tasks/cancel` from a session agent.
pub(super) async fn handle(
    shared: Arc<Shared>,
    agent: &AgentRecord,
    server: &ServerRecord,
    request: Request,
) -> Response {
    let console = &shared.console;
    if request.method == "tasks/list" {
        return match console.agent_tasks(agent.id, server.id, MAX_LISTED).await {
            Ok(tasks) => {
                let tasks: Vec<Value> = tasks.iter().map(legacy_task).collect();
                json_reply(
                    StatusCode::OK,
                    rpc_result(&request.id, json!({"tasks": tasks})),
                )
            }
            Err(e) => json_reply(StatusCode::OK, console_error(&request.id, &e)),
        };
    }
    let Some(task_id) = request.own_task_id() else {
        let named = request.params.get("taskId").and_then(Value::as_str);
        return not_found(&request, named.unwrap_or("none given"));
    };
    let task = match console.agent_task(agent.id, &task_id).await {
        Ok(Some(task)) => task,
        Ok(None) => return not_found(&request, &task_id),
        Err(e) => return json_reply(StatusCode::OK, console_error(&request.id, &e)),
    };
    match request.method.as_str() {
        "tasks/get" => json_reply(StatusCode::OK, rpc_result(&request.id, legacy_task(&task))),
        "tasks/cancel" => {
            if is_terminal(&task) {
                let status = task["status"].as_str().unwrap_or("finished");
                return json_reply(
                    StatusCode::OK,
                    rpc_error(
                        &request.id,
                        -32602,
                        &format!("Cannot cancel task in terminal status: {status}"),
                        None,
                    ),
                );
            }
            if let Err(e) = console.withdraw_gated(agent.id, &task_id).await {
                return json_reply(StatusCode::OK, console_error(&request.id, &e));
            }
            match console.agent_task(agent.id, &task_id).await {
                Ok(Some(task)) => {
                    json_reply(StatusCode::OK, rpc_result(&request.id, legacy_task(&task)))
                }
                Ok(None) => not_found(&request, &task_id),
                Err(e) => json_reply(StatusCode::OK, console_error(&request.id, &e)),
            }
        }
        _ => {
            // tasks/result: held open (keep-alives) until the call is decided and done.
            let keep_alive = shared.config.keep_alive;
            let (console, agent_id, id) = (shared.console.clone(), agent.id, request.id.clone());
            session::held_reply(keep_alive, request.progress_token(), async move {
                result_when_done(&console, agent_id, &task_id, &id).await
            })
        }
    }
}

/// The task's outcome as `tasks/result` gives it, once it has one.
async fn result_when_done(console: &Console, agent_id: i64, task_id: &str, id: &Value) -> Value {
    loop {
        let task = match console.agent_task(agent_id, task_id).await {
            Ok(Some(task)) => task,
            Ok(None) => return rpc_error(id, -32602, "Task not found", None),
            Err(e) => return console_error(id, &e),
        };
        let related = json!({ RELATED_TASK: {"taskId": task_id} });
        match task.get("status").and_then(Value::as_str) {
            Some("completed") => {
                let mut result = task
                    .get("result")
                    .cloned()
                    .unwrap_or(json!({"content": []}));
                if let Some(map) = result.as_object_mut() {
                    let meta = map.entry("_meta").or_insert_with(|| json!({}));
                    if let (Some(meta), Some(related)) = (meta.as_object_mut(), related.as_object())
                    {
                        meta.extend(related.clone());
                    }
                }
                return rpc_result(id, result);
            }
            Some("failed") => {
                let error = task.get("error").cloned().unwrap_or(json!({}));
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the task failed");
                return rpc_error(id, code, message, error.get("data").cloned());
            }
            Some("cancelled") => {
                return rpc_error(id, -32602, &format!("Task {task_id} was cancelled"), None)
            }
            _ => tokio::time::sleep(WATCH_INTERVAL).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_shown_in_the_2025_11_25_shape_without_its_payload() {
        let modern = json!({
            "taskId": "csg-1", "status": "completed", "statusMessage": "done",
            "createdAt": "2026-12-07T10:00:00Z", "lastUpdatedAt": "2026-12-07T10:01:00Z",
            "ttlMs": 3600000, "pollIntervalMs": 1000, "result": {"content": []},
        });
        assert_eq!(
            legacy_task(&modern),
            json!({
                "taskId": "csg-1", "status": "completed", "statusMessage": "done",
                "createdAt": "2026-12-07T10:00:00Z", "lastUpdatedAt": "2026-12-07T10:01:00Z",
                "ttl": 3600000, "pollInterval": 1000,
            })
        );
        assert_eq!(created(&modern)["task"]["taskId"], "csg-1");
        assert!(is_terminal(&modern));
        assert!(!is_terminal(&json!({"status": "working"})));
    }
}
