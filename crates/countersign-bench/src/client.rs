//! A polling client under test (our engine in the `steady` child, or the fastmcp Python client)
//! and how the driver runs one against the demo server.
//!
//! Both speak the same phases on stdout: `created` → `window_start` (wait for `ok`) →
//! `window_end` (wait for `ok`) → `result`. Between the phases the driver snapshots the server's
//! counters, so the server's view (requests, per-task poll gaps) covers exactly the client's
//! steady window, and the whole life of the tasks since the reset before they were created.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::child::Child;
use crate::demo::{DemoProcess, Gaps};
use crate::error::{Error, Result};
use crate::syncs::SyncCount;

/// One line from a client.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum ClientMessage {
    /// Every task exists and is tracked.
    Created {
        /// How many.
        tasks: usize,
        /// How long creating them took.
        seconds: f64,
    },
    /// The steady window starts once the driver answers `ok`.
    WindowStart,
    /// The steady window has ended; the client goes on once the driver answers `ok`.
    WindowEnd,
    /// The client's own measurements.
    Result(ClientResult),
}

/// What a client measured itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientResult {
    /// `countersign` or `fastmcp`.
    pub client: String,
    /// Tasks watched.
    pub tasks: usize,
    /// Seconds spent creating them.
    pub create_seconds: f64,
    /// Length of the steady window.
    pub window_seconds: f64,
    /// `tasks/get` sent in the window (client-side count).
    pub polls_window: u64,
    /// `tasks/get` sent since the first task was created.
    pub polls_total: u64,
    /// Failed polls.
    pub poll_failures: u64,
    /// The most polls a client honouring the interval could have sent per task since creation,
    /// summed: Σ ⌊(window end − createdAt) / interval⌋.
    pub ideal_lifetime: f64,
    /// CPU in the window, % of one core.
    pub cpu_percent: f64,
    /// Peak RSS over the whole process life (task creation included), KiB.
    pub peak_rss_kb: u64,
    /// Peak RSS within the steady window, KiB (None where the kernel refuses to reset the peak).
    pub window_peak_rss_kb: Option<u64>,
    /// Change → event latency (our engine only).
    pub latency: Option<Latency>,
    /// Push counters at the end of the window (our engine only).
    #[serde(default)]
    pub push: Option<Box<crate::sources::PushSummary>>,
}

/// Server-side change → engine event, in milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Latency {
    /// Changes measured.
    pub samples: usize,
    /// Changes in the measured span that produced no event (coalesced with a later change, or
    /// never seen).
    pub missed: usize,
    /// Events the benchmark's subscriber lost to a full channel.
    pub lagged: u64,
    /// Quickest.
    pub min_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest.
    pub max_ms: f64,
}

/// One client run seen from both sides.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientRun {
    /// The client's measurements.
    pub client: ClientResult,
    /// Server-side gaps in the steady window.
    pub window: Gaps,
    /// Server-side gaps since the reset before creation (the tasks' whole life).
    pub life: Gaps,
    /// Requests per method in the window.
    pub window_requests: BTreeMap<String, u64>,
    /// Demo server CPU in the window, % of one core.
    pub server_cpu_percent: f64,
    /// `notifications/tasks` the server pushed in the window.
    #[serde(default)]
    pub window_notifications: u64,
    /// TCP connections the server accepted in the window.
    #[serde(default)]
    pub window_connections: u64,
    /// Legacy-era sessions the server opened over the whole run (its process served this run
    /// alone), up to the window's end; 0 in the modern era.
    #[serde(default)]
    pub sessions_opened: u64,
    /// `fsync` + `fdatasync` and `connect` calls of the client process in the window (`None`:
    /// not counted, see [`crate::syncs`]).
    #[serde(default)]
    pub window_calls: Option<crate::syncs::Counts>,
}

/// A server process the driver can only watch from outside (the fastmcp peer server): its CPU
/// over the window is all that is measured of it.
#[derive(Debug, Clone, Copy)]
pub struct Watched {
    /// Its process id.
    pub pid: u32,
}

