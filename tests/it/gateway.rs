//! The local MCP gateway end to end: `countersign gateway` as a real process in front of our
//! demo server, agents that are not ours (the fastmcp 4.1.4 client with the tasks extension; the
//! `mcp` package's 2025-11-25 session client), policy set and calls decided with the CLI, and
//! the upstream's own request counters as the proof of what ran, and how often.

use std::time::Duration;

use countersign_demo::{DemoConfig, Fault};
use countersign_tests::gateway::{console_with_demo, eventually, tasks_meta, GatewayRig, DEADLINE};
use countersign_tests::raw;
use serde_json::{json, Value};

const DISPOSITION: &str = "io.modelcontextprotocol/tool-approval-disposition";

/// Asserts that the agent's task `task` completed, with `isError` and the disposition given.
fn assert_completed(task: &Value, is_error: bool, disposition: &str) {
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["result"]["isError"], is_error, "{task}");
    assert_eq!(task["result"]["_meta"][DISPOSITION], disposition, "{task}");
}

fn disposition(result: &Value) -> &str {
    result["meta"][DISPOSITION]
        .as_str()
        .or_else(|| result["_meta"][DISPOSITION].as_str())
        .unwrap_or("")
}

#[tokio::test]
async fn an_allowed_call_passes_straight_through_to_the_upstream() {
    let rig = GatewayRig::start(5).await;
    rig.cli(&["policy", "set", "demo", "echo", "allow"])
        .await
        .assert_code(0);

    let result = rig
        .agent(
            "fastmcp",
            &rig.token,
            "echo",
            json!({"text": "hello", "region": "eu-west-1"}),
        )
        .await;

    assert_eq!(
        result["isError"], false,
        "the allowed call succeeds: {result}"
    );
    assert_eq!(
        result["text"], "echo: hello (served in eu-west-1)",
        "the upstream's own result, verbatim (its x-mcp-header check passed too)"
    );
    assert_eq!(rig.upstream_calls(), 1, "the upstream ran the call once");
    assert!(
        rig.pending_calls().await.is_empty(),
        "an allowed call asks nobody"
    );
}

#[tokio::test]
async fn an_ask_call_waits_as_a_task_and_runs_once_after_approval_in_the_cli() {
    let rig = GatewayRig::start(5).await;
    let agent = rig.spawn_agent("fastmcp", "get_time", json!({"why": "audit"}));

    let task_id = rig.wait_for_pending("get_time").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        rig.upstream_calls(),
        0,
        "nothing reaches the upstream before approval"
    );
    let pending = rig.pending_calls().await;
    assert_eq!(pending.len(), 1, "one call waits: {pending:?}");
    assert_eq!(pending[0]["agent"], "bot");
    assert_eq!(
        pending[0]["arguments"],
        json!({"why": "audit"}),
        "the exact arguments are shown"
    );

    rig.approve(&task_id).await;
    let result = agent.await.expect("the agent task");

    assert_eq!(result["isError"], false, "approved and run: {result}");
    assert_eq!(disposition(&result), "approved-executed", "{result}");
    assert!(
        !result["text"].as_str().unwrap_or("").is_empty(),
        "the upstream's result: {result}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        rig.upstream_calls(),
        1,
        "the approved call ran exactly once"
    );
    let again = rig.cli(&["answer", &task_id, "--accept", "{}"]).await;
    assert_ne!(
        again.code,
        Some(0),
        "a decided call cannot be decided again; {again}"
    );
    assert_eq!(rig.upstream_calls(), 1, "and it never runs twice");
}

/// fastmcp 4.1.4's client as released sends no `Mcp-Name` on `tasks/*`: the gateway takes its
/// polls of a held call's task (the body names the task) and the task comes back.
#[tokio::test]
async fn the_released_fastmcp_client_polls_its_task_without_mcp_name_and_gets_the_result() {
    let rig = GatewayRig::start(5).await;
    let agent = rig.spawn_agent(
        "fastmcp-released",
        "get_time",
        json!({"why": "as released"}),
    );

    let task_id = rig.wait_for_pending("get_time").await;
    rig.approve(&task_id).await;
    let result = agent.await.expect("the agent task");

    assert_eq!(result["isError"], false, "approved and run: {result}");
    assert_eq!(disposition(&result), "approved-executed", "{result}");
    assert_eq!(rig.upstream_calls(), 1, "the approved call ran once");
}

/// The same client's polls of an upstream's own task (an allowed call) reach the upstream with
/// the `Mcp-Name` the gateway writes from the body: the demo server, like a strict server,
/// refuses `tasks/get` without one.
#[tokio::test]
async fn the_released_fastmcp_client_polls_an_upstream_task_which_gets_its_mcp_name_upstream() {
    let rig = GatewayRig::start(5).await;
    rig.cli(&["policy", "set", "demo", "slow_compute", "allow"])
        .await
        .assert_code(0);

    let result = rig
        .agent(
            "fastmcp-released",
            &rig.token,
            "slow_compute",
            json!({"seconds": 0.3, "label": "released"}),
        )
        .await;

    assert_eq!(
        result["isError"], false,
        "the upstream task's result: {result}"
    );
    assert!(
        result["text"].as_str().unwrap_or("").contains("released")
            || result.to_string().contains("released"),
        "the result is the upstream's: {result}"
    );
    let stats = rig.demo.stats();
    assert!(
        stats.requests_for("tasks/get") >= 1,
        "the agent polled the upstream's task through the gateway"
    );
    assert_eq!(rig.upstream_calls(), 1);
}

