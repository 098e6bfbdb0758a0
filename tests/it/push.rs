//! Push task status (`subscriptions/listen` with `notifications.taskIds`): the demo server's
//! stream on the wire, and the engine's push source against it, against the demo with push
//! off, and against the independent fastmcp peer (which has no `subscriptions/listen`).
//!
//! What must hold: a pushed task's every change reaches the ledger without a single `tasks/get`;
//! a stream that breaks mid-task hands the task back to polling at once and no change is lost or
//! reordered; a server without push behaves exactly as before.

use std::time::{Duration, Instant};

use countersign_core::ledger::tasks::{LedgerStatus, TaskRecord};
use countersign_core::ledger::{EventKind, Via};
use countersign_core::mcp::{self, ListenEvent, ListenRequest, TaskStatus};
use countersign_core::status::push::StreamScheme;
use countersign_demo::{DemoConfig, DemoServer, Fault};
use countersign_tests::drive::{accept, call, client, expect_task, poll_to_questions};
use countersign_tests::peer::FastmcpPeer;
use countersign_tests::rig::{assert_every_change, describe, state_vias, updates, Rig};
use countersign_tests::{demo, raw};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// The demo's stream on the wire
// ---------------------------------------------------------------------------------------------

fn listen_body(id: Value, notifications: Value, capabilities: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": capabilities,
                "io.modelcontextprotocol/clientInfo": {"name": "push-test", "version": "0"}
            },
            "notifications": notifications
        }
    })
}

async fn post_listen(url: &str, body: &Value) -> reqwest::Response {
    raw::post(&reqwest::Client::new(), url, "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("the listen POST must get an answer: {e}"))
}

async fn json_of(response: reqwest::Response) -> Value {
    let bytes = response.bytes().await.expect("a body");
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("a JSON body: {e}: {}", String::from_utf8_lossy(&bytes)))
}

/// Reads raw SSE: every `data:` payload as JSON, and whether a `: ping` comment was seen.
struct RawStream {
    response: reqwest::Response,
    buffer: String,
    pings: usize,
}

impl RawStream {
    async fn next_message(&mut self) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut data = String::new();
                for line in block.lines() {
                    if line.starts_with(':') {
                        self.pings += 1;
                    } else if let Some(payload) = line.strip_prefix("data: ") {
                        data.push_str(payload);
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some(
                    serde_json::from_str(&data)
                        .unwrap_or_else(|e| panic!("event data must be JSON: {e}: {data}")),
                );
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Ok(None)) | Ok(Err(_)) => return None,
                Err(_) => panic!("no event within 10 s; buffered: {:?}", self.buffer),
            }
        }
    }
}

#[tokio::test]
async fn the_demo_acknowledges_known_tasks_pushes_the_tasks_get_state_pings_and_closes_on_shutdown()
{
    let server = demo::start(DemoConfig {
        time_scale: 0.01,
        listen_keepalive: Duration::from_millis(100),
        ..DemoConfig::default()
    })
    .await;
    let url = server.url();
    let mcp = client(&url);
    mcp.list_tools()
        .await
        .expect("tools/list (for the x-mcp-header of deploy_service)");
    let task = expect_task(
        "deploy_service",
        call(
            &mcp,
            "deploy_service",
            json!({"service": "billing", "environment": "staging"}),
        )
        .await,
    );
    // Input required is stable until answered, so the pushed state can be compared with tasks/get.
    poll_to_questions(&mcp, &task).await;

    let body = listen_body(
        json!("listen-1"),
        json!({"taskIds": [task.task_id, "no-such-task", task.task_id], "toolsListChanged": true}),
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    );
    let response = post_listen(&url, &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream"),
        "a listen answer is an event stream even in JSON mode"
    );
    let mut stream = RawStream {
        response,
        buffer: String::new(),
        pings: 0,
    };

    assert_eq!(
        stream.next_message().await,
        Some(json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {
                "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"},
                "notifications": {"taskIds": [task.task_id]}
            }
        })),
        "the first message acknowledges only the known task, once, and not toolsListChanged (the tool list never changes)"
    );

    let pushed = stream
        .next_message()
        .await
        .expect("the current state follows the acknowledgement");
    // What tasks/get returns, without the result envelope, tagged with the subscription.
    let from_get = raw::post(&reqwest::Client::new(), &url, "tasks/get")
        .header("mcp-name", &task.task_id)
        .body(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
                "taskId": task.task_id}})
            .to_string(),
        )
        .send()
        .await
        .expect("tasks/get answers");
    let from_get = json_of(from_get).await;
    let Some(result) = from_get.get("result").and_then(Value::as_object) else {
        panic!("tasks/get must succeed: {from_get}");
    };
    let mut expected = result.clone();
    assert_eq!(expected.remove("resultType"), Some(json!("complete")));
    expected.insert(
        "_meta".into(),
        json!({"io.modelcontextprotocol/subscriptionId": "listen-1"}),
    );
    assert_eq!(
        pushed,
        json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": expected}),
        "the pushed task is exactly what tasks/get returns, tagged with the subscription id"
    );

    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(server.subscriptions(), 1);
    server.shutdown().await;
    assert_eq!(
        stream.next_message().await,
        Some(json!({
            "jsonrpc": "2.0", "id": "listen-1",
            "result": {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}}
        })),
        "shutdown ends the subscription with the graceful closing result"
    );
    assert!(
        stream.pings >= 2,
        "an idle stream carries `: ping` keep-alives (saw {})",
        stream.pings
    );
    assert_eq!(
        stream.next_message().await,
        None,
        "nothing follows the closing result"
    );
}

