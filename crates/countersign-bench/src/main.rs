//! `countersign-bench`: how Countersign's durable task engine behaves with thousands of live
//! tasks, measured against the demo server and printed (never asserted: the machine is shared).
//!
//! The driver (this binary without a subcommand) runs each phase in fresh processes, re-executing
//! itself in hidden modes:
//! - `serve`: the demo server with a control line ([`demo`]): request counts and per-task gaps
//!   between polls, as only the server sees them;
//! - `steady`: our engine watching N live tasks ([`steady`]): CPU, RSS, polls, change → event
//!   latency, over a steady window;
//! - `resume`: a fresh engine process on a ledger of unfinished tasks ([`resume`]).
//!
//! The fastmcp 4.1.4 Python client (`tests/peers/fastmcp_poll_client.py`) runs the same workload
//! through the same phases ([`client`]) for the side-by-side. The `gateway` and `stdio`
//! subcommands print their own tables ([`gateway`], [`stdio`]). [`run`] sequences the phases,
//! [`report`] prints the table ([`eras`]: the legacy era beside the modern one); [`workload`]
//! is the `bench_job` task mix, [`usage`] and [`clock`] read `/proc` and time, [`child`] is the
//! line protocol that keeps every wait bounded and every child process tied to the driver's
//! life.

mod child;
mod client;
mod clock;
mod demo;
mod eras;
mod error;
mod gateway;
mod report;
mod resume;
mod run;
mod sources;
mod stdio;
mod steady;
mod syncs;
mod usage;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::{Error, Result};
use crate::report::{Document, Machine};
use crate::run::{Fastmcp, Plan, Workload};
use crate::sources::{Scheme, Source, SourceArg};

