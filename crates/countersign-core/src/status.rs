//! How task status arrives: the seam between "a task changed on the server" and the engine.
//!
//! A [`StatusSource`] is told which tasks to watch and delivers [`Observation`]s into the
//! engine's channel. The engine cannot tell sources apart except by [`Via`], which it stamps on
//! the timeline. Every watched task is told to every source.
//!
//! - [`poll::PollSource`]: `tasks/get` on a deadline queue. Always on: it is the fallback for
//!   every other source, and it never stops polling a task, it only slows down to the
//!   [safety-net rate](poll::safety_net) while another source covers it ([`poll::PollSource::cover`]).
//! - [`push::PushSource`]: `subscriptions/listen` with `notifications.taskIds` (on unless
//!   `EngineConfig::push` is off). It sends the tasks it receives as `Observation { via: Push, .. }`
//!   and covers the tasks a healthy, acknowledged stream delivers.
//! - Webhooks (reserved, not implemented: the Tasks extension defines no webhook delivery today).
//!   A webhook source would plug in the same way: a local HTTP receiver whose address the
//!   server can reach, a per-server shared secret to authenticate deliveries (HMAC over the
//!   body, checked before parsing), deliveries parsed as full tasks and sent as observations with
//!   their own `Via`, and [`poll::PollSource::cover`] only for tasks the server confirmed it will
//!   deliver, for as long as the receiver is up. Nothing in the engine, ledger or UI changes.

pub mod poll;
pub mod push;

use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rustc_hash::FxHashMap;
use tokio::sync::Semaphore;

use crate::ledger::Via;
use crate::mcp::{self, ErrorClass};

/// A task a source should watch.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The task row.
    pub task: i64,
    /// The server row.
    pub server_id: i64,
    /// The server's task id.
    pub task_id: String,
    /// The last `pollIntervalMs` the server gave, if any.
    pub poll_interval_ms: Option<u64>,
    /// When the first check should happen.
    pub first: FirstCheck,
}

/// Where a watched task's first check lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstCheck {
    /// One interval from now: the handle was just observed.
    AfterInterval,
    /// Uniformly within one interval: resuming many tasks at once.
    Spread,
}

/// One thing a source learnt about a task.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The task row.
    pub task: i64,
    /// Which source.
    pub via: Via,
    /// The state, or why it could not be had.
    pub outcome: Result<mcp::Task, CheckFailure>,
}

/// A failed check.
#[derive(Debug, Clone)]
pub struct CheckFailure {
    /// Stable code (see [`mcp::Error::code`]).
    pub code: &'static str,
    /// Human message.
    pub message: String,
    /// Transient, lost or permanent.
    pub class: ErrorClass,
    /// Failures in a row, this one included.
    pub failures: u32,
    /// When the source will try again (zero when it gave up).
    pub retry_in: Duration,
}

/// A source of task status.
pub trait StatusSource: Send + Sync {
    /// The mark its observations carry.
    fn via(&self) -> Via;
    /// Starts (or restarts) watching a task.
    fn watch(&self, watch: Watch);
    /// Stops watching a task.
    fn unwatch(&self, task: i64);
}

/// A server as the sources reach it.
#[derive(Debug, Clone)]
pub struct ServerLink {
    /// The server, of either era.
    pub peer: mcp::Peer,
    /// The user's minimum interval for this server.
    pub floor: Duration,
    /// Bounds concurrent requests to this server.
    pub permits: Arc<Semaphore>,
}

/// The servers the engine talks to, by row id; shared by the engine and its sources.
#[derive(Debug, Clone, Default)]
pub struct Links(Arc<RwLock<FxHashMap<i64, ServerLink>>>);

impl Links {
    /// The link for a server.
    pub fn get(&self, server_id: i64) -> Option<ServerLink> {
        self.0.read().ok()?.get(&server_id).cloned()
    }

    /// Adds or replaces a server's link.
    pub fn set(&self, server_id: i64, link: ServerLink) {
        if let Ok(mut map) = self.0.write() {
            map.insert(server_id, link);
        }
    }

    /// Drops a server's link.
    pub fn remove(&self, server_id: i64) {
        if let Ok(mut map) = self.0.write() {
            map.remove(&server_id);
        }
    }

    /// The server ids linked.
    pub fn ids(&self) -> Vec<i64> {
        self.0
            .read()
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default()
    }
}

/// The tasks a source watches, kept beside its loop so that a restarted loop can pick them up
/// again (see [`supervise`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched(Arc<Mutex<FxHashMap<i64, Watch>>>);

impl Watched {
    pub(crate) fn insert(&self, watch: &Watch) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(watch.task, watch.clone());
        }
    }

    pub(crate) fn remove(&self, task: i64) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(&task);
        }
    }

    /// Every watched task, for a restarted loop: first checks spread over one interval.
    pub(crate) fn all(&self) -> Vec<Watch> {
        self.0
            .lock()
            .map(|map| {
                map.values()
                    .cloned()
                    .map(|w| Watch {
                        first: FirstCheck::Spread,
                        ..w
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Longest pause before a panicked source loop is started again.
const MAX_RESTART_PAUSE: Duration = Duration::from_secs(30);

/// Runs a source's loop and keeps it running. A loop that returns is done (its source was
/// dropped); a loop that panics is a bug, and one source's bug must not stop status for every
/// server in silence: the panic is logged at error level (the CLI's `watch` prints it) and the
/// loop starts again, told how many restarts came before so it can take up what it watched,
/// after a pause that doubles up to [`MAX_RESTART_PAUSE`].
pub(crate) fn supervise<F, Fut>(
    name: &'static str,
    restarts: Arc<std::sync::atomic::AtomicU32>,
    mut start: F,
) where
    F: FnMut(u32) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut count = 0u32;
        loop {
            match tokio::spawn(start(count)).await {
                Ok(()) => return,
                Err(e) if e.is_cancelled() => return,
                Err(e) => {
                    count = count.saturating_add(1);
                    restarts.store(count, std::sync::atomic::Ordering::SeqCst);
                    let pause = Duration::from_millis(100)
                        .saturating_mul(1u32 << count.min(16))
                        .min(MAX_RESTART_PAUSE);
                    tracing::error!(
                        source = name,
                        restarts = count,
                        panic = %panic_text(e.into_panic()),
                        restart_in = ?pause,
                        "a status source crashed; restarting it (please report this bug)"
                    );
                    tokio::time::sleep(pause).await;
                }
            }
        }
    });
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_panicking_source_loop_is_restarted_and_told_so() {
        let restarts = Arc::new(AtomicU32::new(0));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        supervise("test", restarts.clone(), move |restart| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(restart);
                if restart < 2 {
                    panic!("bug number {restart}");
                }
            }
        });
        let mut seen = Vec::new();
        while let Some(restart) = rx.recv().await {
            seen.push(restart);
        }
        assert_eq!(
            seen,
            vec![0, 1, 2],
            "started, crashed twice, restarted twice, then returned"
        );
        assert_eq!(restarts.load(Ordering::SeqCst), 2);
    }
}
