//! What a window follows: the ledger's events by cursor, what each batch changed, and the inbox
//! with its notification bookkeeping.
//!
//! Reading by cursor (`events.id > cursor`) rather than only listening to this process's
//! broadcast means writes by other processes (the CLI answering, another engine polling) reach the
//! window too, and a slow window never loses an event; this process's commits wake the read at
//! once ([`Ledger::events_after`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use super::notifications::notification_id;
use super::view::InputRequestView;
use super::{Console, Result};
use crate::ledger::events::{self, EventKind, StoredEvent};
use crate::ledger::Ledger;

/// How often the ledger is read again for other processes' writes.
const POLL_LEDGER: Duration = Duration::from_millis(250);
/// How long one read waits for news before it looks again (no news: keep waiting).
const WAIT: Duration = Duration::from_secs(60);
/// After a failed read, the wait before the next one.
const RETRY: Duration = Duration::from_secs(1);
/// Most events per batch.
pub const BATCH: usize = 512;

/// The ledger's events from a cursor on, in batches.
pub struct Feed {
    ledger: Arc<Ledger>,
    cursor: i64,
}

/// One batch of events and what it changed.
#[derive(Debug, Default)]
pub struct Changes {
    /// The events, oldest first.
    pub events: Vec<StoredEvent>,
    /// Rows of the tasks they concern.
    pub tasks: BTreeSet<i64>,
    /// Whether the server list changed (added, updated, discovered, reachability, removed).
    pub servers: bool,
    /// Whether the inbox may have changed (a question came, was answered or superseded, a task
    /// started or ended, a server left).
    pub inbox: bool,
    /// Questions answered in this batch: (task row, key) → the answer's action (`accept`,
    /// `decline`, `cancel`).
    pub answered: HashMap<(i64, String), String>,
    /// Servers that need a person to sign in again, by name: each is recorded once per refusal
    /// (`sign_in_needed` on the server), so a face tells each once.
    pub sign_in_needed: Vec<String>,
    /// Whether an agent's call held by the gateway changed (held, decided, ran, withdrawn).
    pub gated: bool,
    /// Agents' calls that began waiting for a person in this batch (Countersign's task ids), so
    /// a face tells each once.
    pub gated_waiting: Vec<String>,
    /// Agents' calls that stopped waiting in this batch: the task id and how (`accept` when
    /// approved, `decline` when declined, else the state's name), so their notifications close.
    pub gated_left: Vec<(String, String)>,
    /// Whether the person's settings changed (in this process or another).
    pub settings: bool,
}

impl Changes {
    /// Sorts a batch by what it changed.
    pub fn of(events: Vec<StoredEvent>) -> Self {
        let mut changes = Changes::default();
        for e in &events {
            if let Some(row) = e.task {
                changes.tasks.insert(row);
            }
            match &e.kind {
                EventKind::InputAnswered { key, action, .. } => {
                    if let Some(row) = e.task {
                        changes
                            .answered
                            .insert((row, key.clone()), action.as_str().to_owned());
                    }
                    changes.inbox = true;
                }
                EventKind::InputRequested { .. }
                | EventKind::InputSuperseded { .. }
                | EventKind::TaskCreated { .. }
                | EventKind::TaskFinished { .. }
                | EventKind::TaskExpired { .. }
                | EventKind::TaskLost { .. } => changes.inbox = true,
                EventKind::GatedCallChanged { task_id, state, .. } => {
                    use crate::ledger::gated::GatedState;
                    changes.gated = true;
                    match state {
                        GatedState::Pending => {
                            if !changes.gated_waiting.contains(task_id) {
                                changes.gated_waiting.push(task_id.clone());
                            }
                        }
                        GatedState::Approved => {
                            changes.gated_left.push((task_id.clone(), "accept".into()))
                        }
                        GatedState::Declined => {
                            changes.gated_left.push((task_id.clone(), "decline".into()))
                        }
                        other => changes
                            .gated_left
                            .push((task_id.clone(), other.as_str().to_owned())),
                    }
                }
                EventKind::ServerRemoved { .. } => {
                    changes.servers = true;
                    changes.inbox = true;
                }
                EventKind::ServerAdded { .. }
                | EventKind::ServerUpdated { .. }
                | EventKind::ServerDiscovered { .. }
                | EventKind::ServerUnreachable { .. }
                | EventKind::ServerRecovered
                | EventKind::SignedIn
                | EventKind::SignedOut => changes.servers = true,
                EventKind::SettingsChanged { .. } => changes.settings = true,
                EventKind::SignInNeeded { .. } => {
                    changes.servers = true;
                    // The server's own event, not its copies on each task's timeline; and not
                    // one the person caused by adding a server that asks for a sign-in (they
                    // are looking at it): only the engine's finding is news.
                    if e.task.is_none() && e.via == crate::ledger::events::Via::Engine {
                        changes
                            .sign_in_needed
                            .push(e.server.clone().unwrap_or_else(|| "A server".into()));
                    }
                }
                _ => {}
            }
        }
        changes.events = events;
        changes
    }
}

