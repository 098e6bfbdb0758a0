//! Crash tests: real `countersign` processes over a real SQLite ledger, killed with SIGKILL at
//! the moments that matter, then restarted.
//!
//! The crash scenarios run tasks on two servers at once: our demo server (in this process, at 100x
//! speed, so faults can be injected and its request counters read) and the independent fastmcp
//! peer (a Python subprocess). Each sits behind a [`FaultProxy`], which logs every request with
//! its arrival time and can hold requests of one method or take the server down without it
//! forgetting its tasks.
//!
//! After each restart the ledger must show: every task at its true terminal state, every question
//! requested once (one `inputs` row per key), every answer recorded once, queued once and applied
//! by the server with exactly its content, and a complete, ordered timeline
//! ([`assert_sound_timeline`]).

use std::net::SocketAddr;
use std::time::Duration;

use countersign_demo::{DemoConfig, DemoServer, Fault};
use countersign_tests::ledger_view::{assert_sound_timeline, wait_for};
use countersign_tests::peer::FastmcpPeer;
use countersign_tests::procs::DataDir;
use countersign_tests::proxy::FaultProxy;
use serde_json::{json, Value};

/// How long a task may take to settle after the engine is back.
const SETTLE: Duration = Duration::from_secs(20);

/// Both servers, each behind its proxy, registered in a fresh ledger as `demo` and `peer`.
struct Rig {
    dir: DataDir,
    demo: DemoServer,
    demo_proxy: FaultProxy,
    _peer: FastmcpPeer,
    peer_proxy: FaultProxy,
}

async fn rig(label: &str) -> Rig {
    rig_with(label, false).await
}

/// With `push`, the demo also serves `subscriptions/listen` (the engine then takes its changes
/// from the stream and polls it only as a safety net); without, both servers are polled only,
/// like the real peers today.
async fn rig_with(label: &str, push: bool) -> Rig {
    let config = DemoConfig {
        time_scale: 0.01,
        poll_interval_ms: 100,
        push,
        ..DemoConfig::default()
    };
    let demo = DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), config)
        .await
        .expect("the demo server starts");
    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_STEP_SECONDS", "0.05"),
        ("PEER_POLL_INTERVAL_MS", "100"),
    ])
    .await;
    let demo_proxy = FaultProxy::in_front_of(&demo.url()).await;
    let peer_proxy = FaultProxy::in_front_of(&peer.url).await;
    let dir = DataDir::new(label);
    dir.add_server("demo", &demo_proxy.url()).await;
    dir.add_server("peer", &peer_proxy.url()).await;
    Rig {
        dir,
        demo,
        demo_proxy,
        _peer: peer,
        peer_proxy,
    }
}

const DEMO_DEPLOY: &str = r#"{"service":"billing-api","environment":"staging"}"#;
const PEER_DEPLOY: &str = r#"{"service":"billing-api"}"#;

fn approval(reason: &str) -> String {
    json!({"approve": true, "reason": reason}).to_string()
}

/// What the demo's deploy_service says when it applied an approval with `reason`.
fn demo_approved(reason: &str) -> String {
    format!("Approved with reason: {reason}.")
}

/// What the peer's approve_deploy says when it applied an approval with `reason`.
fn peer_approved(reason: &str) -> String {
    format!("approved, DEPLOYED (reason='{reason}')")
}

