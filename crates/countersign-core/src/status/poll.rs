//! The polling status source: one loop, one deadline queue for every watched task, a bounded
//! number of concurrent `tasks/get` per server. Poll bookkeeping (due times, intervals, failure
//! streaks) lives only in memory: an unchanged poll costs no disk write.
//!
//! A task another source covers (a healthy push stream that acknowledged it, see
//! [`super::push`]) is still polled, at the [`safety_net`] rate: polling is what remains when the
//! other source silently fails, so it never stops, it only slows down. When coverage ends, the
//! task is back at its normal interval at once.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use rustc_hash::FxHashMap;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{
    supervise, CheckFailure, FirstCheck, Links, Observation, StatusSource, Watch, Watched,
};
use crate::ledger::Via;
use crate::mcp::{Digest, ErrorClass, Polled};
use crate::scheduler::{self, DeadlineQueue};

enum Command {
    Watch(Watch),
    Unwatch(i64),
    /// Another source does (true) or no longer does (false) deliver this task's changes.
    Cover(i64, bool),
    /// The server signalled a change between polls: poll again soon.
    Soon(i64),
}

/// The soonest a signalled poll follows the task's last answer: a server that signals without
/// end costs at most this rate per task.
const SOON_MIN: Duration = Duration::from_millis(100);

/// How much slower a covered task is polled than its interval.
pub const SAFETY_NET_FACTOR: u32 = 10;
/// The shortest safety-net interval.
pub const SAFETY_NET_MIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The poll interval of a covered task: `max(10 × interval, 30 s)`. Slow enough that a pushed
/// task costs almost no requests (one per half minute at the demo's 1 s interval, against 30),
/// fast enough that a push source that silently stops delivering (a proxy that buffers, a server
/// bug) delays what the user sees by half a minute, not forever.
pub fn safety_net(interval: Duration) -> Duration {
    interval
        .saturating_mul(SAFETY_NET_FACTOR)
        .max(SAFETY_NET_MIN)
}

struct Done {
    task: i64,
    generation: u64,
    /// The server's failure epoch when the poll was sent (see [`Entry::digest`]).
    epoch: u64,
    result: Result<Polled, crate::mcp::Error>,
}

struct Entry {
    server_id: i64,
    task_id: String,
    interval: Duration,
    /// The server's last `pollIntervalMs` for this task: with the server's floor now, the
    /// interval after an unchanged answer (a floor may have been raised since the last change).
    server_ms: Option<u64>,
    failures: u32,
    generation: u64,
    in_flight: bool,
    /// Another source delivers this task's changes: poll at the safety-net rate.
    covered: bool,
    /// When the last answer arrived (or the watch began): no poll sooner than one interval later.
    last_answer: Instant,
    /// The last answer's digest, and the server's failure epoch then. An answer with the same
    /// digest is not passed on: the engine already has it, and an unchanged poll is the common
    /// case. Only valid while nothing else could have moved the engine's view: it is dropped
    /// when this task's poll fails, when any poll of the server fails (the next success must
    /// reach the engine, which records the server's recovery), and when coverage changes
    /// (another source may have delivered a newer state).
    digest: Option<(Digest, u64)>,
    /// A signal came while a poll was out (its answer may predate the change): the next poll
    /// follows the answer after this wait instead of the interval.
    soon: Option<Duration>,
}

impl Entry {
    /// The wait after an answer, given coverage.
    fn next_wait(&self) -> Duration {
        if let Some(soon) = self.soon {
            return soon;
        }
        if self.covered {
            safety_net(self.interval)
        } else {
            self.interval
        }
    }
}

/// Counters for benchmarks and diagnostics.
#[derive(Debug, Default, Clone, Copy)]
pub struct PollStats {
    /// `tasks/get` requests sent.
    pub polls: u64,
    /// Of those, failed.
    pub failures: u64,
    /// Times the polling loop crashed and was restarted (a bug if ever non-zero).
    pub restarts: u32,
    /// Answers identical to the task's previous one, not passed on.
    pub unchanged: u64,
}

