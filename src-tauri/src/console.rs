//! The seam between the shell and the engine in `countersign-core`.
//!
//! [`Console`] is everything the window needs: the inbox, the task ledger, servers, tools, the
//! audit log, and one stream of [`ConsoleEvent`]s. The shell forwards those events to the webview,
//! to desktop notifications and to the tray; it never talks to an MCP server itself.
//!
//! Until the core engine is wired, [`Standalone`] answers: an in-memory inbox (dedup by key,
//! answer once) that can be seeded from a JSON file named by `COUNTERSIGN_SEED` (used by the
//! screenshot and E2E runs). It never reaches a server, so calls that need one return
//! `Unavailable`.

use crate::ipc::{
    AuditEntry, AuditQuery, CommandError, ErrorCode, InputAnswered, InputRequestView,
    InputResponse, ServerView, TaskDetail, TaskStatus, TaskView, ToolCallOutcome, ToolCallRequest,
    ToolView,
};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use tokio::sync::broadcast;

/// Result of a console call.
pub type Result<T, E = CommandError> = std::result::Result<T, E>;

/// A fact the engine announces; the shell fans it out.
#[derive(Debug, Clone, PartialEq)]
pub enum ConsoleEvent {
    /// A new input reached the inbox (each key at most once).
    InputRequested(InputRequestView),
    /// An input left the inbox.
    InputAnswered(InputAnswered),
    /// A task changed.
    TaskUpdated(TaskView),
    /// The audit log grew.
    AuditAppended(AuditEntry),
}

/// What the shell needs from the engine.
#[async_trait::async_trait]
pub trait Console: Send + Sync + 'static {
    /// A short name for `app_info`.
    fn engine_name(&self) -> &'static str;
    /// Pending inputs, oldest first.
    async fn input_list(&self) -> Result<Vec<InputRequestView>>;
    /// Answers one input (exactly once; `AlreadyAnswered` after that).
    async fn input_answer(&self, key: &str, response: InputResponse) -> Result<()>;
    /// Tasks in the ledger, newest first.
    async fn task_list(&self) -> Result<Vec<TaskView>>;
    /// One task with its outcome and timeline.
    async fn task_get(&self, task_id: &str) -> Result<TaskDetail>;
    /// Requests cooperative cancellation.
    async fn task_cancel(&self, task_id: &str) -> Result<()>;
    /// Configured servers.
    async fn server_list(&self) -> Result<Vec<ServerView>>;
    /// Tools of one server.
    async fn tool_list(&self, server_id: &str) -> Result<Vec<ToolView>>;
    /// Calls a tool; a task or inbox entries it creates are persisted before this returns.
    async fn tool_call(&self, request: ToolCallRequest) -> Result<ToolCallOutcome>;
    /// Audit entries after a cursor.
    async fn audit_list(&self, query: AuditQuery) -> Result<Vec<AuditEntry>>;
    /// Every event from now on. A lagging receiver must re-read the lists.
    fn subscribe(&self) -> broadcast::Receiver<ConsoleEvent>;
}

/// Contents of a `COUNTERSIGN_SEED` file.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Seed {
    /// Servers to list.
    pub servers: Vec<ServerView>,
    /// Tasks to list.
    pub tasks: Vec<TaskView>,
    /// Inputs to put in the inbox.
    pub inputs: Vec<InputRequestView>,
}

#[derive(Default)]
struct Book {
    pending: BTreeMap<u64, InputRequestView>,
    seen: HashSet<String>,
    next: u64,
    tasks: Vec<TaskView>,
    servers: Vec<ServerView>,
    audit: Vec<AuditEntry>,
}

/// The in-memory console used until the engine is wired (see the module docs).
pub struct Standalone {
    book: Mutex<Book>,
    events: broadcast::Sender<ConsoleEvent>,
    now: Box<dyn Fn() -> String + Send + Sync>,
}

fn unavailable() -> CommandError {
    CommandError::new(
        ErrorCode::Unavailable,
        "No engine is connected: this build runs standalone and cannot reach servers yet.",
    )
}

fn poisoned() -> CommandError {
    CommandError::new(ErrorCode::Internal, "console state lock poisoned")
}

impl Standalone {
    /// An empty console with the given clock (RFC 3339 strings).
    pub fn new(now: impl Fn() -> String + Send + Sync + 'static) -> Self {
        let (events, _) = broadcast::channel(1024);
        Self {
            book: Mutex::new(Book::default()),
            events,
            now: Box::new(now),
        }
    }

