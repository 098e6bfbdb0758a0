//! The 2025-11-25 era (`Era::Legacy`), driven by the project's own legacy client
//! (`countersign_mcp::legacy`, the one that also runs against the real server-everything) and,
//! where the exact bytes matter, by plain HTTP.

use std::time::Duration;

use countersign_demo::{DemoConfig, DemoServer, Era, ResponseMode};
use countersign_mcp::era::{self, Connection};
use countersign_mcp::legacy::{
    CancelOutcome, ElicitAction, LegacyClient, SessionEvent, TaskMetadata, TaskResultEvent,
    TaskStatus, TaskSupport, ToolOutcome,
};
use countersign_mcp::{ClientOptions, Endpoint, Era as ClientEra, Error, LegacySession};
use serde_json::{json, Map, Value};

/// Polls at most this often before a test gives up on a status (a bound on a broken server,
/// not a timing assertion).
const MAX_POLLS: usize = 2_000;

fn legacy(mode: ResponseMode) -> DemoConfig {
    DemoConfig {
        era: Era::Legacy,
        time_scale: 0.01,
        poll_interval_ms: 10,
        response_mode: mode,
        ..DemoConfig::default()
    }
}

async fn start(config: DemoConfig) -> DemoServer {
    DemoServer::start(([127, 0, 0, 1], 0).into(), config)
        .await
        .expect("the demo server starts")
}

async fn connect(server: &DemoServer) -> LegacyClient {
    LegacyClient::connect(Endpoint::new(server.url()), ClientOptions::default())
        .await
        .expect("initialize")
}

fn args(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}

const TASK: Option<TaskMetadata> = Some(TaskMetadata { ttl: Some(60_000) });

async fn start_task(client: &LegacyClient, tool: &str, arguments: Value) -> String {
    match client
        .call_tool(tool, args(arguments), TASK)
        .await
        .expect("tools/call with params.task")
    {
        ToolOutcome::Task(task) => {
            assert!(
                matches!(task.status, TaskStatus::Working),
                "a new task works: {task:?}"
            );
            assert_eq!(task.poll_interval, Some(10));
            assert_eq!(task.ttl, Some(900_000));
            task.task_id
        }
        other => panic!("expected a task handle, got {other:?}"),
    }
}

/// Polls `tasks/get` until the task leaves `working`.
async fn poll_past_working(client: &LegacyClient, task_id: &str) -> TaskStatus {
    for _ in 0..MAX_POLLS {
        let task = client.get_task(task_id).await.expect("tasks/get");
        assert_eq!(task.task_id, task_id);
        if task.status != TaskStatus::Working {
            return task.status;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("task {task_id} never left working");
}

fn text_of(result: &countersign_mcp::ToolResult) -> String {
    result
        .content()
        .iter()
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn era_detection_finds_a_2025_11_25_server_with_tool_tasks() {
    let server = start(legacy(ResponseMode::Json)).await;
    let connection = era::connect(Endpoint::new(server.url()), ClientOptions::default())
        .await
        .expect("connects");
    let profile = connection.profile();
    assert_eq!(profile.era, ClientEra::Legacy, "{profile:?}");
    assert_eq!(profile.protocol_version, "2025-11-25");
    assert_eq!(
        profile.capabilities.pointer("/tasks"),
        Some(&json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}))
    );
    assert_eq!(
        profile
            .server_info
            .as_ref()
            .and_then(|info| info.get("name")),
        Some(&json!("countersign-demo"))
    );
    let Connection::Legacy(client) = connection else {
        panic!("expected a legacy connection")
    };
    let session = client.session();
    assert!(session.session_id.as_ref().is_some_and(|id| id.len() == 32));
    assert!(session.supports_tool_tasks() && session.supports_task_list());
    assert_eq!(server.sessions(), 1);
}

#[tokio::test]
async fn tools_say_how_they_run_and_a_task_tool_called_plainly_is_a_tool_error() {
    let server = start(legacy(ResponseMode::Sse)).await;
    let client = connect(&server).await;
    let tools = client.list_tools().await.expect("tools/list");
    let support = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.name == name)
            .map(|tool| tool.task_support)
    };
    assert_eq!(support("bench_job"), Some(TaskSupport::Required));
    assert_eq!(support("confirm_delete"), Some(TaskSupport::Optional));
    assert_eq!(support("echo"), Some(TaskSupport::Forbidden));

    let plain = client
        .call_tool("bench_job", args(json!({"duration_ms": 1})), None)
        .await
        .expect("tools/call");
    let ToolOutcome::Result(result) = plain else {
        panic!("a plain call gives a result: {plain:?}")
    };
    assert!(result.is_error());
    assert!(
        text_of(&result).contains("requires task augmentation"),
        "{result:?}"
    );

    let echoed = client
        .call_tool("echo", args(json!({"text": "hi"})), TASK)
        .await
        .expect("a forbidden tool asked as a task runs plainly");
    let ToolOutcome::Result(result) = echoed else {
        panic!("echo is never a task: {echoed:?}")
    };
    assert_eq!(text_of(&result), "echo: hi");
    assert!(result.0.get("resultType").is_none(), "{result:?}");
}

