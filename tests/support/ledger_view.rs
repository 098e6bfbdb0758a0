//! The ledger file read directly with SQLite, as any other process would see it, and the
//! invariants every task's record must keep whatever crashed or failed on the way.
//!
//! Rows are read into plain structs with JSON columns as `serde_json::Value`, so a test states
//! what it expects of the stored bytes, not of the core's own types.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

/// The ledger's file name inside a data directory.
pub const LEDGER_FILE: &str = "ledger.sqlite3";

/// A read-only view of `<data dir>/ledger.sqlite3`.
pub struct LedgerView {
    conn: Connection,
    path: PathBuf,
}

/// One timeline event.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: i64,
    /// Unix ms, written by whichever process appended it.
    pub at: i64,
    pub task: Option<i64>,
    pub server_id: Option<i64>,
    pub kind: String,
    pub via: Option<String>,
    /// The payload (`kind` included).
    pub data: Value,
}

impl Event {
    /// A string field of the payload.
    pub fn str(&self, field: &str) -> Option<&str> {
        self.data.get(field).and_then(Value::as_str)
    }
}

/// One task row.
#[derive(Debug, Clone)]
pub struct TaskRow {
    pub id: i64,
    pub server: String,
    pub task_id: String,
    pub tool: Option<String>,
    pub origin: String,
    pub status: String,
    pub status_message: Option<String>,
    /// The task as last observed.
    pub state: Value,
    pub ttl_ms: Option<i64>,
    pub finished_at: Option<i64>,
    pub poll_error: Option<String>,
}

impl TaskRow {
    /// The text content of the stored result (completed tasks).
    pub fn result_text(&self) -> String {
        self.state
            .pointer("/result/content")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }
}

/// One question row.
#[derive(Debug, Clone)]
pub struct InputRow {
    pub task: i64,
    pub key: String,
    pub state: String,
    pub answer: Option<Value>,
}

/// One outbox row.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub id: i64,
    pub task: i64,
    pub kind: String,
    pub payload: Option<Value>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub acknowledged_at: Option<i64>,
    pub abandoned_at: Option<i64>,
}

/// One call intent row.
#[derive(Debug, Clone)]
pub struct IntentRow {
    pub id: i64,
    pub server_id: i64,
    pub tool: String,
    pub state: String,
    pub task: Option<i64>,
}

fn json(text: Option<String>) -> Option<Value> {
    text.map(|t| {
        serde_json::from_str(&t)
            .unwrap_or_else(|e| panic!("the ledger holds malformed JSON ({e}): {t}"))
    })
}