    /// Adds servers, tasks and inputs; inputs go through [`Standalone::input_push`] (dedup).
    pub fn seed(&self, seed: Seed) -> Result<()> {
        {
            let mut book = self.book.lock().map_err(|_| poisoned())?;
            book.servers.extend(seed.servers);
            book.tasks.extend(seed.tasks);
        }
        for input in seed.inputs {
            self.input_push(input)?;
        }
        Ok(())
    }

    /// Reads a seed file.
    pub fn read_seed(path: &std::path::Path) -> Result<Seed> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CommandError::new(
                ErrorCode::InvalidInput,
                format!("cannot read seed {}: {e}", path.display()),
            )
        })?;
        serde_json::from_str(&text).map_err(|e| {
            CommandError::new(
                ErrorCode::InvalidInput,
                format!("bad seed {}: {e}", path.display()),
            )
        })
    }

    /// Puts an input in the inbox unless its key was ever seen; returns whether it was new.
    pub fn input_push(&self, input: InputRequestView) -> Result<bool> {
        let mut book = self.book.lock().map_err(|_| poisoned())?;
        if !book.seen.insert(input.key.clone()) {
            return Ok(false);
        }
        let seq = book.next;
        book.next += 1;
        book.pending.insert(seq, input.clone());
        let entry = self.audit(
            &mut book,
            "input_requested",
            Some(&input),
            format!("{} · {} asks for input", input.server_name, input.tool_name),
        );
        drop(book);
        let _ = self.events.send(ConsoleEvent::InputRequested(input));
        let _ = self.events.send(ConsoleEvent::AuditAppended(entry));
        Ok(true)
    }

    fn audit(
        &self,
        book: &mut Book,
        kind: &str,
        input: Option<&InputRequestView>,
        summary: String,
    ) -> AuditEntry {
        let entry = AuditEntry {
            seq: book.audit.len() as u64 + 1,
            at: (self.now)(),
            kind: kind.to_owned(),
            server_id: input.map(|i| i.server_id.clone()),
            task_id: input.and_then(|i| i.task_id.clone()),
            summary,
        };
        book.audit.push(entry.clone());
        entry
    }
}

