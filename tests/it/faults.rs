//! Fault tests: the engine (in this process, over a real ledger file) against servers that go
//! down and come back, answer slowly, fail with 5xx, rate-limit with `Retry-After`, send broken
//! or wrongly shaped bodies, hang up, expire tasks at their TTL, or forget them early.
//!
//! Our demo server runs in this process, so faults are injected per method
//! ([`DemoServer::inject_for`]); the fastmcp peer runs as a subprocess. Both sit behind a
//! [`FaultProxy`] that takes them down without losing their tasks and logs every request with
//! its arrival time. The demo's push stream is off, as on both real peers, so every status
//! change arrives by polling, the path these faults hit.
//!
//! What must hold every time: the engine keeps running (a new task still completes at the end
//! of each test), each fault streak is one `poll_failed` event with a stable code and a message
//! that says what happened, followed by one `poll_recovered`, and every task ends in its true
//! state: `completed` after transient faults, `expired` past its TTL, `lost` when forgotten
//! early, never `failed` for something the task did not do.

use std::net::SocketAddr;
use std::time::Duration;

use countersign_core::console::view::{InputResponse, ServerAddRequest};
use countersign_core::console::{CallStep, Console, Setup, Start};
use countersign_core::engine::{Engine, EngineConfig};
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::mcp::ToolCall;
use countersign_demo::{DemoConfig, DemoServer, Fault};
use countersign_tests::ledger_view::{assert_sound_timeline, wait_for, Event, LedgerView, TaskRow};
use countersign_tests::peer::FastmcpPeer;
use countersign_tests::procs::DataDir;
use countersign_tests::proxy::FaultProxy;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(20);

fn demo_config() -> DemoConfig {
    DemoConfig {
        time_scale: 0.01,
        poll_interval_ms: 100,
        push: false,
        ..DemoConfig::default()
    }
}

async fn start_demo(config: DemoConfig) -> DemoServer {
    DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), config)
        .await
        .expect("the demo server starts")
}

async fn start_peer(extra: &[(&str, &str)]) -> FastmcpPeer {
    let mut env = vec![
        ("PEER_STEP_SECONDS", "0.05"),
        ("PEER_POLL_INTERVAL_MS", "100"),
    ];
    env.extend_from_slice(extra);
    FastmcpPeer::start_with_env(&env).await
}

/// An engine over a fresh ledger.
struct Desk {
    /// Kept for its lifetime: the directory is removed when the test passes.
    _dir: DataDir,
    console: Console,
    view: LedgerView,
}

impl Desk {
    async fn start(label: &str, configure: impl FnOnce(&mut EngineConfig)) -> Desk {
        let dir = DataDir::new(label);
        let mut setup = Setup::new(dir.path());
        setup.start = Start::Now;
        configure(&mut setup.config);
        let console = Console::open(setup)
            .await
            .expect("the console and its engine start");
        let view = dir.ledger();
        Desk {
            _dir: dir,
            console,
            view,
        }
    }

    fn engine(&self) -> &Engine {
        self.console.engine().expect("this console runs its engine")
    }

    /// Registers a server (as `countersign servers add --no-discover` would).
    async fn add_server(&self, name: &str, url: &str) -> ServerRecord {
        self.console
            .add_server(ServerAddRequest {
                name: name.to_owned(),
                url: url.to_owned(),
                token: None,
                discover: false,
            })
            .await
            .expect("the server is registered")
    }

    /// Calls a task tool through the recorded-call path; returns the server's task id.
    async fn call(&self, server: &ServerRecord, tool: &str, args: Value) -> String {
        let Value::Object(arguments) = args else {
            panic!("arguments must be an object")
        };
        let step = self
            .console
            .call(server.id, ToolCall::new(tool, Some(arguments)))
            .await
            .unwrap_or_else(|e| panic!("calling {tool} on {} must succeed: {e}", server.name));
        match step {
            CallStep::Task(record) => record.task_id,
            other => panic!("{tool} must create a task, got {other:?}"),
        }
    }