#[tokio::test]
async fn a_task_is_polled_to_its_end_and_its_result_names_the_task() {
    let server = start(legacy(ResponseMode::Json)).await;
    let client = connect(&server).await;
    let task_id = start_task(&client, "bench_job", json!({"duration_ms": 30, "steps": 3})).await;
    assert_eq!(
        poll_past_working(&client, &task_id).await,
        TaskStatus::Completed
    );
    assert!(server.stats().requests_for("tasks/get") >= 1);
    let mut stream = client
        .task_result(&task_id, Duration::from_secs(10))
        .await
        .expect("tasks/result");
    match stream.next().await {
        Some(Ok(TaskResultEvent::Completed(result))) => {
            assert_eq!(text_of(&result), "bench_job finished after 30 ms");
            assert_eq!(
                Value::Object(result.0.clone())
                    .pointer("/_meta/io.modelcontextprotocol~1related-task/taskId")
                    .cloned(),
                Some(json!(task_id))
            );
        }
        other => panic!("expected the result, got {other:?}"),
    }
}

#[tokio::test]
async fn a_question_arrives_on_tasks_result_and_the_answer_finishes_the_task() {
    for mode in [ResponseMode::Json, ResponseMode::Sse] {
        let server = start(legacy(mode)).await;
        let client = connect(&server).await;
        let task_id = start_task(&client, "confirm_delete", json!({"filename": "notes.txt"})).await;
        assert_eq!(
            poll_past_working(&client, &task_id).await,
            TaskStatus::InputRequired
        );
        let mut stream = client
            .task_result(&task_id, Duration::from_secs(10))
            .await
            .expect("tasks/result opens");
        let mut questions = 0;
        let result = loop {
            match stream.next().await {
                Some(Ok(TaskResultEvent::Request(request))) => {
                    questions += 1;
                    assert_eq!(request.method, "elicitation/create");
                    assert_eq!(request.related_task(), Some(task_id.as_str()));
                    let params = request.params.clone().unwrap_or_default();
                    assert_eq!(params["mode"], "form", "{params}");
                    assert!(params["requestedSchema"]["properties"]["confirm"].is_object());
                    let mut content = Map::new();
                    content.insert("confirm".into(), json!(true));
                    stream
                        .answer_elicitation(&request, &ElicitAction::Accept(content))
                        .await
                        .expect("the answer is taken");
                }
                Some(Ok(TaskResultEvent::Completed(result))) => break result,
                Some(Ok(TaskResultEvent::Status(_))) => {}
                other => panic!("unexpected {other:?}"),
            }
        };
        assert_eq!(questions, 1, "{mode:?}");
        assert_eq!(text_of(&result), "Deleted notes.txt.");
        assert_eq!(
            client.get_task(&task_id).await.expect("tasks/get").status,
            TaskStatus::Completed
        );
        assert_eq!(server.stats().requests_for("<response>"), 1);
    }
}

