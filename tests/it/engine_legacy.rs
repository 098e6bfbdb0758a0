//! The engine following 2025-11-25 tasks on the real reference server
//! `@modelcontextprotocol/server-everything` 2026.8.31: the CLI in ledger mode calls the tool
//! (its task handle committed before the call returns), `countersign watch` runs the engine, and
//! the ledger must show what it shows for a modern server: the question in the inbox once, the
//! answer recorded, delivered once as the JSON-RPC response, the result stored; across kill -9
//! and a server restart, every task ends with its reason.
//!
//! Without Node or the package the tests fail, naming `bash .ci/setup-tools.sh`; never a skip.

use std::time::Duration;

use countersign_tests::everything::Everything;
use countersign_tests::ledger_view::{assert_sound_timeline, wait_for};
use countersign_tests::procs::DataDir;
use serde_json::json;

const RESEARCH: &str = "simulate-research-query";
const AMBIGUOUS: &str = r#"{"topic":"python","ambiguous":true}"#;
const PLAIN: &str = r#"{"topic":"rust"}"#;

/// How long a task may take to reach a state (server-everything's steps are 1 s each).
const SETTLE: Duration = Duration::from_secs(30);

async fn rig(label: &str) -> (Everything, DataDir) {
    let server = Everything::start();
    let dir = DataDir::new(label);
    dir.add_server("everything", &server.url()).await;
    (server, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_research_query_is_followed_to_its_report() {
    let (_server, dir) = rig("legacy-plain").await;
    let _watch = dir.watch().await;
    let id = dir.call_no_follow("everything", RESEARCH, PLAIN).await;
    let view = dir.ledger();
    let task = view.finished(&id, SETTLE).await;
    assert_eq!(task.status, "completed", "{}", view.describe(task.id));
    assert!(
        task.result_text().contains("# Research Report: rust"),
        "the result is tasks/result's CallToolResult: {}",
        task.result_text()
    );
    let timeline = assert_sound_timeline(&view, &task);
    assert!(
        timeline.of("task_updated").len() >= 2,
        "the status messages were followed: {}",
        view.describe(task.id)
    );
    let pushed = view
        .events_for(task.id)
        .iter()
        .filter(|e| e.kind == "task_updated" && e.via.as_deref() == Some("push"))
        .count();
    assert!(
        pushed > 0,
        "server-everything's notifications/tasks/status on the session's GET stream are a push source:\n{}",
        view.describe(task.id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clarification_is_asked_once_answered_and_applied() {
    let (_server, dir) = rig("legacy-answer").await;
    let _watch = dir.watch().await;
    let id = dir.call_no_follow("everything", RESEARCH, AMBIGUOUS).await;
    let view = dir.ledger();
    let key = view.pending_question(&id, SETTLE).await;
    let inbox = dir.run_json(&["inbox"]).await;
    assert!(
        inbox.to_string().contains("multiple interpretations"),
        "the server's question is in the inbox: {inbox}"
    );
    let answer = dir
        .run_json(&[
            "answer",
            &id,
            "--accept",
            &json!({"interpretation": "programming"}).to_string(),
        ])
        .await;
    assert_eq!(
        answer["delivery"], "delivered",
        "the running engine delivers the answer: {answer}"
    );
    let task = view.finished(&id, SETTLE).await;
    assert_eq!(task.status, "completed", "{}", view.describe(task.id));
    assert!(
        task.result_text().contains("python (programming)"),
        "the server applied our answer: {}",
        task.result_text()
    );
    let timeline = assert_sound_timeline(&view, &task);
    assert_eq!(timeline.asked.len(), 1, "{}", view.describe(task.id));
    assert_eq!(timeline.answered.len(), 1);
    assert_eq!(timeline.of("update_acknowledged").len(), 1);
    let inputs = view.inputs(task.id);
    assert_eq!(
        (
            inputs.len(),
            inputs[0].key.as_str(),
            inputs[0].state.as_str()
        ),
        (1, key.as_str(), "delivered"),
        "{inputs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_clarification_lets_the_task_go_on_without_it() {
    let (_server, dir) = rig("legacy-decline").await;
    let _watch = dir.watch().await;
    let id = dir.call_no_follow("everything", RESEARCH, AMBIGUOUS).await;
    let view = dir.ledger();
    view.pending_question(&id, SETTLE).await;
    let answer = dir.run_json(&["answer", &id, "--decline"]).await;
    assert_eq!(answer["delivery"], "delivered", "{answer}");
    let task = view.finished(&id, SETTLE).await;
    assert_eq!(task.status, "completed", "{}", view.describe(task.id));
    assert!(
        !task.result_text().contains("python (programming)"),
        "no interpretation was chosen: {}",
        task.result_text()
    );
    assert_eq!(view.inputs(task.id)[0].state, "delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_a_waiting_task_cancelled() {
    let (_server, dir) = rig("legacy-cancel").await;
    let _watch = dir.watch().await;
    let id = dir.call_no_follow("everything", RESEARCH, AMBIGUOUS).await;
    let view = dir.ledger();
    view.pending_question(&id, SETTLE).await;
    let cancelled = dir.run_json(&["cancel", &id]).await;
    assert_eq!(cancelled["delivery"], "delivered", "{cancelled}");
    let task = view.finished(&id, SETTLE).await;
    assert_eq!(task.status, "cancelled", "{}", view.describe(task.id));
    assert_eq!(
        view.inputs(task.id)[0].state,
        "superseded",
        "the unanswered question is withdrawn with the task"
    );
}

/// kill -9 while the question waits: the question's stream died with the engine, so the server
/// no longer waits on it; the restarted engine shows the question withdrawn (asked once, never
/// twice) and sends no answer into the void.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_a_waiting_question_is_withdrawn_not_asked_again() {
    let (_server, dir) = rig("legacy-kill-waiting").await;
    let mut watch = dir.watch().await;
    let id = dir.call_no_follow("everything", RESEARCH, AMBIGUOUS).await;
    let view = dir.ledger();
    let key = view.pending_question(&id, SETTLE).await;
    watch.kill9().await;
    let _watch = dir.watch().await;
    let task = view.task_expect(&id);
    wait_for("the question to be withdrawn", SETTLE, || {
        view.inputs(task.id)
            .iter()
            .any(|q| q.key == key && q.state == "superseded")
            .then_some(())
    })
    .await;
    assert_eq!(view.count_kind(task.id, "input_requested"), 1);
    let inputs = view.inputs(task.id);
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    let cancelled = dir.run_json(&["cancel", &id]).await;
    assert_eq!(cancelled["delivery"], "delivered", "{cancelled}");
    let task = view.finished(&id, SETTLE).await;
    assert_eq!(task.status, "cancelled", "{}", view.describe(task.id));
    assert_sound_timeline(&view, &task);
}

/// kill -9, then the answer recorded while no engine runs: the CLI delivers it itself, but no
/// process holds the server's question any more (its stream died with the engine), so nothing is
/// sent into the void and the person is told why; the restarted engine does not send it either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_recorded_after_the_engine_died_is_not_sent_into_the_void() {
    let (_server, dir) = rig("legacy-kill-answered").await;
    let mut watch = dir.watch().await;
    let id = dir.call_no_follow("everything", RESEARCH, AMBIGUOUS).await;
    let view = dir.ledger();
    view.pending_question(&id, SETTLE).await;
    watch.kill9().await;
    let answer = dir
        .run(&[
            "--json",
            "answer",
            &id,
            "--accept",
            &json!({"interpretation": "snake"}).to_string(),
        ])
        .await;
    answer.expect_code(69);
    let outcome = answer.json();
    assert_eq!(outcome["delivery"], "refused", "{answer}");
    assert!(
        outcome["message"]
            .as_str()
            .is_some_and(|m| m.contains("question withdrawn by the server")),
        "the person is told why: {answer}"
    );
    let task = view.task_expect(&id);
    assert_eq!(
        view.count_kind(task.id, "input_answered"),
        1,
        "the answer is recorded (and audited) before anything is tried: {}",
        view.describe(task.id)
    );
    let _watch = dir.watch().await;
    let cancelled = dir.run_json(&["cancel", &id]).await;
    assert_eq!(cancelled["delivery"], "delivered", "{cancelled}");
    let task = view.finished(&id, SETTLE).await;
    assert_eq!(task.status, "cancelled", "{}", view.describe(task.id));
    assert!(
        !task.result_text().contains("snake"),
        "the answer was never applied: {}",
        task.result_text()
    );
    assert_eq!(view.count_kind(task.id, "update_acknowledged"), 0);
}

/// The server restarted mid-task: its sessions and tasks are gone. The engine opens a new
/// session and the task ends `lost`, saying why; the new session is in the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_loses_the_old_sessions_tasks_with_their_reason() {
    let (server, dir) = rig("legacy-server-restart").await;
    let _watch = dir.watch().await;
    let id = dir.call_no_follow("everything", RESEARCH, AMBIGUOUS).await;
    let view = dir.ledger();
    view.pending_question(&id, SETTLE).await;
    let _server = server.restart();
    let task = view.finished(&id, SETTLE).await;
    assert_eq!(task.status, "lost", "{}", view.describe(task.id));
    let lost = view
        .events_for(task.id)
        .into_iter()
        .find(|e| e.kind == "task_lost")
        .expect("a task_lost event");
    assert!(
        lost.data
            .to_string()
            .contains("the server ended the session"),
        "{lost:?}"
    );
    assert_eq!(view.inputs(task.id)[0].state, "superseded");
    // A new call works in the new session.
    let again = dir.call_no_follow("everything", RESEARCH, PLAIN).await;
    assert_eq!(view.finished(&again, SETTLE).await.status, "completed");
}

/// `adopt NAME --list` shows the session's tasks (tracked ones marked) and says that a session
/// sees only its own; adopting an id the session cannot see is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_list_shows_the_sessions_tasks_and_says_whose_they_are() {
    let (_server, dir) = rig("legacy-adopt-list").await;
    let id = dir.call_no_follow("everything", RESEARCH, PLAIN).await;
    let row = dir.ledger().task_expect(&id).id;
    let listed = dir.run_json(&["adopt", "everything", "--list"]).await;
    let tasks = listed["tasks"].as_array().expect("a tasks array");
    let ours = tasks
        .iter()
        .find(|t| t["taskId"] == id.as_str())
        .unwrap_or_else(|| panic!("the session's task is listed: {listed}"));
    assert_eq!(ours["tracked"], row, "{listed}");
    assert!(
        listed["note"]
            .as_str()
            .is_some_and(|n| n.contains("a session sees only its own tasks")),
        "{listed}"
    );
    let text = dir.run(&["adopt", "everything", "--list"]).await;
    text.expect_code(0);
    assert!(text.stdout.contains(&id) && text.stdout.contains(&format!("tracked as #{row}")));

    let unknown = dir
        .run(&["adopt", "everything", "not-a-task-of-this-session"])
        .await;
    assert_ne!(unknown.code, Some(0), "{unknown}");
    assert!(
        unknown.stderr.contains("not-a-task-of-this-session"),
        "the error names the task: {unknown}"
    );
}

// ------------------------------------- a scripted legacy server: what server-everything never does

mod scripted {
    use super::*;
    use crate::cli_legacy::{initialized, legacy, legacy_task, modern, not_initialized};
    use countersign_tests::hostile::{Reply, SseEnd};
    use serde_json::Value;

    /// A task that waits for input; its `tasks/result` stream asks for sampling, sends a
    /// question for another task, then this task's own question, then stays open.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn other_requests_and_other_tasks_questions_are_refused_and_noted() {
        let server = legacy(initialized)
            .tool("research", |request| match request.method.as_str() {
                _ if modern(request) => not_initialized(),
                "tools/call" => {
                    Reply::Result(json!({"task": legacy_task(&request.new_task_id(), "working")}))
                }
                "tasks/get" => Reply::Result(legacy_task(
                    request.task_id().unwrap_or_default(),
                    "input_required",
                )),
                "tasks/result" => {
                    let own = request.task_id().unwrap_or_default().to_owned();
                    let events: Vec<Value> = vec![
                        json!({"jsonrpc": "2.0", "id": 900, "method": "sampling/createMessage",
                               "params": {"messages": [], "maxTokens": 10}}),
                        json!({"jsonrpc": "2.0", "id": 901, "method": "elicitation/create",
                               "params": {"message": "not yours", "requestedSchema": {"type": "object", "properties": {}},
                                          "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "someone-else"}}}}),
                        json!({"jsonrpc": "2.0", "id": 902, "method": "elicitation/create",
                               "params": {"message": "Proceed with the research?", "requestedSchema": {"type": "object", "properties": {}},
                                          "_meta": {"io.modelcontextprotocol/related-task": {"taskId": own}}}}),
                    ];
                    Reply::Sse {
                        events: events.iter().map(Value::to_string).collect(),
                        then: SseEnd::Hang,
                    }
                }
                _ => Reply::error(-32601, "method not found"),
            })
            .start()
            .await;
        let dir = DataDir::new("legacy-scripted-refusals");
        dir.add_server("everything", &server.url()).await;
        let _watch = dir.watch().await;
        let out = dir
            .run_json(&["call", "everything", "research", "{}", "--no-follow"])
            .await;
        let id = out["taskId"].as_str().expect("a task id").to_owned();
        let view = dir.ledger();
        let key = view.pending_question(&id, SETTLE).await;
        assert_eq!(key, "902", "the key is the server's request id");
        let task = view.task_expect(&id);
        let notes = wait_for("both refusals on the timeline", SETTLE, || {
            let notes: Vec<String> = view
                .events_for(task.id)
                .into_iter()
                .filter(|e| e.kind == "server_data_ignored")
                .map(|e| e.data.to_string())
                .collect();
            (notes.len() >= 2).then_some(notes)
        })
        .await;
        assert!(
            notes.iter().any(|n| n.contains("sampling/createMessage")),
            "{notes:?}"
        );
        assert!(
            notes.iter().any(|n| n.contains("someone-else")),
            "{notes:?}"
        );
        let inputs = view.inputs(task.id);
        assert_eq!(inputs.len(), 1, "only the task's own question: {inputs:?}");
        assert_eq!(view.count_kind(task.id, "input_requested"), 1);
        let answer = dir.run_json(&["answer", &id, "--decline"]).await;
        assert_eq!(answer["delivery"], "delivered", "{answer}");
    }
}

/// A server that now speaks the other era (the modern demo replaced by a 2025-11-25 one on the
/// same address): the engine's polls fail the way a legacy server answers modern requests, it
/// probes the server again, records the new era, and follows the server through a session from
/// then on; the old era's task, unknown to the new server, ends `lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_changed_era_is_probed_again_and_followed_in_its_new_era() {
    use countersign_demo::{DemoConfig, DemoServer, Era};
    use std::net::SocketAddr;
    let config = DemoConfig {
        time_scale: 0.01,
        poll_interval_ms: 100,
        ..DemoConfig::default()
    };
    let modern = DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), config.clone())
        .await
        .expect("the modern demo starts");
    let addr = modern.local_addr();
    let dir = DataDir::new("legacy-era-change");
    dir.add_server("demo", &modern.url()).await;
    let listed = dir.run(&["servers", "list"]).await;
    assert!(listed.stdout.contains("modern"), "{listed}");
    let _watch = dir.watch().await;
    let out = dir
        .run_json(&[
            "call",
            "demo",
            "deploy_service",
            r#"{"service":"billing-api","environment":"staging"}"#,
            "--no-follow",
        ])
        .await;
    let id = out["taskId"].as_str().expect("a task id").to_owned();
    let view = dir.ledger();
    view.pending_question(&id, SETTLE).await;
    modern.shutdown().await;
    let _legacy = DemoServer::start(
        addr,
        DemoConfig {
            era: Era::Legacy,
            ..config
        },
    )
    .await
    .expect("the legacy demo starts on the same address");
    wait_for("the new era to be recorded", SETTLE, || {
        let listed = std::process::Command::new(countersign_tests::cli::binary())
            .args(["--data-dir", dir.path().to_str()?, "servers", "list"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&listed.stdout)
            .contains("legacy 2025-11-25")
            .then_some(())
    })
    .await;
    let task = view.finished(&id, SETTLE).await;
    assert_eq!(task.status, "lost", "{}", view.describe(task.id));
    let again = dir
        .run_json(&[
            "call",
            "demo",
            "bench_job",
            r#"{"duration_ms":300}"#,
            "--no-follow",
        ])
        .await;
    let again = again["taskId"].as_str().expect("a task id").to_owned();
    assert_eq!(view.finished(&again, SETTLE).await.status, "completed");
}