    async fn finished(&self, task_id: &str) -> TaskRow {
        wait_for(&format!("task {task_id} to finish"), SETTLE, || {
            self.view.task(task_id).filter(|t| t.finished_at.is_some())
        })
        .await
    }

    fn events(&self, task_id: &str, kind: &str) -> Vec<Event> {
        let task = self.view.task_expect(task_id);
        self.view
            .events_for(task.id)
            .into_iter()
            .filter(|e| e.kind == kind)
            .collect()
    }

    fn server_events(&self, server: &ServerRecord, kind: &str) -> Vec<Event> {
        self.view
            .events_of(kind)
            .into_iter()
            .filter(|e| e.server_id == Some(server.id))
            .collect()
    }

    /// The engine survived: a new short task on `server` still runs to completion.
    async fn assert_still_works(&self, server: &ServerRecord, tool: &str, args: Value) {
        let task_id = self.call(server, tool, args).await;
        let task = self.finished(&task_id).await;
        assert_eq!(
            task.status, "completed",
            "after the faults, a new task on {} still completes",
            server.name
        );
    }

    async fn stop(self) {
        self.console.close().await;
    }
}

/// Waits until the proxy has seen a first poll of `task_id`.
async fn first_poll(proxy: &FaultProxy, task_id: &str) {
    wait_for(&format!("a first poll of {task_id}"), SETTLE, || {
        (!proxy.seen_for("tasks/get", Some(task_id)).is_empty()).then_some(())
    })
    .await;
}

/// The one failure streak of a task: one `poll_failed` (returned), then one `poll_recovered`
/// after it counting `failures` attempts (at least `min_failures`).
fn one_streak(desk: &Desk, task_id: &str, min_failures: u64) -> (Event, u64) {
    let task = desk.view.task_expect(task_id);
    let failed = desk.events(task_id, "poll_failed");
    let recovered = desk.events(task_id, "poll_recovered");
    let dump = desk.view.describe(task.id);
    assert_eq!(
        failed.len(),
        1,
        "one poll_failed per failure streak, not one per attempt:\n{dump}"
    );
    assert_eq!(
        recovered.len(),
        1,
        "one poll_recovered when polling works again:\n{dump}"
    );
    assert!(
        failed[0].id < recovered[0].id,
        "poll_failed comes before poll_recovered:\n{dump}"
    );
    let failures = recovered[0].data["failures"]
        .as_u64()
        .expect("poll_recovered counts the failures");
    assert!(failures >= min_failures, "the streak had at least {min_failures} failed attempts, poll_recovered says {failures}:\n{dump}");
    assert!(
        failed[0].data["retry_in_ms"].as_u64().unwrap_or(0) > 0,
        "poll_failed says when the next attempt is: {}",
        failed[0].data
    );
    assert!(
        task.poll_error.is_none(),
        "the task no longer shows a polling error after recovery: {:?}",
        task.poll_error
    );
    (failed[0].clone(), failures)
}

