//! The poll scheduler under paused time: the engine's [`PollSource`] against a scripted server
//! that runs on the same (paused) runtime and stamps every `tasks/get` with the virtual clock.
//!
//! With time paused, a loopback HTTP exchange takes no virtual time, so request times are exact:
//! the gap between two polls of a task is precisely the wait the scheduler chose. That lets
//! these tests pin the policy itself, not a wall-clock approximation of it:
//! - a task is polled exactly `max(pollIntervalMs, floor)` after the previous answer, never
//!   earlier, with the interval re-read from every answer (and the default when there is none);
//! - failures back off exponentially (±20 % jitter, never below the interval), a 429's
//!   `Retry-After` is a floor, and the wait the source announces is the wait it keeps;
//! - a terminal answer ends polling; tasks keep independent schedules.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_core::mcp::{Client, ClientOptions, Endpoint, ErrorClass};
use countersign_core::status::poll::PollSource;
use countersign_core::status::{
    CheckFailure, FirstCheck, Links, Observation, ServerLink, StatusSource, Watch,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

/// What the scripted server answers to one `tasks/get`.
#[derive(Debug, Clone)]
enum Reply {
    /// `working`, with this `pollIntervalMs` (absent when `None`).
    Working(Option<u64>),
    /// `completed` with a text result.
    Completed,
    /// This HTTP status with a plain-text body (no JSON-RPC error).
    Status(u16),
    /// 429 with `Retry-After: secs`.
    TooMany(u64),
}

/// A server for a few task ids: answers each task's polls from its script (then `working`
/// with a 1 s interval forever) and records the virtual instant of every request.
#[derive(Clone, Default)]
struct Scripted {
    scripts: Arc<Mutex<HashMap<String, VecDeque<Reply>>>>,
    seen: Arc<Mutex<HashMap<String, Vec<Instant>>>>,
}

impl Scripted {
    async fn start(scripts: &[(&str, Vec<Reply>)]) -> (Scripted, String) {
        let server = Scripted::default();
        for (task, script) in scripts {
            server
                .scripts
                .lock()
                .unwrap()
                .insert(task.to_string(), script.iter().cloned().collect());
        }
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the scripted server");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let accepting = server.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(accepting.clone().serve(stream));
            }
        });
        (server, url)
    }

    /// When each poll of `task` arrived.
    fn seen(&self, task: &str) -> Vec<Instant> {
        self.seen
            .lock()
            .unwrap()
            .get(task)
            .cloned()
            .unwrap_or_default()
    }

    async fn serve(self, mut stream: TcpStream) {
        let mut buffer = Vec::new();
        loop {
            let Some((head_end, length)) = read_request(&mut stream, &mut buffer).await else {
                return;
            };
            let request: Value =
                serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or(Value::Null);
            buffer.drain(..head_end + length);
            assert_eq!(
                request["method"], "tasks/get",
                "the poll source sends only tasks/get: {request}"
            );
            let task = request["params"]["taskId"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            self.seen
                .lock()
                .unwrap()
                .entry(task.clone())
                .or_default()
                .push(Instant::now());
            let reply = self
                .scripts
                .lock()
                .unwrap()
                .get_mut(&task)
                .and_then(VecDeque::pop_front)
                .unwrap_or(Reply::Working(Some(1000)));
            let response = respond(&request["id"], &task, &reply);
            if stream.write_all(response.as_bytes()).await.is_err() {
                return;
            }
        }
    }
}

/// Reads one request (head, then `Content-Length` bytes); returns where the body starts and
/// its length, or `None` at the end of the connection.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(usize, usize)> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..i]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buffer.len() >= i + 4 + length {
                return Some((i + 4, length));
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

fn respond(id: &Value, task: &str, reply: &Reply) -> String {
    let http = |status: &str, headers: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let mut result = json!({
        "resultType": "complete",
        "taskId": task,
        "status": "working",
        "createdAt": "2026-07-28T00:00:00Z",
        "lastUpdatedAt": "2026-07-28T00:00:00Z",
        "ttlMs": null,
    });
    match reply {
        Reply::Working(interval) => {
            if let Some(ms) = interval {
                result["pollIntervalMs"] = json!(ms);
            }
        }
        Reply::Completed => {
            result["status"] = json!("completed");
            result["pollIntervalMs"] = json!(100);
            result["result"] =
                json!({"content": [{"type": "text", "text": "done"}], "isError": false});
        }
        Reply::Status(code) => {
            return http(
                &format!("{code} Scripted"),
                "Content-Type: text/plain\r\n",
                "scripted failure",
            )
        }
        Reply::TooMany(secs) => {
            return http(
                "429 Too Many Requests",
                &format!("Retry-After: {secs}\r\n"),
                "",
            )
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    http("200 OK", "Content-Type: application/json\r\n", &body)
}

/// A poll source watching the scripted server as server row 1, with `floor`.
fn poll_source(url: &str, floor: Duration) -> (PollSource, mpsc::UnboundedReceiver<Observation>) {
    // No request may time out: under paused time a timeout would be a jump, not a wait.
    let options = ClientOptions {
        request_timeout: Duration::from_secs(24 * 3600),
        ..ClientOptions::default()
    };
    let client = Client::with_options(Endpoint::new(url), options, None).expect("a client");
    let links = Links::default();
    links.set(
        1,
        ServerLink {
            peer: countersign_core::mcp::Peer::Modern(client),
            floor,
            permits: Arc::new(Semaphore::new(8)),
        },
    );
    let (sink, observations) = mpsc::unbounded_channel();
    (PollSource::start(links, sink), observations)
}

fn watch(source: &PollSource, row: i64, task: &str, interval_ms: Option<u64>) {
    source.watch(Watch {
        task: row,
        server_id: 1,
        task_id: task.into(),
        poll_interval_ms: interval_ms,
        first: FirstCheck::AfterInterval,
    });
}

/// The next `n` observations.
async fn observe(
    observations: &mut mpsc::UnboundedReceiver<Observation>,
    n: usize,
) -> Vec<Observation> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(
            observations
                .recv()
                .await
                .expect("the poll source is running"),
        );
    }
    out
}