/// (a) A call whose answer never arrived (the process died while the request was in flight) is
/// `unknown` at the next engine start, with one `call_outcome_unknown` event, and no task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_when_its_process_dies_becomes_unknown_at_the_next_start() {
    let rig = rig("call-in-flight").await;
    let mut watch = rig.dir.watch().await;

    // The demo answers tools/call only after 5 s; the proxy holds the peer's tools/call.
    rig.demo
        .inject_for("tools/call", Fault::Delay(Duration::from_secs(5)), 1);
    rig.peer_proxy.hold("tools/call");
    let mut demo_call =
        rig.dir
            .spawn(&["call", "demo", "deploy_service", DEMO_DEPLOY, "--no-follow"]);
    let mut peer_call =
        rig.dir
            .spawn(&["call", "peer", "approve_deploy", PEER_DEPLOY, "--no-follow"]);

    let view = rig.dir.ledger();
    wait_for(
        "both call intents on disk and both requests at their server",
        SETTLE,
        || {
            let sending = view
                .intents()
                .iter()
                .filter(|i| i.state == "sending")
                .count();
            (sending == 2
                && rig.demo.stats().requests_for("tools/call") == 1
                && rig.peer_proxy.count("tools/call") == 1)
                .then_some(())
        },
    )
    .await;
    demo_call.kill9().await;
    peer_call.kill9().await;
    watch.kill9().await;
    // The held request now reaches the peer: the server acts, but nobody hears the answer.
    rig.peer_proxy.release("tools/call");

    let mut watch = rig.dir.watch().await;
    let intents = view.intents();
    assert_eq!(intents.len(), 2, "two calls were recorded: {intents:?}");
    for intent in &intents {
        assert_eq!(
            intent.state, "unknown",
            "a call in flight at the crash has an unknown outcome: {intent:?}"
        );
        assert_eq!(
            intent.task, None,
            "no task handle was ever received: {intent:?}"
        );
    }
    let unknown = view.events_of("call_outcome_unknown");
    assert_eq!(
        unknown.len(),
        2,
        "one call_outcome_unknown per lost call: {unknown:?}"
    );
    let started = view.events_of("call_started");
    let restart = view
        .events_of("engine_started")
        .last()
        .cloned()
        .expect("the restart is on the timeline");
    for intent in &intents {
        let event = unknown
            .iter()
            .find(|e| e.data["intent"] == intent.id)
            .unwrap_or_else(|| {
                panic!(
                    "no call_outcome_unknown for intent {}: {unknown:?}",
                    intent.id
                )
            });
        assert_eq!(
            event.str("tool"),
            Some(intent.tool.as_str()),
            "the event names the tool"
        );
        let sent = started
            .iter()
            .find(|e| e.data["intent"] == intent.id)
            .expect("call_started for the intent");
        assert!(
            sent.id < event.id && event.id < restart.id,
            "call_started, then call_outcome_unknown, then engine_started"
        );
    }
    assert!(
        view.tasks().is_empty(),
        "no task was recorded for calls whose answer never arrived"
    );

    // A second restart does not conclude the same calls again.
    watch.kill9().await;
    let _watch = rig.dir.watch().await;
    assert_eq!(
        view.events_of("call_outcome_unknown").len(),
        2,
        "an unknown outcome is concluded once, not at every start"
    );
}

/// (a') The other side of (a): a call still in flight in a LIVE process (a slow `tools/call`)
/// while `watch` restarts is not concluded `unknown`; its outcome arrives and is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_in_a_live_process_is_not_concluded_unknown_by_a_restart() {
    let rig = rig("call-alive").await;
    let mut watch = rig.dir.watch().await;
    rig.demo
        .inject_for("tools/call", Fault::Delay(Duration::from_secs(2)), 1);
    let call = rig.dir.spawn(&[
        "--json",
        "call",
        "demo",
        "bench_job",
        r#"{"duration_ms":300}"#,
        "--no-follow",
    ]);
    let view = rig.dir.ledger();
    wait_for("the call in flight", SETTLE, || {
        (rig.demo.stats().requests_for("tools/call") == 1).then_some(())
    })
    .await;
    watch.kill9().await;
    let _watch = rig.dir.watch().await;
    let exit = call.finish().await;
    exit.expect_code(0);
    let task_id = exit.json()["taskId"]
        .as_str()
        .expect("the call got its task")
        .to_owned();
    let task = view.finished(&task_id, SETTLE).await;
    assert_eq!(task.status, "completed");
    let intents = view.intents();
    assert_eq!(intents.len(), 1);
    assert_eq!(
        (intents[0].state.as_str(), intents[0].task),
        ("task", Some(task.id)),
        "the call's outcome is known"
    );
    let unknown = view.events_of("call_outcome_unknown");
    assert!(
        unknown.is_empty(),
        "the restarted engine declared the outcome of a call unknown while its process was alive and then \
         received it; the timeline now says both: {unknown:?}"
    );
}

