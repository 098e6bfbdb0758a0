//! The legacy-era client against the real reference server: `@modelcontextprotocol/server-everything`
//! 2026.8.31 (TypeScript SDK 1.32.2, MCP 2025-11-25, SEP-1686 Tasks) on Streamable HTTP, installed
//! pinned by `bash .ci/setup-tools.sh` into `.ci/tools`. Each test starts its own server on a
//! free port. The server listens on every interface; we send it traffic on 127.0.0.1 only.
//!
//! Without Node or the package these tests fail (they never skip): run `bash .ci/setup-tools.sh`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use countersign_mcp::era::{self, Connection};
use countersign_mcp::legacy::{
    CancelOutcome, ElicitAction, LegacyClient, ServerRequest, TaskMetadata, TaskResultEvent,
    TaskStatus, TaskSupport, ToolOutcome,
};
use countersign_mcp::{ClientOptions, Endpoint, Era, Error};
use serde_json::{json, Map, Value};

const SETUP: &str = "bash .ci/setup-tools.sh";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// server-everything on Streamable HTTP on one port; killed when dropped.
struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        Self::start_on(port)
    }

    fn start_on(port: u16) -> Self {
        let tools = repo_root().join(".ci/tools/node_modules");
        let script = tools.join("@modelcontextprotocol/server-everything/dist/index.js");
        assert!(
            script.is_file(),
            "server-everything is not installed at {}: run `{SETUP}` from the repository root",
            script.display()
        );
        let pinned_node = tools.join(".bin/node");
        let node = if pinned_node.exists() {
            pinned_node
        } else {
            PathBuf::from("node")
        };
        let child = Command::new(&node)
            .arg(&script)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start Node ({}): {e}; run `{SETUP}` from the repository root",
                    node.display()
                )
            });
        let mut server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("server-everything exited at start ({status}); run `{SETUP}` and check port {port}");
            }
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen on 127.0.0.1:{port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::new(self.url())
    }

    /// Kills the process and starts a new one on the same port: every session is gone.
    fn restart(mut self) -> Self {
        let port = self.port;
        self.stop();
        Self::start_on(port)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn connect(server: &Everything) -> LegacyClient {
    LegacyClient::connect(server.endpoint(), ClientOptions::default())
        .await
        .expect("initialize with server-everything")
}

fn args(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}

const TASK: Option<TaskMetadata> = Some(TaskMetadata { ttl: Some(60_000) });

/// Starts `simulate-research-query` as a task; its id.
async fn start_research(client: &LegacyClient, ambiguous: bool) -> String {
    let outcome = client
        .call_tool(
            "simulate-research-query",
            args(json!({"topic": "python", "ambiguous": ambiguous})),
            TASK,
        )
        .await
        .expect("tools/call with a task");
    match outcome {
        ToolOutcome::Task(task) => {
            assert_eq!(task.status, TaskStatus::Working, "{task:?}");
            task.task_id
        }
        other => panic!("expected a CreateTaskResult, got {other:?}"),
    }
}

/// Polls `tasks/get` at the server's interval until the task leaves `working`.
async fn poll_until_not_working(client: &LegacyClient, task_id: &str) -> TaskStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let task = client.get_task(task_id).await.expect("tasks/get");
        assert_eq!(task.task_id, task_id);
        if task.status != TaskStatus::Working {
            return task.status;
        }
        assert!(Instant::now() < deadline, "the task never left working");
        let interval = task
            .poll_interval_within(Duration::from_millis(100), Duration::from_secs(2))
            .unwrap_or(Duration::from_millis(500));
        tokio::time::sleep(interval).await;
    }
}