/// Request times as offsets from `start`, in ms.
fn offsets(start: Instant, times: &[Instant]) -> Vec<u128> {
    times.iter().map(|t| (*t - start).as_millis()).collect()
}

/// The wait kept equals the wait announced (tokio's timer fires on the next whole millisecond).
fn assert_kept(gap: Duration, announced: Duration, after: &str) {
    assert!(
        gap >= announced && gap - announced < ms(1),
        "after {after} the source announced a {announced:?} wait and waited {gap:?}"
    );
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn each_poll_comes_exactly_one_interval_after_the_last_answer_reread_every_time() {
    let script = vec![
        Reply::Working(Some(300)),
        Reply::Working(Some(1200)),
        Reply::Working(Some(50)),
        Reply::Working(Some(700)),
        Reply::Completed,
    ];
    let (server, url) = Scripted::start(&[("t1", script)]).await;
    let (source, mut observations) = poll_source(&url, Duration::ZERO);
    let start = Instant::now();
    watch(&source, 1, "t1", Some(500));

    let seen = observe(&mut observations, 5).await;
    assert!(
        seen.iter().all(|o| o.outcome.is_ok()),
        "every poll succeeded: {seen:?}"
    );
    // First poll one handle interval (500) in; then each answer's interval: 300, 1200, then 50
    // raised to the built-in 250 ms floor, then 700.
    assert_eq!(
        offsets(start, &server.seen("t1")),
        vec![500, 800, 2000, 2250, 2950],
        "polls at exactly the interval of the answer before"
    );

    // A terminal answer ends polling for good.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        server.seen("t1").len(),
        5,
        "no poll after the task completed"
    );
}

