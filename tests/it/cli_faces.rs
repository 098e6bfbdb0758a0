//! What a person sees from the `countersign` binary (a real process) when a server is hostile
//! (issue 8): server text reaches the terminal with its control characters escaped and `--json`
//! keeps it exact; a server cannot keep a call in a question loop or reuse a task id unnoticed;
//! the audit CSV cannot carry spreadsheet formulas; `task get` exits by the task's status; and a
//! closed stdout ends a command quietly.
//!
//! Every server here is the hostile test server on 127.0.0.1 (`support/hostile.rs`).

use std::process::Stdio;
use std::time::Duration;

use countersign_tests::cli::run;
use countersign_tests::hostile::{self, Hostile, Reply, Request};
use countersign_tests::procs::DataDir;
use serde_json::{json, Value};

/// Sets the window title, erases the line, returns to column 0 and prints a forged row.
const FORGED: &str = "\x1b]0;pwned\x07\x1b[2K\rtask t1 completed";
/// [`FORGED`] as the CLI must show it.
const FORGED_SHOWN: &str = "\\x1b]0;pwned\\x07\\x1b[2K\\rtask t1 completed";
/// A task id that would start a new row of output if printed raw.
const ROW_ID: &str = "evil.1\nforged row";

/// `base` (an object) with the fields of `extra` added or replaced.
fn with(mut base: Value, extra: Value) -> Value {
    if let (Some(map), Value::Object(more)) = (base.as_object_mut(), extra) {
        map.extend(more);
    }
    base
}

/// [`hostile::task`] without a TTL: its `createdAt` is a fixed time, so a TTL would make the
/// task expire at once on a later day (or hour), whatever the test is about.
fn task(id: &str, status: &str) -> Value {
    with(hostile::task(id, status), json!({"ttlMs": null}))
}

/// A form question whose message is `message`.
fn question(message: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        }
    })
}

/// Panics if `text` holds a raw ESC, CSI (C1) or BEL byte: what a terminal would obey.
fn assert_no_raw_controls(what: &str, text: &str) {
    assert!(
        !text.contains(['\x1b', '\u{9b}', '\x07', '\r']),
        "{what} must not carry raw control characters: {text:?}"
    );
}

/// A task tool whose handle and every poll carry [`FORGED`] as status message and whose
/// result text carries escape sequences; its task id is [`ROW_ID`].
fn evil_tool(req: &Request) -> Reply {
    let working = with(
        task(ROW_ID, "working"),
        json!({"statusMessage": FORGED, "pollIntervalMs": 10}),
    );
    match req.method.as_str() {
        "tools/call" => Reply::Result(hostile::created(working)),
        "tasks/get" if req.nth == 0 => Reply::Result(with(
            working,
            json!({"statusMessage": format!("{FORGED} again")}),
        )),
        _ => Reply::Result(with(
            task(ROW_ID, "completed"),
            json!({
                "statusMessage": FORGED,
                "result": {"content": [{"type": "text", "text": "\x1b[31mred\x1b[0m\nline two\u{9b}2J"}]}
            }),
        )),
    }
}

// ------------------------------------------------------------------- case 7: server text

#[tokio::test]
async fn a_followed_call_shows_status_messages_task_ids_and_output_escaped() {
    let server = Hostile::builder().tool("evil", evil_tool).start().await;
    let got = run(&["call", &server.url(), "evil", "{}"]).await;
    got.assert_code(0);
    assert_no_raw_controls("stdout", &got.stdout);
    assert!(
        got.stdout
            .contains(&format!("task evil.1\\nforged row working: {FORGED_SHOWN}")),
        "the id and status message are shown escaped on one row: {got}"
    );
    assert!(
        !got.stdout.lines().any(|l| l.starts_with("forged row")),
        "a newline in a task id must not start a row: {got}"
    );
    assert!(
        got.stdout
            .contains("\\x1b[31mred\\x1b[0m\nline two\\x9b2J\n"),
        "tool output keeps its lines, each escaped: {got}"
    );
}

