//! When to poll: one deadline queue for every task, and the policy for intervals and backoff.
//!
//! Invariants:
//! - a task is never polled sooner than its interval after the previous poll's ANSWER arrived,
//!   so the server sees gaps of at least `interval` between requests for one task;
//! - the interval is `max(server pollIntervalMs, user floor, MIN_INTERVAL)`, re-read from every
//!   answer, and [`DEFAULT_INTERVAL`] when the server names none;
//! - failures back off exponentially with jitter, capped at [`MAX_BACKOFF`], and never retry
//!   sooner than the server's `Retry-After` or the normal interval;
//! - every wait a server can influence (`pollIntervalMs`, `Retry-After`) is capped at
//!   [`MAX_SERVER_WAIT`], and deadlines are computed with [`after`], which cannot overflow: a
//!   server number never panics the loop that serves every other server;
//! - on resume, first polls are spread uniformly over each task's interval so a server that just
//!   came back does not get every task at once.
//!
//! Time is `tokio::time::Instant`, so tests run the scheduler under paused time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::Rng as _;
use rustc_hash::FxHashMap;
use tokio::time::Instant;

/// Interval used when the server gives no `pollIntervalMs`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(2000);
/// Longest wait between attempts while a task's polls fail.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The shortest interval between two polls of one task, whatever the server asks
/// (`pollIntervalMs: 0` would otherwise mean a busy loop); a server's floor can only raise it.
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);
/// The longest wait a server can impose through `pollIntervalMs` or `Retry-After`: past an hour
/// a number is more likely a bug or an attack than a plan, and a task must not vanish from
/// view for days because a server said so.
pub const MAX_SERVER_WAIT: Duration = Duration::from_secs(3600);
/// The largest per-server floor honoured (a user's setting, but still a number that meets time).
pub const MAX_FLOOR: Duration = Duration::from_secs(24 * 3600);

/// The interval to wait after a successful poll: the server's `pollIntervalMs` capped at
/// [`MAX_SERVER_WAIT`], raised to the user's `floor` (at most [`MAX_FLOOR`]) and to
/// [`MIN_INTERVAL`].
pub fn interval(server_ms: Option<u64>, floor: Duration) -> Duration {
    server_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_INTERVAL)
        .min(MAX_SERVER_WAIT)
        .max(floor.min(MAX_FLOOR))
        .max(MIN_INTERVAL)
}

/// A server's `Retry-After`, capped at [`MAX_SERVER_WAIT`].
pub fn retry_after(server: Option<Duration>) -> Option<Duration> {
    server.map(|d| d.min(MAX_SERVER_WAIT))
}

/// `now + wait` without overflow: a wait that does not fit in an `Instant` (only possible with
/// a number no caller should have let through) becomes [`MAX_SERVER_WAIT`].
pub fn after(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait)
        .or_else(|| now.checked_add(MAX_SERVER_WAIT))
        .unwrap_or(now)
}

/// The wait after the `failures`-th consecutive failure (1-based): `interval · 2^(n-1)` with ±20 %
/// jitter, capped, and never less than `retry_after` (itself capped at [`MAX_SERVER_WAIT`]) or
/// the interval itself.
pub fn backoff(interval: Duration, failures: u32, retry_after: Option<Duration>) -> Duration {
    let exp = interval.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let jitter = rand::rng().random_range(0.8..1.2);
    // `mul_f64` panics when the product overflows a Duration: bound it first, high enough that
    // the jittered value still reaches the cap (75 s · 0.8 = 60 s).
    let capped = exp.min(MAX_BACKOFF.saturating_mul(2).max(interval));
    let wait = capped.mul_f64(jitter).min(MAX_BACKOFF).max(interval);
    match self::retry_after(retry_after) {
        Some(ra) => wait.max(ra),
        None => wait,
    }
}

/// A uniformly random offset in `[0, interval)`: where a resumed task's first poll lands.
pub fn spread(interval: Duration) -> Duration {
    if interval.is_zero() {
        return Duration::ZERO;
    }
    interval.mul_f64(rand::rng().random_range(0.0..1.0))
}

/// A min-queue of deadlines keyed by task row. Rescheduling a key supersedes its older deadline
/// (lazy deletion by generation), so each key is due at most once at a time.
#[derive(Debug, Default)]
pub struct DeadlineQueue {
    heap: BinaryHeap<Reverse<(Instant, u64, i64)>>,
    current: FxHashMap<i64, u64>,
    next_generation: u64,
}