/// Server down then back (both servers, behind proxies that refuse connections meanwhile): one
/// `server_unreachable` and one `poll_failed` (a connection failure) per streak, then `poll_recovered`
/// and `server_recovered`, and both tasks complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_down_then_back_is_one_streak_of_events_and_nothing_is_lost() {
    let demo = start_demo(demo_config()).await;
    let peer = start_peer(&[]).await;
    let demo_proxy = FaultProxy::in_front_of(&demo.url()).await;
    let peer_proxy = FaultProxy::in_front_of(&peer.url).await;
    let desk = Desk::start("down-and-back", |_| {}).await;
    let demo_server = desk.add_server("demo", &demo_proxy.url()).await;
    let peer_server = desk.add_server("peer", &peer_proxy.url()).await;
    let demo_task = desk
        .call(&demo_server, "bench_job", json!({"duration_ms": 2500}))
        .await;
    let peer_task = desk
        .call(&peer_server, "long_job", json!({"steps": 50}))
        .await;
    first_poll(&demo_proxy, &demo_task).await;
    first_poll(&peer_proxy, &peer_task).await;

    demo_proxy.down();
    peer_proxy.down();
    let failures_before = desk.engine().poll_stats().failures;
    wait_for(
        "three failed polls of each task while both servers are down",
        SETTLE,
        || {
            let streaks = desk.events(&demo_task, "poll_failed").len()
                + desk.events(&peer_task, "poll_failed").len();
            (streaks == 2 && desk.engine().poll_stats().failures >= failures_before + 6)
                .then_some(())
        },
    )
    .await;
    demo_proxy.up().await;
    peer_proxy.up().await;

    let demo_done = desk.finished(&demo_task).await;
    let peer_done = desk.finished(&peer_task).await;
    assert_eq!(
        (demo_done.status.as_str(), demo_done.result_text().as_str()),
        ("completed", "bench_job finished after 2500 ms")
    );
    assert_eq!(
        (peer_done.status.as_str(), peer_done.result_text().as_str()),
        ("completed", "long_job finished after 50 steps")
    );
    for (task, server, proxy) in [
        (&demo_task, &demo_server, &demo_proxy),
        (&peer_task, &peer_server, &peer_proxy),
    ] {
        let (failed, _) = one_streak(&desk, task, 3);
        // `connect`, or `transport` when the outage cut a poll in flight.
        let (code, message) = (
            failed.str("code").unwrap_or_default(),
            failed.str("message").unwrap_or_default(),
        );
        assert!(
            matches!(code, "connect" | "transport"),
            "an unreachable server is a connection failure: {}",
            failed.data
        );
        assert!(
            message.contains(&proxy.url()),
            "the message names the server: {message}"
        );
        let down = desk.server_events(server, "server_unreachable");
        let back = desk.server_events(server, "server_recovered");
        assert_eq!(
            down.len(),
            1,
            "one server_unreachable per outage of {}: {down:?}",
            server.name
        );
        assert_eq!(
            back.len(),
            1,
            "one server_recovered per outage of {}: {back:?}",
            server.name
        );
        assert!(down[0].id < back[0].id);
        let said = down[0].str("message").unwrap_or_default();
        assert!(
            said.contains(&format!("cannot connect to {}", proxy.url())),
            "server_unreachable says why: {said}"
        );
        assert_sound_timeline(&desk.view, &desk.view.task_expect(task));
    }
    desk.assert_still_works(&demo_server, "bench_job", json!({"duration_ms": 100}))
        .await;
    desk.assert_still_works(&peer_server, "long_job", json!({"steps": 2}))
        .await;
    desk.stop().await;
}

/// Slow answers within the request timeout are no failure at all, and polls of one task never
/// overlap; answers slower than the timeout are a `timeout` streak that recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_are_not_failures_and_timeouts_back_off_and_recover() {
    let demo = start_demo(demo_config()).await;
    let proxy = FaultProxy::in_front_of(&demo.url()).await;
    let desk = Desk::start("slow", |c| {
        c.client.request_timeout = Duration::from_millis(500)
    })
    .await;
    let server = desk.add_server("demo", &proxy.url()).await;
    let task = desk
        .call(&server, "bench_job", json!({"duration_ms": 3000}))
        .await;
    first_poll(&proxy, &task).await;

    demo.inject_for("tasks/get", Fault::Delay(Duration::from_millis(300)), 3);
    wait_for("three slow answers", SETTLE, || {
        (demo.stats().faults >= 3).then_some(())
    })
    .await;
    assert!(
        desk.events(&task, "poll_failed").is_empty(),
        "an answer within the timeout is not a failure"
    );

    demo.inject_for("tasks/get", Fault::Delay(Duration::from_millis(1500)), 2);
    let done = desk.finished(&task).await;
    assert_eq!(done.status, "completed");
    let (failed, failures) = one_streak(&desk, &task, 2);
    assert_eq!(failed.str("code"), Some("timeout"), "{}", failed.data);
    assert_eq!(failures, 2, "exactly the two slow answers failed");
    assert!(
        failed
            .str("message")
            .unwrap_or_default()
            .contains("did not answer within 500ms"),
        "{}",
        failed.data
    );

    // One task is never polled again before its previous poll was answered (or timed out).
    let polls = proxy.seen_for("tasks/get", Some(&task));
    for pair in polls.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_millis(100),
            "two polls of one task {gap:?} apart, under the 100 ms interval"
        );
    }
    assert_sound_timeline(&desk.view, &done);
    desk.assert_still_works(&server, "bench_job", json!({"duration_ms": 100}))
        .await;
    desk.stop().await;
}