#[tokio::test]
async fn a_declined_call_completes_with_is_error_and_the_disposition_and_never_runs() {
    let rig = GatewayRig::start(5).await;
    let agent = rig.spawn_agent("fastmcp", "get_time", json!({}));

    let task_id = rig.wait_for_pending("get_time").await;
    rig.cli(&[
        "answer",
        &task_id,
        "--decline",
        "--reason",
        "not during the freeze",
    ])
    .await
    .assert_code(0);
    let result = agent.await.expect("the agent task");

    assert_eq!(
        result["isError"], true,
        "a declined call is an error result: {result}"
    );
    assert_eq!(disposition(&result), "denied-not-executed", "{result}");
    let text = result["text"].as_str().unwrap_or("");
    assert!(
        text.contains("did not run") && text.contains("not during the freeze"),
        "the text says the tool did not run and why: {text}"
    );
    assert_eq!(
        rig.upstream_calls(),
        0,
        "a declined call never reaches the upstream"
    );
}

#[tokio::test]
async fn a_denied_call_is_refused_at_once_and_never_reaches_the_upstream() {
    let rig = GatewayRig::start(5).await;
    rig.cli(&[
        "policy", "set", "demo", "get_time", "deny", "--agent", "bot",
    ])
    .await
    .assert_code(0);

    let result = rig
        .agent("fastmcp", &rig.token, "get_time", json!({}))
        .await;

    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(disposition(&result), "denied-not-executed", "{result}");
    assert_eq!(rig.upstream_calls(), 0);
    assert!(
        rig.pending_calls().await.is_empty(),
        "a denied call asks nobody"
    );
}

#[tokio::test]
async fn the_typescript_sdk_client_is_held_told_it_awaits_approval_and_its_identical_retry_runs_once(
) {
    let rig = GatewayRig::start(2).await;
    let args = json!({"format": "unix_ms"});

    let first = rig.ts_agent("get_time", args.clone()).await;
    assert_eq!(first["sdkVersion"], "1.32.2", "the pinned SDK: {first}");
    assert_eq!(
        first["protocolVersion"], "2025-11-25",
        "a session client: {first}"
    );
    assert_eq!(
        first["isError"], true,
        "held within the SDK's time-out, then answered: {first}"
    );
    let text = first["text"].as_str().unwrap_or("");
    assert!(
        text.contains("waiting for approval") && text.contains("repeat the identical call"),
        "the answer says it awaits approval and may be repeated: {text}"
    );
    assert_eq!(rig.upstream_calls(), 0, "nothing ran before approval");

    let task_id = rig.wait_for_pending("get_time").await;
    rig.approve(&task_id).await;
    let retry = rig.ts_agent("get_time", args.clone()).await;

    assert_eq!(retry["isError"], false, "the identical retry runs: {retry}");
    assert_eq!(disposition(&retry), "approved-executed", "{retry}");
    assert_eq!(rig.upstream_calls(), 1, "and runs once");
    let again = rig.ts_agent("get_time", args).await;
    assert_eq!(
        again["isError"], true,
        "the approval was used: the next identical call asks again: {again}"
    );
    assert_eq!(rig.upstream_calls(), 1, "a decided call never runs twice");
}

#[tokio::test]
async fn an_argument_condition_allows_only_the_matching_values() {
    let rig = GatewayRig::start(5).await;
    rig.cli(&[
        "policy",
        "set",
        "demo",
        "echo",
        "allow",
        "--when",
        r#"{"region": "eu-west-1"}"#,
    ])
    .await
    .assert_code(0);

    let allowed = rig
        .agent(
            "fastmcp",
            &rig.token,
            "echo",
            json!({"text": "a", "region": "eu-west-1"}),
        )
        .await;
    assert_eq!(allowed["isError"], false, "{allowed}");
    assert_eq!(rig.upstream_calls(), 1);

    let held = rig
        .call_as_task_agent("echo", json!({"text": "a", "region": "us-east-1"}))
        .await;
    assert_eq!(
        held["resultType"], "task",
        "another region needs a person: {held}"
    );
    assert_eq!(held["status"], "working", "{held}");
    assert!(
        held["statusMessage"]
            .as_str()
            .unwrap_or("")
            .contains("approve"),
        "the status message says who must approve: {held}"
    );
    assert_eq!(
        rig.upstream_calls(),
        1,
        "the held call did not reach the upstream"
    );
}

