//! The push status source: `subscriptions/listen` with `notifications.taskIds`, behind the same
//! [`StatusSource`] seam as polling.
//!
//! # What it does
//! Every pushed task becomes `Observation { via: Push, .. }` on the engine's channel, the same
//! path a poll takes, so the ledger, the inbox and the UI see the same events with another `via`
//! mark. Push never replaces polling; it tells [`PollSource`] which tasks it covers, and those are
//! polled at the [safety-net rate](super::poll::safety_net) (`max(10 × interval, 30 s)`) instead
//! of their interval. A task is covered while all of these hold:
//! - the stream it is on is open and acknowledged, and the acknowledgement named the task
//!   (the spec lets a server agree to a subset: the rest stay on normal polling);
//! - a notification for the task has arrived on that stream since it opened, or the task was
//!   already covered by the stream this one replaced. Waiting for a first notification matters
//!   for servers that send nothing until the next change: the state may have changed between our
//!   last look and the subscription, and until something arrives only polling can tell.
//!
//! Coverage ends, and the task is back at its normal interval at once (spread over one interval
//! so a broken stream does not fire every poll at the same instant), when the stream fails,
//! closes, goes silent for [`PushConfig::idle_timeout`] (keep-alive comments count as life), or
//! breaks the protocol (a notification before the acknowledgement, tagged for another
//! subscription, or not parseable: treated as broken, since dropping it would lose a change).
//! A server that answers -32601 (neither real peer implements push today), or any other
//! permanent error, or acknowledges none of the requested ids, is polled only, and asked again
//! after [`PushConfig::declined_retry`]; transient failures reconnect with exponential backoff
//! and ±20 % jitter (1 s doubling to 60 s; the streak resets once a stream has lived 30 s).
//!
//! # Stream scheme: one stream per server, re-opened when tasks are added
//! The spec gives no way to add ids to an open stream; a new id needs a new `subscriptions/listen`.
//! The choices are one stream per task, additive streams, or one stream per server that is
//! replaced by one carrying the whole live id set. This source uses the last (make before
//! break: the old stream is dropped only once the new one is acknowledged, and tasks it covered
//! stay covered if the new acknowledgement names them, so a re-open never opens a gap):
//! - **additions** are coalesced: a re-open waits [`PushConfig::coalesce`] after the first new id
//!   and at least the re-open gap after the previous open, so a burst of 500 new (or resumed)
//!   tasks costs one request. The gap is [`PushConfig::min_reopen_gap`] (250 ms), or
//!   [`PushConfig::reopen_gap_per_task`] (0.5 ms) per live task when that is longer, up to
//!   [`MAX_REOPEN_GAP`]: a server that re-sends the live set on every subscription (the demo
//!   does) then re-sends at most ~2,000 task states per second whatever N is, while a new task
//!   is covered within a quarter second at small N, and is polled normally until it is;
//! - **removals cost nothing**: a finished task never changes again, so its id is simply left on
//!   the stream until the next re-open drops it;
//! - **connections**: one per server, where per-task streams hold one per live task (HTTP/1.1:
//!   a socket each, on both sides, plus a keep-alive every few seconds each).
//!
//! Measured with `countersign-bench --source push` against the demo server (README, "Push vs
//! poll"), the per-server scheme and [`StreamScheme::PerTask`] (kept for that comparison) cost the
//! same order of requests per task; per-task holds as many connections as there are live tasks,
//! per-server one. The price of per-server is bandwidth: a server that sends the current state on
//! every (re)subscription, as the demo does, re-sends the live set on each re-open, which the
//! re-open gap bounds.
//!
//! # Ordering
//! Push and poll race: a poll answered just before a change can arrive after the pushed change.
//! The engine drops an observation whose `lastUpdatedAt` is older than the last one it applied
//! for the task (see `engine.rs`), so a late poll never rolls the timeline back.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::poll::PollSource;
use super::{Links, Observation, StatusSource, Watch};
use crate::ledger::Via;
use crate::mcp::{self, Client, ErrorClass, ListenEvent, ListenRequest};
use crate::scheduler::{self, DeadlineQueue};

