//! The `countersign` binary in direct mode against a server of the 2025-11-25 generation: the
//! real reference server `@modelcontextprotocol/server-everything` 2026.8.31 on Streamable HTTP
//! (a session per command, SEP-1686 Tasks, questions as `elicitation/create` on `tasks/result`).
//! Same commands, output and exit codes as against a modern server.
//!
//! Each test starts its own server; a few use a scripted legacy server (the hostile server)
//! for what server-everything never does: a sampling request, a failed task, a server that
//! never answers `initialize` or answers with a version we do not speak. Without Node or the package the tests fail, naming
//! `bash .ci/setup-tools.sh`; they never skip. stdin is never a terminal here, so a question
//! without `--accept`/`--decline` is "input needed" (exit 4).

use countersign_tests::cli::{run, Run};
use countersign_tests::everything::Everything;
use countersign_tests::hostile::{Builder, Hostile, Reply, Request, SseEnd};
use serde_json::{json, Value};

const RESEARCH: &str = "simulate-research-query";
const AMBIGUOUS: &str = r#"{"topic":"python","ambiguous":true}"#;

/// The text blocks of a `result` in `--json` output, joined.
fn result_text(output: &Value) -> String {
    output
        .pointer("/result/content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn assert_session_note(got: &Run) {
    assert!(
        got.stderr
            .contains("a 2025-11-25 server binds a task to the session that created it"),
        "the task's fate is said: {got}"
    );
}

#[tokio::test]
async fn discover_shows_the_legacy_era_and_what_initialize_said() {
    let server = Everything::start();
    let got = run(&["discover", &server.url()]).await;
    got.assert_code(0);
    for line in [
        "era:        legacy (2025-11-25)",
        "server:     mcp-servers/everything",
        "versions:   2025-11-25",
        "tasks:      yes",
    ] {
        assert!(got.stdout.contains(line), "{line:?} is printed: {got}");
    }
    assert!(got.stdout.contains("capabilities: ") && got.stdout.contains("tasks"));

    let got = run(&["discover", &server.url(), "--json"]).await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(output["era"], "legacy", "{got}");
    assert_eq!(output["protocolVersion"], "2025-11-25", "{got}");
    assert_eq!(
        output.pointer("/serverInfo/name"),
        Some(&json!("mcp-servers/everything")),
        "{got}"
    );
    assert!(
        output
            .pointer("/capabilities/tasks/requests/tools/call")
            .is_some(),
        "the capabilities are the server's, verbatim: {got}"
    );
}

#[tokio::test]
async fn tools_lists_the_research_query_as_a_required_task() {
    let server = Everything::start();
    let got = run(&["tools", &server.url()]).await;
    got.assert_code(0);
    let lines: Vec<&str> = got.stdout.lines().collect();
    assert!(
        lines.contains(&"simulate-research-query [task: required]"),
        "{got}"
    );
    assert!(
        lines.contains(&"echo"),
        "a tool without task support has no tag: {got}"
    );

    let got = run(&["tools", &server.url(), "--json"]).await;
    got.assert_code(0);
    let output = got.json();
    let research = output["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == RESEARCH))
        .unwrap_or_else(|| panic!("{RESEARCH} is listed: {got}"));
    assert_eq!(research["execution"]["taskSupport"], "required", "{got}");
    assert_eq!(output["excluded"], json!([]), "{got}");
}

#[tokio::test]
async fn call_echo_prints_the_result_and_exits_0() {
    let server = Everything::start();
    let got = run(&["call", &server.url(), "echo", r#"{"message":"hi"}"#]).await;
    got.assert_code(0);
    assert_eq!(got.stdout.trim(), "Echo: hi", "{got}");

    let got = run(&[
        "call",
        &server.url(),
        "echo",
        r#"{"message":"hi"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(output["outcome"], "completed", "{got}");
    assert_eq!(
        output["taskId"],
        Value::Null,
        "a plain call has no task: {got}"
    );
    assert_eq!(result_text(&output), "Echo: hi");
}

#[tokio::test]
async fn a_research_query_is_followed_as_a_task_to_its_report() {
    let server = Everything::start();
    let got = run(&["call", &server.url(), RESEARCH, r#"{"topic":"python"}"#]).await;
    got.assert_code(0);
    assert!(
        got.stdout.contains("working: Gathering sources..."),
        "each status change is printed: {got}"
    );
    assert!(
        got.stdout.contains("working: Generating report..."),
        "{got}"
    );
    assert!(got.stdout.contains(" completed"), "{got}");
    assert!(got.stdout.contains("# Research Report: python"), "{got}");

    let got = run(&[
        "call",
        &server.url(),
        RESEARCH,
        r#"{"topic":"python"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(output["outcome"], "completed", "{got}");
    assert!(output["taskId"].is_string(), "{got}");
    assert!(
        result_text(&output).contains("# Research Report: python"),
        "{got}"
    );
}

#[tokio::test]
async fn an_accepted_clarification_shapes_the_report() {
    let server = Everything::start();
    let got = run(&[
        "call",
        &server.url(),
        RESEARCH,
        AMBIGUOUS,
        "--accept",
        r#"{"interpretation":"programming"}"#,
    ])
    .await;
    got.assert_code(0);
    assert!(got.stdout.contains("input_required: "), "{got}");
    assert!(got.stdout.contains("  answered 0: accept"), "{got}");
    assert!(
        got.stdout
            .contains("# Research Report: python (programming)"),
        "{got}"
    );

    let got = run(&[
        "call",
        &server.url(),
        RESEARCH,
        AMBIGUOUS,
        "--accept",
        r#"{"interpretation":"snake"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(output["outcome"], "completed", "{got}");
    assert!(
        result_text(&output).contains("Research Report: python (snake)"),
        "{got}"
    );
}

#[tokio::test]
async fn a_declined_clarification_completes_with_the_default_interpretation() {
    let server = Everything::start();
    let got = run(&[
        "call",
        &server.url(),
        RESEARCH,
        AMBIGUOUS,
        "--decline",
        "--json",
    ])
    .await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(output["outcome"], "completed", "{got}");
    let report = result_text(&output);
    assert!(
        report.contains("# Research Report: python (User declined - using default interpretation)"),
        "server-everything goes on without the clarification: {got}"
    );
    for interpretation in ["programming", "snake", "comedy"] {
        assert!(
            !report.contains(&format!("({interpretation})")),
            "no interpretation was chosen: {got}"
        );
    }
}

#[tokio::test]
async fn a_question_with_no_answer_and_no_terminal_exits_4() {
    let server = Everything::start();
    let got = run(&["call", &server.url(), RESEARCH, AMBIGUOUS]).await;
    got.assert_code(4);
    assert!(
        got.stderr
            .contains("input needed and no terminal to ask on"),
        "{got}"
    );
    assert!(got.stderr.contains("Please clarify"), "{got}");
    assert_session_note(&got);

    let got = run(&["call", &server.url(), RESEARCH, AMBIGUOUS, "--json"]).await;
    got.assert_code(4);
    let output = got.json();
    assert_eq!(output["outcome"], "input_needed", "{got}");
    assert!(output["taskId"].is_string(), "{got}");
    let requests = output["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("the questions are listed: {got}"));
    assert_eq!(requests.len(), 1, "{got}");
    let (_, question) = requests.iter().next().expect("one question");
    assert_eq!(question["method"], "elicitation/create", "{got}");
    assert!(
        question.pointer("/params/requestedSchema").is_some(),
        "{got}"
    );
}

#[tokio::test]
async fn no_follow_prints_the_handle_and_other_sessions_cannot_see_the_task() {
    let server = Everything::start();
    let url = server.url();
    let got = run(&[
        "call",
        &url,
        RESEARCH,
        r#"{"topic":"python"}"#,
        "--no-follow",
        "--json",
    ])
    .await;
    got.assert_code(0);
    assert_session_note(&got);
    let handle = got.json();
    assert_eq!(handle["status"], "working", "{got}");
    assert_eq!(handle["ttl"], 300_000, "the task asked for 300 s: {got}");
    let task_id = handle["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {got}"))
        .to_owned();

    let got = run(&[
        "call",
        &url,
        RESEARCH,
        r#"{"topic":"python"}"#,
        "--no-follow",
    ])
    .await;
    got.assert_code(0);
    assert!(
        got.stdout.starts_with("task ") && got.stdout.contains(" working"),
        "{got}"
    );
    assert_session_note(&got);

    for verb in ["get", "cancel"] {
        let got = run(&["task", verb, &url, &task_id, "--json"]).await;
        got.assert_code(69);
        assert_eq!(got.json()["error"]["reason"], "unknown_task", "{got}");
        assert!(
            got.stderr
                .contains("a 2025-11-25 server only shows a session its own tasks"),
            "task {verb} says why: {got}"
        );
    }

    let got = run(&["task", "answer", &url, &task_id, "--decline", "--json"]).await;
    got.assert_code(64);
    let error = &got.json()["error"];
    assert_eq!(error["code"], "invalid_input", "{got}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot be answered outside that session")),
        "{got}"
    );
}

// ------------------------------------- a scripted legacy server: what server-everything never does

/// Whether a request is a modern one (its version is 2026-07-28), which a legacy server
/// refuses as sent outside a session.
pub(crate) fn modern(request: &Request) -> bool {
    request.header("mcp-protocol-version") == Some("2026-07-28")
}

pub(crate) fn not_initialized() -> Reply {
    Reply::error(-32000, "Bad Request: Server not initialized")
}

/// A 2025-11-25 server scripted with the hostile server: it refuses modern requests as an
/// uninitialized legacy server does and answers `initialize` with `initialize`.
pub(crate) fn legacy(initialize: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Builder {
    Hostile::builder()
        .on("server/discover", |_| not_initialized())
        .on("initialize", initialize)
        .on("tools/list", |request| {
            if modern(request) {
                return not_initialized();
            }
            Reply::Result(json!({"tools": [
                {"name": "research", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "required"}},
                {"name": "broken", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "optional"}},
            ]}))
        })
}

pub(crate) fn initialized(_: &Request) -> Reply {
    Reply::Result(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}},
        "serverInfo": {"name": "scripted-legacy", "version": "1"},
    }))
}

/// A legacy task object.
pub(crate) fn legacy_task(id: &str, status: &str) -> Value {
    json!({"taskId": id, "status": status, "ttl": 60000, "pollInterval": 100,
           "createdAt": "2026-12-07T00:00:00Z", "lastUpdatedAt": "2026-12-07T00:00:01Z"})
}

/// The tool's handler: a task that is done at once, whose `tasks/result` is `events` (each
/// given the request's id where it is `null`).
fn task_then(
    result: impl Fn(&Request) -> Vec<Value> + Send + Sync + 'static,
    status: &'static str,
) -> impl Fn(&Request) -> Reply + Send + Sync + 'static {
    move |request| match request.method.as_str() {
        _ if modern(request) => not_initialized(),
        "tools/call" => {
            assert!(
                request.params.get("task").is_some(),
                "a task tool is called with params.task: {request:?}"
            );
            Reply::Result(json!({"task": legacy_task(&request.new_task_id(), "working")}))
        }
        "tasks/get" => Reply::Result(legacy_task(request.task_id().unwrap_or_default(), status)),
        "tasks/result" => Reply::Sse {
            events: result(request).iter().map(Value::to_string).collect(),
            then: SseEnd::Close,
        },
        _ => Reply::error(-32601, "method not found"),
    }
}

#[tokio::test]
async fn a_sampling_request_on_tasks_result_is_refused_and_noted() {
    let server = legacy(initialized)
        .tool(
            "research",
            task_then(
                |request| {
                    vec![
                        json!({"jsonrpc": "2.0", "id": 900, "method": "sampling/createMessage",
                               "params": {"messages": [], "maxTokens": 10}}),
                        json!({"jsonrpc": "2.0", "id": request.id, "result":
                               {"content": [{"type": "text", "text": "done anyway"}]}}),
                    ]
                },
                "completed",
            ),
        )
        .start()
        .await;
    let got = run(&["call", &server.url(), "research", "{}"]).await;
    got.assert_code(0);
    assert!(got.stdout.contains("done anyway"), "{got}");
    assert!(
        got.stderr.contains("sampling/createMessage")
            && got.stderr.contains("Countersign does not support it"),
        "the refusal is noted: {got}"
    );
}

#[tokio::test]
async fn a_failed_task_exits_2_with_its_error() {
    let server = legacy(initialized)
        .tool(
            "broken",
            task_then(
                |request| {
                    vec![json!({"jsonrpc": "2.0", "id": request.id,
                                "error": {"code": -32603, "message": "the disk is full"}})]
                },
                "failed",
            ),
        )
        .start()
        .await;
    let got = run(&["call", &server.url(), "broken", "{}", "--json"]).await;
    got.assert_code(2);
    let output = got.json();
    assert_eq!(output["outcome"], "failed", "{got}");
    assert_eq!(output["taskId"], "broken.0", "{got}");
    assert!(
        output["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the disk is full")),
        "{got}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_exits_69_timeout() {
    let server = legacy(|_| Reply::Hang).start().await;
    let got = run(&["discover", &server.url(), "--timeout", "2", "--json"]).await;
    got.assert_code(69);
    assert_eq!(got.json()["error"]["reason"], "timeout", "{got}");
}

#[tokio::test]
async fn a_version_we_do_not_speak_exits_69_unsupported_version() {
    let server = legacy(|_| {
        Reply::Result(json!({"protocolVersion": "2024-11-05", "capabilities": {},
                             "serverInfo": {"name": "old", "version": "0"}}))
    })
    .start()
    .await;
    let got = run(&["tools", &server.url(), "--json"]).await;
    got.assert_code(69);
    assert_eq!(
        got.json()["error"]["reason"],
        "unsupported_version",
        "{got}"
    );
}

#[tokio::test]
async fn servers_add_keeps_a_legacy_servers_era_version_and_session_in_the_ledger() {
    let server = Everything::start();
    let dir = countersign_tests::rig::TempDir::new("cli-legacy-add");
    let data = dir.0.to_str().expect("a UTF-8 temp path");
    let got = run(&[
        "--data-dir",
        data,
        "servers",
        "add",
        "everything",
        &server.url(),
    ])
    .await;
    got.assert_code(0);
    assert!(
        got.stdout
            .contains("mcp-servers/everything; legacy 2025-11-25"),
        "the era and version are said: {got}"
    );

    let got = run(&["--data-dir", data, "servers", "list"]).await;
    got.assert_code(0);
    assert!(got.stdout.contains("legacy 2025-11-25"), "{got}");

    // The session is durable state: in the ledger file, and never in what the CLI prints.
    let ledger = rusqlite::Connection::open(dir.0.join(countersign_core::ledger::LEDGER_FILE))
        .expect("the ledger file opens");
    let (era, version, session): (String, String, String) = ledger
        .query_row(
            "SELECT era, protocol_version, legacy_session FROM servers WHERE name = 'everything'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("the server row");
    assert_eq!((era.as_str(), version.as_str()), ("legacy", "2025-11-25"));
    let session: Value = serde_json::from_str(&session).expect("the session is JSON");
    let id = session["sessionId"]
        .as_str()
        .expect("server-everything issues a session id");
    let got = run(&["--data-dir", data, "--json", "servers", "list"]).await;
    got.assert_code(0);
    let list = got.json();
    assert_eq!(list[0]["era"], "legacy", "{got}");
    assert_eq!(list[0]["protocol_version"], "2025-11-25", "{got}");
    assert!(
        !got.stdout.contains(id),
        "the session id stays in the ledger: {got}"
    );
}