#[tokio::test]
async fn a_missing_wrong_or_revoked_token_gets_401() {
    let rig = GatewayRig::start(5).await;
    let params = json!({"_meta": tasks_meta()});

    let (none, _) = rig.rpc(None, "tools/list", params.clone()).await;
    let (wrong, _) = rig
        .rpc(Some("csa_not-a-token"), "tools/list", params.clone())
        .await;
    let (valid, body) = rig
        .rpc(Some(&rig.token), "tools/list", params.clone())
        .await;
    assert_eq!(
        (none, wrong),
        (401, 401),
        "no token and a wrong token are refused"
    );
    assert_eq!(valid, 200, "{body}");
    assert!(
        body["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "tools/list comes from the upstream: {body}"
    );

    rig.cli(&["agents", "remove", "bot"]).await.assert_code(0);
    let (revoked, _) = rig.rpc(Some(&rig.token), "tools/list", params).await;
    assert_eq!(revoked, 401, "a revoked token stops working at once");
    let refused = rig
        .agent("fastmcp", &rig.token, "echo", json!({"text": "x"}))
        .await;
    assert!(
        refused.get("error").is_some(),
        "the fastmcp client is refused too: {refused}"
    );
    assert_eq!(rig.upstream_calls(), 0);
}

#[tokio::test]
async fn tasks_cancel_withdraws_a_pending_call_which_then_never_runs() {
    let rig = GatewayRig::start(5).await;
    let task_id = rig.task_of_call("get_time", json!({})).await;

    let ack = rig.task_request("tasks/cancel", &task_id).await;
    assert!(ack.get("error").is_none(), "cancel is acknowledged: {ack}");
    let task = rig.task_to_end(&task_id).await;

    assert_eq!(task["status"], "cancelled", "{task}");
    assert!(
        rig.pending_calls().await.is_empty(),
        "a withdrawn call leaves the inbox"
    );
    let late = rig.cli(&["answer", &task_id, "--accept", "{}"]).await;
    assert_ne!(
        late.code,
        Some(0),
        "a withdrawn call cannot be approved; {late}"
    );
    assert_eq!(rig.upstream_calls(), 0);
}

#[tokio::test]
async fn a_pending_approval_survives_kill_9_of_the_gateway_and_runs_once_after_restart() {
    let mut rig = GatewayRig::start(5).await;
    let task_id = rig.task_of_call("get_time", json!({"n": 1})).await;

    let port = rig.port;
    rig.kill9().await;
    assert_eq!(
        rig.wait_for_pending("get_time").await,
        task_id,
        "the pending call is on disk although its gateway died"
    );
    rig.start_gateway(port).await;
    let polled = rig.task_request("tasks/get", &task_id).await;
    assert_eq!(
        polled["result"]["status"], "working",
        "the agent's next poll finds its task: {polled}"
    );
    rig.approve(&task_id).await;
    let task = rig.task_to_end(&task_id).await;

    assert_completed(&task, false, "approved-executed");
    assert_eq!(
        rig.upstream_calls(),
        1,
        "the upstream ran the call exactly once"
    );
}

#[tokio::test]
async fn a_session_client_is_held_then_told_to_retry_and_the_identical_retry_runs_once() {
    let rig = GatewayRig::start(2).await;
    let args = json!({"purpose": "session"});

    let first = rig
        .agent("session", &rig.token, "get_time", args.clone())
        .await;
    assert_eq!(first["protocolVersion"], "2025-11-25", "{first}");
    assert_eq!(first["isError"], true, "held, then answered: {first}");
    let text = first["text"].as_str().unwrap_or("");
    assert!(
        text.contains("waiting for approval") && text.contains("repeat the identical call"),
        "the answer says it awaits approval and may be repeated: {text}"
    );
    assert_eq!(rig.upstream_calls(), 0);

    let task_id = rig.wait_for_pending("get_time").await;
    rig.approve(&task_id).await;
    let other = rig
        .agent(
            "session",
            &rig.token,
            "get_time",
            json!({"purpose": "other"}),
        )
        .await;
    assert_eq!(
        other["isError"], true,
        "other arguments are not approved: {other}"
    );
    let retry = rig
        .agent("session", &rig.token, "get_time", args.clone())
        .await;

    assert_eq!(retry["isError"], false, "the identical retry runs: {retry}");
    assert_eq!(disposition(&retry), "approved-executed", "{retry}");
    assert_eq!(rig.upstream_calls(), 1, "and runs once");
    let third = rig.agent("session", &rig.token, "get_time", args).await;
    assert_eq!(
        third["isError"], true,
        "a decided call is never run twice: {third}"
    );
    assert_eq!(rig.upstream_calls(), 1);
}

#[tokio::test]
async fn an_approved_call_answered_with_an_upstream_task_is_mirrored_and_its_question_goes_to_the_person(
) {
    let config = DemoConfig {
        time_scale: 0.05,
        poll_interval_ms: 100,
        ..DemoConfig::default()
    };
    let rig = GatewayRig::start_with(5, config).await;
    let task_id = rig
        .task_of_call(
            "deploy_service",
            json!({"service": "billing", "environment": "staging"}),
        )
        .await;
    rig.approve(&task_id).await;

    // The upstream's own approval question reaches the person's inbox, not the agent.
    let question = eventually(
        "the upstream task's question never reached the inbox",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || async { rig.pending_questions().await.into_iter().next() },
    )
    .await;
    let seen = rig.task_request("tasks/get", &task_id).await;
    assert_eq!(
        seen["result"]["status"], "working",
        "the agent sees its task working while a person answers: {seen}"
    );
    let upstream_id = question["task_id"].as_str().expect("the upstream task id");
    rig.cli(&[
        "answer",
        upstream_id,
        "--accept",
        r#"{"approve": true, "reason": "staging is fine"}"#,
    ])
    .await
    .assert_code(0);
    let task = rig.task_to_end(&task_id).await;

    assert_completed(&task, false, "approved-executed");
    let text = task["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.contains("Deployed billing"),
        "the upstream task's result is the agent's: {text}"
    );
    assert_eq!(rig.upstream_calls(), 1, "one tools/call upstream");
}

#[tokio::test]
async fn a_gateway_killed_after_sending_an_approved_call_reports_outcome_unknown_and_never_resends()
{
    let mut rig = GatewayRig::start(5).await;
    // The upstream receives the call but answers only after the gateway is gone.
    rig.demo
        .inject_for("tools/call", Fault::Delay(Duration::from_secs(4)), 1);
    let task_id = rig.task_of_call("get_time", json!({"n": 2})).await;
    rig.approve(&task_id).await;
    eventually(
        "the approved call never reached the upstream",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || async { (rig.upstream_calls() > 0).then_some(()) },
    )
    .await;

    rig.restart_after_kill9().await;
    let task = rig.task_to_end(&task_id).await;

    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["result"]["isError"], true, "{task}");
    assert_eq!(
        task["result"]["_meta"][DISPOSITION], "outcome-unknown",
        "a call that may have run is never reported as not run: {task}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        rig.upstream_calls(),
        1,
        "the call was not sent again after the restart"
    );
}