impl LedgerView {
    /// Opens the ledger of `data_dir`, waiting (10 s at most) for a process to create it.
    pub fn open(data_dir: &Path) -> LedgerView {
        let path = data_dir.join(LEDGER_FILE);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !path.exists() {
            assert!(
                Instant::now() < deadline,
                "no ledger appeared at {}",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Read-write flags only so SQLite can use the WAL index; `query_only` forbids writes.
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .unwrap_or_else(|e| panic!("cannot open the ledger {}: {e}", path.display()));
        conn.busy_timeout(Duration::from_secs(10))
            .expect("busy timeout");
        conn.pragma_update(None, "query_only", true)
            .expect("query_only");
        // The file exists before its first migration commits: wait for the schema.
        while conn
            .pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))
            .unwrap_or(0)
            < 1
        {
            assert!(
                Instant::now() < deadline,
                "the ledger {} was never migrated",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        LedgerView { conn, path }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole timeline, in id order.
    pub fn events(&self) -> Vec<Event> {
        self.query_events(
            "SELECT id, at, task, server_id, kind, via, data FROM events ORDER BY id",
            [],
        )
    }

    /// One task's timeline, in id order.
    pub fn events_for(&self, task: i64) -> Vec<Event> {
        self.query_events("SELECT id, at, task, server_id, kind, via, data FROM events WHERE task = ?1 ORDER BY id", [task])
    }

    /// Events of one kind, in id order.
    pub fn events_of(&self, kind: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.kind == kind)
            .collect()
    }

    fn query_events<P: rusqlite::Params>(&self, sql: &str, params: P) -> Vec<Event> {
        let mut stmt = self.conn.prepare(sql).expect("prepare events query");
        let rows = stmt
            .query_map(params, |r| {
                Ok(Event {
                    id: r.get(0)?,
                    at: r.get(1)?,
                    task: r.get(2)?,
                    server_id: r.get(3)?,
                    kind: r.get(4)?,
                    via: r.get(5)?,
                    data: json(Some(r.get::<_, String>(6)?)).unwrap_or(Value::Null),
                })
            })
            .expect("query events");
        rows.collect::<Result<_, _>>().expect("read events")
    }

    /// Every task, in row order.
    pub fn tasks(&self) -> Vec<TaskRow> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT t.id, s.name, t.task_id, t.tool, t.origin, t.status, t.status_message, t.state, t.ttl_ms,
                        t.finished_at, t.poll_error
                 FROM tasks t JOIN servers s ON s.id = t.server_id ORDER BY t.id",
            )
            .expect("prepare tasks query");
        let rows = stmt
            .query_map([], |r| {
                Ok(TaskRow {
                    id: r.get(0)?,
                    server: r.get(1)?,
                    task_id: r.get(2)?,
                    tool: r.get(3)?,
                    origin: r.get(4)?,
                    status: r.get(5)?,
                    status_message: r.get(6)?,
                    state: json(Some(r.get::<_, String>(7)?)).unwrap_or(Value::Null),
                    ttl_ms: r.get(8)?,
                    finished_at: r.get(9)?,
                    poll_error: r.get(10)?,
                })
            })
            .expect("query tasks");
        rows.collect::<Result<_, _>>().expect("read tasks")
    }

    /// The task with this server task id, if recorded.
    pub fn task(&self, task_id: &str) -> Option<TaskRow> {
        self.tasks().into_iter().find(|t| t.task_id == task_id)
    }

    /// The task with this server task id; panics if it is not recorded.
    pub fn task_expect(&self, task_id: &str) -> TaskRow {
        self.task(task_id)
            .unwrap_or_else(|| panic!("task {task_id} is not in the ledger"))
    }

    /// A task's questions, in order of appearance.
    pub fn inputs(&self, task: i64) -> Vec<InputRow> {
        let mut stmt = self
            .conn
            .prepare("SELECT task, key, state, answer FROM inputs WHERE task = ?1 ORDER BY id")
            .expect("prepare inputs query");
        let rows = stmt
            .query_map([task], |r| {
                Ok(InputRow {
                    task: r.get(0)?,
                    key: r.get(1)?,
                    state: r.get(2)?,
                    answer: json(r.get(3)?),
                })
            })
            .expect("query inputs");
        rows.collect::<Result<_, _>>().expect("read inputs")
    }

