//! Cold resume: a ledger holding M unfinished tasks, and a fresh process that opens it.
//!
//! The driver seeds the ledger (real tasks on the demo server, created through `actions::call`,
//! then the ledger is closed), resets the server's counters, notes the time and starts
//! `countersign-bench resume`, which does nothing but `Engine::start` and report. "Loaded and
//! scheduled" is the moment `Engine::start` returns: every unfinished task has been read, tracked
//! and handed to the poll source with its first check spread over one interval. The first poll
//! of each task is then timed where it lands, at the server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use countersign_core::engine::{self, Engine, EngineConfig};
use countersign_core::ledger::{servers, Ledger};
use serde::{Deserialize, Serialize};
use tokio::process::Command;

use crate::child::{Child, Parent};
use crate::client::quantile;
use crate::demo::DemoProcess;
use crate::error::{Error, Result};
use crate::usage::{self, system_now_us};
use crate::workload::{self, JobPlan};

/// Messages of the `resume` child.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
enum ResumeMessage {
    /// `Engine::start` returned.
    Ready {
        /// Unix µs when `main` began.
        main_us: i64,
        /// Unix µs when `Engine::start` returned.
        ready_us: i64,
        /// Tasks resumed.
        resumed: usize,
        /// Peak RSS so far, KiB.
        peak_rss_kb: u64,
    },
    /// Final counters, after `quit`.
    Done {
        /// `tasks/get` sent.
        polls: u64,
        /// Failed polls.
        failures: u64,
        /// Peak RSS, KiB.
        peak_rss_kb: u64,
    },
}

/// The cold-resume figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResumeReport {
    /// Unfinished tasks in the ledger.
    pub tasks: usize,
    /// Seconds it took to create them (not part of the measurement).
    pub seed_seconds: f64,
    /// Tasks the engine said it resumed.
    pub resumed: usize,
    /// Spawn → `main` (exec, dynamic loading, runtime start).
    pub exec_ms: f64,
    /// Spawn → `Engine::start` returned: every task loaded and scheduled.
    pub ready_ms: f64,
    /// Tasks whose first poll reached the server before the driver stopped waiting.
    pub first_polls: usize,
    /// First poll after spawn: quickest, median, 90th percentile, slowest (ms).
    pub first_poll_min_ms: f64,
    /// Median.
    pub first_poll_p50_ms: f64,
    /// 90th percentile.
    pub first_poll_p90_ms: f64,
    /// Slowest.
    pub first_poll_max_ms: f64,
    /// First polls in the busiest 100 ms.
    pub busiest_100ms: usize,
    /// First polls per 100 ms from the earliest one (the whole distribution, for `--json`).
    pub first_polls_per_100ms: Vec<usize>,
    /// First polls per 100 ms if perfectly even over one interval.
    pub even_100ms: f64,
    /// The child's peak RSS when ready, KiB.
    pub ready_peak_rss_kb: u64,
    /// The child's peak RSS at the end, KiB.
    pub peak_rss_kb: u64,
    /// Polls the child sent.
    pub polls: u64,
    /// Of those, failed.
    pub poll_failures: u64,
}

/// Parameters of the resume measurement.
#[derive(Debug, Clone)]
pub struct ResumeOptions {
    /// Unfinished tasks to resume.
    pub tasks: usize,
    /// The server's `pollIntervalMs`.
    pub interval: Duration,
    /// Longest time seeding may take.
    pub create_budget: Duration,
    /// Ledger directory (fresh).
    pub data_dir: PathBuf,
}

/// The seeded tasks outlive any run.
const SEED_LIFE: Duration = Duration::from_secs(3600);

