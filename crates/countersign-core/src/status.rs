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

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::ledger::Via;
use crate::mcp::{self, Client, ErrorClass};

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
    /// The client.
    pub client: Client,
    /// The user's minimum interval for this server.
    pub floor: Duration,
    /// Bounds concurrent requests to this server.
    pub permits: Arc<Semaphore>,
}

/// The servers the engine talks to, by row id; shared by the engine and its sources.
#[derive(Debug, Clone, Default)]
pub struct Links(Arc<RwLock<HashMap<i64, ServerLink>>>);

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