fn report_text(result: &countersign_mcp::ToolResult) -> String {
    result
        .content()
        .iter()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Drives `tasks/result` to its end, answering the elicitation with `answer`; returns the
/// report and the questions seen.
async fn result_answering(
    client: &LegacyClient,
    task_id: &str,
    answer: ElicitAction,
) -> (String, Vec<ServerRequest>) {
    let mut stream = client
        .task_result(task_id, Duration::from_secs(30))
        .await
        .expect("tasks/result opens");
    let mut questions = Vec::new();
    while let Some(event) = stream.next().await {
        match event.expect("tasks/result event") {
            TaskResultEvent::Request(request) => {
                stream
                    .answer_elicitation(&request, &answer)
                    .await
                    .expect("the answer is taken");
                questions.push(request);
            }
            TaskResultEvent::Completed(result) => {
                assert!(!result.is_error(), "{result:?}");
                return (report_text(&result), questions);
            }
            TaskResultEvent::Refused(request) => panic!("unexpected server request {request:?}"),
            TaskResultEvent::Status(_) => {}
        }
    }
    panic!("tasks/result ended without a result");
}

#[tokio::test]
async fn era_detection_finds_a_legacy_server_speaking_2025_11_25() {
    let server = Everything::start();
    let connection = era::connect(server.endpoint(), ClientOptions::default())
        .await
        .expect("connects");
    let profile = connection.profile();
    assert_eq!(profile.era, Era::Legacy, "{profile:?}");
    assert_eq!(profile.protocol_version, "2025-11-25");
    assert!(
        profile
            .capabilities
            .pointer("/tasks/requests/tools/call")
            .is_some(),
        "server-everything declares task-augmented tools/call: {profile:?}"
    );
    assert_eq!(
        profile.server_info.as_ref().and_then(|i| i.get("name")),
        Some(&json!("mcp-servers/everything"))
    );
    let Connection::Legacy(client) = connection else {
        panic!("expected a legacy connection")
    };
    let session = client.session();
    assert!(
        session.session_id.is_some(),
        "a sessionful server issues an id"
    );
    assert!(session.supports_tool_tasks() && session.supports_task_list());
    client.close().await.expect("DELETE ends the session");
    let gone = client
        .list_tools()
        .await
        .expect_err("the session was closed");
    assert!(matches!(gone, Error::SessionExpired { .. }), "{gone:?}");
}

#[tokio::test]
async fn tools_list_shows_task_support_and_echo_answers_plainly() {
    let server = Everything::start();
    let client = connect(&server).await;
    let tools = client.list_tools().await.expect("tools/list");
    let support = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| {
                panic!(
                    "no tool {name} in {:?}",
                    tools.iter().map(|t| &t.name).collect::<Vec<_>>()
                )
            })
            .task_support
    };
    assert_eq!(support("simulate-research-query"), TaskSupport::Required);
    assert_eq!(support("echo"), TaskSupport::Forbidden);

    let echoed = client
        .call_tool("echo", args(json!({"message": "hello"})), None)
        .await
        .expect("echo");
    let ToolOutcome::Result(result) = echoed else {
        panic!("echo is not a task: {echoed:?}")
    };
    assert!(!result.is_error());
    assert_eq!(report_text(&result), "Echo: hello");
}

#[tokio::test]
async fn a_research_query_runs_as_a_task_to_its_report() {
    let server = Everything::start();
    let client = connect(&server).await;
    let mut pushes = client
        .open_stream(Duration::from_secs(30))
        .await
        .expect("GET stream")
        .expect("server-everything offers a GET stream");
    let task_id = start_research(&client, false).await;
    assert_eq!(
        poll_until_not_working(&client, &task_id).await,
        TaskStatus::Completed
    );
    let (report, questions) = result_answering(&client, &task_id, ElicitAction::Decline).await;
    assert!(questions.is_empty(), "no question without ambiguity");
    assert!(report.contains("# Research Report: python"), "{report}");

    // The status pushes came on the GET stream: at least the completion.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.contains(&TaskStatus::Completed) && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(5), pushes.next()).await {
            Ok(Some(Ok(countersign_mcp::legacy::SessionEvent::TaskStatus(task)))) => {
                assert_eq!(task.task_id, task_id);
                seen.push(task.status);
            }
            Ok(Some(Ok(_))) => {}
            other => panic!("the GET stream failed or went quiet: {other:?} after {seen:?}"),
        }
    }
    assert!(seen.contains(&TaskStatus::Completed), "{seen:?}");
}

#[tokio::test]
async fn an_ambiguous_query_asks_and_the_accepted_answer_shapes_the_report() {
    let server = Everything::start();
    let client = connect(&server).await;
    let task_id = start_research(&client, true).await;
    assert_eq!(
        poll_until_not_working(&client, &task_id).await,
        TaskStatus::InputRequired
    );
    let mut content = Map::new();
    content.insert("interpretation".into(), json!("programming"));
    let (report, questions) =
        result_answering(&client, &task_id, ElicitAction::Accept(content)).await;
    assert_eq!(questions.len(), 1, "{questions:?}");
    assert_eq!(questions[0].method, "elicitation/create");
    assert_eq!(questions[0].related_task(), Some(task_id.as_str()));
    assert!(
        report.contains("Research Report: python (programming)"),
        "{report}"
    );
    assert_eq!(
        client.get_task(&task_id).await.expect("tasks/get").status,
        TaskStatus::Completed
    );
}

