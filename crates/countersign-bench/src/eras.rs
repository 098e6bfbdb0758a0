//! The legacy era beside the modern one: the `legacy` workload (calm's traffic on the demo
//! server's 2025-11-25 era, followed through the legacy peer) against calm at the same N, and
//! `legacy-unchanged` against `unchanged`, from the same run. Issue 30's targets: a legacy poll
//! costs at most 1.2× a modern one, one session per server (not per poll), at most one new TCP
//! connection per 100 polls.
//!
//! While a legacy session's GET stream is open (`legacy`), its `notifications/tasks/status`
//! are the changes (push) and the tasks are polled at the safety-net rate, so the run's CPU is
//! mostly pushed changes over few polls: there CPU per tracked task-minute is the comparison.
//! `legacy-polled` and `legacy-unchanged` are on a server without the GET stream (405), so the
//! engine polls at the interval as on calm: there CPU per poll is. Windows shorter than the
//! safety-net interval (50 s at `pollIntervalMs` 5000) may see no `legacy` poll at all.

use std::fmt::Write as _;

use crate::client::ClientRun;
use crate::report::{
    connections_per_100_polls, cpu_ms_per_task_minute, cpu_per_poll_us, met, secs, thousands,
    wakeups_per_poll, window_ideal, Document,
};
use crate::run::Outcome;

/// Most a legacy poll may cost, as a multiple of a modern one.
const MAX_RATIO: f64 = 1.2;

/// A legacy poll's CPU over a modern one's (`None` when either has no polls).
fn cost_ratio(modern: &ClientRun, legacy: &ClientRun) -> Option<f64> {
    Some(cpu_per_poll_us(legacy)? / cpu_per_poll_us(modern)?)
}