#[tokio::test]
async fn json_output_keeps_server_text_exact() {
    let server = Hostile::builder().tool("evil", evil_tool).start().await;
    let got = run(&["call", &server.url(), "evil", "{}", "--no-follow", "--json"]).await;
    got.assert_code(0);
    let handle = got.json();
    assert_eq!(handle["taskId"], ROW_ID, "{got}");
    assert_eq!(handle["statusMessage"], FORGED, "{got}");
    let got = run(&["call", &server.url(), "evil", "{}", "--json"]).await;
    got.assert_code(0);
    assert_eq!(
        got.json()["result"]["content"][0]["text"],
        "\x1b[31mred\x1b[0m\nline two\u{9b}2J",
        "{got}"
    );
    assert_no_raw_controls(
        "JSON (C0 escaped by serde, C1 such as U+009B by us)",
        &got.stdout,
    );
}

#[tokio::test]
async fn questions_and_server_errors_are_shown_escaped() {
    let server = Hostile::builder()
        .tool("ask", |_req: &Request| {
            Reply::Result(json!({
                "resultType": "input_required",
                "inputRequests": {"key\x1b[1A": question(FORGED)}
            }))
        })
        .tool("broken", |_req: &Request| Reply::Error {
            code: -32000,
            message: format!("boom {FORGED}"),
            data: None,
        })
        .start()
        .await;
    let got = run(&["call", &server.url(), "ask", "{}"]).await;
    got.assert_code(4);
    assert_no_raw_controls("stderr", &got.stderr);
    assert!(
        got.stderr
            .contains(&format!("  key\\x1b[1A: {FORGED_SHOWN}")),
        "the question is listed escaped: {got}"
    );

    let got = run(&["task", "get", &server.url(), "broken.1"]).await;
    got.assert_code(69);
    assert_no_raw_controls("stderr", &got.stderr);
    assert!(
        got.stderr.contains(&format!("boom {FORGED_SHOWN}")),
        "the server's error message is shown escaped: {got}"
    );
}

#[tokio::test]
async fn discover_and_tools_show_server_names_and_descriptions_escaped() {
    let server = Hostile::builder()
        .on("server/discover", |_req: &Request| {
            Reply::Result(json!({
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
                "instructions": format!("line one\n{FORGED}"),
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": format!("evil{FORGED}"), "version": "1"}},
                "resultType": "complete",
            }))
        })
        .on("tools/list", |_req: &Request| {
            Reply::Result(json!({
                "tools": [{"name": "t\x1b[8m", "description": FORGED, "inputSchema": {"type": "object"}}],
                "resultType": "complete",
            }))
        })
        .start()
        .await;
    let got = run(&["discover", &server.url()]).await;
    got.assert_code(0);
    assert_no_raw_controls("discover", &got.stdout);
    assert!(got.stdout.contains(FORGED_SHOWN), "{got}");
    assert!(
        got.stdout.contains("line one\n"),
        "multi-line instructions keep their lines: {got}"
    );
    let got = run(&["tools", &server.url()]).await;
    got.assert_code(0);
    assert_no_raw_controls("tools", &got.stdout);
    assert!(got.stdout.contains("t\\x1b[8m"), "{got}");
    assert!(got.stdout.contains(&format!("    {FORGED_SHOWN}")), "{got}");
}