/// HTTP 500s are one `http` streak naming the status, and polling recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_500s_are_one_poll_failed_streak_and_polling_recovers() {
    let demo = start_demo(demo_config()).await;
    let proxy = FaultProxy::in_front_of(&demo.url()).await;
    let desk = Desk::start("http-500", |_| {}).await;
    let server = desk.add_server("demo", &proxy.url()).await;
    let task = desk
        .call(&server, "bench_job", json!({"duration_ms": 2000}))
        .await;
    first_poll(&proxy, &task).await;
    demo.inject_for("tasks/get", Fault::Status(500), 3);

    let done = desk.finished(&task).await;
    assert_eq!(
        (done.status.as_str(), done.result_text().as_str()),
        ("completed", "bench_job finished after 2000 ms")
    );
    let (failed, failures) = one_streak(&desk, &task, 3);
    assert_eq!(failures, 3);
    assert_eq!(failed.str("code"), Some("http"), "{}", failed.data);
    assert!(
        failed
            .str("message")
            .unwrap_or_default()
            .contains("HTTP 500"),
        "the message names the status: {}",
        failed.data
    );
    assert_eq!(
        demo.stats().responses_with(500),
        3,
        "the server served the three 500s"
    );
    assert_sound_timeline(&desk.view, &done);
    desk.assert_still_works(&server, "bench_job", json!({"duration_ms": 100}))
        .await;
    desk.stop().await;
}

/// HTTP 429 with `Retry-After: 1`: the next poll of that task comes no sooner than one second
/// after the refused one (the server's interval is 100 ms), and the event says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_retry_after_delays_the_next_poll_at_least_that_long() {
    let demo = start_demo(demo_config()).await;
    let proxy = FaultProxy::in_front_of(&demo.url()).await;
    let desk = Desk::start("rate-limited", |_| {}).await;
    let server = desk.add_server("demo", &proxy.url()).await;
    // The task's very first poll is the one refused.
    demo.inject_for(
        "tasks/get",
        Fault::TooManyRequests {
            retry_after_secs: 1,
        },
        1,
    );
    let task = desk
        .call(&server, "bench_job", json!({"duration_ms": 1500}))
        .await;

    let done = desk.finished(&task).await;
    assert_eq!(done.status, "completed");
    assert_eq!(
        demo.stats().responses_with(429),
        1,
        "the server refused one poll"
    );
    let polls = proxy.seen_for("tasks/get", Some(&task));
    assert!(polls.len() >= 2, "polling went on after the 429: {polls:?}");
    let gap = polls[1].at - polls[0].at;
    assert!(
        gap >= Duration::from_secs(1),
        "the poll after a 429 with Retry-After: 1 came {gap:?} after it"
    );
    for pair in polls[1..].windows(2) {
        assert!(
            pair[1].at - pair[0].at >= Duration::from_millis(100),
            "after recovery, polls keep the 100 ms interval"
        );
    }
    let (failed, failures) = one_streak(&desk, &task, 1);
    assert_eq!(failures, 1);
    assert_eq!(failed.str("code"), Some("rate_limited"), "{}", failed.data);
    assert!(
        failed.data["retry_in_ms"].as_u64().unwrap_or(0) >= 1000,
        "the event announces the Retry-After wait: {}",
        failed.data
    );
    assert!(
        failed
            .str("message")
            .unwrap_or_default()
            .contains("retry after 1s"),
        "{}",
        failed.data
    );
    assert_sound_timeline(&desk.view, &done);
    desk.assert_still_works(&server, "bench_job", json!({"duration_ms": 100}))
        .await;
    desk.stop().await;
}

