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
//!   (the spec lets a server agree to a subset: the rest stay on normal polling, and are not
//!   asked for again);
//! - a notification for the task has arrived on that stream since it opened, or the task was
//!   covered by a stream this one replaced. Waiting for a first notification matters for servers
//!   that send nothing until the next change: the state may have changed between our last look
//!   and the subscription, and until something arrives only polling can tell.
//!
//! Coverage ends, and the task is back at its normal interval at once (spread over one interval
//! so a broken stream does not fire every poll at the same instant), when the stream fails,
//! closes, goes silent for [`PushConfig::idle_timeout`] (keep-alive comments count as life), or
//! breaks the protocol (a notification before the acknowledgement, tagged for another
//! subscription, or not parseable: treated as broken, since dropping it would lose a change).
//! A server that answers -32601 (neither real peer implements push today), any other permanent
//! error, or an acknowledgement without `taskIds` (it does not do task notifications) is polled
//! only, and asked again after [`PushConfig::declined_retry`] (one request per server, however
//! many tasks); transient failures reconnect with exponential backoff and ±20 % jitter (1 s
//! doubling to 60 s; the streak resets once a stream has lived 30 s, and streams that break
//! together, as when a server restarts, count as one failure).
//!
//! # Stream scheme: batches per server, retired when done, merged when too many
//! The spec gives no way to add ids to an open stream: a new id needs a new
//! `subscriptions/listen`. Three schemes are implemented ([`StreamScheme`]) and were measured
//! (`measure_stream_schemes_under_churn` in `tests/it/push.rs`: 20 new tasks a second for 20 s, each
//! living 15 s with a change every 5 s, ~300 live at a time, against the demo server, which sends
//! the current state of every task on each subscription so that nothing is missed):
//!
//! | scheme | listen requests per task | notifications per task (4 needed) | open streams at peak |
//! |---|---|---|---|
//! | `Single`: one stream per server, re-opened with the whole live set | 0.10 | 22.2 | 1 |
//! | `PerTask`: one stream per task | 1.00 | 4.0 | 300 (one per live task) |
//! | `Batched` (the default, below) | 0.04 | 5.1 | 8 |
//!
//! `Single` re-sends every live task on each re-open (5× the needed notifications under churn,
//! 10× with a fixed 250 ms gap); `PerTask` holds a connection (a socket on both sides, and a
//! keep-alive each) per live task and costs a request per task. `Batched` takes the good half of
//! each:
//! - new ids go on a **new stream carrying only them** (nothing already subscribed is
//!   re-sent), opened [`PushConfig::coalesce`] after the first new id, and no sooner than
//!   `min_reopen_gap × (1 + open streams)` after the previous open, so a burst of 10,000 new or
//!   resumed tasks costs one request, and steady churn costs a request per gap, not per task;
//! - a stream whose tasks have all finished is **closed** (finished tasks never change again), so
//!   under churn the number of streams stays near task life ÷ gap;
//! - past [`PushConfig::max_streams`] (8) streams, the next open **merges** everything into one
//!   stream (the only time the live set is re-sent: at most once per
//!   `max(gap, consolidation_gap_per_task × live tasks)`, up to [`MAX_REOPEN_GAP`]).
//!
//! Every replacement is make-before-break: old streams are dropped only once the new one is
//! acknowledged, and tasks they covered stay covered if the new acknowledgement names them.
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
use super::{supervise, Links, Observation, StatusSource, Watch, Watched};
use crate::ledger::Via;
use crate::mcp::{self, Client, ErrorClass, ListenEvent, ListenRequest};
use crate::scheduler::{self, DeadlineQueue};

/// First reconnect delay after a failure (doubles per failure, ±20 %, capped at 60 s).
pub const RECONNECT_BASE: Duration = Duration::from_secs(1);
/// A stream that lived this long resets the failure streak when it ends.
pub const STABLE_AFTER: Duration = Duration::from_secs(30);
/// The longest wait between two opens for one server while tasks keep being added.
pub const MAX_REOPEN_GAP: Duration = Duration::from_secs(10);

