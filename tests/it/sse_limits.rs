//! Event streams from an untrusted server: bounded in memory (no event may hold more than a JSON
//! body may), ended with a typed error in bounded time, and cheap when the server is well
//! behaved (the connection is reused after an SSE reply).
//!
//! Against the hostile test server over real HTTP on 127.0.0.1; the engine test runs the real
//! engine on a real ledger file.

use std::time::{Duration, Instant};

use countersign_core::ledger::EventKind;
use countersign_core::mcp::{self, Client, Endpoint, ListenRequest, ToolCall};
use countersign_tests::hostile::{self, Hostile, Reply, SseEnd};
use serde_json::json;

use countersign_tests::rig::Rig;

/// However the limit is crossed, it must be found long before a test gives up on it.
const BOUNDED: Duration = Duration::from_secs(60);

/// One test at a time: the hostile server runs on the test's runtime, and a neighbour decoding
/// 64 MiB would starve it of the microseconds in which it ends a stream, which is what the
/// connection-reuse test measures.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Many `data:` lines and never the blank line that would complete the event.
fn endless_data_lines() -> SseEnd {
    SseEnd::Endless(b"data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n".repeat(512))
}

/// One line that never ends.
fn endless_line() -> Reply {
    Reply::Sse {
        events: Vec::new(),
        then: SseEnd::Endless(b"x".repeat(32 * 1024)),
    }
}

fn client(server: &Hostile) -> Client {
    Client::new(Endpoint::new(server.url()))
        .unwrap_or_else(|e| panic!("a client for the hostile server: {e}"))
}