/// First reconnect delay after a failure (doubles per failure, ±20 %, capped at 60 s).
pub const RECONNECT_BASE: Duration = Duration::from_secs(1);
/// A stream that lived this long resets the failure streak when it ends.
pub const STABLE_AFTER: Duration = Duration::from_secs(30);
/// The longest wait between two opens of one stream while tasks keep being added.
pub const MAX_REOPEN_GAP: Duration = Duration::from_secs(10);

/// How streams are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamScheme {
    /// One stream per server carrying all its live task ids, re-opened as tasks are added.
    #[default]
    PerServer,
    /// One stream per task (for comparison: one connection per live task).
    PerTask,
}

/// Push settings.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// How streams are grouped.
    pub scheme: StreamScheme,
    /// Wait after the first new id before re-opening, to gather a burst into one request.
    pub coalesce: Duration,
    /// Least time between two opens of one stream.
    pub min_reopen_gap: Duration,
    /// Added to the gap per task on the stream (so re-sending a large live set stays rare).
    pub reopen_gap_per_task: Duration,
    /// A stream silent this long (no event, no keep-alive) is dead.
    pub idle_timeout: Duration,
    /// When a server does not do push (-32601, another permanent error, or no id acknowledged),
    /// how long before asking again.
    pub declined_retry: Duration,
}

impl Default for PushConfig {
    fn default() -> Self {
        Self {
            scheme: StreamScheme::PerServer,
            coalesce: Duration::from_millis(25),
            min_reopen_gap: Duration::from_millis(250),
            reopen_gap_per_task: Duration::from_micros(500),
            idle_timeout: mcp::subscription::DEFAULT_IDLE_TIMEOUT,
            declined_retry: Duration::from_secs(15 * 60),
        }
    }
}

/// Counters for benchmarks and diagnostics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PushStats {
    /// `subscriptions/listen` requests sent.
    pub listens: u64,
    /// Streams the server acknowledged.
    pub acknowledged: u64,
    /// `notifications/tasks` received for watched tasks.
    pub notifications: u64,
    /// Streams that failed, closed or went silent (a planned replacement does not count).
    pub broken: u64,
    /// Times a server declined push (-32601 and other permanent errors, nothing acknowledged).
    pub declined: u64,
    /// Tasks covered right now.
    pub covered: u64,
    /// Streams open (acknowledged) right now.
    pub open_streams: u64,
}

enum Command {
    Watch(Watch),
    Unwatch(i64),
}

/// Receives task changes over `subscriptions/listen` streams.
pub struct PushSource {
    commands: mpsc::UnboundedSender<Command>,
    stats: Arc<Mutex<PushStats>>,
}

impl PushSource {
    /// Starts the push loop with default settings; observations go to `sink`, coverage changes
    /// to `poll`. The loop (and every stream) ends when the source is dropped.
    pub fn start(
        links: Links,
        sink: mpsc::UnboundedSender<Observation>,
        poll: Arc<PollSource>,
    ) -> Self {
        Self::with_config(links, sink, poll, PushConfig::default())
    }

    /// Starts the push loop with explicit settings.
    pub fn with_config(
        links: Links,
        sink: mpsc::UnboundedSender<Observation>,
        poll: Arc<PollSource>,
        config: PushConfig,
    ) -> Self {
        let (commands, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(Mutex::new(PushStats::default()));
        let (stream_tx, stream_rx) = mpsc::unbounded_channel();
        let hub = Hub {
            links,
            sink,
            poll,
            config,
            stats: stats.clone(),
            stream_tx,
            feeds: HashMap::new(),
            feed_of_key: HashMap::new(),
            feed_of_row: HashMap::new(),
            declined: HashMap::new(),
            queue: DeadlineQueue::new(),
            next_feed: 0,
            next_generation: 0,
        };
        tokio::spawn(hub.run(rx, stream_rx));
        Self { commands, stats }
    }

    /// Counters so far.
    pub fn stats(&self) -> PushStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }
}