#[tokio::test]
async fn a_declined_question_still_ends_the_task() {
    let server = start(legacy(ResponseMode::Json)).await;
    let client = connect(&server).await;
    let task_id = start_task(&client, "confirm_delete", json!({"filename": "keep.txt"})).await;
    let mut stream = client
        .task_result(&task_id, Duration::from_secs(10))
        .await
        .expect("tasks/result opens while the task still works");
    let result = loop {
        match stream.next().await {
            Some(Ok(TaskResultEvent::Request(request))) => stream
                .answer_elicitation(&request, &ElicitAction::Decline)
                .await
                .expect("taken"),
            Some(Ok(TaskResultEvent::Completed(result))) => break result,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(
        text_of(&result),
        "Kept keep.txt: deletion was not confirmed."
    );
}

#[tokio::test]
async fn a_working_task_is_cancelled_at_once_and_a_finished_one_cannot_be() {
    let server = start(legacy(ResponseMode::Json)).await;
    let client = connect(&server).await;
    let task_id = start_task(&client, "slow_compute", json!({"seconds": 3600})).await;
    match client.cancel_task(&task_id).await.expect("tasks/cancel") {
        CancelOutcome::Cancelled(task) => {
            assert_eq!(task.task_id, task_id);
            assert_eq!(task.status, TaskStatus::Cancelled);
        }
        other => panic!("expected cancelled, got {other:?}"),
    }
    assert_eq!(
        client.get_task(&task_id).await.expect("tasks/get").status,
        TaskStatus::Cancelled
    );
    match client.cancel_task(&task_id).await.expect("tasks/cancel") {
        CancelOutcome::AlreadyFinished { message } => assert!(
            message.contains("Cannot cancel task in terminal status: cancelled"),
            "{message}"
        ),
        other => panic!("expected already finished, got {other:?}"),
    }
}

#[tokio::test]
async fn tasks_belong_to_their_session() {
    let server = start(legacy(ResponseMode::Json)).await;
    let ours = connect(&server).await;
    let theirs = connect(&server).await;
    let task_id = start_task(&ours, "slow_compute", json!({"seconds": 3600})).await;
    let listed = ours.list_tasks(None).await.expect("tasks/list");
    assert_eq!(
        listed
            .tasks
            .iter()
            .map(|task| task.task_id.as_str())
            .collect::<Vec<_>>(),
        vec![task_id.as_str()]
    );
    let other = theirs.list_tasks(None).await.expect("tasks/list");
    assert!(other.tasks.is_empty(), "{other:?}");
    let mut result_stream = theirs
        .task_result(&task_id, Duration::from_secs(5))
        .await
        .expect("tasks/result is answered");
    let result = match result_stream.next().await {
        Some(Err(error)) => Err(error),
        other => panic!("expected an error, got {other:?}"),
    };
    for result in [
        theirs.get_task(&task_id).await.map(|_| ()),
        theirs.cancel_task(&task_id).await.map(|_| ()),
        result,
    ] {
        assert!(
            matches!(result, Err(Error::UnknownTask { .. })),
            "{result:?}"
        );
    }
    assert_eq!(
        ours.get_task(&task_id).await.expect("still ours").status,
        TaskStatus::Working
    );
}

#[tokio::test]
async fn tasks_list_pages_by_ten() {
    let server = start(legacy(ResponseMode::Json)).await;
    let client = connect(&server).await;
    let mut created = Vec::new();
    for _ in 0..12 {
        created.push(start_task(&client, "slow_compute", json!({"seconds": 3600})).await);
    }
    let first = client.list_tasks(None).await.expect("page 1");
    assert_eq!(first.tasks.len(), 10);
    let cursor = first.next_cursor.clone().expect("a second page");
    let second = client.list_tasks(Some(&cursor)).await.expect("page 2");
    assert_eq!(second.next_cursor, None);
    let listed: Vec<String> = first
        .tasks
        .iter()
        .chain(&second.tasks)
        .map(|task| task.task_id.clone())
        .collect();
    assert_eq!(listed, created);
    let bad = client.list_tasks(Some("999")).await;
    assert!(bad.is_err(), "{bad:?}");
}

#[tokio::test]
async fn an_unknown_or_ended_session_is_expired_for_the_client() {
    let server = start(legacy(ResponseMode::Json)).await;
    let forged = LegacySession {
        session_id: Some("0123456789abcdef0123456789abcdef".into()),
        protocol_version: "2025-11-25".into(),
        server_capabilities: Value::Null,
        server_info: Value::Null,
    };
    let stranger = LegacyClient::resume(
        Endpoint::new(server.url()),
        ClientOptions::default(),
        forged,
    )
    .expect("resume sends nothing");
    let error = stranger.get_task("any").await.expect_err("no such session");
    assert!(
        matches!(error, Error::SessionExpired { status: 404, .. }),
        "{error:?}"
    );

    let client = connect(&server).await;
    client.list_tools().await.expect("the session works");
    client.close().await.expect("DELETE");
    assert_eq!(server.sessions(), 0);
    let gone = client.list_tools().await.expect_err("the session ended");
    assert!(matches!(gone, Error::SessionExpired { .. }), "{gone:?}");
    assert_eq!(server.sessions_opened(), 1);
}

#[tokio::test]
async fn the_get_stream_carries_every_status_change() {
    let server = start(legacy(ResponseMode::Json)).await;
    let client = connect(&server).await;
    let mut pushes = client
        .open_stream(Duration::from_secs(10))
        .await
        .expect("GET")
        .expect("the server offers a GET stream");
    let second = client.open_stream(Duration::from_secs(10)).await;
    assert!(
        matches!(&second, Err(Error::Rpc { error, .. }) if error.message.starts_with("Conflict")),
        "one GET stream per session: {second:?}"
    );
    let task_id = start_task(&client, "bench_job", json!({"duration_ms": 60, "steps": 3})).await;
    let mut seen = Vec::new();
    while seen.last().map(|(status, _)| *status) != Some(TaskStatus::Completed) {
        match pushes.next().await {
            Some(Ok(SessionEvent::TaskStatus(task))) => {
                assert_eq!(task.task_id, task_id);
                seen.push((task.status, task.status_message));
            }
            other => panic!("unexpected {other:?} after {seen:?}"),
        }
    }
    // Changes closer together than the pusher wakes merge into the later one (as two changes
    // between two polls would), so the order is checked, not the count.
    let expected = [
        (TaskStatus::Working, Some("step 2/3".to_owned())),
        (TaskStatus::Working, Some("step 3/3".to_owned())),
        (TaskStatus::Completed, Some("done".to_owned())),
    ];
    let mut rest = expected.iter();
    for change in &seen {
        assert!(
            rest.any(|expected| expected == change),
            "{change:?} out of order or unknown in {seen:?}"
        );
    }
    assert_eq!(server.stats().notifications, seen.len() as u64);
}

/// The transport's answers byte for byte where a client keys on them.
mod http {
    use super::*;

    const ACCEPT: &str = "application/json, text/event-stream";

    async fn post(url: &str, session: Option<&str>, body: Value) -> (u16, Option<String>, String) {
        let mut request = reqwest::Client::new()
            .post(url)
            .header("accept", ACCEPT)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        let response = request.send().await.expect("POST");
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        (status, session, response.text().await.unwrap_or_default())
    }

    fn initialize(version: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
        }})
    }

    fn json_of(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    #[tokio::test]
    async fn initialize_answers_the_requested_version_if_it_has_it() {
        let server = start(legacy(ResponseMode::Json)).await;
        for (asked, answered) in [
            ("2025-06-18", "2025-06-18"),
            ("2025-03-26", "2025-03-26"),
            ("2024-11-05", "2025-11-25"),
            ("2026-07-28", "2025-11-25"),
        ] {
            let (status, session, body) = post(&server.url(), None, initialize(asked)).await;
            assert_eq!(status, 200, "{body}");
            assert!(session.is_some(), "initialize issues a session id");
            assert_eq!(json_of(&body)["result"]["protocolVersion"], json!(answered));
        }
    }

    #[tokio::test]
    async fn requests_without_or_with_an_unknown_session_are_refused_like_the_sdk() {
        let server = start(legacy(ResponseMode::Json)).await;
        let url = server.url();
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let (status, _, body) = post(&url, None, list.clone()).await;
        assert_eq!(status, 400);
        assert_eq!(
            json_of(&body),
            json!({"jsonrpc": "2.0", "error": {"code": -32000, "message": "Bad Request: Mcp-Session-Id header is required"}, "id": null})
        );
        let (status, _, body) = post(&url, Some("nope"), list.clone()).await;
        assert_eq!(status, 404);
        assert_eq!(
            json_of(&body),
            json!({"jsonrpc": "2.0", "error": {"code": -32001, "message": "Session not found"}, "id": null})
        );

        let (_, session, _) = post(&url, None, initialize("2025-11-25")).await;
        let session = session.expect("a session id");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, body) = post(&url, Some(&session), initialized).await;
        assert_eq!((status, body.as_str()), (202, ""));
        let (status, echoed, body) = post(&url, Some(&session), list).await;
        assert_eq!(status, 200);
        assert_eq!(echoed.as_deref(), Some(session.as_str()));
        assert!(json_of(&body)["result"]["tools"].is_array(), "{body}");
        let again = post(&url, Some(&session), initialize("2025-11-25")).await;
        assert_eq!(again.0, 400, "a session is initialized once: {}", again.2);

        let unknown =
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "nope"}});
        let (status, _, body) = post(&url, Some(&session), unknown).await;
        assert_eq!(status, 200);
        assert_eq!(
            json_of(&body)["error"],
            json!({"code": -32602, "message": "MCP error -32602: Failed to retrieve task: Task not found"})
        );
        let removed = json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/update", "params": {}});
        let (_, _, body) = post(&url, Some(&session), removed).await;
        assert_eq!(json_of(&body)["error"]["code"], json!(-32601));

        let deleted = reqwest::Client::new()
            .delete(&url)
            .header("mcp-session-id", &session)
            .send()
            .await
            .expect("DELETE");
        assert_eq!(deleted.status().as_u16(), 200);
        let again = reqwest::Client::new()
            .delete(&url)
            .header("mcp-session-id", &session)
            .send()
            .await
            .expect("DELETE");
        assert_eq!(again.status().as_u16(), 404);
    }

    #[tokio::test]
    async fn a_modern_server_has_no_get_stream() {
        let server = start(DemoConfig::default()).await;
        let response = reqwest::Client::new()
            .get(server.url())
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status().as_u16(), 405);
    }
}

