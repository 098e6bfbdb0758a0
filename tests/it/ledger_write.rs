//! The engine's write path under a ledger it cannot write for a while: a change stays pending
//! until it commits, the person is told, and nothing is lost without a restart.
//!
//! Real parts only: `countersign watch` as its own process (the engine), the demo server over
//! HTTP, and a second SQLite connection in this process holding the write lock, as another
//! program (a backup tool, a second Countersign build) would.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use countersign_demo::{DemoConfig, DemoServer};
use countersign_tests::ledger_view::{wait_for, LedgerView};
use countersign_tests::procs::DataDir;

/// Longer than the ledger's 10 s busy timeout, so the engine's first attempt fails for certain.
const LOCK_HELD: Duration = Duration::from_secs(13);

/// Holds `BEGIN IMMEDIATE` on the ledger from another connection for `hold`, then commits.
/// Returns once the lock is taken; the thread releases it.
fn hold_write_lock(view: &LedgerView, hold: Duration) -> std::thread::JoinHandle<()> {
    let conn = rusqlite::Connection::open(view.path())
        .unwrap_or_else(|e| panic!("a second connection to the ledger: {e}"));
    conn.busy_timeout(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("set busy_timeout: {e}"));
    conn.execute_batch("BEGIN IMMEDIATE")
        .unwrap_or_else(|e| panic!("take the ledger's write lock: {e}"));
    std::thread::spawn(move || {
        std::thread::sleep(hold);
        if let Err(e) = conn.execute_batch("COMMIT") {
            panic!("release the write lock: {e}");
        }
    })
}

/// Case 2 of the hostile-input issue: another process holds the write lock past the busy timeout
/// while a task turns `input_required`. The old engine advanced its memory first and only logged
/// the failed write, so the question never reached the inbox until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_seen_while_the_ledger_is_locked_reaches_the_inbox_after_the_lock_is_released() {
    // The deploy asks for approval 35 ms after it starts: the engine's first poll sees the
    // question, so the one write it needs is the one the lock blocks.
    let demo = DemoServer::start(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        DemoConfig {
            time_scale: 0.01,
            poll_interval_ms: 200,
            push: false,
            ..DemoConfig::default()
        },
    )
    .await
    .expect("the demo server starts");
    let dir = DataDir::new("ledger-locked");
    dir.add_server("demo", &demo.url()).await;
    let watch = dir.watch().await;
    let out = dir
        .run_json(&[
            "call",
            "demo",
            "deploy_service",
            r#"{"service":"billing-api","environment":"staging"}"#,
            "--no-follow",
        ])
        .await;
    let task_id = out["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("call --no-follow prints the task id: {out}"))
        .to_owned();
    let view = dir.ledger();
    let row = view.task_expect(&task_id).id;

    let locked_at = Instant::now();
    let holder = hold_write_lock(&view, LOCK_HELD);
    assert!(
        view.inputs(row).is_empty(),
        "the question must not be in the ledger before the lock (else this test proves nothing)"
    );

    // While locked: the engine says so on the terminal (the ledger cannot carry the news).
    wait_for(
        "`watch` to say the ledger cannot be written",
        LOCK_HELD + Duration::from_secs(5),
        || {
            watch
                .stderr()
                .contains("cannot write the ledger")
                .then_some(())
        },
    )
    .await;
    assert!(
        locked_at.elapsed() < LOCK_HELD,
        "the warning came only after the lock was released; stderr:\n{}",
        watch.stderr()
    );
    assert!(
        view.inputs(row).is_empty(),
        "nothing can be committed while another connection holds the write lock"
    );

    holder
        .join()
        .unwrap_or_else(|_| panic!("the lock holder panicked"));
    // Without a restart, the pending change commits: the question is in the inbox, once.
    let question = wait_for(
        "the question to reach the inbox after the lock is released",
        Duration::from_secs(20),
        || view.inputs(row).into_iter().find(|q| q.state == "pending"),
    )
    .await;
    assert!(
        question.key.ends_with("approval-1"),
        "the deploy's approval question, got {question:?}"
    );
    eprintln!(
        "question committed {:?} after the lock was taken",
        locked_at.elapsed()
    );
    let asked: Vec<_> = view
        .events_for(row)
        .into_iter()
        .filter(|e| e.kind == "input_requested")
        .collect();
    assert_eq!(
        asked.len(),
        1,
        "one input_requested event; timeline:\n{}",
        view.describe(row)
    );
    let said = wait_for(
        "`watch` to say the ledger is writable again",
        Duration::from_secs(10),
        || {
            let stderr = watch.stderr();
            stderr
                .contains("the ledger is writable again")
                .then_some(stderr)
        },
    )
    .await;
    eprintln!("watch said:\n{said}");
}
