//! `tasks/get`'s own keep-alive connections (`mcp/http1.rs`): one connection carries poll after
//! poll, a connection the server closed while it sat in the pool costs no failed poll, a poll the
//! server read before closing is never sent twice, a
//! connection the server says it will close is not reused, and a redirected poll follows the
//! same rules as every other request.
//!
//! Against the hostile test server over real HTTP on 127.0.0.1, through the client the engine
//! polls with.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use countersign_core::mcp::{Client, Endpoint, ErrorClass};
use countersign_tests::hostile::{self, Hostile, Reply};
use serde_json::json;

fn client(server: &Hostile) -> Client {
    Client::new(Endpoint::new(server.url()))
        .unwrap_or_else(|e| panic!("a client for the hostile server: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_answered_in_json_share_one_kept_alive_connection() {
    let server = Hostile::builder()
        .tool("1", |req| {
            Reply::Result(hostile::task(req.task_id().unwrap_or("1.0"), "working"))
        })
        .start()
        .await;
    let client = client(&server);
    const POLLS: usize = 300;
    for _ in 0..POLLS {
        let task = client
            .get_task("1.0")
            .await
            .unwrap_or_else(|e| panic!("tasks/get: {e}"));
        assert_eq!(task.task_id, "1.0");
    }
    assert_eq!(server.count("tasks/get"), POLLS);
    assert_eq!(
        server.connections(),
        1,
        "every poll on the one kept-alive connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_the_server_read_and_closed_unanswered_fails_and_is_not_sent_again() {
    // Every third request on the wire ends its connection without an answer: what a server's
    // keep-alive timeout does to a request that crossed its close. The server may have read it
    // (here it did), so the poll fails and the poller backs off as for any failed poll, rather
    // than a second copy reaching the server at once; the next poll goes on a new connection.
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let server = Hostile::builder()
        .tool("1", move |req| {
            if seen.fetch_add(1, Ordering::SeqCst) % 3 == 2 {
                Reply::Raw(Vec::new())
            } else {
                Reply::Result(hostile::task(req.task_id().unwrap_or("1.0"), "working"))
            }
        })
        .start()
        .await;
    let client = client(&server);
    const POLLS: usize = 40;
    let mut failed = 0;
    for n in 0..POLLS {
        match client.get_task("1.0").await {
            Ok(task) => assert_eq!(task.task_id, "1.0"),
            Err(e) => {
                assert_eq!(
                    n % 3,
                    2,
                    "poll {n} failed though the server answered it: {e}"
                );
                assert_eq!(e.class(), ErrorClass::Transient, "{e}");
                failed += 1;
            }
        }
    }
    // Requests 2, 5, 8, … on the wire were the ones closed unanswered.
    assert_eq!(failed, POLLS / 3);
    assert_eq!(server.count("tasks/get"), POLLS, "each poll sent once");
    assert_eq!(
        server.connections(),
        failed + 1,
        "a new connection after each close, none otherwise"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_announces_its_connection_closes_is_not_followed_by_a_poll_on_it() {
    let server = Hostile::builder()
        .tool("1", |req| {
            let body =
                json!({"jsonrpc": "2.0", "id": req.id, "result": hostile::task("1.0", "working")});
            Reply::Http {
                status: 200,
                headers: vec![
                    ("Content-Type".into(), "application/json".into()),
                    ("Connection".into(), "close".into()),
                ],
                body: body.to_string().into_bytes(),
            }
        })
        .start()
        .await;
    let client = client(&server);
    const POLLS: usize = 20;
    for n in 0..POLLS {
        client
            .get_task("1.0")
            .await
            .unwrap_or_else(|e| panic!("poll {n}: {e}"));
    }
    assert_eq!(
        server.count("tasks/get"),
        POLLS,
        "no request was lost and sent again"
    );
    assert_eq!(
        server.connections(),
        POLLS,
        "one connection per announced close"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirected_poll_follows_the_same_origin_and_refuses_another() {
    let elsewhere = Hostile::builder()
        .tool("away", |req| {
            Reply::Result(hostile::task(
                req.task_id().unwrap_or("away.0"),
                "completed",
            ))
        })
        .start()
        .await;
    let target = elsewhere.url();
    let server = Hostile::builder()
        .tool("hop", |req| {
            if req.nth == 0 {
                Reply::status(307, &[("Location", "/mcp?hop")])
            } else {
                Reply::Result(hostile::task(req.task_id().unwrap_or("hop.0"), "working"))
            }
        })
        .tool("away", move |_| {
            Reply::status(307, &[("Location", target.as_str())])
        })
        .start()
        .await;
    let client = client(&server);

    let task = client
        .get_task("hop.0")
        .await
        .unwrap_or_else(|e| panic!("a same-origin redirect is followed: {e}"));
    assert_eq!(task.task_id, "hop.0");

    let err = client.get_task("away.0").await.expect_err("not followed");
    assert_eq!(err.code(), "redirected", "{err}");
    assert!(
        err.to_string().contains(&elsewhere.url()),
        "the error names the target: {err}"
    );
    assert_eq!(
        elsewhere.count("tasks/get"),
        0,
        "nothing reached the other origin"
    );
}