/// (b) A handle committed by a process killed right after it arrived is resumed by the next
/// engine and followed to its real end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_handle_just_arrived_is_resumed_after_kill_9() {
    let rig = rig("handle-arrived").await;
    // No watch runs: each `call` follows its task itself (the first one starts an engine).
    let mut demo_call = rig.dir.spawn(&[
        "call",
        "demo",
        "bench_job",
        r#"{"duration_ms":2000,"steps":3}"#,
    ]);
    let mut peer_call = rig
        .dir
        .spawn(&["call", "peer", "long_job", r#"{"steps":40}"#]);
    let view = rig.dir.ledger();
    wait_for("both task handles on disk", SETTLE, || {
        (view.events_of("task_created").len() == 2).then_some(())
    })
    .await;
    demo_call.kill9().await;
    peer_call.kill9().await;
    for intent in view.intents() {
        assert_eq!(
            intent.state, "task",
            "the intent was resolved with the handle, in the same commit: {intent:?}"
        );
    }
    let unfinished = view
        .tasks()
        .iter()
        .filter(|t| t.finished_at.is_none())
        .count();
    assert_eq!(
        unfinished, 2,
        "both tasks were still running when their processes died"
    );

    let _watch = rig.dir.watch().await;
    let restart = view
        .events_of("engine_started")
        .last()
        .cloned()
        .expect("engine_started");
    assert_eq!(
        restart.data["resumed"], 2,
        "the new engine resumes both tasks: {}",
        restart.data
    );

    let demo_task = view
        .tasks()
        .into_iter()
        .find(|t| t.server == "demo")
        .expect("demo task");
    let peer_task = view
        .tasks()
        .into_iter()
        .find(|t| t.server == "peer")
        .expect("peer task");
    let demo_task = view.finished(&demo_task.task_id, SETTLE).await;
    let peer_task = view.finished(&peer_task.task_id, SETTLE).await;
    assert_eq!(demo_task.status, "completed");
    assert_eq!(demo_task.result_text(), "bench_job finished after 2000 ms");
    assert_eq!(peer_task.status, "completed");
    assert_eq!(peer_task.result_text(), "long_job finished after 40 steps");
    for task in [&demo_task, &peer_task] {
        let timeline = assert_sound_timeline(&view, task);
        assert_eq!(timeline.end.kind, "task_finished");
    }
    assert_eq!(
        view.intents()
            .iter()
            .filter(|i| i.state == "unknown")
            .count(),
        0,
        "no call was in flight at the kill"
    );
}

/// (c) A question pending at the crash is not shown again after the restart (one
/// `input_requested`, one `inputs` row per key) and its answer is delivered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_question_survives_kill_9_and_is_asked_and_answered_once() {
    pending_question_across_a_crash(false).await;
}

/// (c) again with the demo's push stream on (the engine's default pairing with our server): two
/// sources observe the same question, before and after the crash, and it is still asked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_push_a_pending_question_survives_kill_9_and_is_asked_and_answered_once() {
    pending_question_across_a_crash(true).await;
}

