//! A console (with its engine) on a fresh ledger, one registered server, and the timeline read
//! back: what the push/poll tests drive. Calls and answers go through the core's `Console`, the
//! one the CLI and the app use.
//!
//! Every wait panics with the task's timeline when the expected event does not come within
//! [`DEADLINE`]: a hung test is a failure that says why.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use countersign_core::console::view::{InputResponse, ServerAddRequest};
use countersign_core::console::{CallStep, Console, Setup, Start};
use countersign_core::engine::{Engine, EngineConfig};
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::ledger::tasks::TaskRecord;
use countersign_core::ledger::{events, EventKind, StoredEvent, Via};
use countersign_core::mcp::ToolCall;
use countersign_demo::{DemoServer, TaskChange};
use serde_json::{Map, Value};

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let path = std::env::temp_dir().join(format!(
            "countersign-{label}-{}-{nanos:x}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A console running its engine, with one server registered as `demo`.
pub struct Rig {
    pub console: Console,
    pub server: ServerRecord,
    _dir: TempDir,
}

impl Rig {
    /// Starts an engine (push on or off) on a new ledger and registers `url`.
    pub async fn start(url: &str, push: bool) -> Rig {
        Self::start_with(url, |config| config.push = push).await
    }

    /// Starts an engine with settings adjusted by `adjust` and registers `url`.
    pub async fn start_with(url: &str, adjust: impl FnOnce(&mut EngineConfig)) -> Rig {
        let dir = TempDir::new("push");
        let mut setup = Setup::new(&dir.0);
        setup.start = Start::Now;
        adjust(&mut setup.config);
        let console = Console::open(setup)
            .await
            .unwrap_or_else(|e| panic!("the console and its engine must start: {e}"));
        assert!(
            console.runs_engine(),
            "no other engine runs on a fresh ledger"
        );
        let server = console
            .add_server(ServerAddRequest {
                name: "demo".into(),
                url: url.to_owned(),
                token: None,
                discover: false,
            })
            .await
            .unwrap_or_else(|e| panic!("the server must register: {e}"));
        Rig {
            console,
            server,
            _dir: dir,
        }
    }

    /// This process's engine.
    pub fn engine(&self) -> &Engine {
        self.console
            .engine()
            .unwrap_or_else(|| panic!("the rig's console runs its engine"))
    }

    /// Calls `tool` through the console; panics unless it creates a task.
    pub async fn call(&self, tool: &str, arguments: Value) -> TaskRecord {
        let arguments: Map<String, Value> = match arguments {
            Value::Object(map) => map,
            other => panic!("arguments must be an object, got {other}"),
        };
        let step = self
            .console
            .call(self.server.id, ToolCall::new(tool, Some(arguments)))
            .await
            .unwrap_or_else(|e| panic!("tools/call {tool} must succeed: {e}"));
        match step {
            CallStep::Task(record) => record,
            other => panic!("{tool} must create a task, got {other:?}"),
        }
    }

    /// Records an answer and lets the engine deliver it.
    pub async fn answer(&self, row: i64, key: &str, response: Value) {
        let response: InputResponse = serde_json::from_value(response)
            .unwrap_or_else(|e| panic!("{key}: not an elicitation response: {e}"));
        self.console
            .answer(row, key, &response)
            .await
            .unwrap_or_else(|e| panic!("the answer to {key} must be recorded: {e}"));
    }

    /// The task's timeline, oldest first.
    pub fn timeline(&self, row: i64) -> Vec<StoredEvent> {
        self.console
            .ledger()
            .read(|c| events::for_task(c, row))
            .unwrap_or_else(|e| panic!("the timeline of #{row} must be readable: {e}"))
    }

    /// Waits until the task's timeline has an event matching `found`; returns it.
    pub async fn wait_for(
        &self,
        row: i64,
        what: &str,
        found: impl Fn(&StoredEvent) -> bool,
    ) -> StoredEvent {
        let started = Instant::now();
        loop {
            let timeline = self.timeline(row);
            if let Some(event) = timeline.iter().find(|e| found(e)) {
                return event.clone();
            }
            if started.elapsed() > DEADLINE {
                panic!(
                    "task #{row}: no {what} within {DEADLINE:?}; timeline:\n{}",
                    describe(&timeline)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the task's `task_finished`.
    pub async fn wait_finished(&self, row: i64) -> StoredEvent {
        self.wait_for(row, "task_finished", |e| {
            matches!(e.kind, EventKind::TaskFinished { .. })
        })
        .await
    }

    /// Waits until `condition` holds (checked every 20 ms).
    pub async fn wait_until(&self, what: &str, condition: impl Fn(&Rig) -> bool) {
        let started = Instant::now();
        while !condition(self) {
            if started.elapsed() > DEADLINE {
                panic!("{what} did not happen within {DEADLINE:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn shutdown(self) {
        let Rig { console, _dir, .. } = self;
        console.close().await;
        drop(_dir);
    }
}

/// `(status, statusMessage)` of every `task_updated`, in timeline order.
pub fn updates(timeline: &[StoredEvent]) -> Vec<(String, Option<String>)> {
    timeline
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TaskUpdated {
                status,
                status_message,
                ..
            } => Some((status.to_string(), status_message.clone())),
            _ => None,
        })
        .collect()
}

/// The `via` of every event that reports server state (updates, questions, the finish).
pub fn state_vias(timeline: &[StoredEvent]) -> Vec<Via> {
    timeline
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::TaskUpdated { .. }
                    | EventKind::InputRequested { .. }
                    | EventKind::TaskFinished { .. }
            )
        })
        .map(|e| e.via)
        .collect()
}

/// The `(status, statusMessage)` changes the server made after creating the task, the way the
/// ledger records them: consecutive duplicates (payload-only changes) dropped.
fn server_updates(changes: &[TaskChange]) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    let mut previous: Option<(String, Option<String>)> = None;
    for change in changes {
        let status = serde_json::to_value(change.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let now = (status, change.status_message.clone());
        if let Some(before) = &previous {
            if *before != now {
                out.push(now.clone());
            }
        }
        previous = Some(now);
    }
    out
}

/// Asserts that `timeline`, the ledger's of the task `task_id`, holds every change the demo
/// `server` made to it, in order (`why`: what that shows, for the message); returns those
/// changes as [`server_updates`] reads them.
pub fn assert_every_change(
    server: &DemoServer,
    task_id: &str,
    timeline: &[StoredEvent],
    why: &str,
) -> Vec<(String, Option<String>)> {
    let changes = server
        .task_changes(task_id)
        .expect("the server knows the task");
    let expected = server_updates(&changes);
    let why = if why.is_empty() {
        String::new()
    } else {
        format!("{why}; ")
    };
    assert_eq!(
        updates(timeline),
        expected,
        "{why}timeline:\n{}",
        describe(timeline)
    );
    expected
}

/// One line per event, for failure messages.
pub fn describe(timeline: &[StoredEvent]) -> String {
    timeline
        .iter()
        .map(|e| {
            format!(
                "  #{} {:?} {}",
                e.id,
                e.via,
                serde_json::to_string(&e.kind).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
