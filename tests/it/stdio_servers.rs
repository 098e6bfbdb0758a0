//! stdio servers: Countersign starts the process. The real `@modelcontextprotocol/server-filesystem`
//! 2026.8.31 (stdio only) and server-everything 2026.8.31 on stdio, registered with `servers add
//! NAME -- COMMAND`, used from the CLI; the engine that starts a process owns it, and no process
//! outlives it, kill -9 included. Each server gets `--env` with a marker unique to the test, so
//! the test finds its processes in `/proc` wherever they are in the tree.
//!
//! Without Node or the packages the tests fail, naming `bash .ci/setup-tools.sh`; never a skip.

use std::time::Duration;

use countersign_tests::everything::{filesystem_command, processes_marked, stdio_command};
use countersign_tests::ledger_view::wait_for;
use countersign_tests::procs::DataDir;

const RESEARCH: &str = "simulate-research-query";
const SETTLE: Duration = Duration::from_secs(30);

fn marker(label: &str) -> String {
    format!("COUNTERSIGN_TEST_MARK={label}-{}", std::process::id())
}

/// `servers add NAME --env MARKER -- COMMAND…`, which must succeed.
async fn add(dir: &DataDir, name: &str, marker: &str, command: &[String]) -> String {
    let mut args = vec!["servers", "add", name, "--env", marker, "--"];
    args.extend(command.iter().map(String::as_str));
    let got = dir.run(&args).await;
    got.expect_code(0);
    got.stdout
}