impl StatusSource for PushSource {
    fn via(&self) -> Via {
        Via::Push
    }

    fn watch(&self, watch: Watch) {
        let _ = self.commands.send(Command::Watch(watch));
    }

    fn unwatch(&self, task: i64) {
        let _ = self.commands.send(Command::Unwatch(task));
    }
}

/// What a stream task reports.
enum StreamEvent {
    Event(ListenEvent),
    Failed(mcp::Error),
    /// The stream ended with neither a closing response nor an error (should not happen).
    Ended,
}

struct StreamMsg {
    feed: i64,
    generation: u64,
    event: StreamEvent,
}

/// One listen stream.
struct Stream {
    generation: u64,
    requested: HashSet<String>,
    /// `None` until acknowledged.
    acked: Option<HashSet<String>>,
    /// Rows whose changes this stream delivers (the poll source knows them as covered).
    covered: HashSet<i64>,
    started: Instant,
    task: JoinHandle<()>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Dropping the response closes the connection: that is how HTTP cancels a subscription.
        self.task.abort();
    }
}

/// The tasks that share streams (all of a server's, or one task's) and their streams.
struct Feed {
    server_id: i64,
    /// Watched task ids → rows.
    tasks: HashMap<String, i64>,
    /// The acknowledged stream.
    active: Option<Stream>,
    /// A stream opened but not yet acknowledged (it replaces `active` once it is).
    pending: Option<Stream>,
    /// When the next open is scheduled.
    open_at: Option<Instant>,
    last_open: Option<Instant>,
    /// No open before this (backoff, or the server declined).
    not_before: Instant,
    failures: u32,
}

impl Feed {
    fn requested(&self, task_id: &str) -> bool {
        self.active
            .iter()
            .chain(self.pending.iter())
            .any(|s| s.requested.contains(task_id))
    }

    fn stream_mut(&mut self, generation: u64) -> Option<&mut Stream> {
        self.active
            .iter_mut()
            .chain(self.pending.iter_mut())
            .find(|s| s.generation == generation)
    }
}

struct Hub {
    links: Links,
    sink: mpsc::UnboundedSender<Observation>,
    poll: Arc<PollSource>,
    config: PushConfig,
    stats: Arc<Mutex<PushStats>>,
    stream_tx: mpsc::UnboundedSender<StreamMsg>,
    feeds: HashMap<i64, Feed>,
    feed_of_key: HashMap<(i64, i64), i64>,
    feed_of_row: HashMap<i64, i64>,
    /// Servers that declined push, until when: shared by all their feeds and kept when a feed
    /// goes away, so a server without push is asked once per [`PushConfig::declined_retry`], not
    /// once per task or per busy spell.
    declined: HashMap<i64, Instant>,
    /// Scheduled opens, keyed by feed.
    queue: DeadlineQueue,
    next_feed: i64,
    next_generation: u64,
}

