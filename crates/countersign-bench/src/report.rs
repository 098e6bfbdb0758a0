//! The printed table (and its JSON twin). Numbers are printed, never asserted: the machine is
//! shared and noisy. Targets are shown beside the figures, with whether this run met them.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::client::ClientRun;
use crate::resume::ResumeReport;
use crate::run::{Outcome, Plan, Results, CHANGE_EVERY_MS, TIME_SCALE};

/// Where and how the numbers were taken.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// UTC time the run started.
    pub started: String,
    /// CPU model and count.
    pub cpu: String,
    /// Logical CPUs.
    pub cores: usize,
    /// Total memory, MiB.
    pub memory_mb: u64,
    /// Kernel release.
    pub kernel: String,
    /// 1-minute load average at the start.
    pub load_start: f64,
    /// …and at the end.
    pub load_end: f64,
    /// `release` or `debug`.
    pub profile: String,
}

impl Machine {
    /// Reads what the machine says about itself.
    pub fn probe() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, m)| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let memory_kb: u64 = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let now = time::OffsetDateTime::now_utc();
        Self {
            started: format!(
                "{:04}-{:02}-{:02} {:02}:{:02} UTC",
                now.year(),
                now.month() as u8,
                now.day(),
                now.hour(),
                now.minute()
            ),
            cpu: model,
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_mb: memory_kb / 1024,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            load_start: load_average(),
            load_end: 0.0,
            profile: if cfg!(debug_assertions) {
                "debug".into()
            } else {
                "release".into()
            },
        }
    }
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The whole document `--json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Document {
    /// The machine.
    pub machine: Machine,
    /// `pollIntervalMs`.
    pub interval_ms: u64,
    /// Steady window, seconds.
    pub window_s: f64,
    /// Warm-up before the window, seconds.
    pub warmup_s: f64,
    /// The results.
    pub results: Results,
}

pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn mb(kb: u64) -> String {
    format!("{:.0} MB", kb as f64 / 1024.0)
}

pub(crate) fn secs(ms: f64) -> String {
    if ms.is_nan() {
        "—".into()
    } else if ms.abs() < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.3} s", ms / 1000.0)
    }
}

pub(crate) fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

/// Ideal polls in a steady window: every task once per interval.
pub(crate) fn window_ideal(run: &ClientRun, interval_ms: u64) -> f64 {
    run.client.tasks as f64 * run.client.window_seconds * 1000.0 / interval_ms as f64
}

/// Engine CPU per poll in the window, µs (`None` without polls).
pub(crate) fn cpu_per_poll_us(run: &ClientRun) -> Option<f64> {
    let polls = run.client.polls_window;
    (polls > 0).then(|| {
        run.client.cpu_percent / 100.0 * run.client.window_seconds * 1_000_000.0 / polls as f64
    })
}

/// Engine CPU-milliseconds per tracked task-minute: what one live task costs.
pub(crate) fn cpu_ms_per_task_minute(run: &ClientRun) -> f64 {
    if run.client.tasks == 0 {
        return 0.0;
    }
    run.client.cpu_percent / 100.0 * 60_000.0 / run.client.tasks as f64
}

/// Syncs (`fsync` + `fdatasync`) per poll in the window, with the count: what group commit
/// saves. "—" where `perf` could not count.
fn syncs_per_poll(run: &ClientRun) -> String {
    match run.window_calls {
        Some(calls) if run.client.polls_window > 0 => format!(
            "{:.3} ({})",
            calls.syncs as f64 / run.client.polls_window as f64,
            thousands(calls.syncs)
        ),
        _ => "—".into(),
    }
}

/// The engine's `epoll_wait` and `futex` calls per poll in the window: the runtime's wake-ups
/// and thread hand-offs, which polls arriving one by one pay each alone.
pub(crate) fn wakeups_per_poll(run: &ClientRun) -> String {
    match run.window_calls {
        Some(calls) if run.client.polls_window > 0 => {
            let polls = run.client.polls_window as f64;
            format!(
                "{:.2} / {:.2}",
                calls.epoll_waits as f64 / polls,
                calls.futexes as f64 / polls
            )
        }
        _ => "—".into(),
    }
}

/// The engine's `pwrite64` and `fcntl` calls per poll in the window: SQLite's page writes and
/// file locks, paid per transaction.
fn ledger_calls_per_poll(run: &ClientRun) -> String {
    match run.window_calls {
        Some(calls) if run.client.polls_window > 0 => {
            let polls = run.client.polls_window as f64;
            format!(
                "{:.2} / {:.2}",
                calls.pwrites as f64 / polls,
                calls.fcntls as f64 / polls
            )
        }
        _ => "—".into(),
    }
}

/// The engine's own `connect` calls in the window: on the fastmcp peer, the only count of new
/// connections. "—" where `perf` could not count.
fn engine_connects(run: &ClientRun) -> String {
    match run.window_calls {
        Some(calls) => thousands(calls.connects),
        None => "—".into(),
    }
}

/// New TCP connections the server accepted per 100 polls in the window.
pub(crate) fn connections_per_100_polls(run: &ClientRun) -> Option<f64> {
    (run.window.polls > 0).then(|| run.window_connections as f64 * 100.0 / run.window.polls as f64)
}

/// One table row: a label and one cell per column.
struct Table {
    widths: Vec<usize>,
    out: String,
}

impl Table {
    fn new(widths: Vec<usize>) -> Self {
        Self {
            widths,
            out: String::new(),
        }
    }

    fn row(&mut self, cells: &[String]) {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let width = self.widths.get(i).copied().unwrap_or(12);
            let _ = write!(line, "{cell:<width$}");
        }
        let _ = writeln!(self.out, "{}", line.trim_end());
    }
}

/// Renders the results as the table the README quotes.
pub fn render(document: &Document, plan: &Plan) -> String {
    let m = &document.machine;
    let interval_ms = document.interval_ms;
    let mut out = String::new();
    let _ = writeln!(out, "Countersign engine benchmark — {}", m.started);
    let _ = writeln!(
        out,
        "machine: {} × {}, {:.1} GiB, Linux {}; load average {:.2} at start, {:.2} at end; {} build",
        m.cores,
        m.cpu,
        m.memory_mb as f64 / 1024.0,
        m.kernel,
        m.load_start,
        m.load_end,
        m.profile
    );
    let _ = writeln!(
        out,
        "workload: bench_job tasks on the demo server (own process, time scale {TIME_SCALE}), pollIntervalMs {interval_ms}, \
         a status change every {}–{} s per task; steady window {:.0} s after {:.0} s of warm-up{}",
        CHANGE_EVERY_MS.0 / 1000,
        CHANGE_EVERY_MS.1 / 1000,
        document.window_s,
        document.warmup_s,
        if plan.quick { " (quick mode)" } else { "" }
    );
    if m.profile == "debug" {
        let _ = writeln!(
            out,
            "note: debug build — CPU figures are several times higher than in release"
        );
    }
    let _ = writeln!(out);

    // Steady state, one column per N.
    let steady = &document.results.steady;
    let mut widths = vec![46];
    widths.extend(steady.iter().map(|_| 20));
    widths.push(24);
    let mut table = Table::new(widths);
    let mut header = vec!["Steady state (our engine)".to_owned()];
    header.extend(
        steady
            .iter()
            .map(|s| format!("N={}", thousands(s.tasks as u64))),
    );
    header.push("target".into());
    table.row(&header);
    let cell = |f: &dyn Fn(&ClientRun) -> String| cells(steady.iter().map(|s| &s.outcome), f);
    let mut line = |label: &str, cells: Vec<String>, target: &str| {
        target_row(&mut table, label, cells, target)
    };
    line(
        "tasks created in",
        cell(&|r| format!("{:.1} s", r.client.create_seconds)),
        "",
    );
    line(
        "polls ÷ ideal, window (server count)",
        cell(&|r| {
            format!(
                "{:.4}",
                r.window.polls as f64 / window_ideal(r, interval_ms)
            )
        }),
        "≤ 1.02",
    );
    line(
        "polls ÷ ideal, window (engine count)",
        cell(&|r| {
            format!(
                "{:.4}",
                r.client.polls_window as f64 / window_ideal(r, interval_ms)
            )
        }),
        "",
    );
    line(
        "polls earlier than the interval (server)",
        cell(&|r| format!("{} of {}", thousands(r.life.early), thousands(r.life.gaps))),
        "0",
    );
    line(
        "shortest gap between a task's polls",
        cell(&|r| r.life.min_ms().map(secs).unwrap_or_else(|| "—".into())),
        &format!("≥ {}", secs(interval_ms as f64)),
    );
    line(
        "gap p50 / p99 (1 ms buckets)",
        cell(
            &|r| match (r.window.quantile_ms(0.5), r.window.quantile_ms(0.99)) {
                (Some(a), Some(b)) => format!("{} / {}", secs(a as f64), secs(b as f64)),
                _ => "—".into(),
            },
        ),
        "",
    );
    line(
        "engine CPU, % of one core (window)",
        cell(&|r| format!("{:.1} %", r.client.cpu_percent)),
        "≤ 15 % at 10k",
    );
    line(
        "engine CPU per poll (3 in 4 unchanged)",
        cell(&|r| {
            cpu_per_poll_us(r)
                .map(|us| format!("{us:.0} µs"))
                .unwrap_or_else(|| "—".into())
        }),
        "",
    );
    line(
        "new TCP connections in the window",
        cell(&|r| thousands(r.window_connections)),
        "",
    );
    line(
        "engine peak RSS, whole run",
        cell(&|r| mb(r.client.peak_rss_kb)),
        "≤ 100 MB at 10k",
    );
    line(
        "engine peak RSS, window only",
        cell(&|r| {
            r.client
                .window_peak_rss_kb
                .map(mb)
                .unwrap_or_else(|| "—".into())
        }),
        "",
    );
    line(
        "change → event latency p50 / p99",
        cell(&|r| match &r.client.latency {
            Some(l) if l.samples > 0 => format!("{} / {}", secs(l.p50_ms), secs(l.p99_ms)),
            _ => "—".into(),
        }),
        &format!("p99 ≤ {}", secs(interval_ms as f64 + 50.0)),
    );
    line(
        "  min / max",
        cell(&|r| match &r.client.latency {
            Some(l) if l.samples > 0 => format!("{} / {}", secs(l.min_ms), secs(l.max_ms)),
            _ => "—".into(),
        }),
        "",
    );
    line(
        "  changes measured / missed",
        cell(&|r| match &r.client.latency {
            Some(l) => format!(
                "{} / {}",
                thousands(l.samples as u64),
                thousands(l.missed as u64)
            ),
            None => "—".into(),
        }),
        "",
    );
    line(
        "poll failures",
        cell(&|r| thousands(r.client.poll_failures)),
        "",
    );
    line(
        "demo server CPU (its own process)",
        cell(&|r| format!("{:.1} %", r.server_cpu_percent)),
        "",
    );
    out.push_str(&table.out);

    // Targets, in words.
    for s in steady {
        if let Outcome::Measured(r) = &s.outcome {
            let ratio = r.window.polls as f64 / window_ideal(r, interval_ms);
            let mut verdicts = vec![
                format!("polls ÷ ideal {}", met(ratio <= 1.02)),
                format!("no early poll {}", met(r.life.early == 0)),
            ];
            if let Some(l) = &r.client.latency {
                if l.samples > 0 {
                    verdicts.push(format!(
                        "latency p99 {}",
                        met(l.p99_ms <= interval_ms as f64 + 50.0)
                    ));
                }
            }
            if s.tasks >= 10_000 {
                verdicts.push(format!("CPU {}", met(r.client.cpu_percent <= 15.0)));
                verdicts.push(format!("RSS {}", met(r.client.peak_rss_kb <= 100 * 1024)));
            }
            let _ = writeln!(
                out,
                "  N={}: {}",
                thousands(s.tasks as u64),
                verdicts.join(", ")
            );
        }
    }
    for s in steady {
        if let Outcome::Failed(reason) = &s.outcome {
            let _ = writeln!(out, "  N={} failed: {reason}", thousands(s.tasks as u64));
        }
    }
    let _ = writeln!(out);

    match &document.results.resume {
        Some(Outcome::Measured(r)) => render_resume(&mut out, r, interval_ms),
        Some(Outcome::Failed(reason)) => {
            let _ = writeln!(out, "Cold resume: failed: {reason}\n");
        }
        None => {
            let _ = writeln!(out, "Cold resume: not run\n");
        }
    }

    match &document.results.comparison {
        Some(comparison) => {
            let ours = steady
                .iter()
                .find(|s| s.tasks == comparison.tasks)
                .and_then(|s| s.outcome.measured());
            match (ours, &comparison.fastmcp) {
                (Some(ours), Outcome::Measured(theirs)) => {
                    render_comparison(&mut out, ours, theirs, interval_ms)
                }
                (_, Outcome::Failed(reason)) => {
                    let _ = writeln!(out, "Side by side with fastmcp: failed: {reason}");
                }
                (None, _) => {
                    let _ = writeln!(
                        out,
                        "Side by side with fastmcp: our run at N={} failed",
                        comparison.tasks
                    );
                }
            }
        }
        None => {
            let _ = writeln!(
                out,
                "Side by side with the fastmcp 4.1.4 client: not run{} (pass --fastmcp-python .ci/venv/bin/python)",
                if plan.quick { " in quick mode" } else { "" }
            );
        }
    }
    render_shapes(&mut out, document);
    crate::eras::render(&mut out, document);
    render_before_after(&mut out, document, plan);
    crate::sources::render(&mut out, document);
    out
}

/// `--compare-exe`: the other build's engine ("before") beside ours ("after"), run for run.
fn render_before_after(out: &mut String, document: &Document, plan: &Plan) {
    let results = &document.results;
    let Some(exe) = &plan.compare_exe else {
        return;
    };
    let interval_ms = document.interval_ms;
    let after = |b: &crate::run::SteadyResult| {
        results
            .steady
            .iter()
            .chain(&results.shapes)
            .find(|a| a.tasks == b.tasks && a.workload == b.workload && a.source == b.source)
            .and_then(|a| a.outcome.measured())
    };
    let pairs: Vec<_> = results
        .before
        .iter()
        .map(|b| (b, b.outcome.measured(), after(b)))
        .collect();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Before → after, same run (before: the engine of {})",
        exe.display()
    );
    let mut widths = vec![44];
    widths.extend(pairs.iter().flat_map(|_| [13, 16]));
    let mut table = Table::new(widths);
    let mut header = vec![String::new()];
    for (b, _, _) in &pairs {
        header.push(format!(
            "{}, N={}",
            b.workload.label(),
            thousands(b.tasks as u64)
        ));
        header.push(String::new());
    }
    table.row(&header);
    let mut sub = vec![String::new()];
    for _ in &pairs {
        sub.push("before".into());
        sub.push("after".into());
    }
    table.row(&sub);
    let mut line = |label: &str, f: &dyn Fn(&ClientRun) -> String| {
        let mut row = vec![format!("  {label}")];
        for (_, before, after) in &pairs {
            for run in [before, after] {
                row.push(run.map(f).unwrap_or_else(|| "failed".into()));
            }
        }
        table.row(&row);
    };
    line("engine CPU, % of one core", &|r| {
        format!("{:.1} %", r.client.cpu_percent)
    });
    line("engine CPU per poll", &|r| {
        cpu_per_poll_us(r)
            .map(|us| format!("{us:.0} µs"))
            .unwrap_or_else(|| "—".into())
    });
    line("CPU-ms per tracked task-minute", &|r| {
        format!("{:.2}", cpu_ms_per_task_minute(r))
    });
    line("new TCP connections (window)", &|r| {
        thousands(r.window_connections)
    });
    line("syncs per poll (count)", &syncs_per_poll);
    line("engine connect() calls (window)", &engine_connects);
    line("epoll_wait / futex per poll", &wakeups_per_poll);
    line("pwrite64 / fcntl per poll", &ledger_calls_per_poll);
    // The fastmcp peer counts nothing for us: there, the engine's own count.
    line("polls ÷ ideal (server; engine on the peer)", &|r| {
        let polls = if r.window.polls > 0 {
            r.window.polls
        } else {
            r.client.polls_window
        };
        format!("{:.4}", polls as f64 / window_ideal(r, interval_ms))
    });
    line("early polls (server)", &|r| {
        if r.window.polls > 0 {
            thousands(r.life.early)
        } else {
            "—".into()
        }
    });
    line("engine peak RSS", &|r| mb(r.client.peak_rss_kb));
    out.push_str(&table.out);
    if let (Some(Outcome::Measured(b)), Some(Outcome::Measured(a))) =
        (&results.before_resume, &results.resume)
    {
        let _ = writeln!(
            out,
            "  cold resume of {} tasks: ready {} → {}; peak RSS when ready {} → {}, at the end {} → {}",
            thousands(a.tasks as u64),
            secs(b.ready_ms),
            secs(a.ready_ms),
            mb(b.ready_peak_rss_kb),
            mb(a.ready_peak_rss_kb),
            mb(b.peak_rss_kb),
            mb(a.peak_rss_kb)
        );
    }
}

/// The real-server shapes (`--workload`): SSE replies and a change before every poll, one
/// column per workload and N, with the targets.
fn render_shapes(out: &mut String, document: &Document) {
    let shapes = &document.results.shapes;
    if shapes.is_empty() {
        return;
    }
    let _ = writeln!(out);
    let interval_ms = document.interval_ms;
    let mut widths = vec![44];
    widths.extend(shapes.iter().map(|_| 26));
    widths.push(28);
    let mut table = Table::new(widths);
    let mut header = vec!["Real-server shapes (our engine, polling)".to_owned()];
    header.extend(shapes.iter().map(|s| s.workload.label().to_owned()));
    header.push("target".into());
    table.row(&header);
    let cell = |f: &dyn Fn(&ClientRun) -> String| cells(shapes.iter().map(|s| &s.outcome), f);
    let mut line = |label: &str, cells: Vec<String>, target: &str| {
        target_row(&mut table, label, cells, target)
    };
    line(
        "live tasks",
        shapes
            .iter()
            .map(|s| format!("N={}", thousands(s.tasks as u64)))
            .collect(),
        "",
    );
    // The fastmcp peer counts nothing for us: its server-side cells stay empty.
    let served = |r: &ClientRun| r.window.polls > 0;
    line(
        "polls ÷ ideal, window (server count)",
        cell(&|r| {
            if served(r) {
                format!(
                    "{:.4}",
                    r.window.polls as f64 / window_ideal(r, interval_ms)
                )
            } else {
                "—".into()
            }
        }),
        "≤ 1.02",
    );
    line(
        "polls ÷ ideal, window (engine count)",
        cell(&|r| {
            format!(
                "{:.4}",
                r.client.polls_window as f64 / window_ideal(r, interval_ms)
            )
        }),
        "",
    );
    line(
        "polls earlier than the interval (server)",
        cell(&|r| {
            if served(r) {
                format!("{} of {}", thousands(r.life.early), thousands(r.life.gaps))
            } else {
                "—".into()
            }
        }),
        "0",
    );
    line(
        "engine CPU, % of one core (window)",
        cell(&|r| format!("{:.1} %", r.client.cpu_percent)),
        "≤ 3 % at 1k, ≤ 30 % at 10k",
    );
    line(
        "engine CPU per poll",
        cell(&|r| {
            cpu_per_poll_us(r)
                .map(|us| format!("{us:.0} µs"))
                .unwrap_or_else(|| "—".into())
        }),
        "≤ 50 µs unchanged",
    );
    line(
        "engine CPU-ms per tracked task-minute",
        cell(&|r| format!("{:.2}", cpu_ms_per_task_minute(r))),
        "≤ 2",
    );
    line(
        "new TCP connections in the window",
        cell(&|r| {
            if !served(r) {
                return "—".into();
            }
            format!(
                "{} ({} per 100 polls)",
                thousands(r.window_connections),
                connections_per_100_polls(r)
                    .map(|c| format!("{c:.2}"))
                    .unwrap_or_else(|| "—".into())
            )
        }),
        "≤ 1 per 100 polls",
    );
    line(
        "engine syncs (fsync + fdatasync) per poll",
        cell(&syncs_per_poll),
        "",
    );
    line(
        "engine connect() calls in the window",
        cell(&engine_connects),
        "",
    );
    line(
        "engine epoll_wait / futex calls per poll",
        cell(&wakeups_per_poll),
        "",
    );
    line(
        "engine pwrite64 / fcntl calls per poll",
        cell(&ledger_calls_per_poll),
        "",
    );
    line(
        "engine peak RSS, whole run",
        cell(&|r| mb(r.client.peak_rss_kb)),
        "≤ 100 MB at 10k",
    );
    line(
        "change → event latency p50 / p99",
        cell(&|r| match &r.client.latency {
            Some(l) if l.samples > 0 => format!("{} / {}", secs(l.p50_ms), secs(l.p99_ms)),
            _ => "—".into(),
        }),
        "",
    );
    line(
        "poll failures",
        cell(&|r| thousands(r.client.poll_failures)),
        "",
    );
    line(
        "server CPU (its own process)",
        cell(&|r| format!("{:.1} %", r.server_cpu_percent)),
        "",
    );
    out.push_str(&table.out);
    for s in shapes {
        let label = format!("{}, N={}", s.workload.label(), thousands(s.tasks as u64));
        match &s.outcome {
            Outcome::Measured(r) => {
                let polls = if served(r) {
                    r.window.polls
                } else {
                    r.client.polls_window
                };
                let ratio = polls as f64 / window_ideal(r, interval_ms);
                let mut verdicts = vec![format!("polls ÷ ideal {}", met(ratio <= 1.02))];
                if served(r) {
                    verdicts.push(format!("no early poll {}", met(r.life.early == 0)));
                }
                if s.workload.sse() {
                    verdicts.push(format!(
                        "connection reuse {}",
                        met(connections_per_100_polls(r).is_some_and(|c| c <= 1.0))
                    ));
                }
                if s.workload == crate::run::Workload::Unchanged {
                    verdicts.push(format!(
                        "CPU per unchanged poll {}",
                        met(cpu_per_poll_us(r).is_some_and(|us| us <= 50.0))
                    ));
                }
                if matches!(
                    s.workload,
                    crate::run::Workload::SseEveryPoll | crate::run::Workload::SseProgress
                ) {
                    let cpu_target = if s.tasks >= 10_000 { 30.0 } else { 3.0 };
                    verdicts.push(format!("CPU {}", met(r.client.cpu_percent <= cpu_target)));
                    verdicts.push(format!(
                        "CPU per task-minute {}",
                        met(cpu_ms_per_task_minute(r) <= 2.0)
                    ));
                    if s.tasks >= 10_000 {
                        verdicts.push(format!("RSS {}", met(r.client.peak_rss_kb <= 100 * 1024)));
                    }
                }
                let _ = writeln!(out, "  {label}: {}", verdicts.join(", "));
            }
            Outcome::Failed(reason) => {
                let _ = writeln!(out, "  {label} failed: {reason}");
            }
        }
    }
    let _ = writeln!(out);
}

fn render_resume(out: &mut String, r: &ResumeReport, interval_ms: u64) {
    let mut table = Table::new(vec![56, 26, 20]);
    table.row(&[
        format!(
            "Cold resume ({} unfinished tasks, fresh process)",
            thousands(r.tasks as u64)
        ),
        String::new(),
        "target".into(),
    ]);
    table.row(&[
        "  process start → all loaded and scheduled".into(),
        format!(
            "{} ({} resumed)",
            secs(r.ready_ms),
            thousands(r.resumed as u64)
        ),
        format!(
            "≤ 1 s: {}",
            met(r.ready_ms <= 1000.0 && r.resumed == r.tasks)
        ),
    ]);
    table.row(&[
        "    of which spawn → main".into(),
        secs(r.exec_ms),
        String::new(),
    ]);
    let polled = r.first_polls > 0;
    let pair = |a: f64, b: f64| {
        if polled {
            format!("{} / {}", secs(a), secs(b))
        } else {
            "—".into()
        }
    };
    table.row(&[
        "  first poll after process start p50 / max".into(),
        pair(r.first_poll_p50_ms, r.first_poll_max_ms),
        format!("spread over {}", secs(interval_ms as f64)),
    ]);
    table.row(&[
        "    min / p90".into(),
        pair(r.first_poll_min_ms, r.first_poll_p90_ms),
        String::new(),
    ]);
    table.row(&[
        "  tasks polled / resumed".into(),
        format!(
            "{} / {}",
            thousands(r.first_polls as u64),
            thousands(r.resumed as u64)
        ),
        String::new(),
    ]);
    table.row(&[
        "  busiest 100 ms of first polls".into(),
        format!("{} (even: {:.0})", r.busiest_100ms, r.even_100ms),
        "no thundering herd".into(),
    ]);
    table.row(&[
        "  peak RSS when ready / at the end".into(),
        format!("{} / {}", mb(r.ready_peak_rss_kb), mb(r.peak_rss_kb)),
        String::new(),
    ]);
    table.row(&[
        "  seeding the ledger (not measured)".into(),
        format!("{:.1} s", r.seed_seconds),
        String::new(),
    ]);
    out.push_str(&table.out);
    let _ = writeln!(out);
}

fn ratio(theirs: f64, ours: f64, unit: &str) -> String {
    if ours > 0.0 {
        format!("{:.2}{unit}", theirs / ours)
    } else if theirs > 0.0 {
        "— (ours: 0)".into()
    } else {
        "—".into()
    }
}

fn render_comparison(out: &mut String, ours: &ClientRun, theirs: &ClientRun, interval_ms: u64) {
    let mut table = Table::new(vec![52, 16, 16, 22]);
    table.row(&[
        format!(
            "Side by side, N={} (same server, same workload)",
            thousands(ours.client.tasks as u64)
        ),
        "countersign".into(),
        "fastmcp 4.1.4".into(),
        "fastmcp ÷ countersign".into(),
    ]);
    let per_task = |r: &ClientRun| r.life.polls as f64 / r.client.tasks.max(1) as f64;
    let life_ratio = |r: &ClientRun| r.life.polls as f64 / r.client.ideal_lifetime.max(1.0);
    let window_ratio = |r: &ClientRun| r.window.polls as f64 / window_ideal(r, interval_ms);
    let early_per_task = |r: &ClientRun| r.life.early as f64 / r.client.tasks.max(1) as f64;
    table.row(&[
        "  polls per task since creation (server)".into(),
        format!("{:.2}", per_task(ours)),
        format!("{:.2}", per_task(theirs)),
        ratio(per_task(theirs), per_task(ours), "×"),
    ]);
    let ideal_per_task = |r: &ClientRun| r.client.ideal_lifetime / r.client.tasks.max(1) as f64;
    table.row(&[
        "    ideal: ⌊task age at window end ÷ interval⌋".into(),
        format!("{:.2}", ideal_per_task(ours)),
        format!("{:.2}", ideal_per_task(theirs)),
        String::new(),
    ]);
    table.row(&[
        "  polls ÷ ideal since creation".into(),
        format!("{:.3}", life_ratio(ours)),
        format!("{:.3}", life_ratio(theirs)),
        ratio(life_ratio(theirs), life_ratio(ours), "×"),
    ]);
    table.row(&[
        "  polls ÷ ideal, steady window".into(),
        format!("{:.4}", window_ratio(ours)),
        format!("{:.4}", window_ratio(theirs)),
        ratio(window_ratio(theirs), window_ratio(ours), "×"),
    ]);
    table.row(&[
        "  polls earlier than the interval".into(),
        thousands(ours.life.early),
        thousands(theirs.life.early),
        format!(
            "{:.1} vs {:.1} per task",
            early_per_task(theirs),
            early_per_task(ours)
        ),
    ]);
    table.row(&[
        "  shortest gap between a task's polls".into(),
        ours.life.min_ms().map(secs).unwrap_or_else(|| "—".into()),
        theirs.life.min_ms().map(secs).unwrap_or_else(|| "—".into()),
        String::new(),
    ]);
    table.row(&[
        "  client CPU, % of one core (window)".into(),
        format!("{:.1} %", ours.client.cpu_percent),
        format!("{:.1} %", theirs.client.cpu_percent),
        ratio(theirs.client.cpu_percent, ours.client.cpu_percent, "×"),
    ]);
    table.row(&[
        "  client peak RSS, whole run".into(),
        mb(ours.client.peak_rss_kb),
        mb(theirs.client.peak_rss_kb),
        ratio(
            theirs.client.peak_rss_kb as f64,
            ours.client.peak_rss_kb as f64,
            "×",
        ),
    ]);
    table.row(&[
        "  tasks created in".into(),
        format!("{:.1} s", ours.client.create_seconds),
        format!("{:.1} s", theirs.client.create_seconds),
        String::new(),
    ]);
    table.row(&[
        "  poll failures".into(),
        thousands(ours.client.poll_failures),
        thousands(theirs.client.poll_failures),
        String::new(),
    ]);
    out.push_str(&table.out);
}

/// One cell per run: `f` of a measured run, `failed` for a run that could not be measured.
fn cells<'a>(
    outcomes: impl Iterator<Item = &'a Outcome<ClientRun>>,
    f: &dyn Fn(&ClientRun) -> String,
) -> Vec<String> {
    outcomes
        .map(|outcome| match outcome {
            Outcome::Measured(run) => f(run),
            Outcome::Failed(_) => "failed".into(),
        })
        .collect()
}

/// A labelled row of cells with the target in the last column.
fn target_row(table: &mut Table, label: &str, cells: Vec<String>, target: &str) {
    let mut row = vec![format!("  {label}")];
    row.extend(cells);
    row.push(target.to_owned());
    table.row(&row);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(secs(5001.2), "5.001 s");
        assert_eq!(secs(20.4), "20 ms");
        assert_eq!(mb(102_400), "100 MB");
    }
}