impl Feed {
    /// The next batch of events; waits until there is one. A ledger that cannot be read is
    /// logged and read again a second later (the window keeps what it shows meanwhile).
    pub async fn next(&mut self) -> Changes {
        loop {
            match self
                .ledger
                .events_after(self.cursor, BATCH, POLL_LEDGER, WAIT)
                .await
            {
                Ok(batch) => {
                    if let Some(last) = batch.last() {
                        self.cursor = last.id;
                        return Changes::of(batch);
                    }
                }
                Err(e) => {
                    tracing::warn!("the feed cannot read events: {e}");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }
}

/// What a face knows of the inbox between two looks: the questions it showed.
#[derive(Debug, Default)]
pub struct InboxWatch {
    shown: HashSet<(i64, String)>,
}

/// The inbox now, and what changed for notifications since the last look.
#[derive(Debug)]
pub struct InboxUpdate {
    /// Every pending question, oldest first.
    pub inbox: Vec<InputRequestView>,
    /// Questions that left the inbox since the last look (their notifications close): the
    /// notification id ([`notification_id`]) and how they left (the answer's action, or `withdrawn`).
    pub left: Vec<(String, String)>,
    /// Questions no one was told of yet, now recorded as told, before the face posts them, so
    /// that no restart notifies one twice (a face that does not post them, under do-not-disturb
    /// or because the question is on screen, told the person by other means). Only the process
    /// that runs the engine tells: elsewhere this is empty.
    pub untold: Vec<InputRequestView>,
}

impl Console {
    /// The feed from the newest event on.
    pub async fn feed(&self) -> Result<Feed> {
        let cursor = self.read(events::last_id).await?;
        Ok(Feed {
            ledger: Arc::clone(&self.ledger),
            cursor,
        })
    }

    /// Looks at the inbox: what it holds, which questions left since `watch`'s last look (with
    /// how, from `answered`), and which must be notified now (marked told in the ledger in one
    /// write, however many a server sent at once). Failing to mark them notifies none of them
    /// (logged): a question told twice is worse than one told late, on the next look.
    pub async fn look_at_inbox(
        &self,
        watch: &mut InboxWatch,
        answered: &HashMap<(i64, String), String>,
    ) -> Result<InboxUpdate> {
        let entries = self.inbox_entries().await?;
        let now: HashSet<(i64, String)> = entries
            .iter()
            .map(|e| (e.view.task_row, e.view.key.clone()))
            .collect();
        let left = watch
            .shown
            .difference(&now)
            .map(|gone| {
                let how = answered.get(gone).map_or("withdrawn", String::as_str);
                (notification_id(gone.0, &gone.1), how.to_owned())
            })
            .collect();
        watch.shown = now;
        let mut untold = Vec::new();
        if self.runs_engine() {
            let (ids, views): (Vec<i64>, Vec<InputRequestView>) = entries
                .iter()
                .filter(|e| !e.notified)
                .map(|e| (e.input_id, e.view.clone()))
                .unzip();
            if !ids.is_empty() {
                match self.mark_notified(ids).await {
                    Ok(()) => untold = views,
                    Err(e) => tracing::warn!("not notifying {} question(s): {e}", views.len()),
                }
            }
        }
        Ok(InboxUpdate {
            inbox: entries.into_iter().map(|e| e.view).collect(),
            left,
            untold,
        })
    }
}