#[tokio::test]
async fn a_declined_question_still_ends_the_task_without_the_clarification() {
    let server = Everything::start();
    let client = connect(&server).await;
    let task_id = start_research(&client, true).await;
    assert_eq!(
        poll_until_not_working(&client, &task_id).await,
        TaskStatus::InputRequired
    );
    let (report, questions) = result_answering(&client, &task_id, ElicitAction::Decline).await;
    assert_eq!(questions.len(), 1);
    assert!(report.contains("# Research Report: python"), "{report}");
    assert!(!report.contains("(programming)"), "{report}");
}

#[tokio::test]
async fn tasks_belong_to_their_session_and_a_finished_one_cannot_be_cancelled() {
    let server = Everything::start();
    let client = connect(&server).await;
    let task_id = start_research(&client, false).await;

    let listed = client.list_tasks(None).await.expect("tasks/list");
    assert!(
        listed.tasks.iter().any(|t| t.task_id == task_id),
        "our task is listed: {listed:?}"
    );
    let other = connect(&server).await;
    let theirs = other.list_tasks(None).await.expect("tasks/list");
    assert!(
        theirs.tasks.iter().all(|t| t.task_id != task_id),
        "another session does not see our task: {theirs:?}"
    );
    let unknown = other.get_task(&task_id).await.expect_err("not its task");
    assert!(matches!(unknown, Error::UnknownTask { .. }), "{unknown:?}");

    assert_eq!(
        poll_until_not_working(&client, &task_id).await,
        TaskStatus::Completed
    );
    match client.cancel_task(&task_id).await.expect("tasks/cancel") {
        CancelOutcome::AlreadyFinished { message } => {
            assert!(message.contains("terminal"), "{message}")
        }
        other => panic!("expected already finished, got {other:?}"),
    }
}

#[tokio::test]
async fn a_working_task_is_cancelled() {
    let server = Everything::start();
    let client = connect(&server).await;
    let task_id = start_research(&client, false).await;
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
}

#[tokio::test]
async fn a_stored_session_resumes_and_a_restarted_server_has_forgotten_it() {
    let server = Everything::start();
    let client = connect(&server).await;
    let task_id = start_research(&client, false).await;

    // The session as the ledger would store it, taken up by a new client.
    let stored = serde_json::to_string(&client.session()).expect("serialisable");
    let session = serde_json::from_str(&stored).expect("readable");
    let resumed =
        LegacyClient::resume(server.endpoint(), ClientOptions::default(), session).expect("resume");
    assert_eq!(
        resumed
            .get_task(&task_id)
            .await
            .expect("same session")
            .task_id,
        task_id
    );

    let server = server.restart();
    let expired = resumed
        .get_task(&task_id)
        .await
        .expect_err("the new process knows no session");
    assert!(
        matches!(
            expired,
            Error::SessionExpired {
                status: 400 | 404,
                ..
            }
        ),
        "{expired:?}"
    );
    assert_eq!(expired.class(), countersign_mcp::ErrorClass::Lost);

    // A new session works, and does not know the old task.
    let fresh = connect(&server).await;
    let gone = fresh
        .get_task(&task_id)
        .await
        .expect_err("the task went with the session");
    assert!(matches!(gone, Error::UnknownTask { .. }), "{gone:?}");
}

/// Re-records `tests/fixtures/wire/server-everything.json` (replayed by `legacy_replay.rs`)
/// through `tests/fixtures/wire/record_proxy.py`: `cargo test -p countersign-mcp --test
/// it -- --ignored legacy_everything::record_server_everything_exchanges`. Needs python3.
#[tokio::test]
#[ignore = "re-records a fixture; run by hand"]
async fn record_server_everything_exchanges() {
    let server = Everything::start();
    let proxy_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wire");
    let mut proxy = Command::new("python3")
        .arg(fixtures.join("record_proxy.py"))
        .arg(proxy_port.to_string())
        .arg(server.url())
        .arg(fixtures.join("server-everything.json"))
        .spawn()
        .expect("python3 runs the recording proxy");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", proxy_port)).is_err() {
        assert!(Instant::now() < deadline, "the proxy did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = crate::scenario::scripted_session(
        &format!("http://127.0.0.1:{proxy_port}/mcp"),
        Duration::from_millis(3500),
    )
    .await;
    assert_eq!(seen.status_before_answer, TaskStatus::InputRequired);
    assert!(seen.question.get("requestedSchema").is_some(), "{seen:?}");
    assert!(seen.report.contains("(programming)"), "{seen:?}");
    assert_eq!(seen.status_after, TaskStatus::Completed);
    assert!(
        matches!(seen.cancel, CancelOutcome::AlreadyFinished { .. }),
        "{seen:?}"
    );
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(proxy.id().to_string())
        .status();
    let _ = proxy.wait();
}
