//! stdio servers: the real server-everything 2026.8.31 (TypeScript SDK 1.32.2, MCP 2025-11-25,
//! SEP-1686 Tasks) started as a process, followed through [`LegacyPeer::stdio`]; and processes
//! that misbehave (a command that does not exist, one that exits at once, one that writes
//! noise, one that never answers). Installed by `bash .ci/setup-tools.sh`; never skipped.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use countersign_mcp::client::ToolCall;
use countersign_mcp::legacy::LegacySession;
use countersign_mcp::stdio::{StdioCommand, StdioServer};
use countersign_mcp::wire::{CallOutcome, TaskState};
use countersign_mcp::{ClientOptions, Error, LegacyPeer, SessionStore};
use futures_util::future::BoxFuture;
use serde_json::{json, Map, Value};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn node() -> PathBuf {
    let pinned = repo_root().join(".ci/tools/node_modules/.bin/node");
    if pinned.exists() {
        pinned
    } else {
        PathBuf::from("node")
    }
}

fn everything() -> StdioCommand {
    let script = repo_root()
        .join(".ci/tools/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        script.is_file(),
        "server-everything is not installed at {}: run `bash .ci/setup-tools.sh`",
        script.display()
    );
    StdioCommand {
        program: node().display().to_string(),
        args: vec![script.display().to_string(), "stdio".into()],
        env: Vec::new(),
        cwd: None,
    }
}

fn sh(script: &str) -> StdioCommand {
    StdioCommand {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: Vec::new(),
        cwd: None,
    }
}

#[derive(Default)]
struct Memory(Mutex<Option<LegacySession>>);

impl SessionStore for Memory {
    fn load(&self) -> BoxFuture<'static, Option<LegacySession>> {
        let session = self.0.lock().unwrap().clone();
        Box::pin(async move { session })
    }
    fn save(&self, session: LegacySession) -> BoxFuture<'static, Result<(), String>> {
        *self.0.lock().unwrap() = Some(session);
        Box::pin(async { Ok(()) })
    }
}

fn peer(server: &StdioServer, timeout: Duration) -> LegacyPeer {
    let options = ClientOptions {
        request_timeout: timeout,
        ..ClientOptions::default()
    };
    LegacyPeer::stdio(server.clone(), options, Arc::new(Memory::default()), None)
}

fn args(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}

