//! `--source push|poll|both`: the same steady workload with the engine's push source on (the
//! demo server serving `subscriptions/listen`) beside the polling runs, and the "Push vs poll"
//! table: change → event latency and what each costs the server per task-minute.
//!
//! A poll run is exactly what the rest of the benchmark measures (the demo server without
//! push: the engine asks `subscriptions/listen` once, gets -32601, and polls). A push run
//! differs in two switches only: the demo server serves `subscriptions/listen`, and the engine's
//! push source is on (with `--push-scheme` choosing how streams are grouped).

use std::fmt::Write as _;

use clap::ValueEnum;
use countersign_core::status::push::{PushStats, StreamScheme};
use serde::{Deserialize, Serialize};

use crate::client::ClientRun;
use crate::report::Document;
use crate::run::{Outcome, SteadyResult};

/// How a steady run learns about task changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `tasks/get` at the advertised interval (the server has no push).
    #[default]
    Poll,
    /// `subscriptions/listen` streams, polling at the safety-net rate.
    Push,
}

/// `--source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum SourceArg {
    /// Polling only (the default, and what the rest of the report describes).
    #[default]
    Poll,
    /// Push only.
    Push,
    /// Both, one after the other at each N, for the side-by-side.
    Both,
}

impl SourceArg {
    /// The runs to make at each N, in order.
    pub fn sources(self) -> Vec<Source> {
        match self {
            Self::Poll => vec![Source::Poll],
            Self::Push => vec![Source::Push],
            Self::Both => vec![Source::Poll, Source::Push],
        }
    }
}

/// `--push-scheme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// Streams per batch of new tasks, closed when done, merged past a bound (the default).
    #[default]
    Batched,
    /// One stream per server, re-opened with the whole live set when tasks are added.
    Single,
    /// One stream per task.
    PerTask,
}

impl Scheme {
    /// The engine's setting.
    pub fn stream_scheme(self) -> StreamScheme {
        match self {
            Self::Batched => StreamScheme::Batched,
            Self::Single => StreamScheme::Single,
            Self::PerTask => StreamScheme::PerTask,
        }
    }

    /// The command-line spelling.
    pub fn arg(self) -> &'static str {
        match self {
            Self::Batched => "batched",
            Self::Single => "single",
            Self::PerTask => "per-task",
        }
    }
}

/// The push counters a push run reports (a cross-process copy of [`PushStats`]).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PushSummary {
    /// `subscriptions/listen` requests sent since start.
    pub listens: u64,
    /// Streams acknowledged.
    pub acknowledged: u64,
    /// Task notifications received.
    pub notifications: u64,
    /// Streams that broke.
    pub broken: u64,
    /// Servers that declined.
    pub declined: u64,
    /// Tasks covered at the end of the window.
    pub covered: u64,
    /// Streams open at the end of the window.
    pub open_streams: u64,
}

impl From<PushStats> for PushSummary {
    fn from(s: PushStats) -> Self {
        Self {
            listens: s.listens,
            acknowledged: s.acknowledged,
            notifications: s.notifications,
            broken: s.broken,
            declined: s.declined,
            covered: s.covered,
            open_streams: s.open_streams,
        }
    }
}

fn per_task_minute(count: u64, run: &ClientRun) -> f64 {
    let task_minutes = run.client.tasks as f64 * run.client.window_seconds / 60.0;
    if task_minutes > 0.0 {
        count as f64 / task_minutes
    } else {
        f64::NAN
    }
}

fn ms(value: f64) -> String {
    if value.is_nan() {
        "—".into()
    } else if value < 1000.0 {
        format!("{value:.0} ms")
    } else {
        format!("{:.2} s", value / 1000.0)
    }
}

/// Appends the "Push vs poll" table when push runs were made.
pub fn render(out: &mut String, document: &Document) {
    let push = &document.results.push;
    if push.is_empty() {
        return;
    }
    let poll = &document.results.steady;
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Push vs poll (same workload, same window; push: demo server with subscriptions/listen, {} streams)",
        push.first().map(|s| s.scheme.arg()).unwrap_or("batched")
    );
    let mut columns: Vec<(String, &SteadyResult)> = Vec::new();
    let mut sizes: Vec<usize> = poll.iter().chain(push).map(|s| s.tasks).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for n in sizes {
        for (label, runs) in [("poll", poll), ("push", push)] {
            if let Some(s) = runs.iter().find(|s| s.tasks == n) {
                columns.push((format!("{label} N={n}"), s));
            }
        }
    }
    let width = 44;
    let row = |out: &mut String, label: &str, cells: Vec<String>| {
        let mut line = format!("  {label:<width$}");
        for cell in cells {
            let _ = write!(line, "{cell:<22}");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    };
    row(
        out,
        "",
        columns.iter().map(|(label, _)| label.clone()).collect(),
    );
    let cells = |f: &dyn Fn(&ClientRun, &SteadyResult) -> String| -> Vec<String> {
        columns
            .iter()
            .map(|(_, s)| match &s.outcome {
                Outcome::Measured(run) => f(run, s),
                Outcome::Failed(_) => "failed".into(),
            })
            .collect()
    };
    row(
        out,
        "change → event latency p50 / p99",
        cells(&|r, _| match &r.client.latency {
            Some(l) if l.samples > 0 => format!("{} / {}", ms(l.p50_ms), ms(l.p99_ms)),
            _ => "—".into(),
        }),
    );
    row(
        out,
        "  changes measured (missed)",
        cells(&|r, _| match &r.client.latency {
            Some(l) => format!("{} ({})", l.samples, l.missed),
            None => "—".into(),
        }),
    );
    row(
        out,
        "requests per task-minute (server count)",
        cells(&|r, _| {
            format!(
                "{:.2}",
                per_task_minute(r.window_requests.values().sum(), r)
            )
        }),
    );
    row(
        out,
        "  of which tasks/get",
        cells(&|r, _| {
            let gets = r.window_requests.get("tasks/get").copied().unwrap_or(0);
            format!("{:.2}", per_task_minute(gets, r))
        }),
    );
    row(
        out,
        "  of which subscriptions/listen",
        cells(&|r, _| {
            let listens = r
                .window_requests
                .get("subscriptions/listen")
                .copied()
                .unwrap_or(0);
            format!("{:.3}", per_task_minute(listens, r))
        }),
    );
    row(
        out,
        "notifications per task-minute",
        cells(&|r, _| format!("{:.2}", per_task_minute(r.window_notifications, r))),
    );
    row(
        out,
        "engine CPU in the window",
        cells(&|r, _| format!("{:.1} %", r.client.cpu_percent)),
    );
    row(
        out,
        "demo server CPU in the window",
        cells(&|r, _| format!("{:.1} %", r.server_cpu_percent)),
    );
    row(
        out,
        "engine peak RSS",
        cells(&|r, _| format!("{:.0} MB", r.client.peak_rss_kb as f64 / 1024.0)),
    );
    row(
        out,
        "listens / streams open / broken (whole run)",
        cells(&|r, s| match (&r.client.push, s.source) {
            (Some(p), Source::Push) => format!("{} / {} / {}", p.listens, p.open_streams, p.broken),
            _ => "—".into(),
        }),
    );
    row(
        out,
        "tasks covered by push at window end",
        cells(&|r, s| match (&r.client.push, s.source) {
            (Some(p), Source::Push) => format!("{} of {}", p.covered, r.client.tasks),
            _ => "—".into(),
        }),
    );
    for (label, s) in &columns {
        if let Outcome::Failed(reason) = &s.outcome {
            let _ = writeln!(out, "  {label} failed: {reason}");
        }
    }
}
