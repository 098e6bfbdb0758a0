//! The 2025-11-25 shapes: the flattened SEP-1686 task, the tool list with
//! `execution.taskSupport`, a `CallToolResult` without `resultType`, the SDK's transport error
//! bodies, and SSE framed as the TypeScript SDK frames it (`event: message`, LF).

use axum::body::Body;
use axum::http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderName, StatusCode};
use axum::response::Response;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::tools::Catalog;
use crate::wire::{ErrorObject, TaskStatus, TaskView, ToolResult};

/// The versions a session may speak, newest first: the TypeScript SDK's answer to an
/// `initialize` naming any other is the newest.
pub(crate) const VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// `_meta` key tying a message to its task.
pub(crate) const META_RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

pub(crate) const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

const INSTRUCTIONS: &str = "Countersign demo server (MCP 2025-11-25). Long-running tools (run_ci_pipeline, \
deploy_service, batch_export, flaky_migration, lint_repository, provision_account, bench_job) run as tasks when \
called with params.task: poll tasks/get, and call tasks/result when a task needs input (its questions arrive there \
as elicitation/create requests) or has finished. get_time, echo and greet answer at once.";

/// A task as `tasks/get`, `tasks/list`, `tasks/cancel`, a `CreateTaskResult` and
/// `notifications/tasks/status` carry it: `ttl` and `pollInterval` in ms, no payload.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Task<'a> {
    task_id: &'a str,
    status: TaskStatus,
    /// `null` is unlimited, so it is always written.
    ttl: Option<u64>,
    created_at: &'a str,
    last_updated_at: &'a str,
    poll_interval: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_message: Option<&'a str>,
}

/// The legacy rendering of a task the store shows.
pub(crate) fn task(view: &TaskView<'_>) -> Value {
    serde_json::to_value(Task {
        task_id: view.task_id,
        status: view.status,
        ttl: view.ttl_ms,
        created_at: &view.created_at,
        last_updated_at: &view.last_updated_at,
        poll_interval: view.poll_interval_ms,
        status_message: view.status_message,
    })
    .unwrap_or(Value::Null)
}

/// A `CallToolResult` of this era (no `resultType`), tied to its task when it has one.
pub(crate) fn tool_result(result: &ToolResult, related_task: Option<&str>) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("resultType");
        if let Some(task_id) = related_task {
            map.insert("_meta".into(), related_task_meta(task_id));
        }
    }
    value
}

/// A tool execution error as the TypeScript SDK's `McpServer` reports a refused call.
pub(crate) fn tool_error(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// `{"io.modelcontextprotocol/related-task": {"taskId": ...}}`.
pub(crate) fn related_task_meta(task_id: &str) -> Value {
    json!({ META_RELATED_TASK: { "taskId": task_id } })
}

/// The `tools/list` result: every tool with its `execution.taskSupport`.
pub(crate) fn tools(catalog: &Catalog) -> Value {
    let tools: Vec<Value> = catalog
        .entries()
        .iter()
        .map(|entry| {
            let definition = &entry.definition;
            let mut tool = json!({
                "name": definition.name,
                "title": definition.title,
                "description": definition.description,
                "inputSchema": definition.input_schema,
                "annotations": definition.annotations,
                "execution": {"taskSupport": definition.tasks.label()},
            });
            if let (Some(schema), Some(object)) = (&definition.output_schema, tool.as_object_mut())
            {
                object.insert("outputSchema".into(), schema.clone());
            }
            tool
        })
        .collect();
    json!({ "tools": tools })
}

/// The `InitializeResult` for a session speaking `version`.
pub(crate) fn initialize_result(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": false},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        },
        "serverInfo": {"name": crate::wire::SERVER_NAME, "version": crate::wire::SERVER_VERSION},
        "instructions": INSTRUCTIONS,
    })
}