async fn no_process_left(marker: &str) {
    wait_for(
        "the server's processes to end",
        Duration::from_secs(5),
        || processes_marked(marker).is_empty().then_some(()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filesystem_server_is_added_listed_and_called_and_no_process_stays() {
    let dir = DataDir::new("stdio-fs");
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "hello\n").unwrap();
    let mark = marker("fs");
    let said = add(&dir, "files", &mark, &filesystem_command(&root)).await;
    assert!(
        said.contains("secure-filesystem-server") && said.contains("legacy 2025-11-25"),
        "the probe found the era: {said}"
    );
    no_process_left(&mark).await;

    let list = dir.run(&["servers", "list"]).await;
    list.expect_code(0);
    assert!(
        list.stdout.contains("server-filesystem/dist/index.js"),
        "{}",
        list.stdout
    );
    assert!(
        !list.stdout.contains(&mark),
        "the environment is not shown: {}",
        list.stdout
    );

    let discover = dir.run(&["discover", "files"]).await;
    discover.expect_code(0);
    assert!(
        discover.stdout.contains("era:        legacy (2025-11-25)"),
        "{}",
        discover.stdout
    );
    let tools = dir.run(&["tools", "files"]).await;
    tools.expect_code(0);
    for tool in ["read_text_file", "write_file", "list_directory"] {
        assert!(
            tools.stdout.contains(tool),
            "{tool} listed: {}",
            tools.stdout
        );
    }

    let target = root.join("out.txt");
    let args = serde_json::json!({"path": target, "content": "written once"}).to_string();
    dir.run(&["call", "files", "write_file", &args])
        .await
        .expect_code(0);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "written once");
    let read = serde_json::json!({"path": root.join("a.txt")}).to_string();
    let got = dir.run(&["call", "files", "read_text_file", &read]).await;
    got.expect_code(0);
    assert!(got.stdout.contains("hello"), "{}", got.stdout);
    // Outside the served directory: the server's own refusal, as a tool error.
    let outside = serde_json::json!({"path": "/etc/hostname"}).to_string();
    let got = dir
        .run(&["call", "files", "read_text_file", &outside])
        .await;
    got.expect_code(1);
    no_process_left(&mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_on_stdio_is_followed_to_its_end_with_its_question_answered() {
    let dir = DataDir::new("stdio-task");
    let mark = marker("task");
    add(&dir, "everything", &mark, &stdio_command()).await;
    let got = dir
        .run(&[
            "call",
            "everything",
            RESEARCH,
            r#"{"topic":"python","ambiguous":true}"#,
            "--accept",
            r#"{"interpretation":"programming"}"#,
            "--json",
        ])
        .await;
    got.expect_code(0);
    assert!(
        got.stdout.contains("python (programming)"),
        "the answer reached the server: {}",
        got.stdout
    );
    let view = dir.ledger();
    let task = view
        .tasks()
        .into_iter()
        .next()
        .expect("the task is in the ledger");
    assert_eq!(task.status, "completed", "{}", view.describe(task.id));
    assert_eq!(view.count_kind(task.id, "input_requested"), 1);
    assert_eq!(view.count_kind(task.id, "input_answered"), 1);
    no_process_left(&mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_engine_takes_its_server_and_the_task_ends_with_the_process() {
    let dir = DataDir::new("stdio-kill");
    let mark = marker("kill");
    add(&dir, "everything", &mark, &stdio_command()).await;
    // This command is the engine: it starts the server, calls, and follows.
    let mut caller = dir.spawn(&[
        "call",
        "everything",
        RESEARCH,
        r#"{"topic":"python","ambiguous":true}"#,
    ]);
    let view = dir.ledger();
    let task = wait_for("the task handle on disk", SETTLE, || {
        view.tasks().into_iter().next()
    })
    .await;
    assert!(!processes_marked(&mark).is_empty(), "the server runs");
    caller.kill9().await;
    // PR_SET_PDEATHSIG: the server dies with the engine that started it.
    no_process_left(&mark).await;

    let watch = dir.watch().await;
    let done = view.finished(&task.task_id, SETTLE).await;
    assert_eq!(done.status, "lost", "{}", view.describe(done.id));
    let lost = view
        .events_for(done.id)
        .into_iter()
        .find(|e| e.kind == "task_lost")
        .expect("a task_lost event");
    assert!(
        lost.data.to_string().contains("the server process ended"),
        "{}",
        view.describe(done.id)
    );
    drop(watch);
    no_process_left(&mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_killed_engines_server_started_and_left_is_ended_by_the_next_engine() {
    let dir = DataDir::new("stdio-orphan");
    let mark = marker("orphan");
    // The server starts a child that neither reads its stdin nor gets the engine's death signal.
    let mut command = vec!["sh".to_owned(), "-c".to_owned()];
    let everything = stdio_command()
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    command.push(format!("sleep 600 & exec {everything}"));
    add(&dir, "everything", &mark, &command).await;
    no_process_left(&mark).await;
    let mut caller = dir.spawn(&[
        "call",
        "everything",
        RESEARCH,
        r#"{"topic":"python","ambiguous":true}"#,
    ]);
    let view = dir.ledger();
    wait_for("the task handle on disk", SETTLE, || {
        view.tasks().into_iter().next()
    })
    .await;
    caller.kill9().await;
    wait_for(
        "the server itself to die with its engine",
        Duration::from_secs(5),
        || (processes_marked(&mark).len() == 1).then_some(()),
    )
    .await;
    let _watch = dir.watch().await;
    no_process_left(&mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_says_who_owns_the_process_instead_of_starting_a_second_one() {
    let dir = DataDir::new("stdio-owner");
    let mark = marker("owner");
    add(&dir, "everything", &mark, &stdio_command()).await;
    let got = dir
        .run(&[
            "call",
            "everything",
            RESEARCH,
            r#"{"topic":"x"}"#,
            "--no-follow",
        ])
        .await;
    got.expect_code(64);
    assert!(got.stderr.contains("is a stdio server"), "{}", got.stderr);

    let _watch = dir.watch().await;
    let got = dir
        .run(&["call", "everything", "echo", r#"{"message":"x"}"#])
        .await;
    got.expect_code(64);
    assert!(
        got.stderr.contains("run by the engine of process"),
        "{}",
        got.stderr
    );
    // An idle stdio server costs nothing: the engine has not started it.
    assert!(
        processes_marked(&mark).is_empty(),
        "started before it was needed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_that_cannot_serve_are_refused_with_their_reason_and_not_added() {
    let dir = DataDir::new("stdio-bad");
    let got = dir
        .run(&[
            "servers",
            "add",
            "missing",
            "--",
            "/nonexistent/countersign-no-server",
        ])
        .await;
    assert_ne!(got.code, Some(0));
    assert!(got.stderr.contains("could not start"), "{}", got.stderr);

    let got = dir
        .run(&[
            "servers",
            "add",
            "exits",
            "--",
            "sh",
            "-c",
            "echo 'config file missing' >&2; exit 3",
        ])
        .await;
    assert_ne!(got.code, Some(0));
    assert!(
        got.stderr.contains("config file missing"),
        "its stderr is the reason: {}",
        got.stderr
    );

    let got = dir
        .run(&[
            "servers",
            "add",
            "secret",
            "--env-secret",
            "COUNTERSIGN_TEST_UNSET_SECRET",
            "--",
            "true",
        ])
        .await;
    got.expect_code(64);
    assert!(
        got.stderr.contains("set COUNTERSIGN_TEST_UNSET_SECRET"),
        "{}",
        got.stderr
    );

    let list = dir.run(&["servers", "list", "--json"]).await;
    list.expect_code(0);
    assert_eq!(list.json(), serde_json::json!([]), "nothing half-added");
}

/// The Python `mcp` 2.3 SDK's stdio server answers the era probe as a 2026-07-28 server and then
/// refuses `initialize` on that process; a fresh process that is sent `initialize` first serves
/// the session generation, which Countersign speaks on stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dual_era_python_sdk_server_is_added_and_called() {
    let dir = DataDir::new("stdio-python");
    let mark = marker("python");
    let python = countersign_tests::peer::python().display().to_string();
    let script = countersign_tests::peer::repo_root()
        .join("tests/peers/mcp_stdio_server.py")
        .display()
        .to_string();
    let said = add(&dir, "py", &mark, &[python, script]).await;
    assert!(
        said.contains("python-mcp-stdio") && said.contains("legacy 2025-11-25"),
        "{said}"
    );
    let got = dir
        .run(&["call", "py", "add", r#"{"a":2,"b":3}"#, "--json"])
        .await;
    got.expect_code(0);
    assert_eq!(
        got.json()["result"]["structuredContent"]["result"],
        5,
        "{}",
        got.stdout
    );
    no_process_left(&mark).await;
}