fn assert_too_large(outcome: Result<impl std::fmt::Debug, mcp::Error>, what: &str) {
    match outcome {
        Err(mcp::Error::ResponseTooLarge { limit, .. }) => {
            assert_eq!(
                limit,
                mcp::response::MAX_BODY_BYTES,
                "{what}: the JSON body limit"
            )
        }
        other => panic!("{what}: expected ResponseTooLarge, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_event_on_tools_call_ends_with_a_too_large_error_before_the_request_timeout() {
    let _serial = SERIAL.lock().await;
    let server = Hostile::builder()
        .tool("lines", |_| Reply::Sse {
            events: Vec::new(),
            then: endless_data_lines(),
        })
        .tool("line", |_| endless_line())
        .start()
        .await;
    let client = client(&server);
    for tool in ["lines", "line"] {
        let started = Instant::now();
        let call = ToolCall::new(tool, Some(serde_json::Map::new()));
        let Ok(outcome) = tokio::time::timeout(BOUNDED, client.call_tool(&call)).await else {
            panic!("tools/call {tool} did not end within {BOUNDED:?}")
        };
        assert_too_large(outcome, &format!("tools/call {tool}"));
        // The whole-request timeout is 30 s: ending sooner shows the cap ended it.
        let timeout = mcp::ClientOptions::default().request_timeout;
        assert!(
            started.elapsed() < timeout,
            "tools/call {tool} ended by the request timeout, not the cap: {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_listen_stream_ends_with_a_too_large_error() {
    let _serial = SERIAL.lock().await;
    let server = Hostile::builder()
        .on("subscriptions/listen", |_| Reply::Sse {
            events: Vec::new(),
            then: endless_data_lines(),
        })
        .start()
        .await;
    let client = client(&server);
    let mut listening = client
        .listen(&ListenRequest::tasks(["1.0"]))
        .await
        .unwrap_or_else(|e| panic!("the listen stream opens: {e}"));
    let next = tokio::time::timeout(BOUNDED, listening.next())
        .await
        .unwrap_or_else(|_| panic!("the listen stream did not fail within {BOUNDED:?}"));
    match next {
        Some(outcome) => assert_too_large(outcome, "subscriptions/listen"),
        None => panic!("the stream ended without an error"),
    }
    assert!(
        listening.next().await.is_none(),
        "nothing follows the error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_comments_on_a_listen_stream_end_it_with_a_too_large_error() {
    let _serial = SERIAL.lock().await;
    // Nothing is buffered, but a stream that never completes a message only costs us.
    let server = Hostile::builder()
        .on("subscriptions/listen", |_| Reply::Sse {
            events: Vec::new(),
            then: SseEnd::Endless(b": ping\n".repeat(4096)),
        })
        .start()
        .await;
    let client = client(&server);
    let mut listening = client
        .listen(&ListenRequest::tasks(["1.0"]))
        .await
        .unwrap_or_else(|e| panic!("the listen stream opens: {e}"));
    let next = tokio::time::timeout(BOUNDED, listening.next())
        .await
        .unwrap_or_else(|_| panic!("the listen stream did not fail within {BOUNDED:?}"));
    match next {
        Some(outcome) => assert_too_large(outcome, "subscriptions/listen"),
        None => panic!("the stream ended without an error"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_answered_with_an_endless_event_is_a_poll_failure_on_the_timeline() {
    let _serial = SERIAL.lock().await;
    let server = Hostile::builder()
        .tool("1", |req| match req.method.as_str() {
            "tools/call" => {
                // No TTL: `hostile::task` has a fixed `createdAt`, and a TTL counted from it
                // would run out and conclude the task `expired` at its first failed poll.
                let mut task = hostile::task(&req.new_task_id(), "working");
                if let Some(fields) = task.as_object_mut() {
                    fields.remove("ttlMs");
                }
                Reply::Result(hostile::created(task))
            }
            _ => Reply::Sse {
                events: Vec::new(),
                then: endless_data_lines(),
            },
        })
        .start()
        .await;
    let rig = Rig::start_with(&server.url(), |config| config.push = false).await;
    let task = rig.call("1", json!({})).await;
    let started = Instant::now();
    let failed = loop {
        let timeline = rig.timeline(task.id);
        if let Some(code) = timeline.iter().find_map(|e| match &e.kind {
            EventKind::PollFailed { code, .. } => Some(code.clone()),
            _ => None,
        }) {
            break code;
        }
        assert!(
            started.elapsed() < BOUNDED,
            "no poll_failed within {BOUNDED:?}: {timeline:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(failed, "response_too_large");
    // The engine is still polling (the failure is transient): a second poll arrives.
    let polls = server.count("tasks/get");
    let again = Instant::now();
    while server.count("tasks/get") == polls {
        assert!(again.elapsed() < BOUNDED, "the engine stopped polling");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_replies_that_end_promptly_reuse_the_connection() {
    let _serial = SERIAL.lock().await;
    let server = Hostile::builder()
        .tool("1", |req| {
            let id = req.task_id().unwrap_or("1.0").to_owned();
            // The answer, then one more event before the stream ends (a log line, as servers
            // send): the client has to read past its answer to reach the end of the body.
            Reply::Sse {
                events: vec![
                    json!({"jsonrpc": "2.0", "id": req.id, "result": hostile::task(&id, "working")})
                        .to_string(),
                    json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "polled"}})
                        .to_string(),
                ],
                then: SseEnd::Close,
            }
        })
        .start()
        .await;
    let client = client(&server);
    const POLLS: usize = 500;
    for _ in 0..POLLS {
        let task = client
            .get_task("1.0")
            .await
            .unwrap_or_else(|e| panic!("tasks/get over SSE: {e}"));
        assert_eq!(task.task_id, "1.0");
        // Real polls of one server are spaced (250 ms at least per task): a stream whose end
        // took longer than the inline wait (a loaded machine) is drained in the background and
        // its connection is back in the pool before the next poll. Back to back, such a poll
        // would open a connection that the product never would.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.count("tasks/get"), POLLS);
    assert!(
        server.connections() <= POLLS / 100,
        "{} TCP connections for {POLLS} SSE-replied polls (target: at most 1 per 100)",
        server.connections()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_reply_that_stays_open_after_the_answer_does_not_delay_the_answer() {
    let _serial = SERIAL.lock().await;
    let server = Hostile::builder()
        .tool("1", |req| Reply::Sse {
            events: vec![
                json!({"jsonrpc": "2.0", "id": req.id, "result": hostile::task("1.0", "working")})
                    .to_string(),
            ],
            then: SseEnd::Hang,
        })
        .start()
        .await;
    let client = client(&server);
    let started = Instant::now();
    for _ in 0..5 {
        client
            .get_task("1.0")
            .await
            .unwrap_or_else(|e| panic!("tasks/get: {e}"));
    }
    // Each answer is back at once; the streams left open are drained (then dropped) apart.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "five answers took {:?}",
        started.elapsed()
    );
}
