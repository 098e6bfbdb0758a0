//! The gateway in front of a stdio server: the real `@modelcontextprotocol/server-filesystem`
//! 2026.8.31 (stdio only), registered with `servers add files -- …` and started by the gateway's
//! engine; `countersign gateway` as a real process; agents nobody here wrote: the official
//! TypeScript SDK 1.32.2 client (2025-11-25 sessions, as most hosts embed), the Python `mcp` 2.3
//! session client, and a 2026-07-28 tasks-declaring agent. The files on disk are the record of
//! what ran: a write a person approved lands exactly once, a declined one never.
//!
//! Without Node or the packages the tests fail, naming `bash .ci/setup-tools.sh`; never a skip.

use std::path::PathBuf;
use std::time::Duration;

use countersign_tests::everything::{filesystem_command, processes_marked};
use countersign_tests::gateway::GatewayRig;
use countersign_tests::ledger_view::wait_for;
use serde_json::{json, Value};

const DISPOSITION: &str = "io.modelcontextprotocol/tool-approval-disposition";

struct Rig {
    rig: GatewayRig,
    root: PathBuf,
    mark: String,
}

/// server-filesystem over `ROOT` registered as `files` in a gateway rig (whose demo server
/// stays unused), the agents' URL pointed at it.
async fn stdio_rig(label: &str, hold_seconds: u64) -> Rig {
    let mut rig = GatewayRig::start(hold_seconds).await;
    let root = rig.dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "first line\n").unwrap();
    let mark = format!("COUNTERSIGN_TEST_MARK=gw-{label}-{}", std::process::id());
    let mut args = vec!["servers", "add", "files", "--env", &mark, "--"];
    let command = filesystem_command(&root);
    args.extend(command.iter().map(String::as_str));
    rig.cli(&args).await.assert_code(0);
    rig.url = format!("http://127.0.0.1:{}/mcp/files", rig.port);
    Rig { rig, root, mark }
}

fn intents_for(rig: &GatewayRig, tool: &str) -> usize {
    let view = rig.dir.ledger();
    let server = view.server_id("files");
    view.intents()
        .into_iter()
        .filter(|i| i.server_id == server && i.tool == tool)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_and_a_read_allowed_by_a_rule_returns_to_both_clients() {
    let Rig { rig, root, .. } = stdio_rig("read", 20).await;
    rig.cli(&["policy", "set", "files", "read_text_file", "allow"])
        .await
        .assert_code(0);
    let path = root.join("notes.txt").display().to_string();

    let ts = rig
        .ts_agent_with("read_text_file", json!({"path": path}), &["--list"])
        .await;
    assert_eq!(ts["isError"], false, "{ts}");
    assert_eq!(ts["text"], "first line\n", "{ts}");
    let names = ts["tools"].as_array().cloned().unwrap_or_default();
    for tool in ["read_text_file", "write_file", "list_directory"] {
        assert!(names.contains(&json!(tool)), "{tool} listed: {ts}");
    }

    let python = rig
        .agent(
            "session",
            &rig.token,
            "read_text_file",
            json!({"path": path}),
        )
        .await;
    assert_eq!(python["isError"], false, "{python}");
    assert_eq!(python["text"], "first line\n", "{python}");
    assert!(
        rig.pending_calls().await.is_empty(),
        "an allowed read asks nobody"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_is_approved_in_the_cli_and_the_file_is_written_once() {
    let Rig { rig, root, .. } = stdio_rig("write", 30).await;
    let target = root.join("approved.txt");
    let agent = rig.spawn_agent(
        "session",
        "write_file",
        json!({"path": target.display().to_string(), "content": "approved once"}),
    );
    let task_id = rig.wait_for_pending("write_file").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!target.exists(), "nothing is written before approval");
    rig.approve(&task_id).await;
    let result = agent.await.expect("the agent task");
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["meta"][DISPOSITION], "approved-executed", "{result}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "approved once");
    assert_eq!(
        intents_for(&rig, "write_file"),
        1,
        "sent once for the person"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_write_writes_nothing_and_the_agent_gets_is_error_with_the_reason() {
    let Rig { rig, root, .. } = stdio_rig("decline", 30).await;
    let target = root.join("declined.txt");
    let agent = rig.spawn_agent(
        "session",
        "write_file",
        json!({"path": target.display().to_string(), "content": "never"}),
    );
    let task_id = rig.wait_for_pending("write_file").await;
    rig.cli(&[
        "answer",
        &task_id,
        "--decline",
        "--reason",
        "not in my notes",
    ])
    .await
    .assert_code(0);
    let result = agent.await.expect("the agent task");
    assert_eq!(result["isError"], true, "{result}");
    let text = result["text"].as_str().unwrap_or("");
    assert!(
        text.contains("not in my notes"),
        "the reason reaches the agent: {text}"
    );
    assert!(!target.exists(), "a declined write writes nothing");
    assert_eq!(intents_for(&rig, "write_file"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waiting_across_kill_9_of_the_gateway_is_approved_once_and_written_once() {
    let Rig {
        mut rig,
        root,
        mark,
    } = stdio_rig("kill", 30).await;
    let target = root.join("after-restart.txt");
    let task_id = rig
        .task_of_call(
            "write_file",
            json!({"path": target.display().to_string(), "content": "once"}),
        )
        .await;
    let port = rig.port;
    rig.kill9().await;
    // The engine's server process went with it.
    wait_for(
        "the server process to end with its engine",
        Duration::from_secs(5),
        || processes_marked(&mark).is_empty().then_some(()),
    )
    .await;
    assert_eq!(
        rig.wait_for_pending("write_file").await,
        task_id,
        "still waiting, on disk"
    );
    rig.start_gateway(port).await;
    rig.url = format!("http://127.0.0.1:{port}/mcp/files");
    let polled = rig.task_request("tasks/get", &task_id).await;
    assert_eq!(polled["result"]["status"], "working", "{polled}");
    rig.approve(&task_id).await;
    let task: Value = rig.task_to_end(&task_id).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "once");
    assert_eq!(
        intents_for(&rig, "write_file"),
        1,
        "approved once, sent once"
    );
}