#[tokio::test]
async fn ledger_views_show_server_text_escaped() {
    let server = Hostile::builder()
        .tool("evil", |req: &Request| {
            let task = with(
                task(ROW_ID, "input_required"),
                json!({
                    "statusMessage": FORGED,
                    "pollIntervalMs": 60_000,
                    "inputRequests": {"k\x1b[2J": question(FORGED)}
                }),
            );
            match req.method.as_str() {
                "tools/call" => Reply::Result(hostile::created(task)),
                _ => Reply::Result(task),
            }
        })
        .start()
        .await;
    let dir = DataDir::new("faces-views");
    dir.add_server("evil\x1b[5m", &server.url()).await;
    dir.run(&["call", "evil\x1b[5m", "evil", "{}", "--no-follow"])
        .await
        .expect_code(0);
    for args in [
        vec!["task", "show", "#1"],
        vec!["tasks"],
        vec!["inbox"],
        vec!["servers", "list"],
    ] {
        let got = dir.run(&args).await;
        got.expect_code(0);
        assert_no_raw_controls(&format!("{args:?}"), &got.stdout);
        assert!(
            !got.stdout.lines().any(|l| l.starts_with("forged row")),
            "{args:?}: a newline in a task id must not start a row: {got}"
        );
        assert!(
            got.stdout.contains("evil\\x1b[5m"),
            "{args:?} shows the server name escaped: {got}"
        );
    }
    let shown = dir.run(&["task", "show", "#1"]).await;
    assert!(
        shown
            .stdout
            .contains(&format!("status:    input_required: {FORGED_SHOWN}")),
        "{shown}"
    );
    let inbox = dir.run(&["inbox"]).await;
    assert!(inbox.stdout.contains(FORGED_SHOWN), "{inbox}");
    assert!(inbox.stdout.contains("key k\\x1b[2J"), "{inbox}");
    let exact = dir.run(&["--json", "task", "show", "#1"]).await;
    exact.expect_code(0);
    assert_eq!(exact.json()["task"]["task_id"], ROW_ID, "{exact}");
    // The link is percent-encoded: the hostile id cannot break the line or the terminal, and a
    // link to an id with control characters is one `TaskLink::parse` refuses to open.
    let link = exact.json()["link"].as_str().unwrap_or_default().to_owned();
    assert!(link.starts_with("countersign://task/http"), "{exact}");
    assert!(!link.chars().any(|c| c.is_control()), "{link:?}");
    assert!(
        shown.stdout.contains(&format!("  link:      {link}\n")),
        "{shown}"
    );
    assert_eq!(exact.json()["task"]["status_message"], FORGED, "{exact}");
}

// --------------------------------------------------------- case 6: the MRTR loop is bounded

/// A tool that answers every call, answered or not, with one more question.
fn always_asks(req: &Request) -> Reply {
    Reply::Result(json!({
        "resultType": "input_required",
        "inputRequests": {format!("q{}", req.nth): question("and one more?")},
        "requestState": format!("round-{}", req.nth)
    }))
}

#[tokio::test]
async fn a_server_that_always_asks_stops_a_recorded_call_after_16_rounds() {
    let server = Hostile::builder().tool("ask", always_asks).start().await;
    let dir = DataDir::new("faces-mrtr");
    dir.add_server("asker", &server.url()).await;
    let got = dir
        .run(&[
            "--json",
            "call",
            "asker",
            "ask",
            "{}",
            "--accept",
            r#"{"ok":true}"#,
        ])
        .await;
    got.expect_code(69);
    assert_eq!(
        got.json()["error"]["reason"],
        "too_many_question_rounds",
        "{got}"
    );
    assert!(got.stderr.contains("after 16 rounds"), "{got}");
    assert_eq!(
        server.count("tools/call"),
        16,
        "the same bound as direct mode: 16 calls, then stop"
    );
    let intents = dir.ledger().intents();
    assert_eq!(intents.len(), 16, "one recorded intent per round");
    assert!(
        intents.iter().all(|i| i.state == "input_required"),
        "every round's intent is resolved: {intents:?}"
    );
}

#[tokio::test]
async fn a_server_that_always_asks_stops_a_direct_call_after_16_rounds() {
    let server = Hostile::builder().tool("ask", always_asks).start().await;
    let got = run(&[
        "--json",
        "call",
        &server.url(),
        "ask",
        "{}",
        "--accept",
        r#"{"ok":true}"#,
    ])
    .await;
    got.assert_code(69);
    assert_eq!(
        got.json()["error"]["reason"],
        "too_many_question_rounds",
        "{got}"
    );
    assert_eq!(server.count("tools/call"), 16);
}

