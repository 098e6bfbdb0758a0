//! Writes on the loop: one write per task at a time, started by [`State::start_write`] and
//! applied in memory only once it commits ([`State::written`]); the ledger's health follows the
//! outcome.
//!
//! The loop awaits its writes itself ([`Pending`]) rather than spawning a task per write that
//! reports back over a channel: a change then costs one wake-up of the loop when its commit is
//! known, not a spawn (and the idle worker it wakes to steal it), a wake-up of that task and a
//! message back.

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt as _};

use super::{Applied, LedgerHealth, ServerChange, State, WRITE_RETRY};
use crate::ledger::{Ledger, WriteCtx};
use crate::status::Observation;

/// A write started by the loop, reported back to it.
pub(super) enum Written {
    /// An observation's write finished, committed or not.
    Observation {
        row: i64,
        observation: Observation,
        applied: Applied,
        server_id: i64,
        outcome: crate::ledger::Result<()>,
    },
    /// The backoff after a failed write has passed: try the task's newest observation again.
    Retry { row: i64 },
}

/// The loop's writes in flight and retries waiting: each ends as a [`Written`].
#[derive(Default)]
pub(super) struct Pending {
    // In a `Mutex` only so that the engine's state stays `Sync`; always reached through
    // `get_mut`, never locked.
    running: Mutex<FuturesUnordered<BoxFuture<'static, Written>>>,
}

impl Pending {
    fn push(&mut self, work: impl Future<Output = Written> + Send + 'static) {
        self.running
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::pin(work));
    }

    /// The next write or retry to end; pending while there is none.
    pub(super) async fn next(&mut self) -> Written {
        let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
        match running.next().await {
            Some(written) => written,
            // A write started later is awaited by the loop's next call.
            None => std::future::pending().await,
        }
    }
}

impl State {
    /// Marks `row` as writing; the loop hears the write's outcome.
    pub(super) fn start_write(
        &mut self,
        row: i64,
        server_id: i64,
        observation: Observation,
        applied: Applied,
        write: impl std::future::Future<Output = crate::ledger::Result<()>> + Send + 'static,
    ) {
        if let Some(tracked) = self.tracked.get_mut(&row) {
            tracked.writing = true;
        }
        self.written.push(async move {
            let outcome = write.await;
            Written::Observation {
                row,
                observation,
                applied,
                server_id,
                outcome,
            }
        });
    }

    /// A write started by [`State::observe`] ended, or its retry is due.
    pub(super) fn written(&mut self, written: Written) {
        match written {
            Written::Observation {
                row,
                applied,
                outcome: Ok(()),
                ..
            } => {
                if self.unwritten.remove(&row) {
                    self.report_health(None);
                }
                let Some(tracked) = self.tracked.get_mut(&row) else {
                    return; // untracked meanwhile (its server was removed)
                };
                tracked.writing = false;
                tracked.write_failures = 0;
                if let Some(known) = applied.known {
                    tracked.known = known;
                }
                if let Some(ttl) = applied.ttl_ms {
                    tracked.ttl_ms = Some(ttl);
                }
                tracked.failures = applied.failures;
                let next = tracked.next.take();
                if applied.done {
                    self.untrack(row);
                } else if let Some(next) = next {
                    self.observe(next);
                }
            }
            Written::Observation {
                row,
                observation,
                applied,
                server_id,
                outcome: Err(error),
            } => {
                // Undo what was changed in memory ahead of the write, so the next attempt (of
                // this task or another on the server) records it again.
                match applied.server {
                    ServerChange::Recovered => {
                        self.unreachable.insert(server_id);
                    }
                    ServerChange::Down => {
                        self.unreachable.remove(&server_id);
                    }
                    ServerChange::None => {}
                }
                let Some(tracked) = self.tracked.get_mut(&row) else {
                    return;
                };
                // Still `writing`: observations keep waiting until the retry.
                tracked.write_failures = tracked.write_failures.saturating_add(1);
                // A newer observation supersedes the one that failed; otherwise retry this one.
                tracked.next.get_or_insert(observation);
                let wait = crate::scheduler::backoff(WRITE_RETRY, tracked.write_failures, None);
                tracing::debug!(row, error = %error, retry_in = ?wait, "a task's change did not commit; retrying");
                self.unwritten.insert(row);
                self.report_health(Some(&error));
                self.written.push(async move {
                    tokio::time::sleep(wait).await;
                    Written::Retry { row }
                });
            }
            Written::Retry { row } => {
                let Some(tracked) = self.tracked.get_mut(&row) else {
                    return;
                };
                tracked.writing = false;
                if let Some(next) = tracked.next.take() {
                    self.observe(next);
                }
            }
        }
    }

    /// Publishes the ledger's health: notifies when it turns unwritable, when the reason changes
    /// and when it is writable again (not on every failed retry).
    pub(super) fn report_health(&self, error: Option<&crate::ledger::Error>) {
        let pending = self.unwritten.len();
        self.health.send_if_modified(|health| match (error, &*health) {
            (Some(error), LedgerHealth::Unwritable { message, .. })
                if *message == error.to_string() =>
            {
                *health = LedgerHealth::Unwritable {
                    pending,
                    message: message.clone(),
                };
                false
            }
            (Some(error), _) => {
                let message = error.to_string();
                tracing::error!(pending, error = %message, "the ledger is unwritable; changes are kept and retried");
                *health = LedgerHealth::Unwritable { pending, message };
                true
            }
            (None, LedgerHealth::Unwritable { message, .. }) if pending > 0 => {
                *health = LedgerHealth::Unwritable {
                    pending,
                    message: message.clone(),
                };
                false
            }
            (None, LedgerHealth::Unwritable { .. }) => {
                tracing::info!("the ledger is writable again; pending changes are committed");
                *health = LedgerHealth::Writable;
                true
            }
            (None, LedgerHealth::Writable) => false,
        });
    }
}

/// Runs the write `make` builds until it commits, backing off between attempts: what it records
/// (a delivery's outcome) is known only to this process and would be lost until a restart.
pub(super) fn spawn_until_committed<F, J>(ledger: Arc<Ledger>, what: &'static str, make: F)
where
    F: Fn() -> J + Send + 'static,
    J: for<'c> FnOnce(&mut WriteCtx<'c>) -> crate::ledger::Result<()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut failures = 0u32;
        while let Err(e) = ledger.write(make()).await {
            if matches!(e, crate::ledger::Error::WriterGone) {
                return; // shutting down: the outbox row is still open, the next start redoes it
            }
            failures = failures.saturating_add(1);
            let wait = crate::scheduler::backoff(WRITE_RETRY, failures, None);
            tracing::warn!(error = %e, retry_in = ?wait, "failed to {what}; retrying");
            tokio::time::sleep(wait).await;
        }
    });
}