async fn pending_question_across_a_crash(push: bool) {
    let rig = rig_with(
        if push {
            "pending-question-push"
        } else {
            "pending-question"
        },
        push,
    )
    .await;
    let mut watch = rig.dir.watch().await;
    let demo_id = rig
        .dir
        .call_no_follow("demo", "deploy_service", DEMO_DEPLOY)
        .await;
    let peer_id = rig
        .dir
        .call_no_follow("peer", "approve_deploy", PEER_DEPLOY)
        .await;
    let view = rig.dir.ledger();
    let demo_key = view.pending_question(&demo_id, SETTLE).await;
    let peer_key = view.pending_question(&peer_id, SETTLE).await;

    watch.kill9().await;
    // The restarted engine must hear about each task again before the check: three polls, or
    // (with push, where the stream replaces polls) a new listen stream.
    let demo_requests = |r: &Rig| {
        if push {
            r.demo_proxy.count("subscriptions/listen")
        } else {
            r.demo_proxy.seen_for("tasks/get", Some(&demo_id)).len()
        }
    };
    let before = (
        demo_requests(&rig),
        rig.peer_proxy.seen_for("tasks/get", Some(&peer_id)).len(),
    );
    let _watch = rig.dir.watch().await;
    wait_for(
        "the restarted engine to hear about each task again",
        SETTLE,
        || {
            (demo_requests(&rig) >= before.0 + if push { 1 } else { 3 }
                && rig.peer_proxy.seen_for("tasks/get", Some(&peer_id)).len() >= before.1 + 3)
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (id, key) in [(&demo_id, &demo_key), (&peer_id, &peer_key)] {
        let task = view.task_expect(id);
        assert_eq!(
            view.count_kind(task.id, "input_requested"),
            1,
            "the question of {id} is not asked again after the restart"
        );
        let inputs = view.inputs(task.id);
        assert_eq!(inputs.len(), 1, "one inputs row for {id}: {inputs:?}");
        assert_eq!((&inputs[0].key, inputs[0].state.as_str()), (key, "pending"));
    }

    // Answers through the CLI, while the restarted `watch` runs.
    let demo_answer = rig
        .dir
        .run_json(&["answer", &demo_id, "--accept", &approval("crash-c demo")])
        .await;
    assert_eq!(
        demo_answer["delivery"], "delivered",
        "the running engine delivers the answer: {demo_answer}"
    );
    let peer_answer = rig
        .dir
        .run_json(&["answer", &peer_id, "--accept", &approval("crash-c peer")])
        .await;
    assert_eq!(
        peer_answer["delivery"], "delivered",
        "the running engine delivers the answer: {peer_answer}"
    );

    let demo_task = view.finished(&demo_id, SETTLE).await;
    let peer_task = view.finished(&peer_id, SETTLE).await;
    assert_eq!(demo_task.status, "completed");
    assert!(
        demo_task
            .result_text()
            .contains(&demo_approved("crash-c demo")),
        "the demo applied our answer: {}",
        demo_task.result_text()
    );
    assert_eq!(peer_task.status, "completed");
    assert!(
        peer_task
            .result_text()
            .contains(&peer_approved("crash-c peer")),
        "the peer applied our answer: {}",
        peer_task.result_text()
    );
    assert_eq!(
        rig.demo.stats().requests_for("tasks/update"),
        1,
        "the demo got the answer once"
    );
    assert_eq!(
        rig.peer_proxy.count("tasks/update"),
        1,
        "the peer got the answer once"
    );
    if push {
        let pushed = view
            .events_for(demo_task.id)
            .iter()
            .filter(|e| e.via.as_deref() == Some("push"))
            .count();
        assert!(
            pushed > 0,
            "with push on, some of the demo task's changes came over the stream:\n{}",
            view.describe(demo_task.id)
        );
    }
    for task in [&demo_task, &peer_task] {
        let timeline = assert_sound_timeline(&view, task);
        assert_eq!(timeline.asked.len(), 1);
        assert_eq!(timeline.answered.len(), 1);
        assert_eq!(
            timeline.of("update_acknowledged").len(),
            1,
            "one acknowledged delivery"
        );
        let inputs = view.inputs(task.id);
        assert_eq!(
            inputs[0].state, "delivered",
            "the answer is marked delivered: {inputs:?}"
        );
    }
}

/// (d) An answer recorded but not acknowledged when the engine died (the demo was slow to
/// answer `tasks/update`; the peer was unreachable) is sent again by the next engine: the
/// server applies it once, with exactly the recorded content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_recorded_but_unacknowledged_at_the_crash_is_delivered_once_after_restart() {
    let rig = rig("answer-unacked").await;
    let mut watch = rig.dir.watch().await;
    let demo_id = rig
        .dir
        .call_no_follow("demo", "deploy_service", DEMO_DEPLOY)
        .await;
    let peer_id = rig
        .dir
        .call_no_follow("peer", "approve_deploy", PEER_DEPLOY)
        .await;
    let view = rig.dir.ledger();
    view.pending_question(&demo_id, SETTLE).await;
    view.pending_question(&peer_id, SETTLE).await;

    rig.demo
        .inject_for("tasks/update", Fault::Delay(Duration::from_secs(3)), 1);
    rig.peer_proxy.down();
    let mut demo_answer =
        rig.dir
            .spawn(&["answer", &demo_id, "--accept", &approval("crash-d demo")]);
    let mut peer_answer =
        rig.dir
            .spawn(&["answer", &peer_id, "--accept", &approval("crash-d peer")]);
    let demo_row = view.task_expect(&demo_id).id;
    let peer_row = view.task_expect(&peer_id).id;
    wait_for(
        "the demo's tasks/update in flight and a failed attempt at the peer's",
        SETTLE,
        || {
            let peer_attempted = view
                .outbox(peer_row)
                .first()
                .is_some_and(|o| o.attempts >= 1 && o.last_error.is_some());
            (rig.demo.stats().requests_for("tasks/update") == 1 && peer_attempted).then_some(())
        },
    )
    .await;
    for row in [demo_row, peer_row] {
        assert_eq!(
            view.count_kind(row, "input_answered"),
            1,
            "the answer is on disk before anything is sent"
        );
        assert_eq!(
            view.count_kind(row, "update_acknowledged"),
            0,
            "and not acknowledged"
        );
    }
    watch.kill9().await;
    demo_answer.kill9().await;
    peer_answer.kill9().await;
    rig.peer_proxy.up().await;

    let _watch = rig.dir.watch().await;
    let demo_task = view.finished(&demo_id, SETTLE).await;
    let peer_task = view.finished(&peer_id, SETTLE).await;
    assert_eq!(demo_task.status, "completed");
    assert!(
        demo_task
            .result_text()
            .contains(&demo_approved("crash-d demo")),
        "the demo applied our answer: {}",
        demo_task.result_text()
    );
    assert_eq!(peer_task.status, "completed");
    assert!(
        peer_task
            .result_text()
            .contains(&peer_approved("crash-d peer")),
        "the peer applied our answer: {}",
        peer_task.result_text()
    );
    assert_eq!(
        rig.demo.stats().requests_for("tasks/update"),
        2,
        "the unacknowledged update is sent again once, not more"
    );
    assert_eq!(
        rig.peer_proxy.count("tasks/update"),
        1,
        "the peer receives the answer once it is reachable, once"
    );
    for (task, reason) in [(&demo_task, "crash-d demo"), (&peer_task, "crash-d peer")] {
        let timeline = assert_sound_timeline(&view, task);
        assert_eq!(
            timeline.of("update_acknowledged").len(),
            1,
            "one acknowledged delivery"
        );
        let outbox = view.outbox(task.id);
        assert_eq!(
            outbox.len(),
            1,
            "one outbox item, re-sent, never duplicated: {outbox:?}"
        );
        assert!(
            outbox[0].acknowledged_at.is_some(),
            "acknowledged after the restart: {outbox:?}"
        );
        let inputs = view.inputs(task.id);
        let expected: Value =
            json!({"action": "accept", "content": {"approve": true, "reason": reason}});
        assert_eq!(
            inputs[0].answer.as_ref(),
            Some(&expected),
            "the recorded answer is the one given"
        );
        assert_eq!(inputs[0].state, "delivered");
    }
}

/// (e) An engine killed while a `tasks/get` is in flight (the demo answers it slowly; the proxy
/// holds the peer's) resumes polling after the restart and records each task's real end once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_killed_mid_poll_resumes_and_records_each_end_once() {
    let rig = rig("mid-poll").await;
    let mut watch = rig.dir.watch().await;
    let demo_id = rig
        .dir
        .call_no_follow("demo", "bench_job", r#"{"duration_ms":1500,"steps":3}"#)
        .await;
    let peer_id = rig
        .dir
        .call_no_follow("peer", "long_job", r#"{"steps":20}"#)
        .await;
    wait_for("a first poll of each task", SETTLE, || {
        (!rig
            .demo_proxy
            .seen_for("tasks/get", Some(&demo_id))
            .is_empty()
            && !rig
                .peer_proxy
                .seen_for("tasks/get", Some(&peer_id))
                .is_empty())
        .then_some(())
    })
    .await;

    let faults_before = rig.demo.stats().faults;
    rig.demo
        .inject_for("tasks/get", Fault::Delay(Duration::from_secs(3)), 1);
    let peer_polls = rig.peer_proxy.seen_for("tasks/get", Some(&peer_id)).len();
    rig.peer_proxy.hold("tasks/get");
    wait_for("a poll of each task in flight", SETTLE, || {
        (rig.demo.stats().faults > faults_before
            && rig.peer_proxy.seen_for("tasks/get", Some(&peer_id)).len() > peer_polls)
            .then_some(())
    })
    .await;
    watch.kill9().await;
    rig.peer_proxy.release("tasks/get");

    let _watch = rig.dir.watch().await;
    let view = rig.dir.ledger();
    let demo_task = view.finished(&demo_id, SETTLE).await;
    let peer_task = view.finished(&peer_id, SETTLE).await;
    assert_eq!(demo_task.status, "completed");
    assert_eq!(demo_task.result_text(), "bench_job finished after 1500 ms");
    assert_eq!(peer_task.status, "completed");
    assert_eq!(peer_task.result_text(), "long_job finished after 20 steps");
    for task in [&demo_task, &peer_task] {
        let timeline = assert_sound_timeline(&view, task);
        assert_eq!(timeline.end.kind, "task_finished");
        assert!(
            timeline.of("poll_failed").is_empty(),
            "a poll cut by the crash is not a poll failure: {:?}",
            timeline.of("poll_failed")
        );
    }
}

/// Two engines on one ledger would double-poll and double-notify: the second `watch` refuses
/// to start, says why, and leaves the first running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_watch_on_the_same_data_dir_exits_non_zero() {
    let dir = DataDir::new("second-watch");
    let mut first = dir.watch().await;
    let second = dir.run(&["watch"]).await;
    assert_eq!(
        second.code,
        Some(69),
        "a second engine exits with EXIT_UNAVAILABLE; {second}"
    );
    assert!(
        second
            .stderr
            .contains("another Countersign engine is already running"),
        "it says why; {second}"
    );
    assert!(
        second.stderr.contains(&format!("(pid {})", first.pid())),
        "it names the running engine; {second}"
    );
    assert!(first.running(), "the first engine keeps running");
    assert_eq!(dir.engine_starts(), 1, "the refused engine wrote nothing");
    // Once the first is gone (even by SIGKILL), the lock is free again.
    first.kill9().await;
    let _again = dir.watch().await;
}

/// What another process writes (`call --no-follow`, `adopt`, `answer`, `cancel`) is acted on by
/// the running `watch` within a second, measured on the timeline and at the servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_writes_are_picked_up_by_a_running_watch_within_a_second() {
    const PICKUP: i64 = 1000;
    let rig = rig("pickup").await;
    let _watch = rig.dir.watch().await;
    let view = rig.dir.ledger();

    // call --no-follow: from the committed handle to the engine's first tasks/get.
    let called = rig
        .dir
        .call_no_follow("demo", "bench_job", r#"{"duration_ms":3000}"#)
        .await;
    let created = view.events_for(view.task_expect(&called).id)[0].clone();
    let first_poll = wait_for("the engine's first poll of the called task", SETTLE, || {
        rig.demo_proxy
            .seen_for("tasks/get", Some(&called))
            .first()
            .cloned()
    })
    .await;
    let lag = first_poll.wall_ms - created.at;
    assert!(
        lag < PICKUP,
        "a call recorded by another process is polled {lag} ms after its handle was committed"
    );

    // adopt: the CLI's own tasks/get is the first; the engine's is the second.
    let client = countersign_tests::drive::client(&rig.demo_proxy.url());
    let outcome =
        countersign_tests::drive::call(&client, "bench_job", json!({"duration_ms": 3000})).await;
    let foreign = countersign_tests::drive::expect_task("bench_job", outcome).task_id;
    let adopted = rig.dir.run_json(&["adopt", "demo", &foreign]).await;
    assert_eq!(adopted["origin"], "adopted", "{adopted}");
    let created = view.events_for(view.task_expect(&foreign).id)[0].clone();
    let engine_poll = wait_for(
        "the engine's first poll of the adopted task",
        SETTLE,
        || {
            rig.demo_proxy
                .seen_for("tasks/get", Some(&foreign))
                .get(1)
                .cloned()
        },
    )
    .await;
    let lag = engine_poll.wall_ms - created.at;
    assert!(
        lag < PICKUP,
        "an adopted task is polled {lag} ms after adoption"
    );

    // answer: from the recorded answer to the server's acknowledgement.
    let deploy = rig
        .dir
        .call_no_follow("demo", "deploy_service", DEMO_DEPLOY)
        .await;
    view.pending_question(&deploy, SETTLE).await;
    let answered = rig
        .dir
        .run_json(&["answer", &deploy, "--accept", &approval("pickup")])
        .await;
    assert_eq!(answered["delivery"], "delivered", "{answered}");
    let timeline = view.events_for(view.task_expect(&deploy).id);
    let recorded = timeline
        .iter()
        .find(|e| e.kind == "input_answered")
        .expect("input_answered");
    let acked = timeline
        .iter()
        .find(|e| e.kind == "update_acknowledged")
        .expect("update_acknowledged");
    let lag = acked.at - recorded.at;
    assert!(
        lag < PICKUP,
        "an answer recorded by another process is delivered {lag} ms later"
    );

    // cancel, on the peer: from the request to the acknowledgement, then the task ends cancelled.
    let slow = rig
        .dir
        .call_no_follow("peer", "slow_cancellable", r#"{"seconds":5}"#)
        .await;
    wait_for("the peer task running", SETTLE, || {
        view.task(&slow).filter(|t| t.status == "working")
    })
    .await;
    let cancelled = rig.dir.run_json(&["cancel", &slow]).await;
    assert_eq!(cancelled["delivery"], "delivered", "{cancelled}");
    let task = view.finished(&slow, SETTLE).await;
    assert_eq!(task.status, "cancelled", "the peer honours the cancel");
    let timeline = view.events_for(task.id);
    let requested = timeline
        .iter()
        .find(|e| e.kind == "cancel_requested")
        .expect("cancel_requested");
    let acked = timeline
        .iter()
        .find(|e| e.kind == "cancel_acknowledged")
        .expect("cancel_acknowledged");
    let lag = acked.at - requested.at;
    assert!(
        lag < PICKUP,
        "a cancel recorded by another process is delivered {lag} ms later"
    );
    assert_sound_timeline(&view, &task);

    let deploy = view.finished(&deploy, SETTLE).await;
    assert!(
        deploy.result_text().contains(&demo_approved("pickup")),
        "{}",
        deploy.result_text()
    );
    assert_sound_timeline(&view, &deploy);
}

/// A poll-failure streak cut by the crash (the peer was unreachable when `watch` died) is closed
/// once the restarted engine polls successfully: `poll_recovered` and `server_recovered` are on
/// the timeline and the task no longer shows a polling error, even though its state (waiting for
/// an answer) did not change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_streak_cut_by_the_crash_is_closed_after_the_restart() {
    let rig = rig("streak-cut").await;
    let mut watch = rig.dir.watch().await;
    let peer_id = rig
        .dir
        .call_no_follow("peer", "approve_deploy", PEER_DEPLOY)
        .await;
    let view = rig.dir.ledger();
    view.pending_question(&peer_id, SETTLE).await;
    let row = view.task_expect(&peer_id).id;
    let peer = view.server_id("peer");

    rig.peer_proxy.down();
    wait_for("the outage on the timeline", SETTLE, || {
        let unreachable = view
            .events_of("server_unreachable")
            .iter()
            .any(|e| e.server_id == Some(peer));
        (unreachable && view.count_kind(row, "poll_failed") == 1).then_some(())
    })
    .await;
    watch.kill9().await;
    rig.peer_proxy.up().await;
    let polls = rig.peer_proxy.seen_for("tasks/get", Some(&peer_id)).len();
    let _watch = rig.dir.watch().await;
    wait_for("three successful polls after the restart", SETTLE, || {
        (rig.peer_proxy.seen_for("tasks/get", Some(&peer_id)).len() >= polls + 3).then_some(())
    })
    .await;
    // Give the engine a moment to commit what those polls told it.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let task = view.task_expect(&peer_id);
    assert_eq!(
        task.status, "input_required",
        "nothing changed on the server"
    );
    let dump = view.describe(row);
    assert_eq!(
        view.count_kind(row, "poll_recovered"),
        1,
        "the streak open at the crash is closed after the restart:\n{dump}"
    );
    assert_eq!(
        task.poll_error, None,
        "the task must not show a polling error while polling works"
    );
    let server_events: Vec<String> = view
        .events()
        .into_iter()
        .filter(|e| e.server_id == Some(peer) && e.task.is_none() && e.kind.starts_with("server_"))
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        server_events.last().map(String::as_str),
        Some("server_recovered"),
        "the server is reachable again: {server_events:?}"
    );
}

