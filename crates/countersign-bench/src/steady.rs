//! The `steady` child: our engine, alone in its process, watching N live tasks.
//!
//! It creates the tasks through `actions::call` (as the console does), lets the engine pick them
//! up, waits one interval for polling to settle, then measures a steady window: its own CPU and
//! peak RSS, the engine's poll count, and the delay from each server-side status change to the
//! `task_updated` event on `Engine::subscribe()`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use countersign_core::actions;
use countersign_core::engine::{Engine, EngineConfig};
use countersign_core::ledger::servers;
use countersign_core::ledger::EventKind;
use countersign_core::mcp::{self, Endpoint};
use tokio::sync::{broadcast, oneshot};

use crate::child::Parent;
use crate::client::{quantile, ClientMessage, ClientResult, Latency};
use crate::clock::WallClock;
use crate::error::{Error, Result};
use crate::sources::{Scheme, Source};
use crate::usage;
use crate::workload::{self, step_of, Job};

/// Parameters of a steady run (also its command line, see `main`).
#[derive(Debug, Clone)]
pub struct SteadyOptions {
    /// The demo server.
    pub url: String,
    /// Tasks to watch.
    pub tasks: usize,
    /// Steady window.
    pub window: Duration,
    /// The server's `pollIntervalMs`.
    pub interval: Duration,
    /// Wait between the last task created and the window.
    pub warmup: Duration,
    /// Longest time task creation may take.
    pub create_budget: Duration,
    /// How long every task stays working.
    pub life: Duration,
    /// Range of the per-task change period.
    pub change_every: (Duration, Duration),
    /// Tasks are started evenly over this long (zero: as fast as they can be).
    pub stagger: Duration,
    /// Ledger directory (fresh).
    pub data_dir: PathBuf,
    /// Poll or push (the engine's push source is on either way; only a push run's server
    /// serves `subscriptions/listen`).
    pub source: Source,
    /// How push streams are grouped.
    pub push_scheme: Scheme,
    /// The server is the fastmcp peer: create its `long_job` with this many steps instead of
    /// `bench_job` (change times are then unknown, so no latency is measured).
    pub peer_steps: Option<u64>,
    /// The server serves the 2025-11-25 era: it is checked (`server/discover` refused,
    /// `initialize`: its one session) and added with what the check found, as `countersign
    /// server add` does, so the ledger holds it as legacy with that session; the tasks are
    /// created and polled through the legacy peer, which takes the stored session up.
    pub legacy: bool,
}

/// Calls to `bench_job` in flight while creating tasks.
const CREATE_CONCURRENCY: usize = 32;

/// An event as the subscriber saw it.
struct Seen {
    row: i64,
    step: u64,
    at_us: i64,
}

/// Runs the steady child to completion.
pub async fn run(options: SteadyOptions) -> Result<()> {
    let mut parent = Parent::attach();
    let clock = WallClock::new();
    let mut config = EngineConfig::new(&options.data_dir);
    config.push_config.scheme = options.push_scheme.stream_scheme();
    let client_options = config.client.clone();
    let engine = Engine::start(config).await?;
    let server = if options.legacy {
        let found = mcp::era::connect(Endpoint::new(options.url.clone()), client_options).await?;
        if found.era() != mcp::Era::Legacy {
            return Err(Error::Unexpected(format!(
                "{} answered as a {:?} server, not a legacy one",
                options.url,
                found.era()
            )));
        }
        actions::add_server(
            engine.ledger(),
            "bench",
            &options.url,
            false,
            Some(&found),
            "countersign-bench",
        )
        .await?
    } else {
        let url = options.url.clone();
        engine
            .ledger()
            .write(move |ctx| servers::add(ctx.conn, "bench", &url, false))
            .await?
    };
    engine.nudge();

    // Subscribe before the first task exists so no event is missed.
    let (stop, stopped) = oneshot::channel::<()>();
    let collector = tokio::spawn(collect(engine.subscribe(), clock, stopped));

    let started = Instant::now();
    // The engine's own peer once it has linked the server (for a legacy one: its session, the
    // one stored); until then one made the same way, taking the same session up.
    let peer = engine.peer_for(&server)?;
    let plans = workload::changing_plans(options.tasks, options.life, options.change_every);
    let jobs = workload::create(
        engine.ledger(),
        &peer,
        &server,
        &plans,
        options.peer_steps,
        options.stagger,
        CREATE_CONCURRENCY,
        options.create_budget,
        |n| {
            if n % 64 == 0 {
                engine.nudge();
            }
        },
    )
    .await?;
    engine.nudge();
    let create_seconds = started.elapsed().as_secs_f64();
    parent.emit(&ClientMessage::Created {
        tasks: jobs.len(),
        seconds: create_seconds,
    })?;
    tokio::time::sleep(options.warmup).await;

    let peak_before = usage::own()?.peak_rss_kb;
    let peak_reset = usage::reset_peak();
    parent.emit(&ClientMessage::WindowStart)?;
    parent.expect("ok", Duration::from_secs(60)).await?;
    let (u0, polls0, t0_us, i0) = (
        usage::own()?,
        engine.poll_stats(),
        clock.now_us(),
        Instant::now(),
    );
    tokio::time::sleep(options.window).await;
    let (u1, polls1, t1_us, wall) = (
        usage::own()?,
        engine.poll_stats(),
        clock.now_us(),
        i0.elapsed(),
    );
    parent.emit(&ClientMessage::WindowEnd)?;
    let _ = stop.send(());
    parent.expect("ok", Duration::from_secs(60)).await?;

    let (seen, lagged) = tokio::time::timeout(Duration::from_secs(10), collector)
        .await
        .map_err(|_| Error::Timeout {
            what: "the event subscriber to stop".into(),
            after: Duration::from_secs(10),
        })?
        .map_err(|e| Error::Unexpected(format!("the event subscriber failed: {e}")))?;
    // A change is counted when the engine had a full interval (plus a second) to see it before
    // the window closed, so the tail of the window does not bias the figures downwards.
    let measured_until = t1_us - (options.interval + Duration::from_secs(1)).as_micros() as i64;
    let latency = latency(&jobs, &seen, lagged, t0_us, measured_until);

    let interval_us = options.interval.as_micros() as i64;
    let ideal_lifetime: f64 = jobs
        .iter()
        .map(|job| ((t1_us - job.created_us).max(0) / interval_us) as f64)
        .sum();
    parent.emit(&ClientMessage::Result(ClientResult {
        client: "countersign".into(),
        tasks: jobs.len(),
        create_seconds,
        window_seconds: wall.as_secs_f64(),
        polls_window: polls1.polls - polls0.polls,
        polls_total: polls1.polls,
        poll_failures: polls1.failures,
        ideal_lifetime,
        cpu_percent: usage::cpu_percent(&u0, &u1, wall),
        peak_rss_kb: peak_before.max(u1.peak_rss_kb),
        window_peak_rss_kb: peak_reset.then_some(u1.peak_rss_kb),
        latency: options.peer_steps.is_none().then_some(latency),
        push: Some(Box::new(engine.push_stats().into())),
    }))?;
    if tokio::time::timeout(Duration::from_secs(15), engine.shutdown())
        .await
        .is_err()
    {
        eprintln!("[engine] did not shut down within 15 s");
    }
    Ok(())
}