#[tokio::test(start_paused = true)]
async fn the_user_floor_wins_over_shorter_intervals_and_no_interval_means_the_default() {
    let script = vec![
        Reply::Working(Some(100)),
        Reply::Working(Some(400)),
        Reply::Working(None),
        Reply::Completed,
    ];
    let (server, url) = Scripted::start(&[("t1", script)]).await;
    let (source, mut observations) = poll_source(&url, ms(250));
    let start = Instant::now();
    watch(&source, 1, "t1", Some(100));

    observe(&mut observations, 4).await;
    // max(100, 250) = 250 (handle), max(100, 250) = 250, max(400, 250) = 400, then no interval:
    // the default 2 s.
    assert_eq!(
        offsets(start, &server.seen("t1")),
        vec![
            250,
            500,
            900,
            900 + countersign_core::scheduler::DEFAULT_INTERVAL.as_millis()
        ],
        "the floor, the server's interval and the default, whichever applies"
    );
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_exponentially_and_retry_after_is_a_floor() {
    let script = vec![
        Reply::Status(500),
        Reply::Status(500),
        Reply::Status(500),
        Reply::Working(Some(1000)),
        Reply::TooMany(5),
        Reply::Working(Some(1000)),
        Reply::Completed,
    ];
    let (server, url) = Scripted::start(&[("t1", script)]).await;
    let (source, mut observations) = poll_source(&url, Duration::ZERO);
    let start = Instant::now();
    watch(&source, 1, "t1", Some(1000));

    let seen = observe(&mut observations, 7).await;
    let times = server.seen("t1");
    assert_eq!(times.len(), 7, "one request per observation");
    assert_eq!(
        times[0] - start,
        ms(1000),
        "the first poll comes one interval in"
    );
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let failure = |i: usize| -> &CheckFailure {
        match &seen[i].outcome {
            Err(f) => f,
            Ok(task) => panic!("poll {i} must have failed, got {}", task.to_json()),
        }
    };
    // 500s: failure n waits interval · 2^(n-1) ± 20 %, never less than the interval.
    for (n, (low, high)) in [(1, (1000, 1200)), (2, (1600, 2400)), (3, (3200, 4800))] {
        let f = failure(n - 1);
        assert_eq!(
            (f.code, f.class, f.failures),
            ("http", ErrorClass::Transient, n as u32),
            "failure {n}: {f:?}"
        );
        let gap = gaps[n - 1];
        assert!(
            gap >= ms(low) && gap <= ms(high),
            "wait after failure {n} is {gap:?}, outside {low}..={high} ms"
        );
        assert_kept(gap, f.retry_in, &format!("failure {n}"));
    }
    // Success resets the streak: back to the interval.
    assert!(seen[3].outcome.is_ok());
    assert_eq!(
        gaps[3],
        ms(1000),
        "after a success, the normal interval again"
    );
    // 429 with Retry-After: 5 → a first failure, but no sooner than 5 s.
    let limited = failure(4);
    assert_eq!((limited.code, limited.failures), ("rate_limited", 1));
    assert_eq!(
        gaps[4],
        ms(5000),
        "Retry-After (5 s) is the floor of the backoff (≤ 1.2 s here)"
    );
    assert_kept(gaps[4], limited.retry_in, "the 429");
    assert_eq!(gaps[5], ms(1000));
    assert!(seen[6]
        .outcome
        .as_ref()
        .is_ok_and(|t| t.status().is_terminal()));
}

#[tokio::test(start_paused = true)]
async fn tasks_keep_independent_schedules_and_one_tasks_failures_do_not_slow_another() {
    let a = vec![Reply::Working(Some(300)); 40];
    let b = vec![
        Reply::Status(503),
        Reply::Status(503),
        Reply::Working(Some(700)),
        Reply::Working(Some(700)),
    ];
    let (server, url) = Scripted::start(&[("a", a), ("b", b)]).await;
    let (source, mut observations) = poll_source(&url, Duration::ZERO);
    let start = Instant::now();
    watch(&source, 1, "a", Some(300));
    watch(&source, 2, "b", Some(700));

    // Run until b has been polled four times.
    while server.seen("b").len() < 4 {
        observe(&mut observations, 1).await;
    }
    let a_times = offsets(start, &server.seen("a"));
    let expected_a: Vec<u128> = (1..=a_times.len() as u128).map(|n| n * 300).collect();
    assert_eq!(
        a_times, expected_a,
        "a is polled every 300 ms whatever happens to b"
    );
    let b_times = server.seen("b");
    assert_eq!(b_times[0] - start, ms(700));
    let gaps: Vec<Duration> = b_times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps[0] >= ms(700) && gaps[0] <= ms(840),
        "b's first backoff: {:?}",
        gaps[0]
    );
    assert!(
        gaps[1] >= ms(1120) && gaps[1] <= ms(1680),
        "b's second backoff: {:?}",
        gaps[1]
    );
    assert_eq!(gaps[2], ms(700), "b back to its interval after recovering");

    // Unwatching stops a task's polls; the other goes on.
    source.unwatch(1);
    let a_count = server.seen("a").len();
    let b_count = server.seen("b").len();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        server.seen("a").len(),
        a_count,
        "an unwatched task is not polled again"
    );
    assert!(
        server.seen("b").len() > b_count,
        "the other task is still polled"
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_identical_to_the_last_is_passed_on_once_and_again_after_a_failure_on_the_server()
{
    // a: the same `working` answer eight times, then completed. b (same server): one 503 at
    // 700 ms, then completed.
    let mut a = vec![Reply::Working(Some(300)); 8];
    a.push(Reply::Completed);
    let b = vec![Reply::Status(503), Reply::Completed];
    let (server, url) = Scripted::start(&[("a", a), ("b", b)]).await;
    let (source, mut observations) = poll_source(&url, Duration::ZERO);
    watch(&source, 1, "a", Some(300));
    watch(&source, 2, "b", Some(700));

    let mut seen: Vec<Observation> = Vec::new();
    let terminal = |seen: &[Observation], row: i64| {
        seen.iter()
            .any(|o| o.task == row && o.outcome.as_ref().is_ok_and(|t| t.status().is_terminal()))
    };
    while !(terminal(&seen, 1) && terminal(&seen, 2)) {
        seen.extend(observe(&mut observations, 1).await);
    }
    assert_eq!(server.seen("a").len(), 9, "a was polled nine times");
    let a_seen: Vec<&Observation> = seen.iter().filter(|o| o.task == 1).collect();
    // 300 ms: the first answer, passed on. 600: identical, not passed on. 700: b fails, so
    // 900's answer (identical again) is passed on: the engine must see the server answer
    // after a failure. 1200..2400: identical, not passed on. 2700: completed.
    assert_eq!(
        a_seen.len(),
        3,
        "a's answers passed on: the first, the one after b's failure, the last: {a_seen:?}"
    );
    assert!(a_seen.iter().all(|o| o.outcome.is_ok()));
    assert_eq!(
        source.stats().unchanged,
        6,
        "six of a's nine answers were identical to the one before and not passed on"
    );
    assert_eq!(source.stats().polls, 11, "every poll was still sent");
}