/// Seeds the ledger, resumes it in a fresh process, and times the first polls.
pub async fn measure(
    exe: &Path,
    server: &mut DemoProcess,
    options: &ResumeOptions,
) -> Result<ResumeReport> {
    let seed_seconds = seed(&server.url, options).await?;
    eprintln!("  {} unfinished tasks in the ledger ({seed_seconds:.1} s); starting a fresh engine process", options.tasks);
    server.reset().await?;
    let mut command = Command::new(exe);
    command
        .arg("resume")
        .arg("--data-dir")
        .arg(&options.data_dir);
    let spawned_us = system_now_us();
    let mut child = Child::spawn("resume", command)?;
    let (main_us, ready_us, resumed, ready_peak_rss_kb) =
        match child.recv("`ready`", Duration::from_secs(120)).await? {
            ResumeMessage::Ready {
                main_us,
                ready_us,
                resumed,
                peak_rss_kb,
            } => (main_us, ready_us, resumed, peak_rss_kb),
            other => {
                return Err(Error::Unexpected(format!(
                    "expected `ready`, got {other:?}"
                )))
            }
        };
    // Every first poll is due within one interval of `ready`; allow a second interval for a
    // loaded machine, then report whatever arrived.
    let deadline = tokio::time::Instant::now() + options.interval * 2 + Duration::from_secs(5);
    tokio::time::sleep(options.interval + Duration::from_millis(300)).await;
    let mut firsts = server.report().await?.gaps.first_polls_us;
    while firsts.len() < options.tasks && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        firsts = server.report().await?.gaps.first_polls_us;
    }
    child.send("quit").await?;
    let (polls, poll_failures, peak_rss_kb) =
        match child.recv("`done`", Duration::from_secs(60)).await? {
            ResumeMessage::Done {
                polls,
                failures,
                peak_rss_kb,
            } => (polls, failures, peak_rss_kb),
            other => return Err(Error::Unexpected(format!("expected `done`, got {other:?}"))),
        };
    child.finish(Duration::from_secs(20)).await;

    let mut after_spawn: Vec<f64> = firsts
        .iter()
        .map(|at| (at - spawned_us) as f64 / 1000.0)
        .collect();
    after_spawn.sort_by(f64::total_cmp);
    let ready_ms = (ready_us - spawned_us) as f64 / 1000.0;
    let bins = (options.interval.as_millis() as usize).div_ceil(100).max(1);
    // Binned from the earliest first poll: polling starts while `Engine::start` is still
    // finishing (it commits its `engine_started` event last), so binning from `ready` would pile
    // the early polls into the first bin.
    let first = after_spawn.first().copied().unwrap_or(0.0);
    let mut per_bin = vec![0usize; bins * 3];
    for ms in &after_spawn {
        let bin = ((ms - first) / 100.0) as usize;
        if let Some(count) = per_bin.get_mut(bin) {
            *count += 1;
        }
    }
    Ok(ResumeReport {
        tasks: options.tasks,
        seed_seconds,
        resumed,
        exec_ms: (main_us - spawned_us) as f64 / 1000.0,
        ready_ms,
        first_polls: after_spawn.len(),
        first_poll_min_ms: quantile(&after_spawn, 0.0),
        first_poll_p50_ms: quantile(&after_spawn, 0.5),
        first_poll_p90_ms: quantile(&after_spawn, 0.9),
        first_poll_max_ms: quantile(&after_spawn, 1.0),
        busiest_100ms: per_bin.iter().copied().max().unwrap_or(0),
        first_polls_per_100ms: {
            let used = per_bin
                .iter()
                .rposition(|n| *n > 0)
                .map_or(0, |last| last + 1);
            per_bin.truncate(used);
            per_bin
        },
        even_100ms: options.tasks as f64 / bins as f64,
        ready_peak_rss_kb,
        peak_rss_kb,
        polls,
        poll_failures,
    })
}

/// Creates the unfinished tasks through a plain ledger (no engine), then closes it.
async fn seed(url: &str, options: &ResumeOptions) -> Result<f64> {
    let started = std::time::Instant::now();
    let ledger = Ledger::open(&options.data_dir)?;
    let url = url.to_owned();
    let server = ledger
        .write(move |ctx| servers::add(ctx.conn, "bench", &url, false))
        .await?;
    let client = engine::make_client(&server, &EngineConfig::new(&options.data_dir))?;
    let peer = countersign_core::mcp::Peer::Modern(client);
    let plans = vec![JobPlan::quiet(SEED_LIFE); options.tasks];
    let jobs = workload::create(
        &ledger,
        &peer,
        &server,
        &plans,
        None,
        Duration::ZERO,
        32,
        options.create_budget,
        |_| {},
    )
    .await?;
    ledger.close();
    if jobs.len() != options.tasks {
        return Err(Error::Unexpected(format!(
            "seeded {} of {} tasks",
            jobs.len(),
            options.tasks
        )));
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The `resume` child: `Engine::start` on the seeded ledger, report, poll until told to quit.
pub async fn child(main_us: i64, data_dir: PathBuf) -> Result<()> {
    let mut parent = Parent::attach();
    let engine = Engine::start(EngineConfig::new(&data_dir)).await?;
    let ready_us = system_now_us();
    parent.emit(&ResumeMessage::Ready {
        main_us,
        ready_us,
        resumed: engine.resumed(),
        peak_rss_kb: usage::own()?.peak_rss_kb,
    })?;
    parent.expect("quit", Duration::from_secs(600)).await?;
    let stats = engine.poll_stats();
    parent.emit(&ResumeMessage::Done {
        polls: stats.polls,
        failures: stats.failures,
        peak_rss_kb: usage::own()?.peak_rss_kb,
    })?;
    if tokio::time::timeout(Duration::from_secs(15), engine.shutdown())
        .await
        .is_err()
    {
        eprintln!("[resume] the engine did not shut down within 15 s");
    }
    Ok(())
}