/// Polls every watched task no faster than its interval.
pub struct PollSource {
    commands: mpsc::UnboundedSender<Command>,
    stats: std::sync::Arc<std::sync::Mutex<PollStats>>,
    watched: Watched,
    restarts: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl PollSource {
    /// Starts the polling loop; observations go to `sink`. The loop ends when the source is
    /// dropped.
    pub fn start(links: Links, sink: mpsc::UnboundedSender<Observation>) -> Self {
        let (commands, rx) = mpsc::unbounded_channel();
        // Shared with every incarnation of the loop: a restarted loop takes the same commands.
        let rx = std::sync::Arc::new(tokio::sync::Mutex::new(rx));
        let stats = std::sync::Arc::new(std::sync::Mutex::new(PollStats::default()));
        let watched = Watched::default();
        let restarts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let loop_stats = stats.clone();
        let loop_watched = watched.clone();
        supervise("poll", restarts.clone(), move |restart| {
            let resume = if restart > 0 {
                loop_watched.all()
            } else {
                Vec::new()
            };
            run(
                links.clone(),
                sink.clone(),
                rx.clone(),
                loop_stats.clone(),
                loop_watched.clone(),
                resume,
            )
        });
        Self {
            commands,
            stats,
            watched,
            restarts,
        }
    }

    /// Polls sent so far.
    pub fn stats(&self) -> PollStats {
        let mut stats = self.stats.lock().map(|s| *s).unwrap_or_default();
        stats.restarts = self.restarts.load(std::sync::atomic::Ordering::SeqCst);
        stats
    }

    /// Tells the poller whether another source now delivers `task`'s changes: covered tasks are
    /// polled at the [`safety_net`] rate, uncovered ones at their interval (from now: a task
    /// whose cover broke gets its next poll within one interval).
    pub fn cover(&self, task: i64, covered: bool) {
        let _ = self.commands.send(Command::Cover(task, covered));
    }

    /// Polls `task` soon (no sooner than its floor after its last answer): the server signalled
    /// a change the next poll would show (a legacy task's question or result arrived).
    pub fn poll_soon(&self, task: i64) {
        let _ = self.commands.send(Command::Soon(task));
    }
}

impl StatusSource for PollSource {
    fn via(&self) -> Via {
        Via::Poll
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

async fn run(
    links: Links,
    sink: mpsc::UnboundedSender<Observation>,
    commands: std::sync::Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Command>>>,
    stats: std::sync::Arc<std::sync::Mutex<PollStats>>,
    watched: Watched,
    resume: Vec<Watch>,
) {
    // Held for the loop's life; a panic releases it for the restarted loop.
    let mut commands = commands.lock().await;
    let mut queue = DeadlineQueue::new();
    let mut entries: FxHashMap<i64, Entry> = FxHashMap::default();
    let mut generation = 0u64;
    // Per server: bumped by every failed poll (see `Entry::digest`).
    let mut epochs: FxHashMap<i64, u64> = FxHashMap::default();
    // The polls out now, driven by this loop's own task: an answer wakes the loop directly,
    // with no spawned task per poll and no channel hand-off back (on a server whose polls
    // arrive one at a time, those were a thread wake-up each). A panic in a poll is the loop's,
    // which `supervise` restarts, rather than a task that silently never reports.
    let mut in_flight: FuturesUnordered<Pin<Box<dyn Future<Output = Option<Done>> + Send>>> =
        FuturesUnordered::new();
    let mut resume = resume
        .into_iter()
        .map(Command::Watch)
        .collect::<std::collections::VecDeque<_>>();
    loop {
        let next = queue.next_deadline();
        tokio::select! {
            command = async {
                match resume.pop_front() {
                    Some(command) => Some(command),
                    None => commands.recv().await,
                }
            } => match command {
                None => return,
                Some(Command::Watch(w)) => {
                    generation += 1;
                    let floor = links.get(w.server_id).map(|l| l.floor).unwrap_or_default();
                    let interval = scheduler::interval(w.poll_interval_ms, floor);
                    let first = match w.first {
                        FirstCheck::AfterInterval => interval,
                        FirstCheck::Spread => scheduler::spread(interval),
                    };
                    queue.schedule(w.task, scheduler::after(Instant::now(), first));
                    entries.insert(w.task, Entry {
                        server_id: w.server_id,
                        task_id: w.task_id,
                        interval,
                        server_ms: w.poll_interval_ms,
                        failures: 0,
                        generation,
                        in_flight: false,
                        covered: false,
                        last_answer: Instant::now(),
                        digest: None,
                        soon: None,
                    });
                }
                Some(Command::Unwatch(task)) => {
                    entries.remove(&task);
                    queue.remove(task);
                }
                Some(Command::Cover(task, covered)) => {
                    let Some(entry) = entries.get_mut(&task) else { continue };
                    if entry.covered == covered {
                        continue;
                    }
                    entry.covered = covered;
                    entry.digest = None;
                    if entry.in_flight || entry.failures > 0 {
                        continue; // the answer (or the backoff) sets the next deadline
                    }
                    let due = if covered {
                        scheduler::after(entry.last_answer, safety_net(entry.interval))
                    } else {
                        // Spread over one interval: a broken stream uncovers every task of a
                        // server at once, and they must not all be polled in the same instant.
                        scheduler::after(Instant::now(), scheduler::spread(entry.interval))
                            .max(scheduler::after(entry.last_answer, entry.interval))
                    };
                    queue.schedule(task, due);
                }
                Some(Command::Soon(task)) => {
                    let Some(entry) = entries.get_mut(&task) else { continue };
                    if entry.failures > 0 {
                        continue; // the backoff decides
                    }
                    let floor = links.get(entry.server_id).map(|l| l.floor).unwrap_or_default();
                    let wait = floor.max(SOON_MIN);
                    if entry.in_flight {
                        entry.soon = Some(wait);
                        continue;
                    }
                    queue.schedule(task, scheduler::after(entry.last_answer, wait));
                }
            },
            Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                // `None`: the server's link closed while the poll waited for its turn.
                let Some(done) = done else { continue };
                let Some(entry) = entries.get_mut(&done.task) else { continue };
                if entry.generation != done.generation {
                    continue; // re-watched meanwhile: this answer belongs to the old watch
                }
                entry.in_flight = false;
                let now = Instant::now();
                entry.last_answer = now;
                let outcome = match done.result {
                    Ok(Polled::Unchanged)
                        if entry.digest.is_some_and(|(_, epoch)| epoch == done.epoch)
                            && epochs.get(&entry.server_id).copied().unwrap_or(0) == done.epoch =>
                    {
                        // Same answer as last time, nothing failed in between: the engine has it.
                        if let Ok(mut s) = stats.lock() {
                            s.unchanged += 1;
                        }
                        // The person may have raised the floor (Settings, the server's own):
                        // it holds from the next interval, unchanged answer or not.
                        let floor = links.get(entry.server_id).map(|l| l.floor).unwrap_or_default();
                        entry.interval = scheduler::interval(entry.server_ms, floor);
                        queue.schedule(done.task, scheduler::after(now, entry.next_wait()));
                        continue;
                    }
                    Ok(Polled::Unchanged) => {
                        // The digest was dropped while the poll was out (a failure or a coverage
                        // change raced it): the next poll is read in full and reaches the engine.
                        entry.digest = None;
                        queue.schedule(done.task, scheduler::after(now, entry.next_wait()));
                        continue;
                    }
                    Ok(Polled::Changed(task, digest)) => {
                        entry.failures = 0;
                        entry.digest = Some((digest, done.epoch));
                        let floor = links.get(entry.server_id).map(|l| l.floor).unwrap_or_default();
                        entry.server_ms = task.poll_interval_ms;
                        entry.interval = scheduler::interval(task.poll_interval_ms, floor);
                        if task.status().is_terminal() {
                            entries.remove(&done.task);
                            watched.remove(done.task);
                        } else {
                            queue.schedule(done.task, scheduler::after(now, entry.next_wait()));
                        }
                        Ok(task)
                    }
                    Err(error) => {
                        entry.failures += 1;
                        entry.digest = None;
                        *epochs.entry(entry.server_id).or_default() += 1;
                        if let Ok(mut s) = stats.lock() {
                            s.failures += 1;
                        }
                        let class = error.class();
                        let retry_in = if class == ErrorClass::Lost {
                            entries.remove(&done.task);
                            watched.remove(done.task);
                            Duration::ZERO
                        } else {
                            let wait = scheduler::backoff(entry.next_wait(), entry.failures, error.retry_after());
                            queue.schedule(done.task, scheduler::after(now, wait));
                            wait
                        };
                        Err(CheckFailure {
                            code: error.code(),
                            message: error.to_string(),
                            class,
                            failures: entries.get(&done.task).map(|e| e.failures).unwrap_or(1),
                            retry_in,
                        })
                    }
                };
                if sink.send(Observation { task: done.task, via: Via::Poll, outcome }).is_err() {
                    return;
                }
            }
            _ = sleep_until(next), if next.is_some() => {
                for task in queue.pop_due(Instant::now()) {
                    let Some(entry) = entries.get_mut(&task) else { continue };
                    if entry.in_flight {
                        continue;
                    }
                    let Some(link) = links.get(entry.server_id) else {
                        // No client for the server (being removed, or its client could not be
                        // built yet): look again one interval later rather than dropping the
                        // task; the engine unwatches the tasks of a removed server.
                        queue.schedule(task, scheduler::after(Instant::now(), entry.interval));
                        continue;
                    };
                    entry.in_flight = true;
                    entry.soon = None;
                    if let Ok(mut s) = stats.lock() {
                        s.polls += 1;
                    }
                    let task_id = entry.task_id.clone();
                    let generation = entry.generation;
                    let epoch = epochs.get(&entry.server_id).copied().unwrap_or(0);
                    // Only a digest taken in this epoch vouches for the engine's view.
                    let last = entry.digest.filter(|(_, e)| *e == epoch).map(|(d, _)| d);
                    in_flight.push(Box::pin(async move {
                        let _permit = link.permits.acquire_owned().await.ok()?;
                        let result = link.peer.poll_task(&task_id, last).await;
                        Some(Done { task, generation, epoch, result })
                    }));
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safety_net_is_ten_intervals_but_at_least_thirty_seconds() {
        assert_eq!(
            safety_net(Duration::from_millis(200)),
            Duration::from_secs(30)
        );
        assert_eq!(safety_net(Duration::from_secs(2)), Duration::from_secs(30));
        assert_eq!(safety_net(Duration::from_secs(5)), Duration::from_secs(50));
        assert_eq!(
            safety_net(Duration::MAX),
            Duration::MAX,
            "saturates instead of overflowing"
        );
    }
}