#[tokio::test]
async fn a_call_nobody_decides_in_time_expires_and_never_runs() {
    let rig = GatewayRig::start(5).await;
    let task_id = rig.task_of_call("get_time", json!({})).await;

    // Its approval window (24 h) ends now: moved in the ledger file, as a second process would.
    let moved = rig
        .open_ledger()
        .execute(
            "UPDATE gated_calls SET expires_at = 0 WHERE task_id = ?1",
            [&task_id],
        )
        .expect("move the deadline");
    assert_eq!(moved, 1);
    let task = rig.task_to_end(&task_id).await;

    assert_completed(&task, true, "denied-not-executed");
    let text = task["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("nobody approved it in time"), "{text}");
    let late = rig.cli(&["answer", &task_id, "--accept", "{}"]).await;
    assert_ne!(
        late.code,
        Some(0),
        "an expired call cannot be approved; {late}"
    );
    assert_eq!(rig.upstream_calls(), 0);
}

#[tokio::test]
async fn identical_pending_calls_are_merged_and_an_agent_cannot_flood_the_inbox() {
    let rig = GatewayRig::start(5).await;
    let first = rig.call_as_task_agent("get_time", json!({"n": 0})).await;
    let same = rig.call_as_task_agent("get_time", json!({"n": 0})).await;
    assert_eq!(
        first["taskId"], same["taskId"],
        "the identical call while pending is the same task"
    );

    for n in 1..20 {
        let held = rig.call_as_task_agent("get_time", json!({"n": n})).await;
        assert_eq!(held["resultType"], "task", "call {n} waits: {held}");
    }
    let refused = rig.call_as_task_agent("get_time", json!({"n": 20})).await;

    assert_eq!(
        refused["isError"], true,
        "the 21st waiting call is refused: {refused}"
    );
    assert_eq!(
        refused["_meta"][DISPOSITION], "denied-not-executed",
        "{refused}"
    );
    assert_eq!(rig.pending_calls().await.len(), 20, "20 calls wait, not 21");
    assert_eq!(rig.upstream_calls(), 0);
}

#[tokio::test]
async fn countersign_connect_relays_a_stdio_host_through_the_same_policies() {
    let rig = GatewayRig::start(2).await;
    rig.cli(&["policy", "set", "demo", "echo", "allow"])
        .await
        .assert_code(0);

    let allowed = rig.stdio_agent("echo", json!({"text": "over stdio"})).await;
    assert_eq!(allowed["isError"], false, "{allowed}");
    assert_eq!(allowed["text"], "echo: over stdio", "{allowed}");
    assert_eq!(allowed["protocolVersion"], "2025-11-25", "{allowed}");
    assert_eq!(rig.upstream_calls(), 1);

    let held = rig.stdio_agent("get_time", json!({"via": "stdio"})).await;
    assert_eq!(
        held["isError"], true,
        "an ask call is held over stdio too: {held}"
    );
    assert!(
        held["text"]
            .as_str()
            .unwrap_or("")
            .contains("waiting for approval"),
        "{held}"
    );
    assert_eq!(rig.pending_calls().await.len(), 1, "and waits in the inbox");
    assert_eq!(rig.upstream_calls(), 1);
}

#[tokio::test]
async fn always_allow_on_an_approval_creates_a_visible_rule_for_that_agent_and_tool() {
    let rig = GatewayRig::start(5).await;
    let task_id = rig.task_of_call("get_time", json!({"first": true})).await;

    rig.cli(&["answer", &task_id, "--accept", r#"{"alwaysAllow": true}"#])
        .await
        .assert_code(0);
    let first = rig.task_to_end(&task_id).await;
    assert_eq!(
        first["result"]["_meta"][DISPOSITION], "approved-executed",
        "{first}"
    );
    let rules = rig.cli(&["policy", "list", "--json"]).await;
    rules.assert_code(0);
    let rules = rules.json();
    assert_eq!(
        rules.as_array().map(Vec::len),
        Some(1),
        "one rule, visible in `policy list`: {rules}"
    );
    assert_eq!(rules[0]["agent"], "bot", "{rules}");
    assert_eq!(rules[0]["tool"], "get_time", "{rules}");
    assert_eq!(rules[0]["action"], "allow", "{rules}");

    let next = rig
        .call_as_task_agent("get_time", json!({"other": 1}))
        .await;
    assert_ne!(
        next["resultType"], "task",
        "the next call passes at once: {next}"
    );
    assert_eq!(next["isError"], false, "{next}");
    assert_eq!(rig.upstream_calls(), 2);
    let id = rules[0]["id"].as_i64().expect("a rule id").to_string();
    rig.cli(&["policy", "remove", &id]).await.assert_code(0);
    let asked = rig
        .call_as_task_agent("get_time", json!({"other": 2}))
        .await;
    assert_eq!(
        asked["resultType"], "task",
        "without the rule it asks again: {asked}"
    );
}

#[tokio::test]
async fn the_read_only_switch_lets_only_tools_marked_read_only_pass() {
    let rig = GatewayRig::start(5).await;
    let before = rig.call_as_task_agent("echo", json!({"text": "a"})).await;
    assert_eq!(
        before["resultType"], "task",
        "off by default: even echo asks: {before}"
    );

    rig.cli(&["policy", "read-only", "demo", "on"])
        .await
        .assert_code(0);
    let echo = rig.call_as_task_agent("echo", json!({"text": "b"})).await;
    assert_eq!(
        echo["isError"], false,
        "echo says readOnlyHint: it passes: {echo}"
    );
    let deploy = rig
        .call_as_task_agent(
            "deploy_service",
            json!({"service": "api", "environment": "staging"}),
        )
        .await;
    assert_eq!(
        deploy["resultType"], "task",
        "deploy_service is not marked read-only: a person decides: {deploy}"
    );
    assert_eq!(deploy["status"], "working", "{deploy}");
    assert_eq!(
        rig.upstream_calls(),
        1,
        "only the echo reached the upstream"
    );
}

#[tokio::test]
async fn a_result_recorded_before_a_kill_9_is_what_the_agent_polls_after_the_restart() {
    let mut rig = GatewayRig::start(5).await;
    let task_id = rig.task_of_call("get_time", json!({"n": 3})).await;
    rig.approve(&task_id).await;

    // Wait, reading the ledger file as another process would, until the upstream's answer is
    // recorded; the agent has not polled.
    let ledger = rig.open_ledger();
    eventually(
        "the call never finished",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || async {
            let state: String = ledger
                .query_row(
                    "SELECT state FROM gated_calls WHERE task_id = ?1",
                    [&task_id],
                    |r| r.get(0),
                )
                .expect("the call's row");
            (state == "done").then_some(())
        },
    )
    .await;
    rig.restart_after_kill9().await;
    let task = rig.task_to_end(&task_id).await;

    assert_completed(&task, false, "approved-executed");
    assert_eq!(rig.upstream_calls(), 1, "the upstream ran it once");
}

/// The first-launch demo's agent (`countersign-desktop --demo`), run in-process as the app runs
/// it: a console with its engine, the gateway, and the demo server registered as `demo`.
#[tokio::test]
async fn the_demo_agent_gets_its_allowed_call_at_once_and_its_other_call_runs_after_approval_with_a_timeline(
) {
    use countersign_core::console::view::GatedDecision;
    use countersign_core::ledger::EventKind;
    use countersign_gateway::demo_agent::{self, GatedEnd};
    use countersign_gateway::endpoint::{Gateway, GatewayConfig};
    use std::sync::Arc;

    let config = DemoConfig {
        time_scale: 0.05,
        ..DemoConfig::default()
    };
    let (demo, _dir, console) = console_with_demo("demo-agent", config).await;
    let gateway = Gateway::start(Arc::clone(&console), GatewayConfig::default())
        .await
        .expect("the gateway starts");

    let enrolled = demo_agent::enrol(&console, "demo")
        .await
        .expect("the demo agent enrols")
        .expect("a fresh ledger has no demo agent yet");
    let url = format!("{}demo", gateway.base_url());
    let agent = tokio::spawn(async move { demo_agent::run(&url, enrolled).await });

    // Its gated call waits in the inbox; the allowed one has already run.
    let pending = eventually(
        "the demo agent's call never reached the inbox",
        DEADLINE,
        Duration::from_millis(50),
        || async {
            let pending = console.pending_gated_calls().await.expect("the inbox");
            pending.into_iter().next()
        },
    )
    .await;
    assert_eq!(pending.agent, demo_agent::AGENT);
    assert_eq!(pending.tool, demo_agent::GATED_TOOL);
    assert_eq!(
        demo.stats().requests_for("tools/call"),
        1,
        "only the allowed call reached the upstream before approval"
    );
    let rules = console.rules().await.expect("the rules");
    assert!(
        rules
            .iter()
            .any(|r| r.tool == demo_agent::ALLOWED_TOOL
                && r.agent.as_deref() == Some(demo_agent::AGENT)),
        "the rule that let the allowed call pass is visible: {rules:?}"
    );
    assert!(
        demo_agent::enrol(&console, "demo")
            .await
            .expect("a second enrolment is not an error")
            .is_none(),
        "a later launch does not enrol (or run) a second demo agent"
    );

    console
        .decide_gated(
            &pending.task_id,
            GatedDecision {
                approve: true,
                reason: None,
                always_allow: false,
            },
        )
        .await
        .expect("the approval is recorded");
    let outcome = tokio::time::timeout(DEADLINE, agent)
        .await
        .expect("the demo agent ends once its call ran")
        .expect("the agent task")
        .expect("the demo agent's calls succeed");

    assert_eq!(outcome.allowed["isError"], false, "{:?}", outcome.allowed);
    assert_eq!(
        outcome.gated_task, pending.task_id,
        "the task the inbox showed"
    );
    match &outcome.gated {
        GatedEnd::Completed(result) => {
            assert_eq!(result["isError"], false, "approved and run: {result}");
            assert_eq!(disposition(result), "approved-executed", "{result}");
        }
        other => panic!("the approved call completes, got {other:?}"),
    }
    assert_eq!(
        demo.stats().requests_for("tools/call"),
        2,
        "the approved call ran exactly once"
    );

    // The card showed what the upstream's tools/list says about the tool.
    let info = pending
        .tool_info
        .as_ref()
        .unwrap_or_else(|| panic!("the held call carries the tool's listing: {pending:?}"));
    assert!(
        info.description
            .as_deref()
            .is_some_and(|d| d.starts_with("Exports `rows` rows")),
        "the upstream's description: {info:?}"
    );
    assert_eq!(info.read_only_hint, Some(true), "{info:?}");
    assert_eq!(info.open_world_hint, Some(true), "{info:?}");

    // Its timeline, from the ledger: requested → approved → sent upstream → the upstream's task
    // → its end.
    let timeline = console
        .gated_timeline(&pending.task_id)
        .await
        .expect("the call's timeline");
    let steps: Vec<String> = timeline
        .events
        .iter()
        .map(|e| match &e.fact {
            EventKind::GatedCallChanged { state, .. } => format!("call {}", state.as_str()),
            other => other.name().to_owned(),
        })
        .collect();
    let position = |step: &str| {
        steps
            .iter()
            .position(|s| s == step)
            .unwrap_or_else(|| panic!("{step} is on the timeline: {steps:?}"))
    };
    assert!(
        position("call pending") < position("call approved")
            && position("call approved") < position("call running")
            && position("call running") < position("task_created")
            && position("task_created") < position("task_finished"),
        "request → decision → sent upstream → upstream task → its end: {steps:?}"
    );
    assert!(timeline.call.decided_by.is_some(), "who decided");
    gateway.shutdown().await;
}

/// The gateway in this process (its config as given) before the demo server registered as
/// `demo`, with a console running the engine, and agent `bot`'s token.
async fn in_process_gateway(
    config: countersign_gateway::endpoint::GatewayConfig,
) -> (
    countersign_demo::DemoServer,
    countersign_tests::procs::DataDir,
    std::sync::Arc<countersign_core::console::Console>,
    countersign_gateway::endpoint::Gateway,
    String,
) {
    use countersign_gateway::endpoint::Gateway;

    let (demo, dir, console) = console_with_demo("gateway-in-process", DemoConfig::default()).await;
    let (_, token) = console.add_agent("bot").await.expect("an agent");
    let gateway = Gateway::start(std::sync::Arc::clone(&console), config)
        .await
        .expect("the gateway starts");
    (demo, dir, console, gateway, token.expose().clone())
}

#[tokio::test]
async fn a_held_call_that_sent_a_progress_token_gets_progress_notifications_while_it_waits() {
    use countersign_gateway::endpoint::GatewayConfig;

    let config = GatewayConfig {
        hold: Duration::from_millis(2500),
        keep_alive: Duration::from_millis(400),
        ..GatewayConfig::default()
    };
    let (demo, _dir, _console, gateway, token) = in_process_gateway(config).await;
    let url = format!("{}demo", gateway.base_url());
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut request = http
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.send()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw-session-agent", "version": "1"}}}),
        None,
    )
    .await
    .expect("initialize answers");
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("initialize opens a session");

    let body = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "get_time", "arguments": {}, "_meta": {"progressToken": "p-1"}}}),
        Some(session.clone()),
    )
    .await
    .expect("the held call answers")
    .text()
    .await
    .expect("its stream ends after the hold");
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(
        progress.len() >= 3,
        "a progress notification per keep-alive interval while held: {body}"
    );
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "p-1"),
        "each for the agent's own token: {progress:?}"
    );
    let progress_values: Vec<u64> = progress
        .iter()
        .filter_map(|p| p["params"]["progress"].as_u64())
        .collect();
    assert!(
        progress_values.windows(2).all(|w| w[0] < w[1]),
        "progress increases: {progress_values:?}"
    );
    let last = messages.last().expect("the answer comes last");
    assert_eq!(last["id"], 2, "the call's answer ends the stream: {body}");
    assert_eq!(last["result"]["isError"], true, "still waiting: {last}");
    assert_eq!(
        demo.stats().requests_for("tools/call"),
        0,
        "nothing ran upstream"
    );

    // Without a token: keep-alive comments only, no notification.
    let plain = post(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "get_time", "arguments": {"format": "unix_ms"}}}),
        Some(session),
    )
    .await
    .expect("the held call answers")
    .text()
    .await
    .expect("its stream");
    assert!(
        !plain.contains("notifications/progress"),
        "no progress without a progress token: {plain}"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn an_agent_asking_faster_than_the_rate_limit_is_refused_and_other_agents_are_not() {
    use countersign_core::console::gateway::{AgentCall, Gate, PolicyInput, MAX_ASKS_PER_WINDOW};
    use countersign_core::console::view::GatedDecision;
    use countersign_core::ledger::gated::GatedMode;
    use countersign_gateway::endpoint::GatewayConfig;

    let (demo, _dir, console, gateway, token) = in_process_gateway(GatewayConfig::default()).await;
    let bot = console
        .authenticate_agent(&token)
        .await
        .expect("the ledger answers")
        .expect("bot's token");
    let server = console
        .server_named("demo")
        .await
        .expect("the ledger answers")
        .expect("demo is registered");
    let (_, other_token) = console.add_agent("other").await.expect("a second agent");
    let other = console
        .authenticate_agent(other_token.expose())
        .await
        .expect("the ledger answers")
        .expect("other's token");
    let ask = |agent, n: u64| {
        let arguments = json!({"n": n}).as_object().cloned().unwrap_or_default();
        let console = std::sync::Arc::clone(&console);
        let server = server.clone();
        async move {
            console
                .gate(
                    AgentCall {
                        agent: &agent,
                        server: &server,
                        tool: "get_time",
                        arguments: &arguments,
                        mode: GatedMode::Task,
                        tool_info: None,
                    },
                    &PolicyInput::default(),
                )
                .await
                .expect("the gate answers")
        }
    };
    // Each request declined at once, so the cap on waiting calls is never what refuses.
    for n in 0..MAX_ASKS_PER_WINDOW {
        let Gate::Held(call) = ask(bot.clone(), n).await else {
            panic!("request {n} within the limit waits for a person");
        };
        let decline = GatedDecision {
            approve: false,
            reason: None,
            always_allow: false,
        };
        console
            .decide_gated(&call.task_id, decline)
            .await
            .expect("declined");
    }
    for n in [MAX_ASKS_PER_WINDOW, MAX_ASKS_PER_WINDOW + 1] {
        match ask(bot.clone(), n).await {
            Gate::Denied(call) => assert!(
                call.reason
                    .as_deref()
                    .is_some_and(|r| r.contains("within a minute")),
                "refused by the rate limit, saying so: {call:?}"
            ),
            other => panic!("request {n} is over the limit, got {other:?}"),
        }
    }
    assert!(
        matches!(ask(other.clone(), 0).await, Gate::Held(_)),
        "another agent still asks"
    );
    assert_eq!(demo.stats().requests_for("tools/call"), 0, "nothing ran");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_call_whose_param_headers_do_not_mirror_its_body_is_refused_before_any_policy() {
    let rig = GatewayRig::start(5).await;
    rig.cli(&["policy", "set", "demo", "echo", "allow"])
        .await
        .assert_code(0);
    let mut params = json!({"name": "echo", "arguments": {"text": "hi", "region": "eu-west-1"}});
    params["_meta"] = tasks_meta();

    // The raw rpc sends no Mcp-Param-Region although `region` is declared with x-mcp-header.
    let (status, body) = rig.rpc(Some(&rig.token), "tools/call", params).await;

    assert_eq!(status, 400, "a header mismatch is a bad request: {body}");
    assert_eq!(body["error"]["code"], -32020, "HeaderMismatch: {body}");
    assert_eq!(body["id"], 1, "the error answers the request: {body}");
    assert_eq!(rig.upstream_calls(), 0, "nothing reached the upstream");
    assert!(rig.pending_calls().await.is_empty(), "nobody is asked");
}

#[tokio::test]
async fn subscriptions_listen_is_relayed_as_a_stream_tagged_with_the_agents_own_id() {
    let rig = GatewayRig::start(5).await;
    let body = json!({"jsonrpc": "2.0", "id": "agent-listen-1", "method": "subscriptions/listen",
        "params": {"_meta": tasks_meta(), "notifications": {"toolsListChanged": true}}});
    let mut response = raw::post(&reqwest::Client::new(), &rig.url, "subscriptions/listen")
        .bearer_auth(&rig.token)
        .body(body.to_string())
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), 200);
    assert!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream")),
        "the answer is a stream: {:?}",
        response.headers()
    );

    // The first message is the upstream's acknowledgement; the stream stays open after it.
    let mut text = String::new();
    let first = tokio::time::timeout(DEADLINE, async {
        while let Some(chunk) = response.chunk().await.expect("bytes") {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(data) = text.lines().find_map(|l| l.strip_prefix("data:")) {
                return serde_json::from_str::<Value>(data.trim()).expect("JSON");
            }
        }
        panic!("the stream ended before any message: {text}");
    })
    .await
    .expect("a first message in time");

    assert_eq!(
        first["method"], "notifications/subscriptions/acknowledged",
        "{first}"
    );
    assert_eq!(
        first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "agent-listen-1",
        "tagged with the agent's id, not the gateway's upstream request id: {first}"
    );
    let more = tokio::time::timeout(Duration::from_millis(300), response.chunk()).await;
    assert!(
        more.is_err(),
        "the subscription stays open after the acknowledgement: {more:?}"
    );
}

