//! The engine and the client against a hostile server: no single server can stop, flood or fool
//! the engine (issue "Hostile servers and bad input"). Each test scripts the misbehaviour on
//! the hostile test server (`support/hostile.rs`) and asserts what a person would see: the
//! other tasks still move, the bad answer is a typed error on the timeline, nothing is lost.

use std::time::Duration;

use countersign_core::engine::EngineConfig;
use countersign_core::ledger::tasks::{self, LedgerStatus};
use countersign_core::ledger::{inputs, EventKind, Ledger};
use countersign_core::mcp::{self, Client, Endpoint, ToolCall};
use countersign_core::scheduler::{MAX_SERVER_WAIT, MIN_INTERVAL};
use countersign_tests::hostile::{self, Hostile, Reply};
use countersign_tests::rig::{describe, Rig, TempDir};
use serde_json::{json, Map, Value};

/// A task that works for `polls` polls, then completes.
fn steady(req: &hostile::Request, polls: usize) -> Reply {
    match req.method.as_str() {
        "tools/call" => Reply::Result(hostile::created(hostile::task(
            &req.new_task_id(),
            "working",
        ))),
        _ if req.nth < polls => {
            Reply::Result(hostile::task(req.task_id().unwrap_or(""), "working"))
        }
        _ => Reply::Result(hostile::completed(req.task_id().unwrap_or(""), "done")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_retry_after_neither_panics_nor_stops_polling_for_other_tasks() {
    let server = Hostile::builder()
        .tool("limited", |req| match req.method.as_str() {
            "tools/call" => Reply::Result(hostile::created(hostile::task(
                &req.new_task_id(),
                "working",
            ))),
            _ => Reply::status(429, &[("Retry-After", "10000000000000000000")]),
        })
        .tool("steady", |req| steady(req, 3))
        .start()
        .await;
    let rig = Rig::start(&server.url(), false).await;
    let limited = rig.call("limited", json!({})).await;
    rig.wait_for(limited.id, "poll_failed", |e| matches!(&e.kind, EventKind::PollFailed { code, retry_in_ms, .. } if code == "rate_limited" && *retry_in_ms == MAX_SERVER_WAIT.as_millis() as u64))
        .await;
    // The limited task's next poll is an hour out; another task must keep moving meanwhile.
    let other = rig.call("steady", json!({})).await;
    let finished = rig.wait_finished(other.id).await;
    assert!(
        matches!(&finished.kind, EventKind::TaskFinished { status, .. } if *status == LedgerStatus::Completed),
        "{:?}",
        finished.kind
    );
    assert_eq!(
        rig.engine().poll_stats().restarts,
        0,
        "the poll loop never crashed"
    );
    assert_eq!(
        server.count("tasks/get") - 4,
        1,
        "the rate-limited task was polled once, then waits the capped Retry-After"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_interval_zero_is_raised_to_the_built_in_floor_in_the_engine() {
    let server = Hostile::builder()
        .tool("zero", |req| {
            let mut task = hostile::task(
                req.task_id()
                    .map(str::to_owned)
                    .unwrap_or_else(|| req.new_task_id())
                    .as_str(),
                "working",
            );
            task["pollIntervalMs"] = json!(0);
            task["statusMessage"] = json!(format!("step {}", req.nth));
            match req.method.as_str() {
                "tools/call" => Reply::Result(hostile::created(task)),
                _ => Reply::Result(task),
            }
        })
        .start()
        .await;
    let rig = Rig::start(&server.url(), false).await;
    let mut rows = Vec::new();
    for _ in 0..5 {
        rows.push(rig.call("zero", json!({})).await.id);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let polls = server.count("tasks/get");
    // 5 tasks × 2 s / 250 ms = 40 at most (and a little slack for the first poll's timing).
    assert!(
        polls <= 45,
        "{polls} polls in 2 s for 5 tasks: the floor is not applied"
    );
    assert!(polls >= 10, "{polls} polls: the tasks must still be polled");
    let updates: usize = rows
        .iter()
        .map(|row| {
            rig.timeline(*row)
                .iter()
                .filter(|e| matches!(e.kind, EventKind::TaskUpdated { .. }))
                .count()
        })
        .sum();
    assert!(
        updates <= polls,
        "at most one event per poll ({updates} for {polls})"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_interval_zero_is_raised_to_the_built_in_floor_in_direct_mode() {
    let server = Hostile::builder()
        .tool("zero", |req| {
            let id = req
                .task_id()
                .map(str::to_owned)
                .unwrap_or_else(|| req.new_task_id());
            let mut task = if req.method == "tasks/get" && req.nth >= 4 {
                hostile::completed(&id, "done")
            } else {
                hostile::task(&id, "working")
            };
            task["pollIntervalMs"] = json!(0);
            match req.method.as_str() {
                "tools/call" => Reply::Result(hostile::created(task)),
                _ => Reply::Result(task),
            }
        })
        .start()
        .await;
    let run = countersign_tests::cli::run(&["call", &server.url(), "zero", "{}"]).await;
    run.assert_code(0);
    let gets: Vec<_> = server
        .log()
        .into_iter()
        .filter(|(m, _)| m == "tasks/get")
        .map(|(_, at)| at)
        .collect();
    assert_eq!(gets.len(), 5, "{run}");
    for pair in gets.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= MIN_INTERVAL - Duration::from_millis(20),
            "direct mode polled {gap:?} after the previous poll"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_questions_is_refused_with_a_clear_error_and_the_writer_keeps_going() {
    let flood: Value = {
        let requests: Map<String, Value> = (0..100_000)
            .map(|i| {
                (
                    format!("key-{i}"),
                    json!({"method": "elicitation/create", "params": {"mode": "form", "message": "approve?", "requestedSchema": {"type": "object"}}}),
                )
            })
            .collect();
        Value::Object(requests)
    };
    let server = Hostile::builder()
        .tool("flood", move |req| match req.method.as_str() {
            "tools/call" => Reply::Result(hostile::created(hostile::task(
                &req.new_task_id(),
                "working",
            ))),
            _ => {
                let mut task = hostile::task(req.task_id().unwrap_or(""), "input_required");
                task["inputRequests"] = flood.clone();
                Reply::Result(task)
            }
        })
        .tool("steady", |req| steady(req, 1))
        .start()
        .await;
    let rig = Rig::start(&server.url(), false).await;
    let flooded = rig.call("flood", json!({})).await;
    let failed = rig
        .wait_for(flooded.id, "poll_failed", |e| {
            matches!(e.kind, EventKind::PollFailed { .. })
        })
        .await;
    match &failed.kind {
        EventKind::PollFailed { code, message, .. } => {
            assert_eq!(code, "invalid_response");
            assert!(
                message.contains("100000") && message.contains("at most 100"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let stored = rig
        .engine()
        .ledger()
        .read(move |c| inputs::for_task(c, flooded.id))
        .expect("readable");
    assert!(
        stored.is_empty(),
        "no question of the flood is stored ({} were)",
        stored.len()
    );
    let other = rig.call("steady", json!({})).await;
    rig.wait_finished(other.id).await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_past_sqlite_integers_are_clamped_not_wrapped() {
    let server = Hostile::builder()
        .tool("endless", |req| {
            let mut task = hostile::task(&req.new_task_id(), "working");
            task["ttlMs"] = json!(u64::MAX);
            match req.method.as_str() {
                "tools/call" => Reply::Result(hostile::created(task)),
                // The server is in trouble: before the fix, the wrapped TTL (-1) concluded the
                // task `expired` at the first failure.
                _ => Reply::status(503, &[]),
            }
        })
        .tool("slow", |req| {
            let mut task = hostile::task(&req.new_task_id(), "working");
            task["pollIntervalMs"] = json!(1e19);
            Reply::Result(hostile::created(task))
        })
        .start()
        .await;
    let rig = Rig::start(&server.url(), false).await;
    let endless = rig.call("endless", json!({})).await;
    let slow = rig.call("slow", json!({})).await;
    rig.wait_for(endless.id, "poll_failed", |e| {
        matches!(e.kind, EventKind::PollFailed { .. })
    })
    .await;
    let read = |row: i64| {
        rig.engine()
            .ledger()
            .read(move |c| tasks::get(c, row))
            .expect("readable")
    };
    let endless_row = read(endless.id);
    assert_eq!(
        endless_row.ttl_ms,
        Some(i64::MAX as u64),
        "stored clamped, not as -1"
    );
    assert_ne!(
        endless_row.status,
        LedgerStatus::Expired,
        "{}",
        describe(&rig.timeline(endless.id))
    );
    let slow_row = read(slow.id);
    assert_eq!(
        slow_row.poll_interval_ms,
        Some(i64::MAX as u64),
        "1e19 does not read back as 0"
    );
    for row in [endless.id, slow.id] {
        assert!(
            rig.timeline(row).iter().any(|e| matches!(&e.kind, EventKind::ServerDataIgnored { message, .. } if message.contains("clamped"))),
            "the clamp is noted on the timeline: {}",
            describe(&rig.timeline(row))
        );
    }
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_advisory_field_keeps_the_task_handle_and_is_noted() {
    let server = Hostile::builder()
        .tool("hints", |req| match req.method.as_str() {
            "tools/call" => {
                let mut task = hostile::task(&req.new_task_id(), "working");
                task["pollIntervalMs"] = json!(-5);
                task["ttlMs"] = json!("soon");
                Reply::Result(hostile::created(task))
            }
            _ => Reply::Result(hostile::completed(req.task_id().unwrap_or(""), "done")),
        })
        .start()
        .await;
    let rig = Rig::start(&server.url(), false).await;
    // `Rig::call` fails the test unless a task is created: before the fix the intent ended
    // `failed` and the server-side task ran untracked.
    let task = rig.call("hints", json!({})).await;
    let finished = rig.wait_finished(task.id).await;
    assert!(
        matches!(&finished.kind, EventKind::TaskFinished { status, .. } if *status == LedgerStatus::Completed)
    );
    let notes: Vec<String> = rig
        .timeline(task.id)
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ServerDataIgnored { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes
        .iter()
        .any(|n| n.contains("pollIntervalMs") && n.contains("ignored")));
    assert!(notes
        .iter()
        .any(|n| n.contains("ttlMs") && n.contains("ignored")));
    rig.shutdown().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_files_are_private_to_the_user_and_old_ones_are_tightened() {
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;

    let fresh = TempDir::new("perms");
    let data = fresh.0.join("data");
    let engine = countersign_core::engine::Engine::start(EngineConfig::new(&data))
        .await
        .expect("engine starts");
    assert_eq!(mode(&data), 0o700, "data directory");
    for file in [
        "ledger.sqlite3",
        "ledger.sqlite3-wal",
        "ledger.sqlite3-shm",
        "engine.lock",
    ] {
        let path = data.join(file);
        if path.exists() {
            assert_eq!(mode(&path), 0o600, "{file}");
        } else {
            assert_ne!(file, "ledger.sqlite3", "the ledger exists");
        }
    }
    engine.shutdown().await;

    // A ledger made by an older build, world-readable: opening it tightens it.
    let old = TempDir::new("perms-old");
    std::fs::set_permissions(&old.0, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    drop(Ledger::open(&old.0).expect("opens"));
    let ledger_file = old.0.join("ledger.sqlite3");
    std::fs::set_permissions(&ledger_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::set_permissions(&old.0, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    drop(Ledger::open(&old.0).expect("opens again"));
    assert_eq!(mode(&old.0), 0o700);
    assert_eq!(mode(&ledger_file), 0o600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_to_another_origin_are_refused_and_name_the_target() {
    let elsewhere = Hostile::builder()
        .tool("moved", |req| {
            Reply::Result(
                json!({"content": [{"type": "text", "text": format!("forged {}", req.nth)}]}),
            )
        })
        .start()
        .await;
    let target = elsewhere.url();
    let port = std::sync::Arc::new(std::sync::OnceLock::<u16>::new());
    let own_port = port.clone();
    let server = Hostile::builder()
        .tool("moved", move |_| Reply::status(307, &[("Location", target.as_str())]))
        .tool("hop", move |req| {
            if req.nth == 0 {
                let here = format!("http://127.0.0.1:{}/mcp?hop", own_port.get().copied().unwrap_or(0));
                Reply::status(307, &[("Location", here.as_str())])
            } else {
                Reply::Result(json!({"content": [{"type": "text", "text": "here"}], "resultType": "complete"}))
            }
        })
        .tool("loop", |_| Reply::status(308, &[("Location", "/mcp")]))
        .start()
        .await;
    let _ = port.set(server.port());
    let client = Client::new(Endpoint::new(server.url())).expect("client");

    let err = client
        .call_tool(&ToolCall::new("moved", None))
        .await
        .expect_err("not followed");
    assert_eq!(err.code(), "redirected", "{err}");
    assert!(
        err.to_string().contains(&elsewhere.url()),
        "the error names the target: {err}"
    );
    assert_eq!(
        elsewhere.count("tools/call"),
        0,
        "nothing reached the other origin"
    );

    let outcome = client
        .call_tool(&ToolCall::new("hop", None))
        .await
        .expect("same origin is followed");
    assert!(
        matches!(outcome, mcp::CallOutcome::Complete(_)),
        "{outcome:?}"
    );

    let err = client
        .call_tool(&ToolCall::new("loop", None))
        .await
        .expect_err("a loop ends");
    assert_eq!(err.code(), "redirected", "{err}");
    assert_eq!(
        server.count("tools/call") - 3,
        1 + mcp::error::MAX_REDIRECTS,
        "the call and its redirects on the same origin, then stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_server_urls_are_refused_everywhere_and_never_repeated() {
    let url = "http://alice:s3cret@127.0.0.1:9/mcp";
    let err = Client::new(Endpoint::new(url)).expect_err("refused");
    assert_eq!(err.code(), "invalid_url");
    assert!(
        !err.to_string().contains("s3cret") && !err.to_string().contains("alice"),
        "{err}"
    );
    assert!(
        err.to_string().contains("keyring"),
        "says where tokens belong: {err}"
    );

    let dir = TempDir::new("userinfo");
    let ledger = Ledger::open(&dir.0).expect("opens");
    let stored = ledger
        .write(move |ctx| countersign_core::ledger::servers::add(ctx.conn, "a", url, false))
        .await;
    let err = stored.expect_err("the ledger refuses it too");
    assert!(!err.to_string().contains("s3cret"), "{err}");
    let servers = ledger
        .read(countersign_core::ledger::servers::list)
        .expect("readable");
    assert!(servers.is_empty(), "nothing stored");

    let data = dir.0.join("cli");
    let run = countersign_tests::cli::run(&[
        "--data-dir",
        data.to_str().expect("utf-8 path"),
        "servers",
        "add",
        "a",
        url,
        "--no-discover",
    ])
    .await;
    run.assert_code(64);
    assert!(
        !run.stdout.contains("s3cret") && !run.stderr.contains("s3cret"),
        "{run}"
    );
}
