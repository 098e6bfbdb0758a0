//! The workload: `bench_job` tasks on the demo server. Each stays `working` for exactly
//! `duration_ms` (the server's time scale does not touch it) and changes its status message to
//! `step k/S` at `createdAt + duration·(k−1)/S` (k = 2..S), so every change has a known
//! server-side time to measure the engine's event against.
//!
//! Tasks are created through `actions::call`, the way the console does it: call intent on disk,
//! `tools/call`, task handle committed before the call returns.

use std::time::Duration;

use countersign_core::actions::{self, Called};
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::ledger::Ledger;
use countersign_core::mcp::{Peer, ToolCall};
use futures_util::StreamExt as _;
use rand::Rng as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::clock::parse_rfc3339_us;
use crate::error::{Error, Result};

/// The tool every task runs.
pub const TOOL: &str = "bench_job";
/// The fastmcp peer's tool for the peer runs: `steps` steps of `PEER_STEP_SECONDS` each, with
/// `statusMessage` "step i/n".
pub const PEER_TOOL: &str = "long_job";
/// `bench_job` accepts at most this many steps.
const MAX_STEPS: u64 = 1000;

/// The arguments of one `bench_job`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPlan {
    /// How long the task stays `working`.
    pub duration_ms: u64,
    /// Status-message steps (changes = steps − 1).
    pub steps: u64,
}

impl JobPlan {
    /// A task that lives at least `life` and changes its message every `every` (stretched when
    /// `bench_job`'s step limit would be exceeded).
    pub fn changing(life: Duration, every: Duration) -> Self {
        let every_ms = (every.as_millis() as u64).max(1);
        let life_ms = life.as_millis() as u64;
        let steps = life_ms.div_ceil(every_ms).clamp(2, MAX_STEPS);
        let every_ms = every_ms.max(life_ms.div_ceil(steps));
        Self {
            duration_ms: steps * every_ms,
            steps,
        }
    }

    /// A task that stays `working` for `life` without any change.
    pub fn quiet(life: Duration) -> Self {
        Self {
            duration_ms: life.as_millis() as u64,
            steps: 1,
        }
    }

    /// The `tools/call` arguments.
    pub fn arguments(&self) -> Map<String, Value> {
        let mut arguments = Map::new();
        arguments.insert("duration_ms".into(), json!(self.duration_ms));
        arguments.insert("steps".into(), json!(self.steps));
        arguments
    }

    /// When `step k/S` appears, in µs after `createdAt` (the demo server splits the duration in
    /// whole microseconds exactly this way).
    pub fn change_offset_us(&self, k: u64) -> i64 {
        let total_us = self.duration_ms * 1000;
        (total_us * k.saturating_sub(1) / self.steps) as i64
    }
}

/// Plans for `n` tasks living at least `life`, each changing every `every`, drawn uniformly
/// per task from the range so that tasks do not change in lockstep.
pub fn changing_plans(n: usize, life: Duration, every: (Duration, Duration)) -> Vec<JobPlan> {
    let mut rng = rand::rng();
    let (low, high) = (every.0.as_millis() as u64, every.1.as_millis() as u64);
    (0..n)
        .map(|_| {
            let every = if high > low {
                rng.random_range(low..=high)
            } else {
                low
            };
            JobPlan::changing(life, Duration::from_millis(every))
        })
        .collect()
}

/// The step number in a `step k/S` status message.
pub fn step_of(message: &str) -> Option<u64> {
    let (k, _steps) = message.strip_prefix("step ")?.split_once('/')?;
    k.parse().ok()
}

/// One created task.
#[derive(Debug, Clone)]
pub struct Job {
    /// The ledger row.
    pub row: i64,
    /// The server's `createdAt`, Unix µs.
    pub created_us: i64,
    /// Its arguments.
    pub plan: JobPlan,
}