    /// A task's outbox items, in order.
    pub fn outbox(&self, task: i64) -> Vec<OutboxRow> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, task, kind, payload, attempts, last_error, acknowledged_at, abandoned_at
                 FROM outbox WHERE task = ?1 ORDER BY id",
            )
            .expect("prepare outbox query");
        let rows = stmt
            .query_map([task], |r| {
                Ok(OutboxRow {
                    id: r.get(0)?,
                    task: r.get(1)?,
                    kind: r.get(2)?,
                    payload: json(r.get(3)?),
                    attempts: r.get(4)?,
                    last_error: r.get(5)?,
                    acknowledged_at: r.get(6)?,
                    abandoned_at: r.get(7)?,
                })
            })
            .expect("query outbox");
        rows.collect::<Result<_, _>>().expect("read outbox")
    }

    /// Every call intent, in order.
    pub fn intents(&self) -> Vec<IntentRow> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, server_id, tool, state, task FROM call_intents ORDER BY id")
            .expect("prepare intents query");
        let rows = stmt
            .query_map([], |r| {
                Ok(IntentRow {
                    id: r.get(0)?,
                    server_id: r.get(1)?,
                    tool: r.get(2)?,
                    state: r.get(3)?,
                    task: r.get(4)?,
                })
            })
            .expect("query intents");
        rows.collect::<Result<_, _>>().expect("read intents")
    }

    /// A server's row id by name.
    pub fn server_id(&self, name: &str) -> i64 {
        self.conn
            .query_row("SELECT id FROM servers WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .unwrap_or_else(|e| panic!("no server {name:?} in the ledger: {e}"))
    }

    /// A readable dump of a task's timeline, for assertion messages.
    pub fn describe(&self, task: i64) -> String {
        self.events_for(task)
            .iter()
            .map(|e| format!("  #{} {} {} {}", e.id, e.at, e.kind, e.data))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Polls `probe` every 20 ms until it returns `Some`, for at most `timeout`; panics saying
/// `what` was awaited (and the last `context()`) otherwise.
pub async fn wait_for<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl LedgerView {
    /// Waits (at most `timeout`) until task `task_id` has a pending question; its key.
    pub async fn pending_question(&self, task_id: &str, timeout: Duration) -> String {
        wait_for(
            &format!("a pending question on task {task_id}"),
            timeout,
            || {
                let task = self.task(task_id)?;
                self.inputs(task.id)
                    .into_iter()
                    .find(|q| q.state == "pending")
                    .map(|q| q.key)
            },
        )
        .await
    }

    /// Waits (at most `timeout`) until task `task_id` is finished in the ledger.
    pub async fn finished(&self, task_id: &str, timeout: Duration) -> TaskRow {
        wait_for(
            &format!("task {task_id} to finish in the ledger"),
            timeout,
            || self.task(task_id).filter(|t| t.finished_at.is_some()),
        )
        .await
    }

    /// How many events of `kind` task row `task` has.
    pub fn count_kind(&self, task: i64, kind: &str) -> usize {
        self.events_for(task)
            .iter()
            .filter(|e| e.kind == kind)
            .count()
    }
}

/// Kinds that end a task's life in the ledger.
pub const TERMINAL_KINDS: [&str; 3] = ["task_finished", "task_expired", "task_lost"];
/// Kinds that may follow the terminal event: late outcomes of deliveries made before.
const AFTER_END: [&str; 5] = [
    "update_acknowledged",
    "cancel_acknowledged",
    "update_failed",
    "cancel_failed",
    "delivery_retrying",
];

/// What [`assert_sound_timeline`] found, for further assertions.
#[derive(Debug)]
pub struct Timeline {
    pub events: Vec<Event>,
    /// The one terminal event.
    pub end: Event,
    /// Questions by key: the one `input_requested` event of each.
    pub asked: BTreeMap<String, Event>,
    /// Answers by key: the one `input_answered` event of each.
    pub answered: BTreeMap<String, Event>,
}

impl Timeline {
    /// Events of one kind.
    pub fn of(&self, kind: &str) -> Vec<&Event> {
        self.events.iter().filter(|e| e.kind == kind).collect()
    }
}

/// Checks the invariants of a finished task's record and returns its timeline:
/// - the timeline opens with exactly one `task_created` and has exactly one terminal event
///   (`task_finished`, `task_expired` or `task_lost`), after which only late delivery
///   acknowledgements may follow; times never go backwards;
/// - status changes chain: each `task_updated` starts from the status the previous one (or the
///   creation) left, and no two consecutive ones say the same thing;
/// - every question key is requested once, has one `inputs` row, is answered at most once, and
///   the recorded answer is exactly what the outbox sends for that key, in one outbox item;
/// - the task row agrees with the terminal event.
pub fn assert_sound_timeline(view: &LedgerView, task: &TaskRow) -> Timeline {
    let events = view.events_for(task.id);
    let dump = || {
        format!(
            "task #{} {} ({}) timeline:\n{}",
            task.id,
            task.task_id,
            task.server,
            view.describe(task.id)
        )
    };
    assert!(!events.is_empty(), "task {} has no timeline", task.task_id);

    let created: Vec<&Event> = events.iter().filter(|e| e.kind == "task_created").collect();
    assert_eq!(
        created.len(),
        1,
        "exactly one task_created per task; {}",
        dump()
    );
    assert_eq!(
        events[0].kind,
        "task_created",
        "the timeline must open with task_created; {}",
        dump()
    );
    for pair in events.windows(2) {
        assert!(
            pair[0].at <= pair[1].at,
            "event times must not go backwards; {}",
            dump()
        );
    }

    let ends: Vec<&Event> = events
        .iter()
        .filter(|e| TERMINAL_KINDS.contains(&e.kind.as_str()))
        .collect();
    assert_eq!(
        ends.len(),
        1,
        "exactly one terminal event per task; {}",
        dump()
    );
    let end = ends[0].clone();
    for late in events.iter().filter(|e| e.id > end.id) {
        assert!(
            AFTER_END.contains(&late.kind.as_str()),
            "nothing but late delivery acknowledgements may follow the end ({} did); {}",
            late.kind,
            dump()
        );
    }

    // Status changes chain, without repeats.
    let mut status = created[0].str("status").unwrap_or_default().to_owned();
    let mut last: Option<(String, Option<String>)> = None;
    for update in events.iter().filter(|e| e.kind == "task_updated") {
        let previous = update.str("previous_status").unwrap_or_default();
        assert_eq!(
            previous,
            status,
            "task_updated #{} must start where the last change left the task; {}",
            update.id,
            dump()
        );
        let now = (
            update.str("status").unwrap_or_default().to_owned(),
            update.str("status_message").map(str::to_owned),
        );
        assert_ne!(
            last.as_ref(),
            Some(&now),
            "task_updated #{} repeats the previous change; {}",
            update.id,
            dump()
        );
        status = now.0.clone();
        last = Some(now);
    }
    match end.kind.as_str() {
        "task_finished" => {
            let finished = end.str("status").unwrap_or_default();
            assert_eq!(
                finished,
                task.status,
                "the row's status must be the finish's; {}",
                dump()
            );
        }
        "task_expired" => assert_eq!(task.status, "expired", "{}", dump()),
        "task_lost" => assert_eq!(task.status, "lost", "{}", dump()),
        _ => unreachable!(),
    }
    assert!(
        task.finished_at.is_some(),
        "a finished task has finished_at; {}",
        dump()
    );

    // Questions: once each, one row each, answered at most once, answer == outbox payload.
    let mut asked: BTreeMap<String, Event> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "input_requested") {
        let key = e.str("key").unwrap_or_default().to_owned();
        assert!(
            asked.insert(key.clone(), e.clone()).is_none(),
            "question {key} was requested twice; {}",
            dump()
        );
    }
    let inputs = view.inputs(task.id);
    let mut rows: HashMap<&str, &InputRow> = HashMap::new();
    for row in &inputs {
        assert!(
            rows.insert(row.key.as_str(), row).is_none(),
            "two inputs rows for key {}; {}",
            row.key,
            dump()
        );
    }
    assert_eq!(
        rows.keys()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        asked.keys().map(String::as_str).collect(),
        "one inputs row per requested key; {}",
        dump()
    );
    let mut answered: BTreeMap<String, Event> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "input_answered") {
        let key = e.str("key").unwrap_or_default().to_owned();
        assert!(
            answered.insert(key.clone(), e.clone()).is_none(),
            "question {key} was answered twice; {}",
            dump()
        );
        let row = rows
            .get(key.as_str())
            .unwrap_or_else(|| panic!("answer to unknown key {key}; {}", dump()));
        assert_eq!(
            row.answer.as_ref(),
            e.data.get("response"),
            "the inputs row holds the answer of the event; {}",
            dump()
        );
    }
    let outbox = view.outbox(task.id);
    for (key, event) in &answered {
        let carrying: Vec<&OutboxRow> = outbox
            .iter()
            .filter(|o| {
                o.kind == "update" && o.payload.as_ref().is_some_and(|p| p.get(key).is_some())
            })
            .collect();
        assert_eq!(
            carrying.len(),
            1,
            "answer {key} is queued exactly once; {}",
            dump()
        );
        assert_eq!(
            carrying[0].payload.as_ref().and_then(|p| p.get(key)),
            event.data.get("response"),
            "the outbox sends exactly the recorded answer for {key}; {}",
            dump()
        );
    }
    Timeline {
        events,
        end,
        asked,
        answered,
    }
}