/// Malformed JSON, a result of the wrong shape, a hang-up and a 503, one streak each: each is a
/// `poll_failed` with its own code and a message saying what was wrong, then `poll_recovered`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_bodies_wrong_shapes_and_hangups_are_poll_failures_that_recover() {
    let demo = start_demo(demo_config()).await;
    let proxy = FaultProxy::in_front_of(&demo.url()).await;
    let desk = Desk::start("broken-bodies", |_| {}).await;
    let server = desk.add_server("demo", &proxy.url()).await;
    let task = desk
        .call(&server, "bench_job", json!({"duration_ms": 6000}))
        .await;
    first_poll(&proxy, &task).await;

    let cases: [(Fault, &str, &str); 4] = [
        (
            Fault::MalformedJson,
            "invalid_response",
            "invalid response to tasks/get",
        ),
        (
            Fault::WrongShape,
            "invalid_response",
            "invalid response to tasks/get",
        ),
        (Fault::Hangup, "transport", "transport error talking to"),
        (Fault::Status(503), "http", "HTTP 503"),
    ];
    for (round, (fault, _, _)) in cases.iter().enumerate() {
        // A hang-up after the request was sent fails the poll like the others: the server may
        // have read it, so it is not sent again at once (`tests/it/poll_connections.rs`).
        demo.inject_for("tasks/get", fault.clone(), 1);
        wait_for(&format!("recovery from {fault:?}"), SETTLE, || {
            (desk.events(&task, "poll_recovered").len() > round).then_some(())
        })
        .await;
    }
    let done = desk.finished(&task).await;
    assert_eq!(
        (done.status.as_str(), done.result_text().as_str()),
        ("completed", "bench_job finished after 6000 ms"),
        "transient faults do not fail the task"
    );
    let failed = desk.events(&task, "poll_failed");
    let recovered = desk.events(&task, "poll_recovered");
    assert_eq!(failed.len(), 4, "{}", desk.view.describe(done.id));
    assert_eq!(recovered.len(), 4, "{}", desk.view.describe(done.id));
    for (i, (fault, code, says)) in cases.iter().enumerate() {
        assert!(
            failed[i].id < recovered[i].id,
            "streak {i} ({fault:?}): failed, then recovered"
        );
        assert_eq!(
            failed[i].str("code"),
            Some(*code),
            "{fault:?}: {}",
            failed[i].data
        );
        let message = failed[i].str("message").unwrap_or_default();
        assert!(
            message.contains(says),
            "{fault:?}: the message must say {says:?}, got {message:?}"
        );
        assert_eq!(
            recovered[i].data["failures"], 1,
            "{fault:?} failed one poll"
        );
    }
    assert_sound_timeline(&desk.view, &done);
    desk.assert_still_works(&server, "bench_job", json!({"duration_ms": 100}))
        .await;
    desk.stop().await;
}

