//! The `countersign` binary as a real process, in direct mode (no ledger): its exit codes and
//! `--json` output are a contract for scripts.
//!
//! Exit codes: 0 completed, 1 completed with `isError`, 2 failed, 3 cancelled, 4 input needed,
//! 5 still working (`task get`), 64 usage, 69 connection or protocol error. stdin is never a terminal here, so a question
//! without `--accept`/`--decline` is "input needed".
//!
//! Servers: the independent fastmcp peer (50 ms steps, `pollIntervalMs` 50) and our demo
//! server started as `countersign demo-server --port 0 --speed 100` (its `pollIntervalMs` is
//! the default 1000, so each followed task there takes a second or two).

use std::time::{Duration, Instant};

use countersign_demo::{DemoConfig, DemoServer, Fault, ResponseMode};
use countersign_tests::cli::{run, run_with_env, DemoProcess, Run};
use countersign_tests::peer::FastmcpPeer;
use serde_json::{json, Value};

async fn fast_peer() -> FastmcpPeer {
    FastmcpPeer::start_with_env(&[
        ("PEER_STEP_SECONDS", "0.05"),
        ("PEER_POLL_INTERVAL_MS", "50"),
    ])
    .await
}

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

/// Runs `task get URL ID --json` until the task reaches `status` (10 s at most).
async fn task_get_until(url: &str, task_id: &str, status: &str) -> (Run, Value) {
    let started = Instant::now();
    loop {
        let got = run(&["task", "get", url, task_id, "--json"]).await;
        let output = got.json();
        if output["status"] == status {
            return (got, output);
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "task {task_id} never became {status}; last: {got}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A loopback port with nothing listening on it.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    let port = listener.local_addr().expect("local addr").port();
    drop(listener);
    port
}

// ---------------------------------------------------------------- against the fastmcp peer

#[tokio::test]
async fn discover_json_prints_the_peers_discover_result() {
    let peer = fast_peer().await;
    let got = run(&["discover", &peer.url, "--json"]).await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(
        output.pointer("/_meta/io.modelcontextprotocol~1serverInfo/name"),
        Some(&json!("peer-fastmcp-tasks")),
        "{got}"
    );
    assert!(
        output
            .pointer("/capabilities/extensions/io.modelcontextprotocol~1tasks")
            .is_some(),
        "the tasks extension is declared: {got}"
    );
}

#[tokio::test]
async fn tools_json_lists_every_peer_tool_and_excludes_none() {
    let peer = fast_peer().await;
    let got = run(&["tools", &peer.url, "--json"]).await;
    got.assert_code(0);
    let output = got.json();
    let mut names: Vec<&str> = output["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools must be an array: {got}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "approve_deploy",
            "flaky_job",
            "long_job",
            "optional_job",
            "quick_echo",
            "slow_cancellable",
            "tool_error_job"
        ]
    );
    assert_eq!(output["excluded"], json!([]));
}

#[tokio::test]
async fn call_quick_echo_exits_0_with_the_completed_result() {
    let peer = fast_peer().await;
    let got = run(&[
        "call",
        &peer.url,
        "quick_echo",
        r#"{"text":"hi"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(output["outcome"], "completed", "{got}");
    assert_eq!(
        output["taskId"],
        Value::Null,
        "a synchronous call has no task"
    );
    assert_eq!(result_text(&output), "echo: hi");
}

#[tokio::test]
async fn call_in_text_mode_prints_each_status_change_and_the_result() {
    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_STEP_SECONDS", "0.2"),
        ("PEER_POLL_INTERVAL_MS", "50"),
    ])
    .await;
    let got = run(&["call", &peer.url, "long_job", r#"{"steps":3}"#]).await;
    got.assert_code(0);
    let lines: Vec<&str> = got.stdout.lines().collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("task ") && l.ends_with(" working")),
        "the first line is the handle: {got}"
    );
    assert!(
        lines.iter().any(|l| l.contains(" working: step ")),
        "status changes are printed as seen: {got}"
    );
    let done = lines
        .iter()
        .position(|l| l.starts_with("task ") && l.ends_with(" completed"))
        .unwrap_or_else(|| panic!("the completed status is printed: {got}"));
    // Then the result: its text, then its structuredContent (fastmcp wraps text as {"result"}).
    assert_eq!(
        lines.get(done + 1).copied(),
        Some("long_job finished after 3 steps"),
        "{got}"
    );
    let structured: Value = serde_json::from_str(&lines[done + 2..].join("\n"))
        .unwrap_or_else(|e| panic!("structuredContent is printed as JSON ({e}): {got}"));
    assert_eq!(
        structured,
        json!({"result": "long_job finished after 3 steps"})
    );
}

#[tokio::test]
async fn call_approve_deploy_with_accept_exits_0_approved() {
    let peer = fast_peer().await;
    let got = run(&[
        "call",
        &peer.url,
        "approve_deploy",
        r#"{"service":"billing-api"}"#,
        "--accept",
        r#"{"approve":true,"reason":"cli"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(output["outcome"], "completed", "{got}");
    assert!(
        output["taskId"].as_str().is_some_and(|id| !id.is_empty()),
        "{got}"
    );
    assert_eq!(
        result_text(&output),
        "approve_deploy(billing-api): approved, DEPLOYED (reason='cli')"
    );
}

#[tokio::test]
async fn call_approve_deploy_with_decline_exits_0_declined() {
    let peer = fast_peer().await;
    let got = run(&[
        "call",
        &peer.url,
        "approve_deploy",
        r#"{"service":"payments"}"#,
        "--decline",
        "--json",
    ])
    .await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(
        output["outcome"], "completed",
        "a declined approval still completes on fastmcp: {got}"
    );
    assert_eq!(
        result_text(&output),
        "approve_deploy(payments): declined (user action=decline); not deployed"
    );
}

#[tokio::test]
async fn call_flaky_job_exits_2_failed_with_the_error_code() {
    let peer = fast_peer().await;
    let got = run(&["call", &peer.url, "flaky_job", "{}", "--json"]).await;
    got.assert_code(2);
    let output = got.json();
    assert_eq!(output["outcome"], "failed", "{got}");
    assert_eq!(output["error"]["code"], -32603, "{got}");
    assert_eq!(
        output["error"]["message"], "flaky_job exploded (deliberate)",
        "{got}"
    );
}

#[tokio::test]
async fn call_tool_error_job_exits_1_tool_error() {
    let peer = fast_peer().await;
    let got = run(&["call", &peer.url, "tool_error_job", "--json"]).await;
    got.assert_code(1);
    let output = got.json();
    assert_eq!(output["outcome"], "tool_error", "{got}");
    assert_eq!(output["result"]["isError"], true, "{got}");
    assert_eq!(
        result_text(&output),
        "tool_error_job failed (deliberate tool-level error)"
    );
}

#[tokio::test]
async fn call_with_a_question_and_no_terminal_exits_4_input_needed() {
    let peer = fast_peer().await;
    let got = run(&[
        "call",
        &peer.url,
        "approve_deploy",
        r#"{"service":"web"}"#,
        "--json",
    ])
    .await;
    got.assert_code(4);
    let output = got.json();
    assert_eq!(output["outcome"], "input_needed", "{got}");
    let task_id = output["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("the task id is reported: {got}"));
    let requests = output["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("the questions are reported: {got}"));
    assert_eq!(requests.len(), 1, "{got}");
    let (key, request) = requests.iter().next().expect("one");
    assert!(key.starts_with(&format!("{task_id}:")), "{key}");
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Approve deployment of 'web'?");
}

#[tokio::test]
async fn no_follow_prints_the_handle_then_task_get_and_cancel_act_on_it() {
    let peer = fast_peer().await;
    let got = run(&[
        "call",
        &peer.url,
        "slow_cancellable",
        r#"{"seconds":30}"#,
        "--no-follow",
        "--json",
    ])
    .await;
    got.assert_code(0);
    let handle = got.json();
    let task_id = handle["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a handle with taskId: {got}"))
        .to_string();
    assert_eq!(handle["status"], "working", "{got}");
    assert_eq!(handle["pollIntervalMs"], 50, "{got}");

    let (got, task) = task_get_until(&peer.url, &task_id, "working").await;
    // `task get` exits by the task's status: 5 while it is still working.
    got.assert_code(5);
    assert_eq!(task["taskId"], task_id.as_str());

    let got = run(&["task", "cancel", &peer.url, &task_id, "--json"]).await;
    got.assert_code(0);
    assert_eq!(
        got.json(),
        json!({"taskId": task_id, "cancelRequested": true})
    );

    let (got, task) = task_get_until(&peer.url, &task_id, "cancelled").await;
    got.assert_code(3);
    assert_eq!(task["status"], "cancelled");

    let got = run(&["task", "cancel", &peer.url, &task_id]).await;
    got.assert_code(0);
    assert_eq!(
        got.stdout.trim(),
        format!("cancel requested for task {task_id}")
    );
}

#[tokio::test]
async fn task_answer_accepts_the_open_question_of_a_task_left_running() {
    let peer = fast_peer().await;
    let got = run(&[
        "call",
        &peer.url,
        "approve_deploy",
        r#"{"service":"api"}"#,
        "--no-follow",
        "--json",
    ])
    .await;
    got.assert_code(0);
    let task_id = got.json()["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"))
        .to_string();

    let (got, task) = task_get_until(&peer.url, &task_id, "input_required").await;
    got.assert_code(4);
    let keys: Vec<String> = task["inputRequests"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(keys.len(), 1, "{got}");

    let got = run(&[
        "task",
        "answer",
        &peer.url,
        &task_id,
        "--accept",
        r#"{"approve":true,"reason":"later"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    assert_eq!(got.json(), json!({"taskId": task_id, "answered": keys}));

    let (got, task) = task_get_until(&peer.url, &task_id, "completed").await;
    got.assert_code(0);
    assert_eq!(
        result_text(&task),
        "approve_deploy(api): approved, DEPLOYED (reason='later')"
    );

    let got = run(&["task", "answer", &peer.url, &task_id, "--decline"]).await;
    got.assert_code(64);
    assert!(got.stderr.contains("not waiting for input"), "{got}");
}

#[tokio::test]
async fn task_commands_on_an_unknown_id_exit_69_unknown_task() {
    let peer = fast_peer().await;
    for args in [
        vec!["task", "get", peer.url.as_str(), "no-such-task", "--json"],
        vec![
            "task",
            "cancel",
            peer.url.as_str(),
            "no-such-task",
            "--json",
        ],
    ] {
        let got = run(&args).await;
        got.assert_code(69);
        assert_eq!(got.json()["error"]["reason"], "unknown_task", "{got}");
    }
}

#[tokio::test]
async fn bad_usage_exits_64() {
    let peer = fast_peer().await;
    let url = peer.url.as_str();
    for args in [
        vec!["call", url, "quick_echo", "not json"],
        vec!["call", url, "quick_echo", "[1, 2]"],
        vec![
            "call",
            url,
            "approve_deploy",
            "{}",
            "--accept",
            "{\"approve\":",
        ],
        vec![
            "call",
            url,
            "approve_deploy",
            "{}",
            "--accept",
            "{}",
            "--decline",
        ],
        vec!["call", url],
        vec!["task", "answer", url, "some-task"],
        vec!["no-such-command"],
        vec!["discover", url, "--timeout", "soon"],
        vec!["demo-server", "--speed", "0"],
    ] {
        let got = run(&args).await;
        assert_eq!(
            got.code,
            Some(64),
            "countersign {args:?} is bad usage; {got}"
        );
    }
    let got = run(&["call", url, "quick_echo", "not json", "--json"]).await;
    got.assert_code(64);
    assert_eq!(got.json()["error"]["reason"], "usage", "{got}");
    assert_eq!(
        got.json()["error"]["code"],
        "invalid_input",
        "the window's code for the same mistake: {got}"
    );
}

#[tokio::test]
async fn an_unreachable_server_exits_69() {
    let url = format!("http://127.0.0.1:{}/mcp", closed_port());
    let got = run(&["discover", &url, "--json"]).await;
    got.assert_code(69);
    let output = got.json();
    assert_eq!(output["outcome"], "error", "{got}");
    assert_eq!(output["error"]["reason"], "connect", "{got}");
    assert_eq!(
        output["error"]["code"], "unavailable",
        "the window's code: trying again may work: {got}"
    );

    let got = run(&["call", &url, "quick_echo", r#"{"text":"hi"}"#]).await;
    got.assert_code(69);
    assert!(got.stderr.starts_with("error: cannot connect to"), "{got}");
    assert!(
        got.stderr.contains("Nothing is listening at 127.0.0.1:"),
        "the plain sentence and what to do follow the transport's words: {got}"
    );
}

// ------------------------------------------------------------------ against `demo-server`

#[tokio::test]
async fn demo_server_prints_its_url_and_answers_discover_and_tools() {
    let demo = DemoProcess::start(100.0).await;
    let got = run(&["discover", &demo.url, "--json"]).await;
    got.assert_code(0);
    assert_eq!(
        got.json()
            .pointer("/_meta/io.modelcontextprotocol~1serverInfo/name"),
        Some(&json!("countersign-demo")),
        "{got}"
    );
    assert_eq!(got.json()["era"], "modern", "the era is added: {got}");
    assert_eq!(got.json()["protocolVersion"], "2026-07-28", "{got}");
    let got = run(&["discover", &demo.url]).await;
    got.assert_code(0);
    assert!(got.stdout.contains("tasks:      yes"), "{got}");
    assert!(
        got.stdout.contains("era:        modern (2026-07-28)"),
        "{got}"
    );

    let got = run(&["tools", &demo.url, "--json"]).await;
    got.assert_code(0);
    let output = got.json();
    let names: Vec<&str> = output["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    for tool in [
        "get_time",
        "echo",
        "deploy_service",
        "flaky_migration",
        "lint_repository",
        "connect_github",
    ] {
        assert!(names.contains(&tool), "{tool} is listed: {names:?}");
    }
    assert_eq!(output["excluded"], json!([]));
}

#[tokio::test]
async fn demo_echo_with_a_header_parameter_exits_0() {
    let demo = DemoProcess::start(100.0).await;
    let got = run(&[
        "call",
        &demo.url,
        "echo",
        r#"{"text":"hi","region":"eu-west-1"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    assert_eq!(
        result_text(&got.json()),
        "echo: hi (served in eu-west-1)",
        "{got}"
    );
}

#[tokio::test]
async fn demo_deploy_accepted_exits_0_and_declined_exits_1() {
    let demo = DemoProcess::start(100.0).await;
    let args = r#"{"service":"web","environment":"staging","version":"v1"}"#;
    let got = run(&[
        "call",
        &demo.url,
        "deploy_service",
        args,
        "--accept",
        r#"{"approve":true}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    let output = got.json();
    assert_eq!(output["outcome"], "completed", "{got}");
    assert_eq!(
        result_text(&output),
        "Deployed web v1 to staging: 2/2 instances healthy. Approved."
    );

    let got = run(&[
        "call",
        &demo.url,
        "deploy_service",
        args,
        "--decline",
        "--json",
    ])
    .await;
    got.assert_code(1);
    let output = got.json();
    assert_eq!(
        output["outcome"], "tool_error",
        "the demo reports an aborted deployment as isError: {got}"
    );
    assert_eq!(
        result_text(&output),
        "Deployment aborted: the approval request was declined. web v1 to staging was not deployed."
    );
}

#[tokio::test]
async fn demo_failure_tool_error_and_input_needed_exit_2_1_and_4() {
    let demo = DemoProcess::start(100.0).await;
    let got = run(&["call", &demo.url, "flaky_migration", "--json"]).await;
    got.assert_code(2);
    let output = got.json();
    assert_eq!(output["outcome"], "failed");
    assert_eq!(output["error"]["code"], -32603);

    let got = run(&[
        "call",
        &demo.url,
        "lint_repository",
        r#"{"repo":"acme/web"}"#,
        "--json",
    ])
    .await;
    got.assert_code(1);
    assert_eq!(got.json()["outcome"], "tool_error");

    let got = run(&[
        "call",
        &demo.url,
        "deploy_service",
        r#"{"service":"web","environment":"production"}"#,
        "--json",
    ])
    .await;
    got.assert_code(4);
    let output = got.json();
    assert_eq!(output["outcome"], "input_needed", "{got}");
    assert_eq!(
        output["inputRequests"].as_object().map(|m| m.len()),
        Some(1),
        "{got}"
    );
}

#[tokio::test]
async fn demo_url_consent_and_mrtr_then_task_complete_with_accept() {
    let demo = DemoProcess::start(100.0).await;
    let got = run(&[
        "call",
        &demo.url,
        "connect_github",
        r#"{"account":"octo"}"#,
        "--accept",
        "{}",
        "--json",
    ])
    .await;
    got.assert_code(0);
    assert_eq!(
        result_text(&got.json()),
        "Connected GitHub account @octo (scopes: repo:read, read:org).",
        "{got}"
    );

    let got = run(&[
        "call",
        &demo.url,
        "test_tool_with_task",
        "--accept",
        r#"{"name":"Ada"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    assert_eq!(
        result_text(&got.json()),
        "Hello, Ada! (your name was gathered over MRTR before this task started)",
        "{got}"
    );
}

#[tokio::test]
async fn demo_no_follow_then_cancel_ends_cancelled() {
    let demo = DemoProcess::start(100.0).await;
    let got = run(&[
        "call",
        &demo.url,
        "slow_compute",
        r#"{"seconds":3600}"#,
        "--no-follow",
        "--json",
    ])
    .await;
    got.assert_code(0);
    let task_id = got.json()["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"))
        .to_string();
    run(&["task", "cancel", &demo.url, &task_id])
        .await
        .assert_code(0);
    let got = run(&["task", "get", &demo.url, &task_id, "--json"]).await;
    got.assert_code(3);
    assert_eq!(got.json()["status"], "cancelled", "{got}");
}

#[tokio::test]
async fn demo_provision_answers_both_questions_with_one_accept() {
    let demo = DemoProcess::start(100.0).await;
    let answer = r#"{"plan":"team","seats":3,"region":"eu-west-1"}"#;
    let got = run(&[
        "call",
        &demo.url,
        "provision_account",
        r#"{"email":"ada@example.com"}"#,
        "--accept",
        answer,
        "--json",
    ])
    .await;
    got.assert_code(0);
    assert_eq!(
        result_text(&got.json()),
        "Provisioned an account for ada@example.com on the team plan with 3 seats in eu-west-1; an invitation was sent.",
        "{got}"
    );
}

#[tokio::test]
async fn demo_server_exits_0_on_sigterm() {
    let demo = DemoProcess::start(100.0).await;
    run(&["discover", &demo.url]).await.assert_code(0);
    assert_eq!(
        demo.terminate().await,
        Some(0),
        "SIGTERM is a clean shutdown"
    );
}

#[tokio::test]
async fn no_follow_reports_the_status_the_server_gave_the_handle() {
    // bench_job with duration 0 is already completed when its CreateTaskResult is sent.
    let demo = DemoProcess::start(100.0).await;
    let got = run(&[
        "call",
        &demo.url,
        "bench_job",
        r#"{"duration_ms":0}"#,
        "--no-follow",
        "--json",
    ])
    .await;
    got.assert_code(0);
    let handle = got.json();
    let task_id = handle["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"))
        .to_string();
    let (_, task) = task_get_until(&demo.url, &task_id, "completed").await;
    assert_eq!(task["status"], "completed");
    assert_eq!(
        handle["status"], "completed",
        "the printed handle must carry the status the server sent, not one the client made up: {got}"
    );
}

// ------------------------------------- against an in-process demo server (fast polls, faults)

/// Our demo server inside the test process at 100x speed with 20 ms polls; the CLI process
/// talks to it while the test awaits the CLI.
async fn in_process_demo(adjust: impl FnOnce(&mut DemoConfig)) -> DemoServer {
    let mut config = DemoConfig {
        time_scale: 0.01,
        poll_interval_ms: 20,
        ..DemoConfig::default()
    };
    adjust(&mut config);
    DemoServer::start("127.0.0.1:0".parse().expect("addr"), config)
        .await
        .expect("the demo server must start")
}

#[tokio::test]
async fn a_token_from_the_flag_or_the_environment_reaches_a_protected_server() {
    let server = in_process_demo(|c| c.required_token = Some("s3cret".into())).await;
    let url = server.url();

    let got = run(&["discover", &url, "--json"]).await;
    got.assert_code(69);
    assert_eq!(got.json()["error"]["reason"], "unauthorized", "{got}");

    run(&["discover", &url, "--token", "wrong", "--json"])
        .await
        .assert_code(69);
    run(&["discover", &url, "--token", "s3cret", "--json"])
        .await
        .assert_code(0);
    run_with_env(
        &["discover", &url, "--json"],
        &[("COUNTERSIGN_TOKEN", "s3cret")],
    )
    .await
    .assert_code(0);

    let got = run_with_env(
        &[
            "call",
            &url,
            "deploy_service",
            r#"{"service":"web","environment":"staging","version":"v9"}"#,
            "--accept",
            r#"{"approve":true}"#,
            "--json",
        ],
        &[("COUNTERSIGN_TOKEN", "s3cret")],
    )
    .await;
    got.assert_code(0);
    assert_eq!(
        result_text(&got.json()),
        "Deployed web v9 to staging: 2/2 instances healthy. Approved."
    );
}

#[tokio::test]
async fn following_a_task_over_sse_replies_answers_and_completes() {
    let server = in_process_demo(|c| {
        c.response_mode = ResponseMode::Sse;
        c.sse_crlf = true;
    })
    .await;
    let got = run(&[
        "call",
        &server.url(),
        "deploy_service",
        r#"{"service":"web","environment":"production","version":"v2"}"#,
        "--accept",
        r#"{"approve":true,"reason":"sse"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    assert_eq!(
        result_text(&got.json()),
        "Deployed web v2 to production: 3/3 instances healthy. Approved with reason: sse."
    );
}

#[tokio::test]
async fn following_survives_transient_poll_failures() {
    let server = in_process_demo(|_| {}).await;
    server.inject_for("tasks/get", Fault::Status(503), 2);
    let got = run(&[
        "call",
        &server.url(),
        "run_ci_pipeline",
        r#"{"repo":"acme/web"}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    assert_eq!(got.json()["outcome"], "completed", "{got}");
    assert_eq!(
        got.stderr.matches("poll failed").count(),
        2,
        "each failed poll is reported: {got}"
    );
    assert_eq!(server.stats().responses_with(503), 2);
}

#[tokio::test]
async fn following_waits_as_long_as_a_rate_limited_poll_asks() {
    let server = in_process_demo(|_| {}).await;
    server.inject_for(
        "tasks/get",
        Fault::TooManyRequests {
            retry_after_secs: 1,
        },
        1,
    );
    let started = Instant::now();
    let got = run(&["call", &server.url(), "failing_job", "--json"]).await;
    got.assert_code(1);
    assert!(
        got.stderr.contains("retrying in 1.0s"),
        "Retry-After is honoured: {got}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the CLI waited the second it was asked to"
    );
}

#[tokio::test]
async fn a_poll_that_keeps_failing_exits_69() {
    let server = in_process_demo(|_| {}).await;
    server.inject_for("tasks/get", Fault::Status(500), 1000);
    let got = run(&["call", &server.url(), "protocol_error_job", "--json"]).await;
    got.assert_code(69);
    assert_eq!(got.json()["error"]["reason"], "http", "{got}");
    assert_eq!(
        got.stderr.matches("poll failed").count(),
        8,
        "eight retries, then give up: {got}"
    );
}

#[tokio::test]
async fn a_task_forgotten_while_followed_exits_69_not_failed() {
    let server = in_process_demo(|c| c.default_ttl_ms = Some(200)).await;
    let got = run(&[
        "call",
        &server.url(),
        "slow_compute",
        r#"{"seconds":3600}"#,
        "--json",
    ])
    .await;
    got.assert_code(69);
    assert_eq!(
        got.json()["error"]["reason"],
        "unknown_task",
        "a lost handle is not a failed task: {got}"
    );
}

#[tokio::test]
async fn following_never_polls_sooner_than_the_advertised_interval() {
    let server = in_process_demo(|c| c.poll_interval_ms = 50).await;
    let got = run(&[
        "call",
        &server.url(),
        "deploy_service",
        r#"{"service":"web","environment":"staging","version":"v5"}"#,
        "--accept",
        r#"{"approve":true}"#,
        "--json",
    ])
    .await;
    got.assert_code(0);
    let gaps = server.poll_gaps();
    assert!(gaps.polls >= 2, "the task was polled to its end: {gaps:?}");
    assert_eq!(
        gaps.early, 0,
        "no poll came sooner than pollIntervalMs after the previous one: {gaps:?}"
    );
    assert!(
        gaps.min_gap.is_some_and(|g| g >= Duration::from_millis(50)),
        "{gaps:?}"
    );
}