#[async_trait::async_trait]
impl Console for Standalone {
    fn engine_name(&self) -> &'static str {
        "standalone"
    }

    async fn input_list(&self) -> Result<Vec<InputRequestView>> {
        Ok(self
            .book
            .lock()
            .map_err(|_| poisoned())?
            .pending
            .values()
            .cloned()
            .collect())
    }

    async fn input_answer(&self, key: &str, response: InputResponse) -> Result<()> {
        let mut book = self.book.lock().map_err(|_| poisoned())?;
        let Some(seq) = book
            .pending
            .iter()
            .find(|(_, i)| i.key == key)
            .map(|(s, _)| *s)
        else {
            let code = if book.seen.contains(key) {
                ErrorCode::AlreadyAnswered
            } else {
                ErrorCode::NotFound
            };
            return Err(CommandError::new(code, format!("no pending input {key}")));
        };
        let Some(input) = book.pending.remove(&seq) else {
            return Err(poisoned());
        };
        let action = response.action();
        let entry = self.audit(
            &mut book,
            "input_answered",
            Some(&input),
            format!(
                "{action} · {} · {} (standalone: recorded, not sent)",
                input.server_name, input.tool_name
            ),
        );
        drop(book);
        let _ = self.events.send(ConsoleEvent::InputAnswered(InputAnswered {
            key: key.to_owned(),
            outcome: action.to_owned(),
        }));
        let _ = self.events.send(ConsoleEvent::AuditAppended(entry));
        Ok(())
    }

    async fn task_list(&self) -> Result<Vec<TaskView>> {
        let book = self.book.lock().map_err(|_| poisoned())?;
        let mut tasks = book.tasks.clone();
        for t in &mut tasks {
            t.pending_inputs = book
                .pending
                .values()
                .filter(|i| i.task_id.as_deref() == Some(&t.task_id))
                .count() as u32;
        }
        tasks.sort_by(|a, b| b.created_at.cmp(&a.created_at));
        Ok(tasks)
    }

    async fn task_get(&self, task_id: &str) -> Result<TaskDetail> {
        let task = self
            .task_list()
            .await?
            .into_iter()
            .find(|t| t.task_id == task_id)
            .ok_or_else(|| CommandError::new(ErrorCode::NotFound, format!("no task {task_id}")))?;
        let book = self.book.lock().map_err(|_| poisoned())?;
        let timeline = book
            .audit
            .iter()
            .filter(|e| e.task_id.as_deref() == Some(task_id))
            .cloned()
            .collect();
        Ok(TaskDetail {
            task,
            outcome: None,
            timeline,
        })
    }

    async fn task_cancel(&self, task_id: &str) -> Result<()> {
        let book = self.book.lock().map_err(|_| poisoned())?;
        match book.tasks.iter().find(|t| t.task_id == task_id) {
            None => Err(CommandError::new(
                ErrorCode::NotFound,
                format!("no task {task_id}"),
            )),
            Some(t)
                if matches!(
                    t.status,
                    TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
                ) =>
            {
                Err(CommandError::new(
                    ErrorCode::InvalidInput,
                    "the task already ended",
                ))
            }
            Some(_) => Err(unavailable()),
        }
    }

    async fn server_list(&self) -> Result<Vec<ServerView>> {
        Ok(self.book.lock().map_err(|_| poisoned())?.servers.clone())
    }

    async fn tool_list(&self, _server_id: &str) -> Result<Vec<ToolView>> {
        Err(unavailable())
    }

    async fn tool_call(&self, _request: ToolCallRequest) -> Result<ToolCallOutcome> {
        Err(unavailable())
    }

    async fn audit_list(&self, query: AuditQuery) -> Result<Vec<AuditEntry>> {
        let book = self.book.lock().map_err(|_| poisoned())?;
        let after = query.after.unwrap_or(0);
        Ok(book
            .audit
            .iter()
            .filter(|e| e.seq > after)
            .take(query.limit as usize)
            .cloned()
            .collect())
    }

    fn subscribe(&self) -> broadcast::Receiver<ConsoleEvent> {
        self.events.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc::InputKind;
    use serde_json::json;

    fn input(key: &str) -> InputRequestView {
        InputRequestView {
            key: key.into(),
            task_id: Some("t1".into()),
            server_id: "s1".into(),
            server_name: "billing".into(),
            tool_name: "deploy".into(),
            received_at: "2026-12-02T09:36:04Z".into(),
            request: InputKind::Form {
                message: "Go?".into(),
                requested_schema: json!({"type":"object"}),
            },
        }
    }

    fn console() -> Standalone {
        Standalone::new(|| "2026-12-02T09:36:05Z".to_owned())
    }

    #[tokio::test]
    async fn a_key_enters_the_inbox_once_even_after_it_was_answered() {
        let c = console();
        assert!(c.input_push(input("k1")).unwrap());
        assert!(
            !c.input_push(input("k1")).unwrap(),
            "a re-polled key must not show twice"
        );
        c.input_answer("k1", InputResponse::Decline).await.unwrap();
        assert!(
            !c.input_push(input("k1")).unwrap(),
            "an answered key must never come back"
        );
        assert!(c.input_list().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn answering_twice_says_already_answered() {
        let c = console();
        c.input_push(input("k1")).unwrap();
        c.input_answer(
            "k1",
            InputResponse::Accept {
                content: Some(Default::default()),
            },
        )
        .await
        .unwrap();
        let err = c
            .input_answer("k1", InputResponse::Decline)
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::AlreadyAnswered);
        assert_eq!(
            c.input_answer("nope", InputResponse::Cancel)
                .await
                .unwrap_err()
                .code,
            ErrorCode::NotFound
        );
    }

    #[tokio::test]
    async fn events_announce_requests_answers_and_audit() {
        let c = console();
        let mut rx = c.subscribe();
        c.input_push(input("k1")).unwrap();
        c.input_answer("k1", InputResponse::Decline).await.unwrap();
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert!(matches!(got[0], ConsoleEvent::InputRequested(ref i) if i.key == "k1"));
        assert!(matches!(got[2], ConsoleEvent::InputAnswered(ref a) if a.outcome == "decline"));
        let audit = c
            .audit_list(AuditQuery {
                after: Some(1),
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(audit.len(), 1, "cursor excludes seq 1");
        assert_eq!(audit[0].kind, "input_answered");
    }
}
