//! What a window follows (`countersign_core::console::feed`): the ledger's events by cursor,
//! sorted by what they changed, and the inbox with its notification bookkeeping, against the
//! demo server on 127.0.0.1 and a real ledger file.
//!
//! What must hold: a question reaches the feed and is to be told exactly once (marked told in the
//! ledger before the face posts it, so a restart does not repeat it); only the engine's process
//! tells; an answer recorded by another process (another console on the same data directory)
//! reaches the feed too, and closes the question with how it was answered.

use std::collections::HashMap;
use std::time::Duration;

use countersign_core::console::feed::{Changes, Feed, InboxWatch};
use countersign_core::console::notifications::notification_id;
use countersign_core::console::view::InputResponse;
use countersign_core::console::{Console, Setup, Start};
use countersign_core::ledger::EventKind;
use countersign_demo::{DemoConfig, DemoServer};
use countersign_tests::rig::{Rig, DEADLINE};
use serde_json::json;

/// The demo server on 127.0.0.1, `time_scale` × real time, polled every 300 ms.
async fn demo(time_scale: f64) -> DemoServer {
    DemoServer::start(
        ([127, 0, 0, 1], 0).into(),
        DemoConfig {
            time_scale,
            poll_interval_ms: 300,
            ..DemoConfig::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("the demo server must start: {e}"))
}

/// The next batch, or a failure naming what was awaited.
async fn next(feed: &mut Feed, what: &str) -> Changes {
    tokio::time::timeout(DEADLINE, feed.next())
        .await
        .unwrap_or_else(|_| panic!("no {what} reached the feed within {DEADLINE:?}"))
}

#[tokio::test]
async fn a_question_is_told_once_by_the_engines_process_and_an_answer_from_another_process_closes_it(
) {
    let server = demo(0.2).await;
    let rig = Rig::start(&server.url(), false).await;
    let mut feed = rig.console.feed().await.expect("the feed opens");
    let mut inbox = InboxWatch::default();
    let first = rig
        .console
        .look_at_inbox(&mut inbox, &HashMap::new())
        .await
        .expect("the inbox is readable");
    assert!(first.inbox.is_empty() && first.untold.is_empty() && first.left.is_empty());

    let record = rig
        .call(
            "deploy_service",
            json!({"service": "billing", "environment": "staging"}),
        )
        .await;
    // The call's own events, then the question: the feed reports each batch's tasks and whether
    // the inbox may have changed.
    let mut asked = false;
    while !asked {
        let changes = next(&mut feed, "input_requested").await;
        assert!(
            changes.tasks.contains(&record.id),
            "every batch here concerns the call's task: {:?}",
            changes.events
        );
        asked = changes
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::InputRequested { .. }));
        assert!(!asked || changes.inbox, "a question changes the inbox");
    }
    let told = rig
        .console
        .look_at_inbox(&mut inbox, &HashMap::new())
        .await
        .expect("the inbox is readable");
    assert_eq!(told.inbox.len(), 1, "one question waits");
    assert_eq!(
        told.untold.len(),
        1,
        "the engine's process is to tell of it"
    );
    let key = told.untold[0].key.clone();
    let again = rig
        .console
        .look_at_inbox(&mut InboxWatch::default(), &HashMap::new())
        .await
        .expect("the inbox is readable");
    assert_eq!(again.inbox.len(), 1);
    assert!(
        again.untold.is_empty(),
        "marked told in the ledger: a second look (as after a restart) tells nothing"
    );

    // Another process's console on the same ledger: it records, it does not tell, and its write
    // reaches this feed (no broadcast crosses processes; the feed reads the ledger).
    let mut setup = Setup::new(rig.console.data_dir());
    setup.start = Start::WhenNeeded;
    let other = Console::open(setup).await.expect("a second console opens");
    assert!(!other.runs_engine());
    let elsewhere = other
        .look_at_inbox(&mut InboxWatch::default(), &HashMap::new())
        .await
        .expect("the inbox is readable");
    assert_eq!(elsewhere.inbox.len(), 1);
    assert!(
        elsewhere.untold.is_empty(),
        "only the engine's process tells"
    );
    other
        .answer(
            record.id,
            &key,
            &InputResponse::Accept {
                content: Some(serde_json::Map::from_iter([(
                    "approve".to_owned(),
                    json!(true),
                )])),
            },
        )
        .await
        .expect("the answer is recorded");
    let answered = loop {
        let changes = tokio::time::timeout(Duration::from_secs(5), feed.next())
            .await
            .expect("another process's answer reaches the feed within seconds");
        if !changes.answered.is_empty() {
            break changes;
        }
    };
    assert!(answered.inbox);
    assert_eq!(
        answered
            .answered
            .get(&(record.id, key.clone()))
            .map(String::as_str),
        Some("accept")
    );
    let closed = rig
        .console
        .look_at_inbox(&mut inbox, &answered.answered)
        .await
        .expect("the inbox is readable");
    assert!(closed.inbox.is_empty());
    assert_eq!(
        closed.left,
        vec![(notification_id(record.id, &key), "accept".to_owned())],
        "the question left, approved: its notification closes with that"
    );
    other.close().await;
    rig.shutdown().await;
}

#[tokio::test]
async fn a_task_whose_tool_reports_an_error_is_listed_as_completed_with_an_error() {
    let server = demo(0.05).await;
    let rig = Rig::start(&server.url(), false).await;
    let failing = rig
        .call("lint_repository", json!({"repo": "acme/web"}))
        .await;
    let fine = rig
        .call(
            "run_ci_pipeline",
            json!({"repo": "acme/web", "branch": "main"}),
        )
        .await;
    rig.wait_finished(failing.id).await;
    rig.wait_finished(fine.id).await;
    let failing = rig.console.task(failing.id).await.expect("listed");
    let fine = rig.console.task(fine.id).await.expect("listed");
    assert!(
        failing.result_is_error,
        "lint_repository completes with isError: true"
    );
    assert!(!fine.result_is_error, "a pipeline that passed is no error");
    rig.shutdown().await;
}

#[tokio::test]
async fn the_cli_task_list_says_how_a_task_ended_in_the_same_words_as_the_app() {
    let server = demo(0.05).await;
    let dir = countersign_tests::procs::DataDir::new("feed-cli-tasks");
    dir.add_server("demo", &server.url()).await;
    // Followed to its end: a tool error exits 1.
    dir.run(&["call", "demo", "lint_repository", r#"{"repo": "acme/web"}"#])
        .await
        .expect_code(1);
    let listed = dir.run(&["tasks"]).await;
    listed.expect_code(0);
    assert!(
        listed.stdout.contains("completed · tool reported an error"),
        "{listed}"
    );
}
