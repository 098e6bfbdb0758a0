//! Server-side record of how often each task is polled, for the benchmark's "never sooner than
//! `pollIntervalMs`" check, which only the server can make whatever the client claims.
//!
//! Per task: the instant of its last `tasks/get` (or of its creation, so that a client polling
//! at once after `tools/call` shows up as an early poll) and its first poll since the last reset.
//! Everything else is a handful of counters and a fixed-size histogram, so memory grows with the
//! number of tasks, never with the number of polls.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::time::Instant;

/// Gaps up to this are counted in 1 ms buckets (the benchmark reads gaps near the interval)…
const FINE_LIMIT_MS: u64 = 10_000;
/// …longer ones in 100 ms buckets…
const COARSE_STEP_MS: u64 = 100;
/// …and everything from here on in the last bucket.
const LAST_BUCKET_MS: u64 = 600_000;
const BUCKETS: usize =
    FINE_LIMIT_MS as usize + ((LAST_BUCKET_MS - FINE_LIMIT_MS) / COARSE_STEP_MS) as usize + 1;
/// Tasks remembered at most. Past it, tasks not polled for [`FORGET_AFTER`] are forgotten (a
/// long-running demo server must not grow without bound); their next gap is then not measured.
const MAX_TASKS: usize = 200_000;
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// What the server saw since start (or the last [`reset`](crate::DemoServer::reset_poll_gaps)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollGapStats {
    /// The `pollIntervalMs` the server advertises: gaps shorter than this are early.
    pub interval: Duration,
    /// Successful `tasks/get` requests.
    pub polls: u64,
    /// Of those, the ones whose gap could be measured (the task's creation or previous poll was
    /// seen by this server).
    pub gaps: u64,
    /// Gaps shorter than `interval`.
    pub early: u64,
    /// Shortest gap.
    pub min_gap: Option<Duration>,
    /// Longest gap.
    pub max_gap: Option<Duration>,
    /// Gap counts by bucket: (lower bound, count), ascending, non-empty buckets only. Buckets are
    /// 1 ms wide below 10 s and 100 ms wide up to 600 s; the last one holds everything longer.
    pub histogram: Vec<(Duration, u64)>,
    /// Wall-clock time of each task's first poll since the reset (one entry per task polled).
    pub first_polls: Vec<SystemTime>,
}

impl PollGapStats {
    /// The lower bound of the bucket holding the `q`-quantile gap (`q` in 0..=1).
    pub fn gap_quantile(&self, q: f64) -> Option<Duration> {
        let total: u64 = self.histogram.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (lower, count) in &self.histogram {
            seen += count;
            if seen >= rank {
                return Some(*lower);
            }
        }
        self.histogram.last().map(|(lower, _)| *lower)
    }
}

struct TaskPolls {
    last: Instant,
    first_since_reset: Option<SystemTime>,
}

struct Inner {
    tasks: HashMap<String, TaskPolls>,
    polls: u64,
    gaps: u64,
    early: u64,
    min_gap: Option<Duration>,
    max_gap: Option<Duration>,
    histogram: Box<[u64]>,
}

impl Inner {
    fn zeroed(tasks: HashMap<String, TaskPolls>) -> Self {
        Self {
            tasks,
            polls: 0,
            gaps: 0,
            early: 0,
            min_gap: None,
            max_gap: None,
            histogram: vec![0; BUCKETS].into_boxed_slice(),
        }
    }

    fn make_room(&mut self, now: Instant) {
        if self.tasks.len() < MAX_TASKS {
            return;
        }
        self.tasks
            .retain(|_, task| now.saturating_duration_since(task.last) < FORGET_AFTER);
        if self.tasks.len() >= MAX_TASKS {
            self.tasks.clear();
        }
    }
}

fn bucket(gap: Duration) -> usize {
    let ms = u64::try_from(gap.as_millis()).unwrap_or(u64::MAX);
    if ms < FINE_LIMIT_MS {
        ms as usize
    } else {
        let coarse = (ms.min(LAST_BUCKET_MS) - FINE_LIMIT_MS) / COARSE_STEP_MS;
        FINE_LIMIT_MS as usize + coarse as usize
    }
}

fn bucket_floor(index: usize) -> Duration {
    let index = index as u64;
    if index < FINE_LIMIT_MS {
        Duration::from_millis(index)
    } else {
        Duration::from_millis(FINE_LIMIT_MS + (index - FINE_LIMIT_MS) * COARSE_STEP_MS)
    }
}

/// The live recorder behind [`PollGapStats`].
pub(crate) struct PollGaps {
    interval: Duration,
    inner: Mutex<Inner>,
}

impl PollGaps {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            interval,
            inner: Mutex::new(Inner::zeroed(HashMap::new())),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A task was created (`created` is its `CreateTaskResult`): its first poll is measured
    /// from now.
    pub(crate) fn created(&self, created: &Value) {
        let Some(task_id) = created.get("taskId").and_then(Value::as_str) else {
            return;
        };
        let now = Instant::now();
        self.with(|inner| {
            inner.make_room(now);
            inner.tasks.insert(
                task_id.to_owned(),
                TaskPolls {
                    last: now,
                    first_since_reset: None,
                },
            );
        });
    }