/// Benchmarks Countersign's durable task engine against the demo server (and, optionally, the
/// fastmcp 4.1.4 client on the same workload). Prints a table; `--json` prints the numbers.
#[derive(Parser, Debug)]
#[command(
    name = "countersign-bench",
    version,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Live tasks per steady run; repeat or list them (`--tasks 1000,10000`).
    /// [default: 1000,10000; quick: 1000]
    #[arg(long, value_delimiter = ',')]
    tasks: Vec<usize>,
    /// Length of each steady window, seconds. [default: 60; quick: 20]
    #[arg(long)]
    seconds: Option<u64>,
    /// The `pollIntervalMs` the demo server advertises.
    #[arg(long, default_value_t = 5000)]
    interval_ms: u64,
    /// Unfinished tasks for the cold-resume measurement (0 skips it). [default: 10000; quick: 2000]
    #[arg(long)]
    resume_tasks: Option<usize>,
    /// Short CI mode: N=1000 for 20 s and a resume of 2,000 tasks; the whole table is printed.
    #[arg(long)]
    quick: bool,
    /// Print the results as JSON (progress still goes to stderr).
    #[arg(long)]
    json: bool,
    /// Run the fastmcp 4.1.4 client side by side, with this Python (`.ci/venv/bin/python`).
    #[arg(long)]
    fastmcp_python: Option<PathBuf>,
    /// The fastmcp client script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/peers/fastmcp_poll_client.py"))]
    fastmcp_script: PathBuf,
    /// Tasks for the side-by-side (both clients).
    #[arg(long, default_value_t = 1000)]
    fastmcp_tasks: usize,
    /// Where the ledgers go (removed afterwards). [default: a new directory under $TMPDIR]
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// How the steady runs learn about changes: `poll` (the demo server has no push), `push`
    /// (it serves subscriptions/listen and the engine's push source is on), or `both`, side by
    /// side in a "Push vs poll" table.
    #[arg(long, value_enum, default_value_t = SourceArg::Poll)]
    source: SourceArg,
    /// How push runs group their listen streams.
    #[arg(long, value_enum, default_value_t = Scheme::Batched)]
    push_scheme: Scheme,
    /// Workloads of the steady runs; list them (`--workload calm,sse-every-poll`). `calm` is the
    /// main table's; the others are the shapes of real servers' traffic, in their own table.
    /// `peer-every-poll` puts our engine on the fastmcp peer server (needs --fastmcp-python);
    /// `legacy` is calm's traffic on the demo server's 2025-11-25 era (`legacy-polled`: without
    /// its GET stream), compared with calm; `legacy-unchanged` is compared with `unchanged`.
    /// [default: calm,unchanged,sse-every-poll,sse-progress,legacy,legacy-polled, and
    /// peer-every-poll with
    /// --fastmcp-python; quick: calm,unchanged]
    #[arg(long, value_enum, value_delimiter = ',')]
    workload: Vec<Workload>,
    /// Another build of this benchmark (e.g. of the previous commit): its engine runs every
    /// steady run and the resume right after ours, and the report shows both, "before" and
    /// "after", from the same run.
    #[arg(long)]
    compare_exe: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// (internal) Host the demo server for the driver.
    #[command(hide = true)]
    Serve {
        #[arg(long)]
        poll_interval_ms: u64,
        #[arg(long)]
        time_scale: f64,
        /// Serve `subscriptions/listen`.
        #[arg(long)]
        push: bool,
        /// Answer with `text/event-stream`.
        #[arg(long)]
        sse: bool,
        /// Serve the 2025-11-25 era.
        #[arg(long)]
        legacy: bool,
        /// In the legacy era, refuse the session's GET stream (405).
        #[arg(long)]
        no_get_stream: bool,
    },
    /// (internal) Our engine in the steady-state measurement.
    #[command(hide = true)]
    Steady(SteadyArgs),
    /// The latency the local MCP gateway adds: an allowed call vs. direct (1 and N agents), an
    /// ask call until it is committed, Approve until the upstream has the call. Prints tables.
    Gateway {
        /// Sequential allowed calls per side.
        #[arg(long, default_value_t = 2000)]
        calls: usize,
        /// Concurrent agents.
        #[arg(long, default_value_t = 100)]
        agents: usize,
        /// Calls per concurrent agent.
        #[arg(long, default_value_t = 20)]
        calls_per_agent: usize,
        /// Ask calls, each approved.
        #[arg(long, default_value_t = 200)]
        asks: usize,
    },
    /// What fronting a stdio server costs (real server-filesystem, real `countersign`
    /// processes): an allowed `read_text_file` through `countersign gateway` vs. direct over
    /// stdio, and `countersign watch` idle with 0 vs. N stdio servers. Prints tables.
    Stdio {
        /// Timed calls per side.
        #[arg(long, default_value_t = 200)]
        calls: usize,
        /// Untimed calls per side before them.
        #[arg(long, default_value_t = 50)]
        warmup: usize,
        /// Each idle engine's window, seconds.
        #[arg(long, default_value_t = 20)]
        idle_seconds: u64,
        /// Stdio servers on the idle ledger that has them.
        #[arg(long, default_value_t = 5)]
        servers: usize,
        /// The `countersign` binary. [default: next to this one]
        #[arg(long)]
        countersign: Option<PathBuf>,
        /// Where `.ci/setup-tools.sh` installed Node and server-filesystem.
        #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci/tools"))]
        tools: PathBuf,
    },
    /// (internal) A fresh engine process resuming a seeded ledger.
    #[command(hide = true)]
    Resume {
        #[arg(long)]
        data_dir: PathBuf,
    },
}