/// Answers and cancels survive server errors on `tasks/update` / `tasks/cancel`: the outbox
/// retries (no sooner than `Retry-After`) until acknowledged, and the server applies the
/// answer once, with its content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_and_cancels_are_retried_through_server_errors_until_acknowledged() {
    let demo = start_demo(demo_config()).await;
    let proxy = FaultProxy::in_front_of(&demo.url()).await;
    let desk = Desk::start("delivery-faults", |_| {}).await;
    let server = desk.add_server("demo", &proxy.url()).await;
    let deploy = desk
        .call(
            &server,
            "deploy_service",
            json!({"service": "billing-api", "environment": "staging"}),
        )
        .await;
    let export = desk
        .call(&server, "bench_job", json!({"duration_ms": 10000}))
        .await;
    let row = wait_for("the deploy question", SETTLE, || {
        let task = desk.view.task(&deploy)?;
        desk.view
            .inputs(task.id)
            .into_iter()
            .find(|q| q.state == "pending")
            .map(|q| (task.id, q.key))
    })
    .await;

    // Retry-After (2 s) is longer than the first backoff (1–1.2 s): it must win.
    demo.inject_for(
        "tasks/update",
        Fault::TooManyRequests {
            retry_after_secs: 2,
        },
        1,
    );
    demo.inject_for("tasks/update", Fault::Status(503), 1);
    demo.inject_for("tasks/cancel", Fault::Hangup, 1);
    let answer =
        json!({"action": "accept", "content": {"approve": true, "reason": "through 429 and 503"}});
    let response: InputResponse =
        serde_json::from_value(answer.clone()).expect("an elicitation response");
    desk.console
        .answer(row.0, &row.1, &response)
        .await
        .expect("the answer is recorded");
    let export_row = desk.view.task_expect(&export).id;
    desk.console
        .cancel(export_row)
        .await
        .expect("the cancel is recorded");

    let deployed = desk.finished(&deploy).await;
    let cancelled = desk.finished(&export).await;
    assert_eq!(deployed.status, "completed");
    assert!(
        deployed
            .result_text()
            .contains("Approved with reason: through 429 and 503."),
        "{}",
        deployed.result_text()
    );
    assert_eq!(
        cancelled.status, "cancelled",
        "the cancel got through after the hang-up"
    );
    assert_eq!(
        demo.stats().requests_for("tasks/update"),
        3,
        "429, 503, then delivered: three attempts"
    );
    let updates = proxy.seen_for("tasks/update", Some(&deploy));
    let gap = updates[1].at - updates[0].at;
    assert!(
        gap >= Duration::from_secs(2),
        "the retry after a 429 waits for its Retry-After (2 s), not {gap:?}"
    );
    let outbox = desk.view.outbox(row.0);
    assert_eq!(outbox.len(), 1, "{outbox:?}");
    assert_eq!(
        outbox[0].attempts, 3,
        "two failed attempts, then the acknowledged one: {outbox:?}"
    );
    assert!(outbox[0].acknowledged_at.is_some());
    assert_eq!(
        outbox[0].payload.as_ref().and_then(|p| p.get(&row.1)),
        Some(&answer),
        "exactly the recorded answer is sent"
    );
    let timeline = assert_sound_timeline(&desk.view, &deployed);
    assert_eq!(timeline.of("update_acknowledged").len(), 1);
    assert!(
        timeline.of("update_failed").is_empty(),
        "a transient refusal is retried, not given up"
    );
    assert_eq!(
        timeline.of("delivery_retrying").len(),
        1,
        "the stuck answer is visible on the timeline, once per delivery"
    );
    let timeline = assert_sound_timeline(&desk.view, &cancelled);
    assert_eq!(timeline.of("cancel_acknowledged").len(), 1);
    assert_eq!(
        timeline.of("delivery_retrying").len(),
        1,
        "the cancel's hang-up is on the timeline"
    );
    desk.stop().await;
}

