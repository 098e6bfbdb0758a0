//! The gateway in front of a 2025-11-25 server: the real reference server-everything 2026.8.31
//! (TypeScript SDK 1.32.2, sessions, SEP-1686 Tasks) on Streamable HTTP, registered as
//! `everything`; `countersign gateway` as a real process; agents that are not ours of both
//! generations (the fastmcp 4.1.4 client exactly as released, speaking 2026-07-28; the
//! TypeScript SDK's 2025-11-25 session client); policy set and calls decided with the CLI.
//! server-everything keeps no request counters, so the ledger is the record of what the gateway
//! sent it: one call intent per call a person approved, written before `tools/call`.
//!
//! Without Node or the package the tests fail, naming `bash .ci/setup-tools.sh`; never a skip.

use std::time::Duration;

use countersign_tests::everything::Everything;
use countersign_tests::gateway::{tasks_meta, GatewayRig};
use serde_json::{json, Value};

const DISPOSITION: &str = "io.modelcontextprotocol/tool-approval-disposition";
const RESEARCH: &str = "simulate-research-query";

/// server-everything registered as `everything` in a gateway rig (whose demo server stays
/// unused), the rig's agent URL pointed at it. The rig's gateway process runs the engine, which
/// takes up the new server on its next scan.
async fn legacy_rig(hold_seconds: u64) -> (GatewayRig, Everything) {
    let server = Everything::start();
    let mut rig = GatewayRig::start(hold_seconds).await;
    rig.cli(&["servers", "add", "everything", &server.url()])
        .await
        .assert_code(0);
    rig.url = format!("http://127.0.0.1:{}/mcp/everything", rig.port);
    (rig, server)
}

fn disposition(result: &Value) -> &str {
    result["meta"][DISPOSITION].as_str().unwrap_or("")
}