async fn poll_until(
    peer: &LegacyPeer,
    task_id: &str,
    done: impl Fn(&TaskState) -> bool,
) -> countersign_mcp::wire::Task {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let task = match peer.poll_task(task_id, None).await.expect("tasks/get") {
            countersign_mcp::client::Polled::Changed(task, _) => task,
            countersign_mcp::client::Polled::Unchanged => unreachable!("no digest was given"),
        };
        if done(&task.state) {
            return task;
        }
        assert!(Instant::now() < deadline, "task stuck in {:?}", task.state);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn group_alive(pid: u32) -> bool {
    // `kill -0 -PGID` through the shell: the test crate has no system-call bindings of its own.
    std::process::Command::new("sh")
        .args(["-c", &format!("kill -0 -{pid} 2>/dev/null")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

async fn gone_within(pgid: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while group_alive(pgid) {
        assert!(
            Instant::now() < deadline,
            "process group {pgid} still alive"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_research_query_on_stdio_asks_its_question_and_completes_once_answered() {
    let server = StdioServer::new("everything", everything());
    let peer = peer(&server, Duration::from_secs(30));

    let echo = peer
        .call_tool(&ToolCall::new("echo", args(json!({"message": "hi"}))))
        .await
        .expect("echo");
    let CallOutcome::Complete(result) = echo else {
        panic!("echo is a plain call: {echo:?}")
    };
    assert!(serde_json::to_string(&result).unwrap().contains("Echo: hi"));
    let pid = server.status().pid.expect("a process runs");
    assert_eq!(server.status().starts, 1);

    let call = ToolCall::new(
        "simulate-research-query",
        args(json!({"topic": "python", "ambiguous": true})),
    );
    let CallOutcome::Task(handle) = peer.call_tool(&call).await.expect("tools/call") else {
        panic!("simulate-research-query runs as a task")
    };
    let asked = poll_until(&peer, &handle.task_id, |s| match s {
        TaskState::InputRequired { input_requests } => !input_requests.is_empty(),
        _ => false,
    })
    .await;
    let TaskState::InputRequired { input_requests } = asked.state else {
        unreachable!()
    };
    let key = input_requests.keys().next().unwrap().clone();
    let mut answers = Map::new();
    answers.insert(
        key,
        json!({"action": "accept", "content": {"interpretation": "programming"}}),
    );
    peer.update_task(&handle.task_id, answers)
        .await
        .expect("the answer is sent");
    let done = poll_until(&peer, &handle.task_id, |s| {
        matches!(s, TaskState::Completed { .. })
    })
    .await;
    let TaskState::Completed { result } = done.state else {
        unreachable!()
    };
    assert!(serde_json::to_string(&result)
        .unwrap()
        .contains("python (programming)"));
    assert_eq!(server.status().pid, Some(pid), "one process served it all");

    drop(peer);
    server.stop().await;
    gone_within(pid, Duration::from_secs(3)).await;
    assert!(server.log().iter().any(|l| l.contains("the process ended")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_of_a_killed_process_ends_lost_and_the_next_process_serves_new_calls() {
    let server = StdioServer::new("everything", everything());
    let peer = peer(&server, Duration::from_secs(30));
    let call = ToolCall::new("simulate-research-query", args(json!({"topic": "rust"})));
    let CallOutcome::Task(handle) = peer.call_tool(&call).await.expect("tools/call") else {
        panic!("a task")
    };
    let pid = server.status().pid.expect("running");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    // The exit is seen, the pause after one exit passes, and the new process does not know
    // the task: it ends with the process, and is not polled forever.
    let deadline = Instant::now() + Duration::from_secs(20);
    let error = loop {
        match peer.poll_task(&handle.task_id, None).await {
            Err(Error::ProcessEnded { task_id }) => break task_id,
            Err(e) if e.class() == countersign_mcp::ErrorClass::Transient => {}
            other => panic!("expected the task to end with its process: {other:?}"),
        }
        assert!(Instant::now() < deadline, "never concluded");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(error, handle.task_id);
    let status = server.status();
    assert_eq!(status.starts, 2);
    assert_ne!(status.pid, Some(pid));
    assert!(status.last_exit.unwrap().contains("signal 9"));
    let echo = peer
        .call_tool(&ToolCall::new("echo", args(json!({"message": "again"}))))
        .await;
    assert!(matches!(echo, Ok(CallOutcome::Complete(_))), "{echo:?}");
    drop(peer);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_peer_stops_the_process_group() {
    let server = StdioServer::new("everything", everything());
    let peer = peer(&server, Duration::from_secs(30));
    peer.call_tool(&ToolCall::new("echo", args(json!({"message": "x"}))))
        .await
        .expect("echo");
    let pid = server.status().pid.unwrap();
    drop(peer);
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(10);
    while group_alive(pid) {
        assert!(
            Instant::now() < deadline,
            "process group {pid} outlived its owner"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_commands_are_clear_errors_and_bounded() {
    // A program that does not exist.
    let missing = StdioServer::new(
        "missing",
        StdioCommand {
            program: "/nonexistent/countersign-no-such-server".into(),
            args: vec![],
            env: vec![],
            cwd: None,
        },
    );
    let error = peer(&missing, Duration::from_secs(2))
        .call_tool(&ToolCall::new("x", None))
        .await
        .expect_err("cannot start");
    assert!(error.to_string().contains("could not start"), "{error}");
    assert_eq!(missing.status().recent_exits, 1);
    // Asked again at once: the pause is said, not a fork storm.
    let again = peer(&missing, Duration::from_secs(2))
        .call_tool(&ToolCall::new("x", None))
        .await
        .expect_err("paused");
    assert!(
        again.to_string().contains("starting it again in"),
        "{again}"
    );

    // Exits at once: the process's own words are in the log.
    let exits = StdioServer::new("exits", sh("echo 'config missing' >&2; exit 3"));
    let error = peer(&exits, Duration::from_secs(5))
        .call_tool(&ToolCall::new("x", None))
        .await
        .expect_err("exited");
    assert!(
        error.to_string().contains("exit status 3") || error.to_string().contains("process ended"),
        "{error}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !exits.log().iter().any(|l| l.contains("config missing")) {
        assert!(
            Instant::now() < deadline,
            "stderr not kept: {:?}",
            exits.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Noise on stdout and then silence: skipped lines are noted, the request times out.
    let noisy = StdioServer::new("noisy", sh("echo 'not json'; exec sleep 60"));
    let started = Instant::now();
    let error = peer(&noisy, Duration::from_secs(2))
        .call_tool(&ToolCall::new("x", None))
        .await
        .expect_err("no answer");
    assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        noisy.log().iter().any(|l| l.contains("not JSON-RPC")),
        "{:?}",
        noisy.log()
    );
    let pid = noisy.status().pid.unwrap();
    noisy.stop().await;
    gone_within(pid, Duration::from_secs(3)).await;

    // Ignores SIGTERM: killed after the grace period.
    let stubborn = StdioServer::new("stubborn", sh("trap '' TERM; while :; do sleep 1; done"));
    let _ = peer(&stubborn, Duration::from_millis(500))
        .call_tool(&ToolCall::new("x", None))
        .await;
    let pid = stubborn.status().pid.unwrap();
    let stopping = Instant::now();
    stubborn.stop().await;
    gone_within(pid, Duration::from_secs(3)).await;
    assert!(stopping.elapsed() >= Duration::from_secs(2));
}