/// A task whose TTL runs out before it finishes (the server then forgets it) is `expired`, not
/// `lost` and not `failed`, on the demo (working, 1 s TTL) and on the peer (waiting for input,
/// 1 s TTL); its pending question is withdrawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_outlives_its_ttl_is_expired_not_lost_or_failed() {
    let demo = start_demo(DemoConfig {
        default_ttl_ms: Some(1000),
        ..demo_config()
    })
    .await;
    let peer = start_peer(&[("PEER_TTL_MS", "1000")]).await;
    let desk = Desk::start("ttl", |_| {}).await;
    let demo_server = desk.add_server("demo", &demo.url()).await;
    let peer_server = desk.add_server("peer", &peer.url).await;
    let demo_task = desk
        .call(&demo_server, "bench_job", json!({"duration_ms": 30000}))
        .await;
    let peer_task = desk
        .call(
            &peer_server,
            "approve_deploy",
            json!({"service": "billing-api"}),
        )
        .await;

    let demo_done = desk.finished(&demo_task).await;
    let peer_done = desk.finished(&peer_task).await;
    for (task, done) in [(&demo_task, &demo_done), (&peer_task, &peer_done)] {
        let dump = desk.view.describe(done.id);
        assert_eq!(
            done.status, "expired",
            "a task past its TTL is expired, not lost or failed:\n{dump}"
        );
        assert_eq!(done.ttl_ms, Some(1000));
        let timeline = assert_sound_timeline(&desk.view, done);
        assert_eq!(timeline.end.kind, "task_expired", "{dump}");
        assert_eq!(timeline.end.data["ttl_ms"], 1000, "{dump}");
        assert!(
            desk.events(task, "task_lost").is_empty()
                && desk.events(task, "task_finished").is_empty(),
            "{dump}"
        );
    }
    let peer_row = desk.view.task_expect(&peer_task);
    let questions = desk.view.inputs(peer_row.id);
    assert_eq!(questions.len(), 1, "the peer asked once: {questions:?}");
    assert_eq!(
        questions[0].state, "superseded",
        "a question of an expired task is withdrawn, not left in the inbox"
    );
    assert_eq!(desk.events(&peer_task, "input_superseded").len(), 1);
    desk.assert_still_works(&demo_server, "bench_job", json!({"duration_ms": 100}))
        .await;
    desk.assert_still_works(&peer_server, "long_job", json!({"steps": 2}))
        .await;
    desk.stop().await;
}

/// A task the server forgets long before its TTL (the peer restarted; the demo was replaced on
/// the same address) is `lost`, with the server's message, not `expired` and not `failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_forgotten_before_its_ttl_is_lost_not_failed() {
    let mut peer = start_peer(&[]).await;
    let demo = start_demo(demo_config()).await;
    let address = demo.local_addr();
    let demo_proxy = FaultProxy::in_front_of(&demo.url()).await;
    let peer_proxy = FaultProxy::in_front_of(&peer.url).await;
    let desk = Desk::start("lost", |_| {}).await;
    let demo_server = desk.add_server("demo", &demo_proxy.url()).await;
    let peer_server = desk.add_server("peer", &peer_proxy.url()).await;
    let demo_task = desk
        .call(&demo_server, "bench_job", json!({"duration_ms": 30000}))
        .await;
    let peer_task = desk
        .call(&peer_server, "long_job", json!({"steps": 400}))
        .await;
    first_poll(&demo_proxy, &demo_task).await;
    first_poll(&peer_proxy, &peer_task).await;

    peer.restart().await;
    demo.shutdown().await;
    let demo = DemoServer::start(address, demo_config())
        .await
        .expect("a new demo server on the same address");

    let demo_done = desk.finished(&demo_task).await;
    let peer_done = desk.finished(&peer_task).await;
    for (task, done) in [(&demo_task, &demo_done), (&peer_task, &peer_done)] {
        let dump = desk.view.describe(done.id);
        assert_eq!(
            done.status, "lost",
            "a task the server forgot before its TTL is lost:\n{dump}"
        );
        let timeline = assert_sound_timeline(&desk.view, done);
        assert_eq!(timeline.end.kind, "task_lost", "{dump}");
        let message = timeline.end.str("message").unwrap_or_default();
        assert!(
            message.contains(task.as_str()),
            "task_lost names the task and what the server said: {message}"
        );
        assert!(
            desk.events(task, "task_expired").is_empty()
                && desk.events(task, "task_finished").is_empty(),
            "{dump}"
        );
    }
    desk.assert_still_works(&demo_server, "bench_job", json!({"duration_ms": 100}))
        .await;
    desk.assert_still_works(&peer_server, "long_job", json!({"steps": 2}))
        .await;
    drop(demo);
    desk.stop().await;
}