impl Job {
    /// Server time (Unix µs) at which `step k/S` appeared.
    pub fn change_us(&self, k: u64) -> i64 {
        self.created_us + self.plan.change_offset_us(k)
    }
}

/// Calls `bench_job` once per plan (or, with `peer_steps`, the fastmcp peer's `long_job` with
/// that many steps), `concurrency` at a time, through `actions::call` with `peer` (either era's:
/// a legacy peer calls task-augmented, in its stored session), the i-th call started no sooner
/// than `stagger`·i/n after the first; `progress` hears the count of tasks created so far. Fails
/// if any call does not create a task or the whole batch
/// takes longer than `budget`.
#[allow(clippy::too_many_arguments)]
pub async fn create(
    ledger: &Ledger,
    peer: &Peer,
    server: &ServerRecord,
    plans: &[JobPlan],
    peer_steps: Option<u64>,
    stagger: Duration,
    concurrency: usize,
    budget: Duration,
    mut progress: impl FnMut(usize),
) -> Result<Vec<Job>> {
    let start = tokio::time::Instant::now();
    let spacing = stagger / (plans.len().max(1) as u32);
    let calls = futures_util::stream::iter(plans.iter().copied().enumerate())
        .map(|(i, plan)| async move {
            if !spacing.is_zero() {
                tokio::time::sleep_until(start + spacing * i as u32).await;
            }
            let call = match peer_steps {
                Some(steps) => {
                    let mut arguments = Map::new();
                    arguments.insert("steps".into(), json!(steps));
                    ToolCall::new(PEER_TOOL, Some(arguments))
                }
                None => ToolCall::new(TOOL, Some(plan.arguments())),
            };
            match actions::call(ledger, peer, server, &call, "countersign-bench").await? {
                Called::Task(record) => {
                    let created_us = record
                        .created_text
                        .as_deref()
                        .and_then(parse_rfc3339_us)
                        .ok_or_else(|| {
                            Error::Unexpected(format!(
                                "task {} has no readable createdAt",
                                record.task_id
                            ))
                        })?;
                    Ok(Job {
                        row: record.id,
                        created_us,
                        plan,
                    })
                }
                other => Err(Error::Unexpected(format!(
                    "{TOOL} did not create a task: {other:?}"
                ))),
            }
        })
        .buffer_unordered(concurrency.max(1));
    let collect = async {
        futures_util::pin_mut!(calls);
        let mut jobs = Vec::with_capacity(plans.len());
        while let Some(job) = calls.next().await {
            jobs.push(job?);
            progress(jobs.len());
        }
        Ok::<_, Error>(jobs)
    };
    tokio::time::timeout(budget, collect)
        .await
        .map_err(|_| Error::Timeout {
            what: format!("{} {TOOL} tasks to be created", plans.len()),
            after: budget,
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_outlive_their_life_and_respect_the_step_limit() {
        let plan = JobPlan::changing(Duration::from_secs(300), Duration::from_secs(20));
        assert_eq!(
            plan,
            JobPlan {
                duration_ms: 300_000,
                steps: 15
            }
        );
        let long = JobPlan::changing(Duration::from_secs(100_000), Duration::from_secs(20));
        assert_eq!(long.steps, 1000);
        assert!(long.duration_ms >= 100_000_000, "{long:?}");
        let short = JobPlan::changing(Duration::from_secs(1), Duration::from_secs(20));
        assert_eq!(short.steps, 2, "at least one change");
    }

    #[test]
    fn change_times_match_the_demo_servers_split() {
        let plan = JobPlan {
            duration_ms: 1000,
            steps: 3,
        };
        // Slices of 333 333, 333 333 and 333 334 µs; step 1 shows from the start.
        assert_eq!(plan.change_offset_us(1), 0);
        assert_eq!(plan.change_offset_us(2), 333_333);
        assert_eq!(plan.change_offset_us(3), 666_666);
        assert_eq!(step_of("step 2/3"), Some(2));
        assert_eq!(step_of("done"), None);
    }
}