impl DeadlineQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or replaces) the deadline of `key`.
    pub fn schedule(&mut self, key: i64, at: Instant) {
        self.next_generation += 1;
        let generation = self.next_generation;
        self.current.insert(key, generation);
        self.heap.push(Reverse((at, generation, key)));
    }

    /// Forgets `key`.
    pub fn remove(&mut self, key: i64) {
        self.current.remove(&key);
    }

    /// Whether `key` has a deadline.
    pub fn contains(&self, key: i64) -> bool {
        self.current.contains_key(&key)
    }

    /// How many keys are scheduled.
    pub fn len(&self) -> usize {
        self.current.len()
    }

    /// Whether nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// The earliest live deadline.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        self.discard_stale();
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Removes and returns every key due at or before `now`.
    pub fn pop_due(&mut self, now: Instant) -> Vec<i64> {
        let mut due = Vec::new();
        loop {
            self.discard_stale();
            match self.heap.peek() {
                Some(Reverse((at, _, _))) if *at <= now => {
                    if let Some(Reverse((_, _, key))) = self.heap.pop() {
                        self.current.remove(&key);
                        due.push(key);
                    }
                }
                _ => return due,
            }
        }
    }

    fn discard_stale(&mut self) {
        while let Some(Reverse((_, generation, key))) = self.heap.peek() {
            if self.current.get(key) == Some(generation) {
                return;
            }
            self.heap.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_honours_server_value_floor_and_default() {
        assert_eq!(
            interval(Some(500), Duration::ZERO),
            Duration::from_millis(500)
        );
        assert_eq!(
            interval(Some(500), Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        assert_eq!(interval(None, Duration::ZERO), DEFAULT_INTERVAL);
    }

    #[test]
    fn backoff_grows_is_capped_and_respects_retry_after() {
        let base = Duration::from_secs(1);
        for _ in 0..100 {
            let first = backoff(base, 1, None);
            assert!(
                first >= base && first <= Duration::from_millis(1200),
                "{first:?}"
            );
            let third = backoff(base, 3, None);
            assert!(
                third >= Duration::from_millis(3200) && third <= Duration::from_millis(4800),
                "{third:?}"
            );
            assert_eq!(
                backoff(base, 30, None).min(MAX_BACKOFF),
                backoff(base, 30, None).min(MAX_BACKOFF)
            );
            assert!(backoff(base, 30, None) <= MAX_BACKOFF);
            assert!(backoff(base, 1, Some(Duration::from_secs(90))) >= Duration::from_secs(90));
        }
    }

    #[test]
    fn interval_has_a_built_in_floor_and_a_ceiling() {
        assert_eq!(
            interval(Some(0), Duration::ZERO),
            MIN_INTERVAL,
            "0 ms is not a busy loop"
        );
        assert_eq!(interval(Some(10), Duration::ZERO), MIN_INTERVAL);
        assert_eq!(
            interval(Some(0), Duration::from_secs(2)),
            Duration::from_secs(2),
            "the user's floor only raises it"
        );
        assert_eq!(interval(Some(u64::MAX), Duration::ZERO), MAX_SERVER_WAIT);
        assert_eq!(
            interval(Some(i64::MAX as u64), Duration::ZERO),
            MAX_SERVER_WAIT
        );
    }

    #[test]
    fn server_waits_never_overflow_an_instant() {
        let huge = Some(Duration::from_secs(10_000_000_000_000_000_000));
        for failures in [1, 2, 30, u32::MAX] {
            let wait = backoff(Duration::from_secs(1), failures, huge);
            assert_eq!(wait, MAX_SERVER_WAIT, "Retry-After is capped at an hour");
            let _ = after(Instant::now(), wait);
        }
        let longest = interval(Some(u64::MAX), Duration::MAX);
        assert_eq!(longest, MAX_FLOOR, "even the user's floor is bounded");
        let now = Instant::now();
        assert_eq!(after(now, Duration::MAX), now + MAX_SERVER_WAIT);
        assert!(
            backoff(longest, 3, None) >= longest,
            "no panic on the longest interval"
        );
        assert!(spread(longest) < longest);
    }

    #[test]
    fn spread_stays_within_the_interval() {
        for _ in 0..1000 {
            assert!(spread(Duration::from_secs(5)) < Duration::from_secs(5));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn queue_pops_in_deadline_order_and_rescheduling_supersedes() {
        let now = Instant::now();
        let mut q = DeadlineQueue::new();
        q.schedule(1, now + Duration::from_secs(3));
        q.schedule(2, now + Duration::from_secs(1));
        q.schedule(3, now + Duration::from_secs(2));
        q.schedule(1, now + Duration::from_millis(1500)); // supersedes the 3 s deadline
        assert_eq!(q.len(), 3);
        assert_eq!(q.next_deadline(), Some(now + Duration::from_secs(1)));
        assert_eq!(q.pop_due(now + Duration::from_millis(1600)), vec![2, 1]);
        q.remove(3);
        assert_eq!(q.pop_due(now + Duration::from_secs(10)), Vec::<i64>::new());
        assert!(q.is_empty());
        assert_eq!(q.next_deadline(), None);
    }
}