impl Hub {
    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut streams: mpsc::UnboundedReceiver<StreamMsg>,
    ) {
        loop {
            let next = self.queue.next_deadline();
            tokio::select! {
                command = commands.recv() => match command {
                    // The source was dropped: dropping the feeds closes every stream.
                    None => return,
                    Some(Command::Watch(w)) => self.watch(w),
                    Some(Command::Unwatch(row)) => self.unwatch(row),
                },
                Some(msg) = streams.recv() => {
                    if !self.stream_event(msg) {
                        return; // the engine is gone
                    }
                }
                _ = sleep_until(next), if next.is_some() => {
                    for feed in self.queue.pop_due(Instant::now()) {
                        self.open(feed);
                    }
                }
            }
        }
    }

    fn stats(&self, change: impl FnOnce(&mut PushStats)) {
        if let Ok(mut stats) = self.stats.lock() {
            change(&mut stats);
        }
    }

    fn watch(&mut self, watch: Watch) {
        if self.feed_of_row.contains_key(&watch.task) {
            self.unwatch(watch.task); // re-watched: start over
        }
        let key = match self.config.scheme {
            StreamScheme::PerServer => (watch.server_id, 0),
            StreamScheme::PerTask => (watch.server_id, watch.task),
        };
        let feed_id = match self.feed_of_key.get(&key) {
            Some(id) => *id,
            None => {
                self.next_feed += 1;
                self.feed_of_key.insert(key, self.next_feed);
                self.next_feed
            }
        };
        let feed = self.feeds.entry(feed_id).or_insert_with(|| Feed {
            server_id: watch.server_id,
            tasks: HashMap::new(),
            active: None,
            pending: None,
            open_at: None,
            last_open: None,
            not_before: Instant::now(),
            failures: 0,
        });
        let already = feed.requested(&watch.task_id);
        feed.tasks.insert(watch.task_id, watch.task);
        self.feed_of_row.insert(watch.task, feed_id);
        if !already {
            self.schedule_open(feed_id);
        }
    }

    fn unwatch(&mut self, row: i64) {
        let Some(feed_id) = self.feed_of_row.remove(&row) else {
            return;
        };
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        feed.tasks.retain(|_, r| *r != row);
        let mut uncovered = 0;
        for stream in feed.active.iter_mut().chain(feed.pending.iter_mut()) {
            if stream.covered.remove(&row) {
                uncovered += 1; // the poll source forgets the task itself
            }
        }
        if feed.tasks.is_empty() {
            let open = u64::from(feed.active.is_some());
            self.feeds.remove(&feed_id);
            self.feed_of_key.retain(|_, id| *id != feed_id);
            self.queue.remove(feed_id);
            self.stats(|s| s.open_streams = s.open_streams.saturating_sub(open));
        }
        self.stats(|s| s.covered = s.covered.saturating_sub(uncovered));
    }

    /// Plans an open of `feed_id` that will carry every watched id, unless one is planned.
    fn schedule_open(&mut self, feed_id: i64) {
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        if feed.open_at.is_some() || feed.pending.is_some() {
            return; // that open (or the acknowledgement) will pick the new ids up
        }
        let now = Instant::now();
        let mut at = (now + self.config.coalesce).max(feed.not_before);
        if let Some(until) = self.declined.get(&feed.server_id) {
            at = at.max(*until);
        }
        if let Some(last) = feed.last_open {
            let per_task = self
                .config
                .reopen_gap_per_task
                .saturating_mul(u32::try_from(feed.tasks.len()).unwrap_or(u32::MAX));
            let gap = self.config.min_reopen_gap.max(per_task).min(MAX_REOPEN_GAP);
            at = at.max(last + gap);
        }
        feed.open_at = Some(at);
        self.queue.schedule(feed_id, at);
    }

    /// Schedules an open if a watched id is on no live stream.
    fn ensure_requested(&mut self, feed_id: i64) {
        let missing = self
            .feeds
            .get(&feed_id)
            .is_some_and(|feed| feed.tasks.keys().any(|id| !feed.requested(id)));
        if missing {
            self.schedule_open(feed_id);
        }
    }

    fn open(&mut self, feed_id: i64) {
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        feed.open_at = None;
        if feed.tasks.is_empty() || feed.pending.is_some() {
            return;
        }
        let now = Instant::now();
        match self.declined.get(&feed.server_id) {
            // Another feed of this server was declined after this open was planned.
            Some(until) if *until > now => {
                feed.open_at = Some(*until);
                self.queue.schedule(feed_id, *until);
                return;
            }
            Some(_) => {
                self.declined.remove(&feed.server_id);
            }
            None => {}
        }
        let Some(link) = self.links.get(feed.server_id) else {
            return; // the server was removed: the engine unwatches its tasks
        };
        let mut ids: Vec<String> = feed.tasks.keys().cloned().collect();
        ids.sort_unstable();
        self.next_generation += 1;
        let generation = self.next_generation;
        let request = ListenRequest {
            task_ids: ids.clone(),
            idle_timeout: self.config.idle_timeout,
        };
        let task = tokio::spawn(follow(
            link.client,
            request,
            feed_id,
            generation,
            self.stream_tx.clone(),
        ));
        feed.pending = Some(Stream {
            generation,
            requested: ids.into_iter().collect(),
            acked: None,
            covered: HashSet::new(),
            started: now,
            task,
        });
        feed.last_open = Some(now);
        self.stats(|s| s.listens += 1);
    }

    /// Handles what a stream said; false when the engine is gone.
    fn stream_event(&mut self, msg: StreamMsg) -> bool {
        let Some(feed) = self.feeds.get_mut(&msg.feed) else {
            return true;
        };
        let is_active = feed
            .active
            .as_ref()
            .is_some_and(|s| s.generation == msg.generation);
        let is_pending = feed
            .pending
            .as_ref()
            .is_some_and(|s| s.generation == msg.generation);
        if !is_active && !is_pending {
            return true; // a stream already replaced or dropped
        }
        match msg.event {
            StreamEvent::Event(ListenEvent::Acknowledged { task_ids }) => {
                if is_pending {
                    self.acknowledged(msg.feed, task_ids);
                }
                true
            }
            StreamEvent::Event(ListenEvent::Task(task)) => {
                self.pushed(msg.feed, msg.generation, task)
            }
            StreamEvent::Event(ListenEvent::Closed) => {
                tracing::info!(
                    server = feed.server_id,
                    "the server closed the push stream; reconnecting"
                );
                self.ended(msg.feed, is_active, None);
                true
            }
            StreamEvent::Failed(error) => {
                self.ended(msg.feed, is_active, Some(error));
                true
            }
            StreamEvent::Ended => {
                self.ended(
                    msg.feed,
                    is_active,
                    Some(mcp::Error::InvalidResponse {
                        method: mcp::subscription::LISTEN_METHOD.into(),
                        reason: "the stream ended without a closing response".into(),
                    }),
                );
                true
            }
        }
    }

    fn acknowledged(&mut self, feed_id: i64, task_ids: Vec<String>) {
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        let Some(mut stream) = feed.pending.take() else {
            return;
        };
        let acked: HashSet<String> = task_ids
            .into_iter()
            .filter(|id| stream.requested.contains(id))
            .collect();
        if acked.is_empty() && !stream.requested.is_empty() {
            // The server listens, but not for these tasks (or not for tasks at all).
            tracing::info!(
                server = feed.server_id,
                "the server acknowledged none of the tasks asked for; polling them"
            );
            feed.not_before = Instant::now() + self.config.declined_retry;
            self.declined.insert(feed.server_id, feed.not_before);
            drop(stream);
            self.stats(|s| s.declined += 1);
            self.ensure_requested(feed_id);
            return;
        }
        let not_acked = stream.requested.len() - acked.len();
        if not_acked > 0 {
            tracing::debug!(
                server = feed.server_id,
                not_acked,
                "some tasks were not acknowledged; they stay on normal polling"
            );
        }
        // Make before break: tasks the old stream covered stay covered if this one took them.
        let mut uncovered = Vec::new();
        let was_open = feed.active.is_some();
        if let Some(old) = feed.active.take() {
            let id_of: HashMap<i64, &str> = feed
                .tasks
                .iter()
                .map(|(id, row)| (*row, id.as_str()))
                .collect();
            for row in &old.covered {
                match id_of.get(row) {
                    Some(id) if acked.contains(*id) => {
                        stream.covered.insert(*row);
                    }
                    _ => uncovered.push(*row),
                }
            }
        }
        stream.acked = Some(acked);
        feed.active = Some(stream);
        for row in &uncovered {
            self.poll.cover(*row, false);
        }
        let uncovered = uncovered.len() as u64;
        self.stats(|s| {
            s.acknowledged += 1;
            s.covered = s.covered.saturating_sub(uncovered);
            if !was_open {
                s.open_streams += 1;
            }
        });
        self.ensure_requested(feed_id);
    }

    fn pushed(&mut self, feed_id: i64, generation: u64, task: mcp::Task) -> bool {
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return true;
        };
        let Some(&row) = feed.tasks.get(&task.task_id) else {
            return true; // no longer watched (finished, or the server added one we did not ask for)
        };
        let task_id = task.task_id.clone();
        let terminal = task.status().is_terminal();
        if self
            .sink
            .send(Observation {
                task: row,
                via: Via::Push,
                outcome: Ok(task),
            })
            .is_err()
        {
            return false;
        }
        let mut newly_covered = false;
        if let Some(stream) = feed.stream_mut(generation) {
            let acked = stream.acked.as_ref().is_some_and(|a| a.contains(&task_id));
            // The observation is on the engine's channel before the poll source slows down.
            if acked && !terminal && stream.covered.insert(row) {
                newly_covered = true;
            }
        }
        if newly_covered {
            self.poll.cover(row, true);
        }
        self.stats(|s| {
            s.notifications += 1;
            if newly_covered {
                s.covered += 1;
            }
        });
        true
    }

    /// A stream is over: its tasks go back to normal polling now, and a reconnect is planned.
    fn ended(&mut self, feed_id: i64, was_active: bool, error: Option<mcp::Error>) {
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        let stream = if was_active {
            feed.active.take()
        } else {
            feed.pending.take()
        };
        let Some(stream) = stream else { return };
        let now = Instant::now();
        let lived = now.saturating_duration_since(stream.started);
        let mut declined = false;
        match &error {
            Some(e) if e.class() == ErrorClass::Permanent => {
                declined = true;
                if e.code() == "method_not_found" {
                    tracing::info!(
                        server = feed.server_id,
                        "the server does not implement subscriptions/listen; polling only"
                    );
                } else {
                    tracing::warn!(server = feed.server_id, error = %e, "push refused; polling only");
                }
                feed.not_before = now + self.config.declined_retry;
                self.declined.insert(feed.server_id, feed.not_before);
            }
            _ => {
                feed.failures = if was_active && lived >= STABLE_AFTER {
                    1
                } else {
                    feed.failures.saturating_add(1)
                };
                let retry_after = error.as_ref().and_then(mcp::Error::retry_after);
                let wait = scheduler::backoff(RECONNECT_BASE, feed.failures, retry_after);
                if let Some(e) = &error {
                    tracing::info!(server = feed.server_id, error = %e, retry_in = ?wait, "push stream broke; polling until it is back");
                }
                feed.not_before = now + wait;
            }
        }
        let rows: Vec<i64> = stream.covered.iter().copied().collect();
        drop(stream);
        for row in &rows {
            self.poll.cover(*row, false);
        }
        let uncovered = rows.len() as u64;
        self.stats(|s| {
            s.covered = s.covered.saturating_sub(uncovered);
            if was_active {
                s.open_streams = s.open_streams.saturating_sub(1);
            }
            if declined {
                s.declined += 1;
            } else {
                s.broken += 1;
            }
        });
        self.ensure_requested(feed_id);
    }
}

/// Runs one listen stream, forwarding what it says until it ends or is aborted.
async fn follow(
    client: Client,
    request: ListenRequest,
    feed: i64,
    generation: u64,
    tx: mpsc::UnboundedSender<StreamMsg>,
) {
    let send = |event| {
        tx.send(StreamMsg {
            feed,
            generation,
            event,
        })
        .is_ok()
    };
    let mut listening = match client.listen(&request).await {
        Ok(listening) => listening,
        Err(error) => {
            send(StreamEvent::Failed(error));
            return;
        }
    };
    loop {
        match listening.next().await {
            Some(Ok(event)) => {
                let closed = event == ListenEvent::Closed;
                if !send(StreamEvent::Event(event)) || closed {
                    return;
                }
            }
            Some(Err(error)) => {
                send(StreamEvent::Failed(error));
                return;
            }
            None => {
                send(StreamEvent::Ended);
                return;
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
