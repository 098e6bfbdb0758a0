//! The demo server in its own process, so the engine's CPU and memory are measured apart from
//! the server's, with a control line on stdin for what only the server can tell: request counts
//! per method and the per-task gaps between polls ([`countersign_demo::PollGapStats`]).
//!
//! `countersign demo-server` runs the same `DemoServer`, but has no way to hand those counters
//! to another process; this host is the demo library plus that control line.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant, UNIX_EPOCH};

use countersign_demo::{DemoConfig, DemoServer, Era, PollGapStats, ResponseMode};
use serde::{Deserialize, Serialize};
use tokio::process::Command;

use crate::child::{Child, Parent};
use crate::error::{Error, Result};
use crate::usage;

/// How the demo server runs for the benchmark.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// `pollIntervalMs` on every task.
    pub poll_interval_ms: u64,
    /// Simulated-time factor (bench_job ignores it; the other tools run fast).
    pub time_scale: f64,
    /// Serve `subscriptions/listen` (push runs only).
    pub push: bool,
    /// Answer every request with `text/event-stream`, as rmcp servers do by default.
    pub sse: bool,
    /// Serve the 2025-11-25 era (`initialize`, a session, SEP-1686 Tasks) instead of the
    /// modern one.
    pub legacy: bool,
    /// In the legacy era, refuse the session's GET stream (405), so the engine polls alone.
    pub no_get_stream: bool,
}

/// Server-side poll gaps in a form that crosses the pipe.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Gaps {
    /// The advertised interval.
    pub interval_ms: u64,
    /// Successful `tasks/get`.
    pub polls: u64,
    /// Polls with a measured gap.
    pub gaps: u64,
    /// Gaps shorter than the interval.
    pub early: u64,
    /// Shortest gap (exact, since the last reset; `None` in a difference of snapshots).
    pub min_gap_us: Option<u64>,
    /// Gap histogram: (bucket lower bound in ms, count), ascending.
    pub histogram: Vec<(u64, u64)>,
    /// Each task's first poll since the reset, Unix µs.
    pub first_polls_us: Vec<i64>,
}

impl Gaps {
    fn of(stats: &PollGapStats) -> Self {
        Self {
            interval_ms: stats.interval.as_millis() as u64,
            polls: stats.polls,
            gaps: stats.gaps,
            early: stats.early,
            min_gap_us: stats.min_gap.map(|d| d.as_micros() as u64),
            histogram: stats
                .histogram
                .iter()
                .map(|(lower, n)| (lower.as_millis() as u64, *n))
                .collect(),
            first_polls_us: stats
                .first_polls
                .iter()
                .map(|t| {
                    t.duration_since(UNIX_EPOCH)
                        .map(|d| d.as_micros() as i64)
                        .unwrap_or(0)
                })
                .collect(),
        }
    }

    /// What happened between an `earlier` cumulative snapshot and this one.
    pub fn since(&self, earlier: &Gaps) -> Gaps {
        let before: BTreeMap<u64, u64> = earlier.histogram.iter().copied().collect();
        Gaps {
            interval_ms: self.interval_ms,
            polls: self.polls.saturating_sub(earlier.polls),
            gaps: self.gaps.saturating_sub(earlier.gaps),
            early: self.early.saturating_sub(earlier.early),
            min_gap_us: None,
            histogram: self
                .histogram
                .iter()
                .map(|(lower, n)| {
                    (
                        *lower,
                        n.saturating_sub(before.get(lower).copied().unwrap_or(0)),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
            first_polls_us: Vec::new(),
        }
    }

    /// The lower bound (ms) of the bucket holding the `q`-quantile gap.
    pub fn quantile_ms(&self, q: f64) -> Option<u64> {
        let total: u64 = self.histogram.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        self.histogram
            .iter()
            .find(|(_, n)| {
                seen += n;
                seen >= rank
            })
            .map(|(lower, _)| *lower)
    }

    /// The shortest gap in ms: exact when known, else the lowest non-empty bucket.
    pub fn min_ms(&self) -> Option<f64> {
        self.min_gap_us
            .map(|us| us as f64 / 1000.0)
            .or_else(|| self.histogram.first().map(|(lower, _)| *lower as f64))
    }
}

/// What the server reports on `report`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerReport {
    /// Requests per JSON-RPC method since the last reset.
    pub requests: BTreeMap<String, u64>,
    /// Poll gaps since the last reset.
    pub gaps: Gaps,
    /// Server CPU time since the last reset, seconds.
    pub cpu_s: f64,
    /// Wall time since the last reset, seconds.
    pub wall_s: f64,
    /// Server peak RSS, KiB.
    pub peak_rss_kb: u64,
    /// `notifications/tasks` pushed since the last reset.
    #[serde(default)]
    pub notifications: u64,
    /// TCP connections accepted since the server started (cumulative: subtract snapshots).
    #[serde(default)]
    pub connections: u64,
    /// Legacy-era sessions opened (`initialize` answered) since the server started
    /// (cumulative; always 0 in the modern era).
    #[serde(default)]
    pub sessions_opened: u64,
}

#[derive(Serialize, Deserialize)]
struct Hello {
    url: String,
}

#[derive(Serialize, Deserialize)]
struct Ack {
    ok: bool,
}

/// The `serve` mode: hosts the demo server until stdin closes or says `quit`.
pub async fn serve(options: ServeOptions) -> Result<()> {
    let mut parent = Parent::attach();
    let config = DemoConfig {
        time_scale: options.time_scale,
        poll_interval_ms: options.poll_interval_ms,
        // Unlimited: the benchmark decides when tasks end, not a TTL running out mid-window.
        default_ttl_ms: None,
        // Polling is what is measured, and what both real peers need (neither offers push):
        // the engine asks for `subscriptions/listen` once, gets -32601, and polls. Push runs
        // (`--source push|both`) turn it on.
        push: options.push,
        response_mode: if options.sse {
            ResponseMode::Sse
        } else {
            ResponseMode::Json
        },
        legacy_get_stream: !options.no_get_stream,
        era: if options.legacy {
            Era::Legacy
        } else {
            Era::Modern
        },
        ..DemoConfig::default()
    };
    let server = DemoServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), config)
        .await
        .map_err(|e| Error::io("starting the demo server", e))?;
    parent.emit(&Hello { url: server.url() })?;
    // Counters are cumulative from here (or the last reset); the driver subtracts snapshots.
    let mut since = (Instant::now(), usage::own()?);
    loop {
        // A run's longest quiet stretch is the steady window; an hour bounds a stuck driver.
        let command = parent.next(Duration::from_secs(3600)).await?;
        match command.as_str() {
            "reset" => {
                server.reset_stats();
                server.reset_poll_gaps();
                since = (Instant::now(), usage::own()?);
                parent.emit(&Ack { ok: true })?;
            }
            "report" => {
                let now = usage::own()?;
                let stats = server.stats();
                parent.emit(&ServerReport {
                    notifications: stats.notifications,
                    connections: server.connections(),
                    sessions_opened: server.sessions_opened(),
                    requests: stats.requests,
                    gaps: Gaps::of(&server.poll_gaps()),
                    cpu_s: now.cpu.saturating_sub(since.1.cpu).as_secs_f64(),
                    wall_s: since.0.elapsed().as_secs_f64(),
                    peak_rss_kb: now.peak_rss_kb,
                })?;
            }
            "quit" => break,
            other => eprintln!("[demo server] unknown command {other:?}"),
        }
    }
    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .ok();
    Ok(())
}