/// The call intents the gateway wrote for `tool`: one per call it sent for a person.
fn intents_for(rig: &GatewayRig, tool: &str) -> Vec<countersign_tests::ledger_view::IntentRow> {
    let view = rig.dir.ledger();
    let server = view.server_id("everything");
    view.intents()
        .into_iter()
        .filter(|i| i.server_id == server && i.tool == tool)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_are_listed_and_an_allowed_echo_returns_to_agents_of_both_generations() {
    let (rig, _server) = legacy_rig(20).await;
    let era: Option<String> = rig
        .open_ledger()
        .query_row(
            "SELECT era FROM servers WHERE name = 'everything'",
            [],
            |r| r.get(0),
        )
        .expect("the server's row");
    assert_eq!(
        era.as_deref(),
        Some("legacy"),
        "server-everything is recorded as a 2025-11-25 server"
    );

    let (status, discovered) = rig
        .rpc(
            Some(&rig.token),
            "server/discover",
            json!({"_meta": tasks_meta()}),
        )
        .await;
    assert_eq!(status, 200, "{discovered}");
    let result = &discovered["result"];
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28"]),
        "{result}"
    );
    assert!(
        result["capabilities"]["tools"].is_object()
            && result["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "the upstream's tools and Countersign's tasks: {result}"
    );
    assert!(
        result["capabilities"].get("tasks").is_none(),
        "2025-11-25's own tasks capability is not shown to a 2026-07-28 agent: {result}"
    );

    let (status, listed) = rig
        .rpc(
            Some(&rig.token),
            "tools/list",
            json!({"_meta": tasks_meta()}),
        )
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
    let tools = listed["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let research = tools.iter().find(|t| t["name"] == RESEARCH);
    assert!(
        tools.iter().any(|t| t["name"] == "echo"),
        "the upstream's tools, passed through: {listed}"
    );
    assert_eq!(
        research.map(|t| t["execution"]["taskSupport"].clone()),
        Some(json!("required")),
        "the session's task tools too, as the upstream declares them: {listed}"
    );

    rig.cli(&["policy", "set", "everything", "echo", "allow"])
        .await
        .assert_code(0);
    let modern = rig
        .agent(
            "fastmcp-released",
            &rig.token,
            "echo",
            json!({"message": "hello"}),
        )
        .await;
    assert_eq!(modern["isError"], false, "{modern}");
    assert_eq!(
        modern["text"], "Echo: hello",
        "the upstream's own result: {modern}"
    );

    let session = rig
        .ts_agent_with("echo", json!({"message": "from a session"}), &["--list"])
        .await;
    assert_eq!(session["protocolVersion"], "2025-11-25", "{session}");
    assert_eq!(session["isError"], false, "{session}");
    assert_eq!(session["text"], "Echo: from a session", "{session}");
    let names = session["tools"].as_array().cloned().unwrap_or_default();
    assert!(
        names.contains(&json!("echo")) && names.contains(&json!(RESEARCH)),
        "the session agent lists the upstream's tools: {session}"
    );

    assert!(
        rig.pending_calls().await.is_empty(),
        "allowed calls ask nobody"
    );
    assert!(
        intents_for(&rig, "echo").is_empty(),
        "an allowed call passes through; nothing is sent on a person's behalf"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_approved_with_countersign_answer_runs_once() {
    let (rig, _server) = legacy_rig(20).await;
    let agent = rig.spawn_agent("fastmcp-released", "get-sum", json!({"a": 1, "b": 2}));

    let task_id = rig.wait_for_pending("get-sum").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        intents_for(&rig, "get-sum").is_empty(),
        "nothing is sent before approval"
    );
    rig.approve(&task_id).await;
    let result = agent.await.expect("the agent task");

    assert_eq!(result["isError"], false, "approved and run: {result}");
    assert_eq!(result["text"], "The sum of 1 and 2 is 3.", "{result}");
    assert_eq!(disposition(&result), "approved-executed", "{result}");
    let again = rig.cli(&["answer", &task_id, "--accept", "{}"]).await;
    assert_ne!(
        again.code,
        Some(0),
        "a decided call cannot be decided again; {again}"
    );
    let intents = intents_for(&rig, "get-sum");
    assert_eq!(
        intents.len(),
        1,
        "the approved call was sent once: {intents:?}"
    );
    assert_eq!(intents[0].state, "completed", "{intents:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_call_returns_is_error_with_the_reason_and_is_never_sent() {
    let (rig, _server) = legacy_rig(20).await;
    let agent = rig.spawn_agent("fastmcp-released", "get-sum", json!({"a": 2, "b": 3}));

    let task_id = rig.wait_for_pending("get-sum").await;
    rig.cli(&["answer", &task_id, "--decline", "--reason", "not today"])
        .await
        .assert_code(0);
    let result = agent.await.expect("the agent task");

    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(disposition(&result), "denied-not-executed", "{result}");
    let text = result["text"].as_str().unwrap_or("");
    assert!(
        text.contains("did not run") && text.contains("not today"),
        "the text says the tool did not run and why: {text}"
    );
    assert!(intents_for(&rig, "get-sum").is_empty(), "never sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_task_tool_runs_as_a_legacy_task_in_the_ledger_and_the_agent_gets_its_report() {
    let (rig, _server) = legacy_rig(20).await;
    let agent = rig.spawn_agent("fastmcp-released", RESEARCH, json!({"topic": "rust"}));

    let task_id = rig.wait_for_pending(RESEARCH).await;
    rig.approve(&task_id).await;
    let result = agent.await.expect("the agent task");

    assert_eq!(result["isError"], false, "{result}");
    assert!(
        result["text"]
            .as_str()
            .unwrap_or("")
            .contains("# Research Report: rust"),
        "the upstream task's result is the agent's: {result}"
    );
    assert_eq!(disposition(&result), "approved-executed", "{result}");
    let intents = intents_for(&rig, RESEARCH);
    assert_eq!(intents.len(), 1, "sent once: {intents:?}");
    let view = rig.dir.ledger();
    let row = intents[0]
        .task
        .and_then(|id| view.tasks().into_iter().find(|t| t.id == id))
        .unwrap_or_else(|| panic!("the call became a task in the ledger: {intents:?}"));
    assert_eq!(row.server, "everything");
    assert_eq!(row.status, "completed", "{}", view.describe(row.id));
    assert!(
        row.result_text().contains("# Research Report: rust"),
        "the engine followed the 2025-11-25 task to its result: {}",
        view.describe(row.id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_agent_held_on_a_task_tool_gets_the_report_once_a_person_approves() {
    let (rig, _server) = legacy_rig(30).await;
    let args = json!({"topic": "sessions"});

    let (result, ()) = tokio::join!(
        rig.ts_agent_with(RESEARCH, args.clone(), &["--list"]),
        async {
            let task_id = rig.wait_for_pending(RESEARCH).await;
            rig.approve(&task_id).await;
        }
    );

    assert_eq!(result["protocolVersion"], "2025-11-25", "{result}");
    assert_eq!(
        result["isError"], false,
        "listed without taskSupport, held, approved and run as a task the gateway waited for: {result}"
    );
    assert!(
        result["text"]
            .as_str()
            .unwrap_or("")
            .contains("# Research Report: sessions"),
        "{result}"
    );
    assert_eq!(intents_for(&rig, RESEARCH).len(), 1, "sent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_task_tool_runs_as_the_upstreams_task_for_agents_of_both_generations() {
    let (rig, _server) = legacy_rig(30).await;
    rig.cli(&["policy", "set", "everything", RESEARCH, "allow"])
        .await
        .assert_code(0);

    // fastmcp holds the upstream's task as a 2026-07-28 task: its tasks/get (without Mcp-Name,
    // as released) is answered from the SEP-1686 task's tasks/get and tasks/result.
    let modern = rig
        .agent(
            "fastmcp-released",
            &rig.token,
            RESEARCH,
            json!({"topic": "handles"}),
        )
        .await;
    assert_eq!(modern["isError"], false, "{modern}");
    assert!(
        modern["text"]
            .as_str()
            .unwrap_or("")
            .contains("# Research Report: handles"),
        "{modern}"
    );

    // A session agent has no tasks: the gateway waits for the upstream's task on its behalf.
    let session = rig
        .ts_agent_with(RESEARCH, json!({"topic": "waiting"}), &["--list"])
        .await;
    assert_eq!(session["isError"], false, "{session}");
    assert!(
        session["text"]
            .as_str()
            .unwrap_or("")
            .contains("# Research Report: waiting"),
        "{session}"
    );
    assert!(
        intents_for(&rig, RESEARCH).is_empty(),
        "allowed calls pass through, none sent on a person's behalf"
    );

    // 2025-11-25 has no subscriptions: a 2026-07-28 agent is told so, and polls.
    let (status, listen) = rig
        .rpc(
            Some(&rig.token),
            "subscriptions/listen",
            json!({"_meta": tasks_meta(), "notifications": {"taskIds": []}}),
        )
        .await;
    assert_eq!(
        (status, listen["error"]["code"].as_i64()),
        (404, Some(-32601)),
        "{listen}"
    );
}

/// A session agent that declares 2025-11-25 tasks (as VS Code does): the official TypeScript
/// SDK's `callToolStream` with `params.task`. Its held call is a task of Countersign's at once
/// (the agent is not held on an open request); after approval the upstream's own task runs, its
/// clarification reaches the person's inbox, and the agent's `tasks/result` brings the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_agent_that_declares_tasks_gets_a_task_and_the_clarification_reaches_the_inbox() {
    let (rig, _server) = legacy_rig(30).await;
    let args = json!({"topic": "python", "ambiguous": true});
    let (result, ()) = tokio::join!(
        rig.ts_agent_with(RESEARCH, args, &["--list", "--task"]),
        async {
            let task_id = rig.wait_for_pending(RESEARCH).await;
            let mode: String = rig
                .open_ledger()
                .query_row(
                    "SELECT mode FROM gated_calls WHERE task_id = ?1",
                    [&task_id],
                    |r| r.get(0),
                )
                .expect("the gated call");
            assert_eq!(mode, "task", "the agent follows a task, it is not held");
            rig.approve(&task_id).await;
            let question = countersign_tests::gateway::eventually(
                "the upstream's clarification never reached the inbox",
                Duration::from_secs(60),
                Duration::from_millis(200),
                || async {
                    rig.pending_questions()
                        .await
                        .into_iter()
                        .find(|q| q["kind"] != "tool_call_questions")
                },
            )
            .await;
            let upstream = question["task_id"].as_str().expect("the upstream task id");
            rig.cli(&[
                "answer",
                upstream,
                "--accept",
                r#"{"interpretation": "programming"}"#,
            ])
            .await
            .assert_code(0);
        }
    );
    assert_eq!(result["protocolVersion"], "2025-11-25", "{result}");
    let task_id = result["taskId"].as_str().unwrap_or("");
    assert!(
        task_id.starts_with("csg-"),
        "Countersign's own task: {result}"
    );
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        result["text"]
            .as_str()
            .unwrap_or("")
            .contains("python (programming)"),
        "the report after the person's clarification: {result}"
    );
    assert_eq!(intents_for(&rig, RESEARCH).len(), 1, "sent once");
}