/// Runs a started client through its phases against `server` (reset just before the client
/// started) or a `watched` server, with `syncs` counting over exactly the window. Every wait is
/// bounded by the given durations plus a margin.
pub async fn drive(
    child: &mut Child,
    mut server: Option<&mut DemoProcess>,
    watched: Option<Watched>,
    syncs: Option<&SyncCount>,
    create_budget: Duration,
    warmup: Duration,
    window: Duration,
) -> Result<ClientRun> {
    const MARGIN: Duration = Duration::from_secs(60);
    match child
        .recv::<ClientMessage>("its tasks", create_budget + MARGIN)
        .await?
    {
        ClientMessage::Created { tasks, seconds } => {
            eprintln!("  {tasks} tasks created in {seconds:.1} s; warming up for {warmup:?}")
        }
        other => {
            return Err(Error::Unexpected(format!(
                "expected `created`, got {other:?}"
            )))
        }
    }
    expect_phase(child, "window_start", warmup + MARGIN).await?;
    let start = match server.as_deref_mut() {
        Some(server) => Some(server.report().await?),
        None => None,
    };
    let counting = syncs.is_some_and(SyncCount::enable);
    let watched_start = watched
        .and_then(|w| crate::usage::cpu_of(w.pid))
        .map(|cpu| (cpu, std::time::Instant::now()));
    child.send("ok").await?;
    eprintln!("  steady window: {window:?}");
    expect_phase(child, "window_end", window + MARGIN).await?;
    if let (Some(syncs), true) = (syncs, counting) {
        syncs.disable();
    }
    let watched_cpu = match (
        watched_start,
        watched.and_then(|w| crate::usage::cpu_of(w.pid)),
    ) {
        (Some((before, since)), Some(after)) => {
            after.saturating_sub(before).as_secs_f64() / since.elapsed().as_secs_f64().max(1e-9)
                * 100.0
        }
        _ => 0.0,
    };
    let end = match server {
        Some(server) => Some(server.report().await?),
        None => None,
    };
    child.send("ok").await?;
    let client = match child.recv::<ClientMessage>("its result", MARGIN).await? {
        ClientMessage::Result(result) => result,
        other => {
            return Err(Error::Unexpected(format!(
                "expected `result`, got {other:?}"
            )))
        }
    };
    // Without our demo server (the fastmcp peer) only the client's own figures and the
    // server's CPU exist.
    let (Some(start), Some(end)) = (start, end) else {
        return Ok(ClientRun {
            client,
            window: Gaps::default(),
            life: Gaps::default(),
            window_requests: BTreeMap::new(),
            server_cpu_percent: watched_cpu,
            window_notifications: 0,
            window_connections: 0,
            sessions_opened: 0,
            window_calls: None,
        });
    };
    let window_requests = end
        .requests
        .iter()
        .map(|(method, n)| {
            (
                method.clone(),
                n.saturating_sub(start.requests.get(method).copied().unwrap_or(0)),
            )
        })
        .collect();
    let wall = end.wall_s - start.wall_s;
    Ok(ClientRun {
        client,
        window: end.gaps.since(&start.gaps),
        life: end.gaps,
        window_requests,
        window_notifications: end.notifications.saturating_sub(start.notifications),
        window_connections: end.connections.saturating_sub(start.connections),
        sessions_opened: end.sessions_opened,
        window_calls: None,
        server_cpu_percent: if wall > 0.0 {
            (end.cpu_s - start.cpu_s) / wall * 100.0
        } else {
            0.0
        },
    })
}

async fn expect_phase(child: &mut Child, phase: &str, within: Duration) -> Result<()> {
    let message: ClientMessage = child.recv(phase, within).await?;
    let matches = matches!(
        (&message, phase),
        (ClientMessage::WindowStart, "window_start") | (ClientMessage::WindowEnd, "window_end")
    );
    if matches {
        Ok(())
    } else {
        Err(Error::Unexpected(format!(
            "expected `{phase}`, got {message:?}"
        )))
    }
}

/// The value at quantile `q` of sorted `values` (nearest rank); 0 for no values (callers show
/// the count beside it).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_have_the_shape_the_python_client_prints() {
        let line = r#"{"phase":"created","tasks":3,"seconds":0.5}"#;
        assert!(matches!(
            serde_json::from_str::<ClientMessage>(line),
            Ok(ClientMessage::Created { tasks: 3, .. })
        ));
        assert!(matches!(
            serde_json::from_str::<ClientMessage>(r#"{"phase":"window_start"}"#),
            Ok(ClientMessage::WindowStart)
        ));
        let result = r#"{"phase":"result","client":"fastmcp","tasks":1,"create_seconds":1.0,"window_seconds":60.0,
            "polls_window":12,"polls_total":30,"poll_failures":0,"ideal_lifetime":14.0,"cpu_percent":3.5,
            "peak_rss_kb":90000,"window_peak_rss_kb":null,"latency":null}"#;
        assert!(
            matches!(serde_json::from_str::<ClientMessage>(result), Ok(ClientMessage::Result(r)) if r.polls_total == 30)
        );
    }

    #[test]
    fn nearest_rank_quantiles() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&values, 0.5), 50.0);
        assert_eq!(quantile(&values, 0.99), 99.0);
        assert_eq!(quantile(&values, 1.0), 100.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