#[derive(Args, Debug)]
struct SteadyArgs {
    #[arg(long)]
    url: String,
    #[arg(long)]
    tasks: usize,
    #[arg(long)]
    window_ms: u64,
    #[arg(long)]
    interval_ms: u64,
    #[arg(long)]
    warmup_ms: u64,
    #[arg(long)]
    create_budget_ms: u64,
    #[arg(long)]
    life_ms: u64,
    #[arg(long)]
    change_min_ms: u64,
    #[arg(long)]
    change_max_ms: u64,
    #[arg(long)]
    data_dir: PathBuf,
    #[arg(long, value_enum, default_value_t = Source::Poll)]
    source: Source,
    #[arg(long, value_enum, default_value_t = Scheme::Batched)]
    push_scheme: Scheme,
    #[arg(long)]
    peer_steps: Option<u64>,
    /// Start the tasks evenly over this long instead of as fast as possible.
    #[arg(long, default_value_t = 0)]
    stagger_ms: u64,
    /// The server speaks the 2025-11-25 era: register it as legacy and follow it through the
    /// legacy peer.
    #[arg(long)]
    legacy: bool,
}

fn main() -> ExitCode {
    // Taken first: the resume measurement counts from process start.
    let main_us = usage::system_now_us();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("countersign-bench: cannot start the async runtime: {e}");
            return ExitCode::from(70);
        }
    };
    let outcome = runtime.block_on(async move {
        match cli.mode {
            Some(Mode::Serve {
                poll_interval_ms,
                time_scale,
                push,
                sse,
                legacy,
                no_get_stream,
            }) => demo::serve(demo::ServeOptions {
                poll_interval_ms,
                time_scale,
                push,
                sse,
                legacy,
                no_get_stream,
            })
            .await
            .map(|()| ExitCode::SUCCESS),
            Some(Mode::Steady(args)) => steady::run(args.into()).await.map(|()| ExitCode::SUCCESS),
            Some(Mode::Resume { data_dir }) => resume::child(main_us, data_dir)
                .await
                .map(|()| ExitCode::SUCCESS),
            Some(Mode::Gateway {
                calls,
                agents,
                calls_per_agent,
                asks,
            }) => gateway::run(gateway::Options {
                calls,
                agents,
                calls_per_agent,
                asks,
            })
            .await
            .map(|()| ExitCode::SUCCESS),
            Some(Mode::Stdio {
                calls,
                warmup,
                idle_seconds,
                servers,
                countersign,
                tools,
            }) => match countersign.map_or_else(sibling_countersign, Ok) {
                Ok(countersign) => stdio::run(stdio::Options {
                    calls,
                    warmup,
                    idle: Duration::from_secs(idle_seconds),
                    servers,
                    countersign,
                    tools,
                })
                .await
                .map(|()| ExitCode::SUCCESS),
                Err(e) => Err(e),
            },
            None => drive(cli.run).await,
        }
    });
    // Children, tasks and the ledger writer thread must not keep a finished run alive.
    runtime.shutdown_timeout(Duration::from_secs(5));
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("countersign-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

impl From<SteadyArgs> for steady::SteadyOptions {
    fn from(a: SteadyArgs) -> Self {
        Self {
            url: a.url,
            tasks: a.tasks,
            window: Duration::from_millis(a.window_ms),
            interval: Duration::from_millis(a.interval_ms),
            warmup: Duration::from_millis(a.warmup_ms),
            create_budget: Duration::from_millis(a.create_budget_ms),
            life: Duration::from_millis(a.life_ms),
            change_every: (
                Duration::from_millis(a.change_min_ms),
                Duration::from_millis(a.change_max_ms),
            ),
            data_dir: a.data_dir,
            source: a.source,
            push_scheme: a.push_scheme,
            peer_steps: a.peer_steps,
            stagger: Duration::from_millis(a.stagger_ms),
            legacy: a.legacy,
        }
    }
}

/// The `countersign` binary of the same build: next to this one.
fn sibling_countersign() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding this executable", e))?;
    Ok(exe.with_file_name("countersign"))
}