#[tokio::test]
async fn an_approved_call_whose_upstream_asks_first_puts_its_questions_in_the_inbox_and_runs_with_the_answers(
) {
    let config = DemoConfig {
        time_scale: 0.05,
        poll_interval_ms: 100,
        ..DemoConfig::default()
    };
    let rig = GatewayRig::start_with(5, config).await;
    // `test_tool_with_task` asks for a name over MRTR (input_required with requestState) before
    // it runs; re-sent with the answer, it creates a task whose result greets that name.
    let agent = rig.spawn_agent("fastmcp", "test_tool_with_task", json!({}));
    let task_id = rig.wait_for_pending("test_tool_with_task").await;
    // The window's console on the same ledger: its count (the tray's and the title's) is one
    // per entry of the inbox, whether the call waits for a decision or for answers.
    let mut setup = countersign_core::console::Setup::new(rig.dir.path());
    setup.start = countersign_core::console::Start::WhenNeeded;
    let window = countersign_core::console::Console::open(setup)
        .await
        .expect("a second console opens on the gateway's ledger");
    assert_eq!(window.waiting_count().await, 1, "the held call");
    rig.approve(&task_id).await;

    let asked = eventually(
        "the upstream's questions never reached the inbox",
        DEADLINE,
        Duration::from_millis(100),
        || async {
            rig.pending_questions()
                .await
                .into_iter()
                .find(|q| q["kind"] == "tool_call_questions" && q["task_id"] == task_id.as_str())
        },
    )
    .await;
    assert!(
        asked["questions"]["user_name"].is_object(),
        "the upstream's own question, for the person: {asked}"
    );
    let seen = rig.task_request("tasks/get", &task_id).await;
    assert_eq!(
        seen["result"]["status"], "working",
        "the agent's task stays working, the question is not the agent's: {seen}"
    );
    assert_eq!(rig.upstream_calls(), 1, "one round so far");
    assert_eq!(
        window.waiting_count().await,
        1,
        "the approved call with its question, counted as the inbox shows it"
    );

    rig.cli(&["answer", &task_id, "--accept", r#"{"name": "Ada"}"#])
        .await
        .assert_code(0);
    let result = agent.await.expect("the agent task");

    assert_eq!(
        result["isError"], false,
        "approved, answered, run: {result}"
    );
    assert!(
        result["text"].as_str().unwrap_or("").contains("Ada"),
        "the result of the round sent with the person's answer: {result}"
    );
    assert_eq!(disposition(&result), "approved-executed", "{result}");
    assert_eq!(
        rig.upstream_calls(),
        2,
        "the question round and the answered one, nothing more"
    );
    assert!(
        rig.pending_questions().await.is_empty(),
        "nothing left to answer"
    );
    assert_eq!(window.waiting_count().await, 0, "nothing waits");
}

#[tokio::test]
async fn a_session_agent_is_refused_a_tool_that_would_ask_it_questions_it_cannot_answer() {
    let rig = GatewayRig::start(5).await;
    rig.cli(&["policy", "set", "demo", "confirm_delete", "allow"])
        .await
        .assert_code(0);

    // A 2025-11-25 session has no round in which the upstream's questions could reach the
    // agent: the upstream must hear that this agent cannot answer them.
    let started = tokio::time::Instant::now();
    let result = rig
        .agent(
            "session",
            &rig.token,
            "confirm_delete",
            json!({"filename": "notes.txt"}),
        )
        .await;

    let error = result["error"].as_str().unwrap_or("");
    assert!(
        error.contains("elicitation"),
        "refused at once by the upstream for want of elicitation, not left to hang: {result}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered before the hold ran out: {:?}",
        started.elapsed()
    );
}