/// Row ids are the cursors the running engine (tasks, outbox) and `watch`'s printer (events)
/// follow. `servers remove` deletes the removed server's rows, the newest included; whatever is
/// recorded next (a task, an answer, their events) must still be seen by the running `watch`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_after_a_server_removal_are_still_seen_by_the_running_watch() {
    const SEEN_WITHIN: Duration = Duration::from_secs(3);
    let rig = rig("after-removal").await;
    let watch = rig.dir.watch().await;
    let view = rig.dir.ledger();
    rig.dir.add_server("spare", &rig.demo_proxy.url()).await;
    let kept = rig
        .dir
        .call_no_follow("demo", "deploy_service", DEMO_DEPLOY)
        .await;
    view.pending_question(&kept, SETTLE).await;
    // The spare's task holds the newest task row, outbox row (a cancel) and events.
    let doomed = rig
        .dir
        .call_no_follow("spare", "bench_job", r#"{"duration_ms":60000}"#)
        .await;
    let cancelled = rig.dir.run_json(&["cancel", &doomed]).await;
    assert_eq!(cancelled["delivery"], "delivered", "{cancelled}");
    let removed = rig.dir.run_json(&["servers", "remove", "spare"]).await;
    assert_eq!(removed["removed"], "spare", "{removed}");

    let mut problems = Vec::new();
    let fresh = rig
        .dir
        .call_no_follow("demo", "bench_job", r#"{"duration_ms":300}"#)
        .await;
    let fresh_row = view.task_expect(&fresh).id;
    let deadline = tokio::time::Instant::now() + SEEN_WITHIN;
    while tokio::time::Instant::now() < deadline
        && rig
            .demo_proxy
            .seen_for("tasks/get", Some(&fresh))
            .is_empty()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if rig
        .demo_proxy
        .seen_for("tasks/get", Some(&fresh))
        .is_empty()
    {
        problems.push(format!("the engine never polled task #{fresh_row} (recorded after the removal) within {SEEN_WITHIN:?}"));
    }
    if !watch.stdout().contains(&fresh) {
        problems.push(format!(
            "`watch` did not print the events of task #{fresh_row}"
        ));
    }
    let mut answering = rig
        .dir
        .spawn(&["answer", &kept, "--accept", &approval("after removal")]);
    let kept_row = view.task_expect(&kept).id;
    let deadline = tokio::time::Instant::now() + SEEN_WITHIN;
    while tokio::time::Instant::now() < deadline
        && view.count_kind(kept_row, "update_acknowledged") == 0
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if view.count_kind(kept_row, "update_acknowledged") == 0 {
        let outbox = view.outbox(kept_row);
        problems.push(format!(
            "the engine never delivered the answer recorded after the removal (outbox {outbox:?})"
        ));
    }
    answering.kill9().await;
    assert!(
        problems.is_empty(),
        "writes after `servers remove` are invisible to the running watch:\n- {}",
        problems.join("\n- ")
    );
}

/// Server task ids are opaque and may start with '-' (the demo's are base64url): every command
/// that takes one must accept it as the id, not parse it as a flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_take_task_ids_that_start_with_a_dash() {
    let dir = DataDir::new("dash-ids");
    for args in [
        vec!["answer", "-dashed", "--decline"],
        vec!["cancel", "-dashed"],
        vec!["task", "show", "-dashed"],
        vec!["adopt", "nowhere", "-dashed"],
    ] {
        let exit = dir.run(&args).await;
        assert!(
            !exit.stderr.contains("unexpected argument"),
            "`countersign {}` read the id as a flag; {exit}",
            args.join(" ")
        );
        let says = if args[0] == "adopt" {
            "no server named \"nowhere\""
        } else {
            "task -dashed not found"
        };
        assert!(
            exit.stderr.contains(says),
            "`countersign {}` must look the id up; {exit}",
            args.join(" ")
        );
    }
}