    /// A `tasks/get` for `task_id` succeeded.
    pub(crate) fn polled(&self, task_id: &str) {
        let now = Instant::now();
        let interval = self.interval;
        self.with(|inner| {
            inner.polls += 1;
            let gap = match inner.tasks.get_mut(task_id) {
                Some(task) => {
                    let gap = now.saturating_duration_since(task.last);
                    task.last = now;
                    task.first_since_reset.get_or_insert_with(SystemTime::now);
                    Some(gap)
                }
                None => {
                    inner.make_room(now);
                    inner.tasks.insert(
                        task_id.to_owned(),
                        TaskPolls {
                            last: now,
                            first_since_reset: Some(SystemTime::now()),
                        },
                    );
                    None
                }
            };
            if let Some(gap) = gap {
                inner.gaps += 1;
                if gap < interval {
                    inner.early += 1;
                }
                inner.min_gap = Some(inner.min_gap.map_or(gap, |min| min.min(gap)));
                inner.max_gap = Some(inner.max_gap.map_or(gap, |max| max.max(gap)));
                inner.histogram[bucket(gap)] += 1;
            }
        });
    }

    pub(crate) fn snapshot(&self) -> PollGapStats {
        self.with(|inner| PollGapStats {
            interval: self.interval,
            polls: inner.polls,
            gaps: inner.gaps,
            early: inner.early,
            min_gap: inner.min_gap,
            max_gap: inner.max_gap,
            histogram: inner
                .histogram
                .iter()
                .enumerate()
                .filter(|(_, count)| **count > 0)
                .map(|(index, count)| (bucket_floor(index), *count))
                .collect(),
            first_polls: inner
                .tasks
                .values()
                .filter_map(|task| task.first_since_reset)
                .collect(),
        })
    }

    /// Zeroes the counters and forgets first polls; each task's last poll is kept, so the gap
    /// that spans the reset is still measured.
    pub(crate) fn reset(&self) {
        self.with(|inner| {
            let mut tasks = std::mem::take(&mut inner.tasks);
            for task in tasks.values_mut() {
                task.first_since_reset = None;
            }
            *inner = Inner::zeroed(tasks);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test(start_paused = true)]
    async fn measures_gaps_from_creation_and_between_polls() {
        let gaps = PollGaps::new(Duration::from_secs(5));
        gaps.created(&json!({"taskId": "a"}));
        tokio::time::advance(Duration::from_millis(20)).await;
        gaps.polled("a"); // 20 ms after creation: early
        tokio::time::advance(Duration::from_millis(5_001)).await;
        gaps.polled("a");
        gaps.polled("unknown"); // first sight: counted, no gap
        let stats = gaps.snapshot();
        assert_eq!(
            (stats.polls, stats.gaps, stats.early),
            (3, 2, 1),
            "{stats:?}"
        );
        assert_eq!(stats.min_gap, Some(Duration::from_millis(20)));
        assert_eq!(stats.max_gap, Some(Duration::from_millis(5_001)));
        assert_eq!(
            stats.histogram,
            vec![
                (Duration::from_millis(20), 1),
                (Duration::from_millis(5_001), 1)
            ]
        );
        assert_eq!(stats.first_polls.len(), 2, "one first poll per task");
        assert_eq!(stats.gap_quantile(0.5), Some(Duration::from_millis(20)));
        assert_eq!(stats.gap_quantile(1.0), Some(Duration::from_millis(5_001)));
    }

    #[tokio::test(start_paused = true)]
    async fn reset_zeroes_counters_but_keeps_the_gap_across_it() {
        let gaps = PollGaps::new(Duration::from_secs(5));
        gaps.polled("a");
        gaps.reset();
        assert_eq!(gaps.snapshot().polls, 0);
        assert!(
            gaps.snapshot().first_polls.is_empty(),
            "first polls are per reset"
        );
        tokio::time::advance(Duration::from_secs(6)).await;
        gaps.polled("a");
        let stats = gaps.snapshot();
        assert_eq!((stats.polls, stats.gaps, stats.early), (1, 1, 0));
        assert_eq!(stats.first_polls.len(), 1);
    }

    #[test]
    fn buckets_are_fine_then_coarse_then_capped() {
        assert_eq!(
            bucket_floor(bucket(Duration::from_micros(4_999_999))),
            Duration::from_millis(4_999)
        );
        assert_eq!(
            bucket_floor(bucket(Duration::from_millis(12_345))),
            Duration::from_millis(12_300)
        );
        assert_eq!(bucket(Duration::from_secs(86_400)), BUCKETS - 1);
        assert_eq!(
            bucket_floor(BUCKETS - 1),
            Duration::from_millis(LAST_BUCKET_MS)
        );
    }
}