// ----------------------------------------------------------- case 15: small CLI defects

#[tokio::test]
async fn a_reused_task_id_fails_the_call_with_exit_69_and_resolves_its_intent() {
    let server = Hostile::builder()
        .tool("dup", |req: &Request| {
            let task = task("dup.same", "working");
            match req.method.as_str() {
                "tools/call" => Reply::Result(hostile::created(task)),
                _ => Reply::Result(task),
            }
        })
        .start()
        .await;
    let dir = DataDir::new("faces-reuse");
    dir.add_server("dup", &server.url()).await;
    dir.run(&["call", "dup", "dup", "{}", "--no-follow"])
        .await
        .expect_code(0);
    let got = dir
        .run(&["--json", "call", "dup", "dup", "{}", "--no-follow"])
        .await;
    got.expect_code(69);
    assert_eq!(got.json()["error"]["reason"], "task_id_reused", "{got}");
    assert_eq!(got.json()["error"]["code"], "server", "{got}");
    assert!(
        got.stderr.contains("#1"),
        "names the task that has the id: {got}"
    );
    let intents = dir.ledger().intents();
    assert_eq!(intents.len(), 2, "{intents:?}");
    assert!(
        intents.iter().all(|i| i.state != "sending"),
        "no intent is left sending (a restart would call its outcome unknown): {intents:?}"
    );
    assert!(
        intents.iter().any(|i| i.state == "failed"),
        "the second call is recorded as failed: {intents:?}"
    );
    assert_eq!(dir.ledger().tasks().len(), 1, "the id is tracked once");
}

#[tokio::test]
async fn task_get_exits_by_the_tasks_status() {
    let server = Hostile::builder()
        .tool("st", |req: &Request| {
            let id = req.task_id().unwrap_or_default().to_owned();
            let status = id.trim_start_matches("st.");
            Reply::Result(match status {
                "completed" => with(
                    task(&id, status),
                    json!({"result": {"content": [{"type": "text", "text": "done"}]}}),
                ),
                "tool_error" => with(
                    task(&id, "completed"),
                    json!({"result": {"content": [{"type": "text", "text": "no"}], "isError": true}}),
                ),
                "failed" => with(
                    task(&id, status),
                    json!({"error": {"code": -32000, "message": "broke"}}),
                ),
                "input_required" => with(
                    task(&id, status),
                    json!({"inputRequests": {"k": question("ok?")}}),
                ),
                other => task(&id, other),
            })
        })
        .start()
        .await;
    for (status, code) in [
        ("completed", 0),
        ("tool_error", 1),
        ("failed", 2),
        ("cancelled", 3),
        ("input_required", 4),
        ("working", 5),
    ] {
        let got = run(&["task", "get", &server.url(), &format!("st.{status}")]).await;
        assert_eq!(got.code, Some(code), "task get of a {status} task; {got}");
    }
}