/// Records when each `task_updated` with a `step k/S` message arrives, until `stop`.
async fn collect(
    mut events: broadcast::Receiver<countersign_core::ledger::StoredEvent>,
    clock: WallClock,
    mut stop: oneshot::Receiver<()>,
) -> (Vec<Seen>, u64) {
    let mut seen = Vec::new();
    let mut lagged = 0;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            event = events.recv() => match event {
                Ok(event) => {
                    let at_us = clock.now_us();
                    if let EventKind::TaskUpdated { status_message: Some(message), .. } = &event.kind {
                        if let (Some(row), Some(step)) = (event.task, step_of(message)) {
                            seen.push(Seen { row, step, at_us });
                        }
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => lagged += n,
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
    (seen, lagged)
}

/// Latency of every change that happened in `[from_us, until_us]`.
fn latency(jobs: &[Job], seen: &[Seen], lagged: u64, from_us: i64, until_us: i64) -> Latency {
    let by_row: HashMap<i64, &Job> = jobs.iter().map(|job| (job.row, job)).collect();
    let in_span = |at: i64| at >= from_us && at <= until_us;
    let mut samples: Vec<f64> = seen
        .iter()
        .filter_map(|s| {
            let change = by_row.get(&s.row)?.change_us(s.step);
            in_span(change).then(|| (s.at_us - change) as f64 / 1000.0)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    let expected: usize = jobs
        .iter()
        .map(|job| {
            (2..=job.plan.steps)
                .filter(|k| in_span(job.change_us(*k)))
                .count()
        })
        .sum();
    Latency {
        samples: samples.len(),
        missed: expected.saturating_sub(samples.len()),
        lagged,
        min_ms: quantile(&samples, 0.0),
        p50_ms: quantile(&samples, 0.5),
        p90_ms: quantile(&samples, 0.9),
        p99_ms: quantile(&samples, 0.99),
        max_ms: quantile(&samples, 1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::JobPlan;

    #[test]
    fn latency_counts_only_changes_in_the_span_and_the_ones_never_seen() {
        let job = Job {
            row: 7,
            created_us: 0,
            plan: JobPlan {
                duration_ms: 40_000,
                steps: 4,
            },
        };
        // Changes at 10 s (step 2), 20 s (step 3), 30 s (step 4).
        let seen = [
            Seen {
                row: 7,
                step: 2,
                at_us: 12_000_000,
            },
            Seen {
                row: 7,
                step: 4,
                at_us: 31_000_000,
            },
            Seen {
                row: 99,
                step: 2,
                at_us: 1,
            }, // not ours
        ];
        let measured = latency(&[job], &seen, 0, 5_000_000, 35_000_000);
        assert_eq!(
            (measured.samples, measured.missed),
            (2, 1),
            "step 3 was coalesced into step 4"
        );
        assert_eq!((measured.min_ms, measured.max_ms), (1000.0, 2000.0));
    }
}