/// A JSON-RPC error as an `McpError` thrown in a handler reaches the wire: the SDK puts
/// `MCP error <code>: ` before the message.
pub(crate) fn mcp_error(code: i64, message: impl std::fmt::Display) -> ErrorObject {
    ErrorObject {
        code,
        message: format!("MCP error {code}: {message}"),
        data: None,
    }
}

/// One message, framed as an SSE event the way the TypeScript SDK writes it.
pub(crate) fn event(message: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(message.len() + 24);
    framed.extend_from_slice(b"event: message\ndata: ");
    framed.extend_from_slice(message);
    framed.extend_from_slice(b"\n\n");
    framed
}

/// A keep-alive comment on an idle stream.
pub(crate) const PING: &[u8] = b": ping\n\n";

/// A response carrying `body` as `content_type`, with the session's id when there is one.
pub(crate) fn response(
    status: StatusCode,
    content_type: &'static str,
    body: Body,
    session: Option<&HeaderValue>,
) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if content_type == "text/event-stream" {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    if let Some(session) = session {
        headers.insert(MCP_SESSION_ID, session.clone());
    }
    response
}

/// The SDK transport's refusal before any handler runs: a JSON-RPC error with a null id.
pub(crate) fn refusal(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": null});
    response(
        status,
        "application/json",
        Body::from(serde_json::to_vec(&body).unwrap_or_default()),
        None,
    )
}

/// `params` of a server request tied to a task: the question's params plus the related-task
/// `_meta`.
pub(crate) fn request_params(params: Option<&Value>, task_id: &str) -> Value {
    let mut params = match params {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(META_RELATED_TASK.into(), json!({ "taskId": task_id }));
    }
    Value::Object(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ResultType;

    #[test]
    fn a_task_is_flat_with_ttl_and_poll_interval_in_ms() {
        let view = TaskView {
            task_id: "t1",
            status: TaskStatus::InputRequired,
            status_message: Some("waiting"),
            created_at: "2026-12-02T09:36:05.000000Z".into(),
            last_updated_at: "2026-12-02T09:36:06.000000Z".into(),
            ttl_ms: None,
            poll_interval_ms: 1000,
            result_type: ResultType::Task,
            input_requests: None,
            result: None,
            error: None,
        };
        assert_eq!(
            task(&view),
            json!({
                "taskId": "t1",
                "status": "input_required",
                "statusMessage": "waiting",
                "createdAt": "2026-12-02T09:36:05.000000Z",
                "lastUpdatedAt": "2026-12-02T09:36:06.000000Z",
                "ttl": null,
                "pollInterval": 1000
            })
        );
    }

    #[test]
    fn a_tool_result_loses_result_type_and_gains_its_task() {
        let result = ToolResult::text("done");
        assert_eq!(
            tool_result(&result, Some("t1")),
            json!({
                "content": [{"type": "text", "text": "done"}],
                "isError": false,
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}
            })
        );
    }

    #[test]
    fn every_tool_says_how_it_runs_as_a_task() {
        let listed = tools(&Catalog::new());
        let tools = listed["tools"].as_array().cloned().unwrap_or_default();
        assert!(!tools.is_empty());
        for tool in &tools {
            let support = tool["execution"]["taskSupport"].as_str();
            assert!(
                matches!(support, Some("required" | "optional" | "forbidden")),
                "{tool}"
            );
        }
        let bench = tools.iter().find(|t| t["name"] == "bench_job");
        assert_eq!(
            bench.map(|t| t["execution"]["taskSupport"].clone()),
            Some(json!("required"))
        );
    }

    #[test]
    fn server_requests_carry_their_task() {
        let params = request_params(Some(&json!({"message": "Sure?", "_meta": {"x": 1}})), "t9");
        assert_eq!(
            params,
            json!({"message": "Sure?", "_meta": {"x": 1, "io.modelcontextprotocol/related-task": {"taskId": "t9"}}})
        );
        assert_eq!(
            String::from_utf8(event(b"{}")).ok().as_deref(),
            Some("event: message\ndata: {}\n\n")
        );
    }
}