/// Runs `countersign ARGS…` with a stdout whose reading end is already closed, as
/// `countersign … | head -1` is once `head` has its line.
async fn run_into_closed_pipe(dir: &DataDir, args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let child = tokio::process::Command::new(countersign_tests::cli::binary())
        .arg("--data-dir")
        .arg(dir.path())
        .args(args)
        .env_remove("COUNTERSIGN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn countersign");
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("countersign must end when its stdout is closed")
        .expect("wait for countersign");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_closed_stdout_ends_a_command_quietly_with_141() {
    let server = Hostile::builder().tool("evil", evil_tool).start().await;
    let dir = DataDir::new("faces-pipe");
    dir.add_server("evil", &server.url()).await;
    dir.run(&["call", "evil", "evil", "{}", "--no-follow"])
        .await
        .expect_code(0);
    for args in [
        vec!["task", "show", "#1"],
        vec!["--json", "task", "show", "#1"],
        vec!["servers", "list"],
    ] {
        let (code, stderr) = run_into_closed_pipe(&dir, &args).await;
        assert_eq!(
            code,
            Some(141),
            "{args:?} into a closed pipe ends with 141, not a panic (101); stderr: {stderr}"
        );
        assert!(
            !stderr.contains("panicked"),
            "{args:?}: no panic message: {stderr}"
        );
    }
}

// ------------------------------------------------------------ case 8: audit CSV injection

#[tokio::test]
async fn the_audit_csv_export_guards_a_server_chosen_question_key() {
    const KEY: &str = "=HYPERLINK(\"http://evil.example\",\"click\")";
    let server = Hostile::builder()
        .tool("ask", |req: &Request| {
            let task = with(
                task("ask.1", "input_required"),
                json!({"pollIntervalMs": 60_000, "inputRequests": {KEY: question("ok?")}}),
            );
            match req.method.as_str() {
                "tools/call" => Reply::Result(hostile::created(task)),
                "tasks/update" => Reply::Result(json!({"resultType": "complete"})),
                _ => Reply::Result(task),
            }
        })
        .start()
        .await;
    let dir = DataDir::new("faces-csv");
    dir.add_server("asker", &server.url()).await;
    dir.run(&["call", "asker", "ask", "{}", "--no-follow"])
        .await
        .expect_code(0);
    dir.run(&["answer", "ask.1", "--accept", r#"{"ok":true}"#])
        .await
        .expect_code(0);
    let got = dir.run(&["audit", "--csv"]).await;
    got.expect_code(0);
    let answer_row = got
        .stdout
        .lines()
        .find(|l| l.contains(",answer_accept,"))
        .unwrap_or_else(|| panic!("an answer row in the export: {got}"));
    assert!(
        answer_row.contains(r#","'=HYPERLINK(""http://evil.example"",""click"")","#),
        "the key is exported as text, not a formula: {answer_row}"
    );
    assert!(
        !got.stdout.contains(",=") && !got.stdout.contains(",\"="),
        "no cell starts with '=': {got}"
    );
    let exact = dir.run(&["--json", "audit"]).await;
    assert!(
        exact.stdout.contains(r#""input_key":"=HYPERLINK("#),
        "the JSON export stays exact: {exact}"
    );
}

/// A pre-registered client's secret comes from a variable the person names, never from the
/// command line: a variable that is not set is a usage error before any server is contacted or
/// registered, and there is no flag that takes the secret itself.
#[tokio::test]
async fn a_client_secret_is_read_only_from_a_named_variable_and_a_missing_one_registers_nothing() {
    let dir = DataDir::new("faces-client-secret");
    let missing = dir
        .run_with_env(
            &[
                "servers",
                "add",
                "p",
                "http://127.0.0.1:9/mcp",
                "--client-id",
                "my-client",
                "--client-secret-env",
                "COUNTERSIGN_TEST_NO_SUCH_SECRET",
            ],
            &[],
        )
        .await;
    missing.expect_code(64);
    assert!(
        missing.stderr.contains("COUNTERSIGN_TEST_NO_SUCH_SECRET"),
        "the message names the variable: {missing}"
    );
    let listed = dir.run_json(&["servers", "list"]).await;
    assert_eq!(listed, json!([]), "nothing was registered");
    let inline = dir
        .run(&[
            "servers",
            "login",
            "p",
            "--client-id",
            "my-client",
            "--client-secret",
            "s3cr3t",
        ])
        .await;
    assert_ne!(
        inline.code,
        Some(0),
        "no flag takes a secret itself: {inline}"
    );
    let without_id = dir
        .run_with_env(
            &["servers", "login", "p", "--client-secret-env", "SECRET"],
            &[("SECRET", "s3cr3t")],
        )
        .await;
    assert_ne!(
        without_id.code,
        Some(0),
        "a secret needs its client id: {without_id}"
    );
    assert!(
        !without_id.stderr.contains("s3cr3t"),
        "no secret in the message: {without_id}"
    );
}