/// How a server's tasks are spread over listen streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamScheme {
    /// A stream per batch of new tasks, closed when its tasks are done, merged into one past
    /// [`PushConfig::max_streams`].
    #[default]
    Batched,
    /// One stream per server, re-opened with the whole live set whenever tasks are added.
    Single,
    /// One stream per task.
    PerTask,
}

/// Push settings.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// How streams are grouped.
    pub scheme: StreamScheme,
    /// Wait after the first new id before opening, to gather a burst into one request.
    pub coalesce: Duration,
    /// The gap between two opens for one server is this times (1 + its open streams).
    pub min_reopen_gap: Duration,
    /// Streams per server (batched scheme) before the next open merges them all.
    pub max_streams: usize,
    /// A merge re-sends the live set: no sooner than this per live task after the last open.
    pub consolidation_gap_per_task: Duration,
    /// A stream silent this long (no event, no keep-alive) is dead.
    pub idle_timeout: Duration,
    /// When a server does not do push (-32601, another permanent error, an acknowledgement
    /// without `taskIds`), how long before asking again.
    pub declined_retry: Duration,
}

impl Default for PushConfig {
    fn default() -> Self {
        Self {
            scheme: StreamScheme::Batched,
            coalesce: Duration::from_millis(25),
            min_reopen_gap: Duration::from_millis(250),
            max_streams: 8,
            consolidation_gap_per_task: Duration::from_micros(500),
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
    /// Streams that failed, closed or went silent (planned replacements and retirements do not
    /// count).
    pub broken: u64,
    /// Times a server declined push (-32601 and other permanent errors, no `taskIds`).
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
    watched: Watched,
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
        // Shared with every incarnation of the hub: a restarted hub takes the same commands.
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let stats = Arc::new(Mutex::new(PushStats::default()));
        let watched = Watched::default();
        let hub_stats = stats.clone();
        let hub_watched = watched.clone();
        let restarts = Arc::new(std::sync::atomic::AtomicU32::new(0));
        supervise("push", restarts, move |restart| {
            let (stream_tx, stream_rx) = mpsc::unbounded_channel();
            let hub = Hub {
                links: links.clone(),
                sink: sink.clone(),
                poll: poll.clone(),
                config: config.clone(),
                stats: hub_stats.clone(),
                stream_tx,
                feeds: HashMap::new(),
                feed_of_key: HashMap::new(),
                feed_of_row: HashMap::new(),
                declined: HashMap::new(),
                queue: DeadlineQueue::new(),
                next_feed: 0,
                next_generation: 0,
            };
            let resume = if restart > 0 {
                // The crashed hub's streams are gone with it: nothing covers these tasks now.
                let all = hub_watched.all();
                for w in &all {
                    hub.poll.cover(w.task, false);
                }
                all
            } else {
                Vec::new()
            };
            hub.run(rx.clone(), stream_rx, resume)
        });
        Self {
            commands,
            stats,
            watched,
        }
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
        self.watched.insert(&watch);
        let _ = self.commands.send(Command::Watch(watch));
    }

    fn unwatch(&self, task: i64) {
        self.watched.remove(task);
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
    /// Acknowledged ids still watched; the stream is closed when none are left.
    live: usize,
    /// Rows whose changes this stream delivers (the poll source knows them as covered).
    covered: HashSet<i64>,
    /// A merge: once acknowledged, it replaces every other stream of the feed.
    replaces: bool,
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
    /// Watched task ids → rows, and back.
    tasks: HashMap<String, i64>,
    ids: HashMap<i64, String>,
    /// Acknowledged streams.
    streams: Vec<Stream>,
    /// The stream being opened (one at a time).
    pending: Option<Stream>,
    /// Watched ids a server left out of an acknowledgement: polled only, not asked again.
    refused: HashSet<String>,
    /// When the next open is scheduled.
    open_at: Option<Instant>,
    last_open: Option<Instant>,
    /// No open before this (backoff).
    not_before: Instant,
    failures: u32,
    last_failure: Option<Instant>,
}

impl Feed {
    fn requested(&self, task_id: &str) -> bool {
        self.streams
            .iter()
            .chain(self.pending.iter())
            .any(|s| s.requested.contains(task_id))
    }

    /// Watched ids on no stream, not refused.
    fn missing(&self) -> Vec<String> {
        self.tasks
            .keys()
            .filter(|id| !self.refused.contains(*id) && !self.requested(id))
            .cloned()
            .collect()
    }

    fn covered_elsewhere(&self, row: i64) -> bool {
        self.streams.iter().any(|s| s.covered.contains(&row))
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
        commands: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Command>>>,
        mut streams: mpsc::UnboundedReceiver<StreamMsg>,
        resume: Vec<Watch>,
    ) {
        // Held for the hub's life; a panic releases it for the restarted hub.
        let mut commands = commands.lock().await;
        for watch in resume {
            self.watch(watch);
        }
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

    fn max_streams(&self) -> usize {
        match self.config.scheme {
            StreamScheme::Batched => self.config.max_streams.max(1),
            StreamScheme::Single | StreamScheme::PerTask => 1,
        }
    }

    fn watch(&mut self, watch: Watch) {
        if self.feed_of_row.contains_key(&watch.task) {
            self.unwatch(watch.task); // re-watched: start over
        }
        let key = match self.config.scheme {
            StreamScheme::Batched | StreamScheme::Single => (watch.server_id, 0),
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
            ids: HashMap::new(),
            streams: Vec::new(),
            pending: None,
            refused: HashSet::new(),
            open_at: None,
            last_open: None,
            not_before: Instant::now(),
            failures: 0,
            last_failure: None,
        });
        for stream in &mut feed.streams {
            if stream
                .acked
                .as_ref()
                .is_some_and(|a| a.contains(&watch.task_id))
            {
                stream.live += 1;
            }
        }
        let settled = feed.refused.contains(&watch.task_id) || feed.requested(&watch.task_id);
        feed.ids.insert(watch.task, watch.task_id.clone());
        feed.tasks.insert(watch.task_id, watch.task);
        self.feed_of_row.insert(watch.task, feed_id);
        if !settled {
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
        let Some(task_id) = feed.ids.remove(&row) else {
            return;
        };
        feed.tasks.remove(&task_id);
        feed.refused.remove(&task_id);
        let mut uncovered = 0;
        for stream in feed.streams.iter_mut().chain(feed.pending.iter_mut()) {
            if stream.covered.remove(&row) {
                uncovered += 1; // the poll source forgets the task itself
            }
            if stream.acked.as_ref().is_some_and(|a| a.contains(&task_id)) {
                stream.live = stream.live.saturating_sub(1);
            }
        }
        // A stream whose tasks have all finished will never carry anything again.
        let before = feed.streams.len();
        feed.streams.retain(|s| s.live > 0);
        let mut closed = (before - feed.streams.len()) as u64;
        if feed.tasks.is_empty() {
            closed += feed.streams.len() as u64;
            self.feeds.remove(&feed_id);
            self.feed_of_key.retain(|_, id| *id != feed_id);
            self.queue.remove(feed_id);
        }
        self.stats(|s| {
            s.covered = s.covered.saturating_sub(uncovered);
            s.open_streams = s.open_streams.saturating_sub(closed);
        });
    }

    /// Plans an open for `feed_id` (it will carry whatever is missing then), unless one is
    /// planned or in flight.
    fn schedule_open(&mut self, feed_id: i64) {
        let max_streams = self.max_streams();
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        if feed.open_at.is_some() || feed.pending.is_some() {
            return; // that open (or the acknowledgement) will pick the new ids up
        }
        let now = Instant::now();
        let mut at = scheduler::after(now, self.config.coalesce).max(feed.not_before);
        if let Some(until) = self.declined.get(&feed.server_id) {
            at = at.max(*until);
        }
        if let Some(last) = feed.last_open {
            let open = u32::try_from(feed.streams.len()).unwrap_or(u32::MAX);
            let mut gap = self
                .config
                .min_reopen_gap
                .saturating_mul(open.saturating_add(1));
            if feed.streams.len() >= max_streams {
                let live = u32::try_from(feed.tasks.len()).unwrap_or(u32::MAX);
                gap = gap.max(self.config.consolidation_gap_per_task.saturating_mul(live));
            }
            at = at.max(last + gap.min(MAX_REOPEN_GAP));
        }
        feed.open_at = Some(at);
        self.queue.schedule(feed_id, at);
    }

    /// Schedules an open if a watched id is on no stream.
    fn ensure_requested(&mut self, feed_id: i64) {
        let missing = self
            .feeds
            .get(&feed_id)
            .is_some_and(|feed| !feed.missing().is_empty());
        if missing {
            self.schedule_open(feed_id);
        }
    }

    fn open(&mut self, feed_id: i64) {
        let max_streams = self.max_streams();
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        feed.open_at = None;
        if feed.pending.is_some() {
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
        let missing = feed.missing();
        if missing.is_empty() {
            return;
        }
        let Some(link) = self.links.get(feed.server_id) else {
            return; // the server was removed: the engine unwatches its tasks
        };
        // `subscriptions/listen` is the modern era's; a legacy server's changes come from its
        // polls and question streams.
        let Some(client) = link.peer.modern().cloned() else {
            return;
        };
        let replaces = feed.streams.len() >= max_streams;
        let mut ids: Vec<String> = if replaces {
            feed.tasks
                .keys()
                .filter(|id| !feed.refused.contains(*id))
                .cloned()
                .collect()
        } else {
            missing
        };
        ids.sort_unstable();
        self.next_generation += 1;
        let generation = self.next_generation;
        let request = ListenRequest {
            task_ids: ids.clone(),
            idle_timeout: self.config.idle_timeout,
        };
        let task = tokio::spawn(follow(
            client,
            request,
            feed_id,
            generation,
            self.stream_tx.clone(),
        ));
        feed.pending = Some(Stream {
            generation,
            requested: ids.into_iter().collect(),
            acked: None,
            live: 0,
            covered: HashSet::new(),
            replaces,
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
        let is_pending = feed
            .pending
            .as_ref()
            .is_some_and(|s| s.generation == msg.generation);
        let is_open = feed.streams.iter().any(|s| s.generation == msg.generation);
        if !is_pending && !is_open {
            return true; // a stream already replaced, retired or dropped
        }
        let server_id = feed.server_id;
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
                    server = server_id,
                    "the server closed a push stream; reconnecting"
                );
                self.ended(msg.feed, msg.generation, None);
                true
            }
            StreamEvent::Failed(error) => {
                self.ended(msg.feed, msg.generation, Some(error));
                true
            }
            StreamEvent::Ended => {
                let error = mcp::Error::InvalidResponse {
                    method: mcp::subscription::LISTEN_METHOD.into(),
                    reason: "the stream ended without a closing response".into(),
                };
                self.ended(msg.feed, msg.generation, Some(error));
                true
            }
        }
    }

    fn acknowledged(&mut self, feed_id: i64, task_ids: Option<Vec<String>>) {
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        let Some(mut stream) = feed.pending.take() else {
            return;
        };
        let Some(task_ids) = task_ids else {
            // The acknowledgement has no `taskIds`: the server does not do task notifications.
            tracing::info!(
                server = feed.server_id,
                "the server does not acknowledge task notifications; polling only"
            );
            let until = scheduler::after(Instant::now(), self.config.declined_retry);
            self.declined.insert(feed.server_id, until);
            drop(stream);
            self.stats(|s| s.declined += 1);
            self.ensure_requested(feed_id);
            return;
        };
        let acked: HashSet<String> = task_ids
            .into_iter()
            .filter(|id| stream.requested.contains(id))
            .collect();
        let refused: Vec<String> = stream
            .requested
            .iter()
            .filter(|id| !acked.contains(*id) && feed.tasks.contains_key(*id))
            .cloned()
            .collect();
        if !refused.is_empty() {
            tracing::debug!(
                server = feed.server_id,
                refused = refused.len(),
                "some tasks were not acknowledged; they stay on normal polling"
            );
            feed.refused.extend(refused);
        }
        stream.live = acked
            .iter()
            .filter(|id| feed.tasks.contains_key(*id))
            .count();
        let mut uncovered = Vec::new();
        let mut closed = 0u64;
        if stream.replaces {
            // Make before break: what the old streams covered stays covered if this one took it.
            for old in std::mem::take(&mut feed.streams) {
                for row in &old.covered {
                    match feed.ids.get(row) {
                        Some(id) if acked.contains(id) => {
                            stream.covered.insert(*row);
                        }
                        _ => uncovered.push(*row),
                    }
                }
                closed += 1;
            }
        }
        stream.acked = Some(acked);
        let opened = u64::from(stream.live > 0);
        if stream.live > 0 {
            feed.streams.push(stream);
        } // else: nothing of it is still watched (or nothing was acknowledged): close it now
        for row in &uncovered {
            self.poll.cover(*row, false);
        }
        let uncovered = uncovered.len() as u64;
        self.stats(|s| {
            s.acknowledged += 1;
            s.covered = s.covered.saturating_sub(uncovered);
            s.open_streams = (s.open_streams + opened).saturating_sub(closed);
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
        let observation = Observation {
            task: row,
            via: Via::Push,
            outcome: Ok(task),
        };
        if self.sink.send(observation).is_err() {
            return false;
        }
        let mut newly_covered = false;
        if let Some(stream) = feed.streams.iter_mut().find(|s| s.generation == generation) {
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
    fn ended(&mut self, feed_id: i64, generation: u64, error: Option<mcp::Error>) {
        let Some(feed) = self.feeds.get_mut(&feed_id) else {
            return;
        };
        let (stream, was_open) = match feed.streams.iter().position(|s| s.generation == generation)
        {
            Some(index) => (feed.streams.remove(index), true),
            None => match feed.pending.take_if(|s| s.generation == generation) {
                Some(stream) => (stream, false),
                None => return,
            },
        };
        let now = Instant::now();
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
                let until = scheduler::after(now, self.config.declined_retry);
                self.declined.insert(feed.server_id, until);
            }
            _ => {
                // Streams opened before the last failure break with it (a server restart takes
                // them all): one incident, one step of backoff.
                let same_incident = feed.last_failure.is_some_and(|t| stream.started < t);
                if !same_incident {
                    let stable =
                        was_open && now.saturating_duration_since(stream.started) >= STABLE_AFTER;
                    feed.failures = if stable {
                        1
                    } else {
                        feed.failures.saturating_add(1)
                    };
                }
                feed.last_failure = Some(now);
                let retry_after = error.as_ref().and_then(mcp::Error::retry_after);
                let wait = scheduler::backoff(RECONNECT_BASE, feed.failures, retry_after);
                if let Some(e) = &error {
                    tracing::info!(server = feed.server_id, error = %e, retry_in = ?wait, "push stream broke; polling until it is back");
                }
                feed.not_before = feed.not_before.max(scheduler::after(now, wait));
            }
        }
        let rows: Vec<i64> = stream
            .covered
            .iter()
            .copied()
            .filter(|row| !feed.covered_elsewhere(*row))
            .collect();
        drop(stream);
        for row in &rows {
            self.poll.cover(*row, false);
        }
        let uncovered = rows.len() as u64;
        self.stats(|s| {
            s.covered = s.covered.saturating_sub(uncovered);
            if was_open {
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