/// The driver's handle on a demo server process.
pub struct DemoProcess {
    child: Child,
    /// Its endpoint, on 127.0.0.1.
    pub url: String,
}

impl DemoProcess {
    /// Starts `exe serve …` and waits for its URL.
    pub async fn start(exe: &Path, options: ServeOptions) -> Result<Self> {
        let mut command = Command::new(exe);
        command
            .arg("serve")
            .arg("--poll-interval-ms")
            .arg(options.poll_interval_ms.to_string())
            .arg("--time-scale")
            .arg(options.time_scale.to_string());
        if options.push {
            command.arg("--push");
        }
        if options.sse {
            command.arg("--sse");
        }
        if options.legacy {
            command.arg("--legacy");
        }
        if options.no_get_stream {
            command.arg("--no-get-stream");
        }
        let mut child = Child::spawn("demo server", command)?;
        let hello: Hello = child.recv("its URL", Duration::from_secs(30)).await?;
        if !hello.url.starts_with("http://127.0.0.1:") {
            return Err(Error::Unexpected(format!(
                "the demo server must listen on 127.0.0.1, not {}",
                hello.url
            )));
        }
        Ok(Self {
            child,
            url: hello.url,
        })
    }

    /// Zeroes the server's counters.
    pub async fn reset(&mut self) -> Result<()> {
        self.child.send("reset").await?;
        let ack: Ack = self
            .child
            .recv("a reset acknowledgement", Duration::from_secs(30))
            .await?;
        if ack.ok {
            Ok(())
        } else {
            Err(Error::child("demo server", "reset refused"))
        }
    }

    /// The counters since the last reset.
    pub async fn report(&mut self) -> Result<ServerReport> {
        self.child.send("report").await?;
        self.child.recv("a report", Duration::from_secs(30)).await
    }

    /// Stops the server.
    pub async fn stop(mut self) {
        let _ = self.child.send("quit").await;
        self.child.finish(Duration::from_secs(15)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_of_snapshots_subtract_bucket_by_bucket() {
        let earlier = Gaps {
            polls: 10,
            gaps: 9,
            early: 1,
            histogram: vec![(20, 1), (5000, 8)],
            ..Gaps::default()
        };
        let later = Gaps {
            polls: 30,
            gaps: 29,
            early: 1,
            histogram: vec![(20, 1), (5000, 20), (5001, 8)],
            ..Gaps::default()
        };
        let window = later.since(&earlier);
        assert_eq!((window.polls, window.gaps, window.early), (20, 20, 0));
        assert_eq!(window.histogram, vec![(5000, 12), (5001, 8)]);
        assert_eq!(window.min_ms(), Some(5000.0));
        assert_eq!(window.quantile_ms(0.5), Some(5000));
        assert_eq!(window.quantile_ms(0.99), Some(5001));
    }
}