/// The official TypeScript SDK 1.32.2 client (`ts_sdk_client.mjs`), which the era imitates the
/// server side of. Needs Node and `bash .ci/setup-tools.sh` (or `COUNTERSIGN_CI_TOOLS` naming an
/// installed `.ci/tools`); without them the test fails, never skips.
#[tokio::test]
async fn the_typescript_sdk_client_initializes_calls_and_follows_tasks() {
    let server = start(legacy(ResponseMode::Sse)).await;
    let here = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tools = std::env::var_os("COUNTERSIGN_CI_TOOLS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| here.join("../../.ci/tools"));
    assert!(
        tools
            .join("node_modules/@modelcontextprotocol/sdk/package.json")
            .is_file(),
        "the TypeScript SDK is not installed in {}: run `bash .ci/setup-tools.sh`",
        tools.display()
    );
    let pinned = tools.join("node_modules/.bin/node");
    let node = if pinned.exists() {
        pinned
    } else {
        "node".into()
    };
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(&node)
            .arg(here.join("tests/it/ts_sdk_client.mjs"))
            .arg(server.url())
            .env("COUNTERSIGN_CI_TOOLS", &tools)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the SDK client finishes")
    .unwrap_or_else(|e| panic!("cannot run {}: {e}", node.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        panic!(
            "not one JSON line: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(output.status.success(), "{seen}");
    assert_eq!(seen["protocolVersion"], "2025-11-25", "{seen}");
    assert_eq!(seen["sessionId"], true);
    assert_eq!(seen["serverName"], "countersign-demo");
    assert_eq!(
        seen["tasksCapability"]["requests"]["tools"]["call"],
        json!({})
    );
    assert_eq!(seen["benchSupport"], "required");
    assert_eq!(seen["greeting"], "Hello, SDK!");
    assert_eq!(
        seen["bench"]["text"], "bench_job finished after 20 ms",
        "{seen}"
    );
    assert_eq!(seen["bench"]["statuses"][0], "working");
    assert_eq!(seen["confirm"]["text"], "Deleted a.txt.", "{seen}");
    assert_eq!(
        seen["questions"],
        json!(["Delete a.txt? This cannot be undone."])
    );
    assert_eq!(server.sessions(), 0, "the client ended its session");
}