#[tokio::test]
async fn listen_needs_the_tasks_extension_and_is_unknown_when_push_is_off() {
    let server = demo::start(DemoConfig::default()).await;
    let without_tasks = post_listen(
        &server.url(),
        &listen_body(json!(7), json!({"taskIds": ["x"]}), json!({})),
    )
    .await;
    assert_eq!(without_tasks.status(), 400);
    let error = json_of(without_tasks).await;
    assert_eq!(error["id"], json!(7));
    assert_eq!(error["error"]["code"], json!(-32021));
    assert_eq!(
        error["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    let missing = post_listen(
        &server.url(),
        &listen_body(json!(8), json!(null), json!({})),
    )
    .await;
    assert_eq!(missing.status(), 400, "`notifications` is required");
    server.shutdown().await;

    let off = demo::start(DemoConfig {
        push: false,
        ..DemoConfig::default()
    })
    .await;
    let answer = post_listen(
        &off.url(),
        &listen_body(
            json!(9),
            json!({"taskIds": ["x"]}),
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        ),
    )
    .await;
    assert_eq!(answer.status(), 404);
    let error = json_of(answer).await;
    assert_eq!(
        error["error"]["code"],
        json!(-32601),
        "push off answers like both real peers"
    );
    match client(&off.url())
        .listen(&ListenRequest::tasks(["x"]))
        .await
    {
        Err(mcp::Error::MethodNotFound { method }) => assert_eq!(method, "subscriptions/listen"),
        other => panic!("the client must type -32601 as MethodNotFound, got {other:?}"),
    }
    off.shutdown().await;
}

async fn next_event(listening: &mut mcp::Listening) -> Option<mcp::Result<ListenEvent>> {
    tokio::time::timeout(Duration::from_secs(10), listening.next())
        .await
        .expect("an event within 10 s")
}

#[tokio::test]
async fn the_client_reads_the_demo_stream_into_typed_events() {
    let server = demo::start(DemoConfig {
        time_scale: 0.01,
        listen_keepalive: Duration::from_millis(50),
        ..DemoConfig::default()
    })
    .await;
    let mcp = client(&server.url());
    let task = expect_task(
        "bench_job",
        call(&mcp, "bench_job", json!({"duration_ms": 1500, "steps": 3})).await,
    );
    let mut request = ListenRequest::tasks([task.task_id.clone(), "unknown".to_owned()]);
    request.idle_timeout = Duration::from_secs(2);
    let mut listening = mcp.listen(&request).await.expect("the stream opens");
    assert_eq!(
        next_event(&mut listening)
            .await
            .expect("an event")
            .expect("no error"),
        ListenEvent::Acknowledged {
            task_ids: Some(vec![task.task_id.clone()])
        }
    );
    let mut seen = Vec::new();
    loop {
        match next_event(&mut listening).await {
            Some(Ok(ListenEvent::Task(t))) => {
                assert_eq!(t.task_id, task.task_id);
                assert_eq!(t.meta, None, "the subscription tag is stripped");
                let done = t.status() == TaskStatus::Completed;
                seen.push(t.status_message.clone());
                if done {
                    break;
                }
            }
            other => panic!("task notifications expected, got {other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            Some("step 1/3"),
            Some("step 2/3"),
            Some("step 3/3"),
            Some("done")
        ]
        .map(|s| s.map(str::to_owned)),
        "every change, in order"
    );
    assert_eq!(server.close_subscriptions(), 1);
    assert_eq!(
        listening.next().await.map(|r| r.ok()),
        Some(Some(ListenEvent::Closed))
    );
    assert!(listening.next().await.is_none());

    // A dropped stream is an error (the subscription is gone without a closing result).
    let mut listening = mcp.listen(&request).await.expect("the stream opens");
    assert!(matches!(
        listening.next().await,
        Some(Ok(ListenEvent::Acknowledged { .. }))
    ));
    assert!(matches!(
        listening.next().await,
        Some(Ok(ListenEvent::Task(_)))
    ));
    server.drop_subscriptions();
    match tokio::time::timeout(Duration::from_secs(10), listening.next()).await {
        Ok(Some(Err(e))) => assert_eq!(
            e.class(),
            mcp::ErrorClass::Transient,
            "a broken stream is transient: {e}"
        ),
        other => panic!("a dropped stream must end in an error, got {other:?}"),
    }
    server.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The engine with push
// ---------------------------------------------------------------------------------------------

/// The demo server (`config`), and a console whose engine has push on, with it registered.
async fn pushing(config: DemoConfig) -> (DemoServer, Rig) {
    let server = demo::start(config).await;
    let rig = Rig::start(&server.url(), true).await;
    (server, rig)
}

#[tokio::test]
async fn push_delivers_every_change_of_an_elicitation_task_without_a_single_poll() {
    // pollIntervalMs 2 s: the engine's first poll would come 2 s after the handle; push must
    // have covered the task long before, and then polls only every 30 s.
    let (server, rig) = pushing(DemoConfig {
        time_scale: 0.2,
        poll_interval_ms: 2000,
        ..DemoConfig::default()
    })
    .await;
    let record = rig
        .call(
            "deploy_service",
            json!({"service": "billing", "environment": "staging"}),
        )
        .await;
    let asked = rig
        .wait_for(record.id, "input_requested", |e| {
            matches!(e.kind, EventKind::InputRequested { .. })
        })
        .await;
    let EventKind::InputRequested { key, .. } = &asked.kind else {
        unreachable!()
    };
    assert_eq!(asked.via, Via::Push, "the question arrived by push");
    rig.answer(
        record.id,
        key,
        accept(json!({"approve": true, "reason": "push test"})),
    )
    .await;
    let finished = rig.wait_finished(record.id).await;
    match &finished.kind {
        EventKind::TaskFinished { status, .. } => assert_eq!(*status, LedgerStatus::Completed),
        other => panic!("unexpected {other:?}"),
    }

    let stats = server.stats();
    let timeline = rig.timeline(record.id);
    assert_eq!(
        stats.requests_for("tasks/get"),
        0,
        "no tasks/get while push delivers; server saw {:?}; timeline:\n{}",
        stats.requests,
        describe(&timeline)
    );
    assert_eq!(
        stats.requests_for("tasks/update"),
        1,
        "the answer is delivered once"
    );
    assert_every_change(
        &server,
        &record.task_id,
        &timeline,
        "every server-side change is in the ledger, in order",
    );
    assert!(
        updates(&timeline)
            .iter()
            .any(|(s, _)| s == "input_required"),
        "the task went through input_required"
    );
    assert!(
        state_vias(&timeline).iter().all(|v| *v == Via::Push),
        "every state event came by push: {:?}",
        state_vias(&timeline)
    );
    let push = rig.engine().push_stats();
    assert_eq!(push.declined, 0);
    assert!(push.listens >= 1 && push.notifications >= 5, "{push:?}");
    assert_eq!(rig.engine().poll_stats().polls, 0);
    rig.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_broken_stream_falls_back_to_polling_at_once_and_loses_no_change() {
    // A change every 300 ms for 6 s; polls (when not covered) every 100 ms catch each one.
    let (server, rig) = pushing(DemoConfig {
        poll_interval_ms: 100,
        ..DemoConfig::default()
    })
    .await;
    let record = rig
        .call("bench_job", json!({"duration_ms": 6000, "steps": 20}))
        .await;
    rig.wait_for(record.id, "a pushed update", |e| {
        e.via == Via::Push && matches!(e.kind, EventKind::TaskUpdated { .. })
    })
    .await;
    rig.wait_until("the task to be covered", |r| {
        r.engine().push_stats().covered == 1
    })
    .await;
    let gets_while_covered = server.stats().requests_for("tasks/get");

    // The first reconnect fails too, so polling carries the task for a few seconds.
    server.inject_for("subscriptions/listen", Fault::Status(503), 1);
    assert_eq!(server.drop_subscriptions(), 1, "one stream for the server");
    let dropped_at = Instant::now();
    rig.wait_for(record.id, "a polled update after the break", |e| {
        e.via == Via::Poll && matches!(e.kind, EventKind::TaskUpdated { .. })
    })
    .await;
    let fell_back_after = dropped_at.elapsed();
    assert!(
        fell_back_after < Duration::from_millis(1500),
        "polling takes over within a step or two, not at the 30 s safety net ({fell_back_after:?})"
    );
    // Push comes back (after the 503 and a backoff) and covers the task again.
    rig.wait_until("push to cover the task again", |r| {
        let s = r.engine().push_stats();
        s.covered == 1 && s.broken >= 2
    })
    .await;
    rig.wait_finished(record.id).await;

    let timeline = rig.timeline(record.id);
    let server_updates = assert_every_change(
        &server,
        &record.task_id,
        &timeline,
        "no change lost, none repeated, none out of order",
    );
    assert_eq!(server_updates.len(), 20, "19 step messages, then done");
    let vias = state_vias(&timeline);
    assert!(
        vias.contains(&Via::Push) && vias.contains(&Via::Poll),
        "both sources delivered: {vias:?}"
    );
    assert!(
        timeline
            .windows(2)
            .all(|w| w[0].id < w[1].id && w[0].at <= w[1].at),
        "the timeline is ordered"
    );
    let stats = server.stats();
    assert!(
        stats.requests_for("subscriptions/listen") >= 3,
        "{:?}",
        stats.requests
    );
    assert!(
        stats.requests_for("tasks/get") > gets_while_covered,
        "the task was polled while the stream was down"
    );
    rig.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_gracefully_closed_stream_reconnects_and_push_resumes() {
    let (server, rig) = pushing(DemoConfig {
        poll_interval_ms: 100,
        ..DemoConfig::default()
    })
    .await;
    let record = rig
        .call("bench_job", json!({"duration_ms": 5000, "steps": 10}))
        .await;
    rig.wait_until("the task to be covered", |r| {
        r.engine().push_stats().covered == 1
    })
    .await;
    assert_eq!(server.close_subscriptions(), 1);
    rig.wait_until("a new stream to cover the task", |r| {
        let s = r.engine().push_stats();
        s.acknowledged >= 2 && s.covered == 1
    })
    .await;
    rig.wait_finished(record.id).await;
    let timeline = rig.timeline(record.id);
    assert_every_change(&server, &record.task_id, &timeline, "");
    assert_eq!(
        timeline.last().map(|e| e.via),
        Some(Via::Push),
        "after the reconnect, changes come by push again"
    );
    rig.shutdown().await;
    server.shutdown().await;
}

/// Waits for each of `records` to finish; every change the server made is in its timeline, in
/// order, and every state event came by push.
async fn each_finished_with_every_change_pushed(
    rig: &Rig,
    server: &DemoServer,
    records: &[TaskRecord],
) {
    for record in records {
        rig.wait_finished(record.id).await;
        let timeline = rig.timeline(record.id);
        assert_every_change(server, &record.task_id, &timeline, "");
        assert!(
            state_vias(&timeline).iter().all(|v| *v == Via::Push),
            "{:?}",
            state_vias(&timeline)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Servers without push
// ---------------------------------------------------------------------------------------------

/// Runs one bench_job to the end with the engine's push on or off; returns the timeline's
/// updates, its vias, the server's request counts and the push counters.
async fn run_bench_job(
    server: &DemoServer,
    push: bool,
) -> (
    Vec<(String, Option<String>)>,
    Vec<Via>,
    countersign_demo::Stats,
    countersign_core::status::push::PushStats,
    usize,
) {
    server.reset_stats();
    let rig = Rig::start(&server.url(), push).await;
    let record = rig
        .call("bench_job", json!({"duration_ms": 1500, "steps": 5}))
        .await;
    rig.wait_finished(record.id).await;
    let timeline = rig.timeline(record.id);
    assert_every_change(server, &record.task_id, &timeline, &format!("push={push}"));
    let failures = timeline
        .iter()
        .filter(|e| matches!(e.kind, EventKind::PollFailed { .. }))
        .count();
    let push_stats = rig.engine().push_stats();
    rig.shutdown().await;
    (
        updates(&timeline),
        state_vias(&timeline),
        server.stats(),
        push_stats,
        failures,
    )
}

#[tokio::test]
async fn a_demo_without_push_is_polled_exactly_as_before() {
    let server = demo::start(DemoConfig {
        push: false,
        poll_interval_ms: 100,
        ..DemoConfig::default()
    })
    .await;
    let (with_push, vias_with, stats_with, push_with, failures_with) =
        run_bench_job(&server, true).await;
    let (without, vias_without, stats_without, push_without, failures_without) =
        run_bench_job(&server, false).await;

    assert_eq!(with_push, without, "the same timeline either way");
    assert!(vias_with
        .iter()
        .chain(&vias_without)
        .all(|v| *v == Via::Poll));
    assert_eq!(
        (failures_with, failures_without),
        (0, 0),
        "-32601 on listen is not a poll failure"
    );
    assert_eq!(
        stats_with.requests_for("subscriptions/listen"),
        1,
        "asked once, then left alone"
    );
    assert_eq!(stats_without.requests_for("subscriptions/listen"), 0);
    assert_eq!(push_with.declined, 1);
    assert_eq!(push_with.covered, 0);
    assert_eq!(push_without, Default::default());
    let (a, b) = (
        stats_with.requests_for("tasks/get"),
        stats_without.requests_for("tasks/get"),
    );
    assert!(
        a.abs_diff(b) <= 2,
        "the same polling either way: {a} vs {b} tasks/get"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_fastmcp_peer_without_listen_is_polled_exactly_as_before() {
    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_STEP_SECONDS", "0.6"), // each step outlasts two polls at the 250 ms floor
        ("PEER_POLL_INTERVAL_MS", "100"),
    ])
    .await;
    let rig = Rig::start(&peer.url, true).await;
    let record = rig.call("long_job", json!({"steps": 4})).await;
    let finished = rig.wait_finished(record.id).await;
    match &finished.kind {
        EventKind::TaskFinished { status, .. } => assert_eq!(*status, LedgerStatus::Completed),
        other => panic!("unexpected {other:?}"),
    }
    let timeline = rig.timeline(record.id);
    let messages: Vec<Option<String>> = updates(&timeline).into_iter().map(|(_, m)| m).collect();
    for step in 1..=4 {
        let text = format!("step {step}/4");
        assert!(
            messages.iter().any(|m| m.as_deref() == Some(text.as_str())),
            "{text} must be seen by polling; timeline:\n{}",
            describe(&timeline)
        );
    }
    assert!(state_vias(&timeline).iter().all(|v| *v == Via::Poll));
    assert!(
        !timeline
            .iter()
            .any(|e| matches!(e.kind, EventKind::PollFailed { .. })),
        "no poll failures; timeline:\n{}",
        describe(&timeline)
    );
    let push = rig.engine().push_stats();
    assert_eq!(
        (push.listens, push.declined, push.covered),
        (1, 1, 0),
        "{push:?}"
    );
    assert!(rig.engine().poll_stats().polls >= 4);

    // The refusal is remembered for the server, not for the task: the next task does not ask.
    let second = rig.call("long_job", json!({"steps": 2})).await;
    rig.wait_finished(second.id).await;
    assert_eq!(
        rig.engine().push_stats().listens,
        1,
        "a server without push is asked once"
    );
    rig.shutdown().await;
}

#[tokio::test]
async fn batched_streams_are_added_retired_and_merged_without_losing_a_change() {
    let server = demo::start(DemoConfig {
        poll_interval_ms: 2000,
        ..DemoConfig::default()
    })
    .await;
    let rig = Rig::start_with(&server.url(), |config| {
        config.push_config.max_streams = 2;
        config.push_config.min_reopen_gap = Duration::from_millis(50);
    })
    .await;
    // Five tasks 300 ms apart: a stream each for the first two, then merges.
    let mut records = Vec::new();
    let mut most_streams = 0;
    for _ in 0..5 {
        records.push(
            rig.call("bench_job", json!({"duration_ms": 1500, "steps": 3}))
                .await,
        );
        for _ in 0..15 {
            most_streams = most_streams.max(server.subscriptions());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    each_finished_with_every_change_pushed(&rig, &server, &records).await;
    let stats = server.stats();
    assert_eq!(stats.requests_for("tasks/get"), 0, "{:?}", stats.requests);
    let push = rig.engine().push_stats();
    assert!(
        push.listens >= 3,
        "new tasks get new streams, past two a merge: {push:?}"
    );
    assert!(
        most_streams <= 3,
        "at most max_streams, plus the merge while it is acknowledged ({most_streams})"
    );
    rig.wait_until("every finished stream to be closed", |r| {
        r.engine().push_stats().open_streams == 0 && server.subscriptions() == 0
    })
    .await;
    rig.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn per_task_streams_deliver_every_change_too() {
    let server = demo::start(DemoConfig {
        poll_interval_ms: 2000,
        ..DemoConfig::default()
    })
    .await;
    let rig = Rig::start_with(&server.url(), |config| {
        config.push_config.scheme = StreamScheme::PerTask;
    })
    .await;
    let mut records = Vec::new();
    for _ in 0..3 {
        records.push(
            rig.call("bench_job", json!({"duration_ms": 1200, "steps": 4}))
                .await,
        );
    }
    rig.wait_until("three streams, one per task", |r| {
        r.engine().push_stats().open_streams == 3
    })
    .await;
    each_finished_with_every_change_pushed(&rig, &server, &records).await;
    assert_eq!(server.stats().requests_for("tasks/get"), 0);
    assert_eq!(server.stats().requests_for("subscriptions/listen"), 3);
    rig.shutdown().await;
    server.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Measurement (ignored by default: prints numbers, asserts nothing)
// ---------------------------------------------------------------------------------------------

/// The cost of each stream scheme under task churn: 20 new tasks a second for 20 s, each living
/// 15 s (about 300 live at a time) with a change every 5 s. Run with
/// `cargo test -p countersign-tests --release --test it -- --ignored --nocapture push::measure_stream_schemes_under_churn`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check; run it by hand"]
async fn measure_stream_schemes_under_churn() {
    for scheme in [
        StreamScheme::Batched,
        StreamScheme::Single,
        StreamScheme::PerTask,
    ] {
        let server = demo::start(DemoConfig {
            poll_interval_ms: 5000,
            ..DemoConfig::default()
        })
        .await;
        let rig = Rig::start_with(&server.url(), |config| config.push_config.scheme = scheme).await;
        let started = Instant::now();
        let mut rows = Vec::new();
        let mut peak_streams = 0;
        for i in 0..400u32 {
            let due = started + Duration::from_millis(50) * i;
            tokio::time::sleep_until(due.into()).await;
            rows.push(
                rig.call("bench_job", json!({"duration_ms": 15_000, "steps": 3}))
                    .await
                    .id,
            );
            peak_streams = peak_streams.max(server.subscriptions());
        }
        for row in &rows {
            rig.wait_finished(*row).await;
            peak_streams = peak_streams.max(server.subscriptions());
        }
        let elapsed = started.elapsed().as_secs_f64();
        let stats = server.stats();
        let task_minutes = rows.len() as f64 * 15.0 / 60.0;
        println!(
            "{scheme:?}: {} tasks in {elapsed:.0} s; listen requests {} ({:.2}/task), tasks/get {} ({:.2}/task-minute), \
             notifications {} ({:.1}/task), peak open streams {peak_streams}, engine push {:?}",
            rows.len(),
            stats.requests_for("subscriptions/listen"),
            stats.requests_for("subscriptions/listen") as f64 / rows.len() as f64,
            stats.requests_for("tasks/get"),
            stats.requests_for("tasks/get") as f64 / task_minutes,
            stats.notifications,
            stats.notifications as f64 / rows.len() as f64,
            rig.engine().push_stats(),
        );
        rig.shutdown().await;
        server.shutdown().await;
    }
}