/// Prints one block per legacy run, beside its modern twin at the same N.
pub fn render(out: &mut String, document: &Document) {
    let results = &document.results;
    let interval_ms = document.interval_ms;
    for legacy in &results.shapes {
        let Some(twin) = legacy.workload.modern_twin() else {
            continue;
        };
        let n = legacy.tasks;
        let pushed = legacy.workload.get_stream();
        let title = format!(
            "{} vs {}, N={}",
            legacy.workload.label(),
            twin.label(),
            thousands(n as u64)
        );
        let modern = results
            .steady
            .iter()
            .chain(&results.shapes)
            .find(|s| s.tasks == n && s.workload == twin && s.source == legacy.source)
            .map(|s| &s.outcome);
        let (modern, legacy) = match (modern, &legacy.outcome) {
            (Some(Outcome::Measured(m)), Outcome::Measured(l)) => (m, l),
            (None, _) => {
                let _ = writeln!(
                    out,
                    "{title}: no {} run at this N to compare with\n",
                    twin.label()
                );
                continue;
            }
            (Some(Outcome::Failed(reason)), _) | (_, Outcome::Failed(reason)) => {
                let _ = writeln!(out, "{title}: a run failed: {reason}\n");
                continue;
            }
        };
        let widths = [48, 22, 22, 18, 22];
        let mut text = String::new();
        let mut row = |cells: [String; 5]| {
            let mut line = String::new();
            for (cell, width) in cells.iter().zip(widths) {
                let _ = write!(line, "{cell:<width$}");
            }
            let _ = writeln!(text, "{}", line.trim_end());
        };
        let both = |label: &str, f: &dyn Fn(&ClientRun) -> String, ratio: String, target: &str| {
            [
                format!("  {label}"),
                f(modern),
                f(legacy),
                ratio,
                target.to_owned(),
            ]
        };
        row([
            title.clone(),
            "modern 2026-07-28".into(),
            "legacy 2025-11-25".into(),
            "legacy ÷ modern".into(),
            "target".into(),
        ]);
        let per_poll = |r: &ClientRun| {
            cpu_per_poll_us(r)
                .map(|us| format!("{us:.1} µs"))
                .unwrap_or_else(|| "—".into())
        };
        let ratio = cost_ratio(modern, legacy);
        // Pushed: the CPU also records the pushed changes over safety-net polls, so per
        // task-minute is the fair figure; polled alone, per poll is (see the module doc).
        let per_poll_target = if pushed { "" } else { "≤ 1.2×" };
        row(both(
            "engine CPU per poll (all CPU ÷ polls)",
            &per_poll,
            ratio
                .map(|r| format!("{r:.2}×"))
                .unwrap_or_else(|| "—".into()),
            per_poll_target,
        ));
        let minute_ratio = cpu_ms_per_task_minute(legacy) / cpu_ms_per_task_minute(modern);
        row(both(
            "engine CPU-ms per tracked task-minute",
            &|r| format!("{:.3}", cpu_ms_per_task_minute(r)),
            if minute_ratio.is_finite() {
                format!("{minute_ratio:.2}×")
            } else {
                "—".into()
            },
            if pushed { "≤ 1.2×" } else { "" },
        ));
        row(both(
            "tasks/get per task-minute (server)",
            &|r| {
                let minutes = r.client.tasks as f64 * r.client.window_seconds / 60.0;
                let gets = r.window_requests.get("tasks/get").copied().unwrap_or(0);
                if minutes > 0.0 {
                    format!("{:.2}", gets as f64 / minutes)
                } else {
                    "—".into()
                }
            },
            String::new(),
            "",
        ));
        row(both(
            "engine CPU, % of one core (window)",
            &|r| format!("{:.2} %", r.client.cpu_percent),
            String::new(),
            "",
        ));
        row(both(
            "polls in the window (engine / server)",
            &|r| {
                format!(
                    "{} / {}",
                    thousands(r.client.polls_window),
                    thousands(r.window.polls)
                )
            },
            String::new(),
            "",
        ));
        row(both(
            "polls ÷ ideal, window (server count)",
            &|r| {
                format!(
                    "{:.4}",
                    r.window.polls as f64 / window_ideal(r, interval_ms)
                )
            },
            String::new(),
            "",
        ));
        row(both(
            "sessions opened on the server (run)",
            &|r| thousands(r.sessions_opened),
            String::new(),
            "1 (legacy)",
        ));
        row(both(
            "new TCP connections in the window",
            &|r| {
                format!(
                    "{} ({} / 100 polls)",
                    thousands(r.window_connections),
                    connections_per_100_polls(r)
                        .map(|c| format!("{c:.2}"))
                        .unwrap_or_else(|| "—".into())
                )
            },
            String::new(),
            "≤ 1 per 100 polls",
        ));
        row(both(
            "engine epoll_wait / futex calls per poll",
            &wakeups_per_poll,
            String::new(),
            "",
        ));
        row(both(
            "GET streams opened in the window",
            &|r| thousands(r.window_requests.get("GET").copied().unwrap_or(0)),
            String::new(),
            "",
        ));
        row(both(
            "change → event latency p50 / p99",
            &|r| match &r.client.latency {
                Some(l) if l.samples > 0 => format!("{} / {}", secs(l.p50_ms), secs(l.p99_ms)),
                _ => "—".into(),
            },
            String::new(),
            "",
        ));
        row(both(
            "poll failures",
            &|r| thousands(r.client.poll_failures),
            String::new(),
            "",
        ));
        row(both(
            "engine peak RSS, whole run",
            &|r| format!("{:.0} MB", r.client.peak_rss_kb as f64 / 1024.0),
            String::new(),
            "",
        ));
        out.push_str(&text);
        let cost = if pushed {
            format!("cost per task-minute {}", met(minute_ratio <= MAX_RATIO))
        } else {
            format!(
                "cost per poll {}",
                met(ratio.is_some_and(|r| r <= MAX_RATIO))
            )
        };
        let verdicts = [
            cost,
            format!("one session {}", met(legacy.sessions_opened == 1)),
            format!(
                "connection reuse {}",
                met(connections_per_100_polls(legacy).is_some_and(|c| c <= 1.0))
            ),
        ];
        let _ = writeln!(out, "  {title}: {}", verdicts.join(", "));
        let _ = writeln!(out);
    }
}