fn plan(args: &RunArgs) -> Result<Plan> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding this executable", e))?;
    let tasks = match (args.tasks.is_empty(), args.quick) {
        (false, _) => args.tasks.clone(),
        (true, true) => vec![1000],
        (true, false) => vec![1000, 10_000],
    };
    if tasks.contains(&0) || args.interval_ms == 0 {
        return Err(Error::Unexpected(
            "--tasks and --interval-ms must be positive".into(),
        ));
    }
    let seconds = args.seconds.unwrap_or(if args.quick { 20 } else { 60 });
    let interval = Duration::from_millis(args.interval_ms);
    if Duration::from_secs(seconds) < interval * 2 {
        return Err(Error::Unexpected(format!(
            "--seconds must cover at least two poll intervals ({:?})",
            interval * 2
        )));
    }
    let work_dir = args.work_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("countersign-bench-{}", std::process::id()))
    });
    Ok(Plan {
        exe,
        tasks,
        window: Duration::from_secs(seconds),
        interval,
        resume_tasks: args
            .resume_tasks
            .unwrap_or(if args.quick { 2000 } else { 10_000 }),
        fastmcp: args.fastmcp_python.clone().map(|python| Fastmcp {
            python,
            script: args.fastmcp_script.clone(),
            tasks: args.fastmcp_tasks,
        }),
        work_dir,
        quick: args.quick,
        sources: args.source.sources(),
        push_scheme: args.push_scheme,
        workloads: match (args.workload.is_empty(), args.quick) {
            (false, _) => {
                let mut workloads = args.workload.clone();
                workloads.dedup();
                workloads
            }
            (true, true) => vec![Workload::Calm, Workload::Unchanged],
            (true, false) if args.fastmcp_python.is_some() => vec![
                Workload::Calm,
                Workload::Unchanged,
                Workload::SseEveryPoll,
                Workload::SseProgress,
                Workload::Legacy,
                Workload::LegacyPolled,
                Workload::PeerEveryPoll,
            ],
            (true, false) => vec![
                Workload::Calm,
                Workload::Unchanged,
                Workload::SseEveryPoll,
                Workload::SseProgress,
                Workload::Legacy,
                Workload::LegacyPolled,
            ],
        },
        compare_exe: args.compare_exe.clone(),
        count_syncs: false,
    })
}

/// The driver: runs the plan under a watchdog and Ctrl-C, prints the table or JSON.
async fn drive(args: RunArgs) -> Result<ExitCode> {
    let mut plan = plan(&args)?;
    plan.count_syncs = syncs::available().await;
    if !plan.count_syncs {
        eprintln!("countersign-bench: `perf stat` cannot count syscalls here; no sync counts");
    }
    let mut machine = Machine::probe();
    let budget = plan.time_budget();
    eprintln!(
        "countersign-bench: {} build, steady runs at N = {:?} for {:?}, resume of {} tasks{}; at most {:?}",
        machine.profile,
        plan.tasks,
        plan.window,
        plan.resume_tasks,
        plan.fastmcp.as_ref().map(|f| format!(", fastmcp side by side at N = {}", f.tasks)).unwrap_or_default(),
        budget
    );
    std::fs::create_dir_all(&plan.work_dir)
        .map_err(|e| Error::io(format!("creating {}", plan.work_dir.display()), e))?;
    // Dropping `run::execute` (watchdog, Ctrl-C) drops its children, which kills them.
    let results = tokio::select! {
        results = run::execute(&plan) => Ok(results),
        () = tokio::time::sleep(budget) => Err(Error::Timeout { what: "the whole benchmark".into(), after: budget }),
        _ = tokio::signal::ctrl_c() => Err(Error::Unexpected("interrupted".into())),
    };
    if args.work_dir.is_none() {
        let _ = std::fs::remove_dir_all(&plan.work_dir);
    }
    let results = results?;
    machine.load_end = report::load_average();
    let complete = results.complete();
    let document = Document {
        machine,
        interval_ms: plan.interval.as_millis() as u64,
        window_s: plan.window.as_secs_f64(),
        warmup_s: plan.warmup().as_secs_f64(),
        results,
    };
    if args.json {
        let json = serde_json::to_string_pretty(&document)
            .map_err(|e| Error::Unexpected(e.to_string()))?;
        println!("{json}");
    } else {
        println!("{}", report::render(&document, &plan));
    }
    Ok(if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
