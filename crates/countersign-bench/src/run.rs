//! The driver: one benchmark run, phase by phase, each phase in fresh processes (a demo server,
//! and the client under test) so that every figure belongs to exactly one process and one
//! workload. A phase that fails is reported as failed; the others still run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::process::Command;

use crate::child::Child;
use crate::client::{self, ClientRun};
use crate::demo::{DemoProcess, ServeOptions};
use crate::error::{Error, Result};
use crate::resume::{self, ResumeOptions, ResumeReport};
use crate::sources::{Scheme, Source};
use crate::steady::SteadyOptions;
use crate::syncs::SyncCount;

/// The fastmcp baseline.
#[derive(Debug, Clone)]
pub struct Fastmcp {
    /// The Python with `fastmcp[tasks]==4.1.4` (`.ci/venv/bin/python`).
    pub python: PathBuf,
    /// `tests/peers/fastmcp_poll_client.py`.
    pub script: PathBuf,
    /// Tasks it watches.
    pub tasks: usize,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// This binary (re-executed for every child).
    pub exe: PathBuf,
    /// Live tasks, one steady run each.
    pub tasks: Vec<usize>,
    /// Steady window.
    pub window: Duration,
    /// `pollIntervalMs` of the demo server.
    pub interval: Duration,
    /// Unfinished tasks to resume (0 = skip).
    pub resume_tasks: usize,
    /// The Python baseline, if wanted.
    pub fastmcp: Option<Fastmcp>,
    /// Ledgers go here.
    pub work_dir: PathBuf,
    /// The short CI mode.
    pub quick: bool,
    /// The status sources of the steady runs, in order at each N (`--source`).
    pub sources: Vec<Source>,
    /// How push runs group their streams.
    pub push_scheme: Scheme,
    /// The steady runs' workloads, in order (`Calm` feeds the main table).
    pub workloads: Vec<Workload>,
    /// Another build whose engine repeats each steady (polling) run and the resume: "before".
    pub compare_exe: Option<PathBuf>,
    /// Whether the engine runs under `perf stat` to count its syncs ([`crate::syncs`]); set by
    /// the driver once it has asked whether `perf` can.
    pub count_syncs: bool,
}

/// The shape of a steady run's traffic.
///
/// `Calm` is kind to a client: JSON replies, and a task changes every 15–25 s, so most polls
/// are unchanged and cost no ledger write. Real servers differ on both counts (rmcp answers
/// with an event stream by default; long jobs update `statusMessage` every few hundred ms), and
/// these shapes put a figure on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// JSON replies, a change every 15–25 s per task.
    #[default]
    Calm,
    /// SSE replies (the stream ends after the answer, as rmcp's do), calm changes.
    Sse,
    /// JSON replies and no change at all in the window: every poll is an unchanged one, the
    /// figure the "≤ 50 µs per unchanged poll" target is about (calm mixes in a change every
    /// fourth poll, with its ledger write).
    Unchanged,
    /// JSON replies, a change before every poll.
    EveryPoll,
    /// SSE replies and a change before every poll: the shape of the rmcp server.
    SseEveryPoll,
    /// The independent fastmcp 4.1.4 peer as the server (`tests/peers/fastmcp_server.py`,
    /// JSON replies), its `long_job` changing `statusMessage` before every poll. Needs
    /// `--fastmcp-python`; runs at the side-by-side's N only (Python cannot serve 10,000 tasks
    /// at this rate). Only the engine's own figures: the peer counts nothing for us.
    PeerEveryPoll,
    /// SSE replies, each task's status message changing every 0.5 s, and the tasks started one
    /// after another over [`STAGGER`] rather than in one burst: the polls, every one a change,
    /// then arrive evenly spread instead of in a burst per interval, so no two changes are
    /// ever close together (the shape of the rmcp server with progress messages).
    SseProgress,
    /// Calm's traffic (JSON replies, a change every 15–25 s per task) on the demo server's
    /// 2025-11-25 era: the server registered as legacy, its tasks created task-augmented and
    /// followed through the legacy peer in one session (whose GET stream also asks for a poll
    /// when a task changes). Compared with calm at the same N.
    Legacy,
    /// `unchanged`'s traffic (no change in the window) on the 2025-11-25 era, as `legacy`:
    /// every poll an unchanged one and nothing on the GET stream, so it is the poll path alone.
    /// Compared with `unchanged` at the same N. The server offers no GET stream (as
    /// `legacy-polled`): otherwise its tasks would be polled at the safety-net rate only.
    LegacyUnchanged,
    /// `legacy` on a server that offers no GET stream (405): the engine learns of changes by
    /// polling alone, at the interval, exactly as on calm: the poll path compared poll for poll.
    LegacyPolled,
}

/// Over how long [`Workload::SseProgress`] starts its tasks.
pub const STAGGER: Duration = Duration::from_secs(60);

impl Workload {
    /// Whether the demo server answers with event streams.
    pub fn sse(self) -> bool {
        matches!(self, Self::Sse | Self::SseEveryPoll | Self::SseProgress)
    }

    /// Over how long the tasks are started (zero: as fast as they can be).
    pub fn stagger(self) -> Duration {
        match self {
            Self::SseProgress => STAGGER,
            _ => Duration::ZERO,
        }
    }

    /// Whether the demo server serves the 2025-11-25 era.
    pub fn legacy(self) -> bool {
        matches!(
            self,
            Self::Legacy | Self::LegacyUnchanged | Self::LegacyPolled
        )
    }

    /// Whether a legacy server offers the session's GET stream (push of task status).
    pub fn get_stream(self) -> bool {
        self == Self::Legacy
    }

    /// The modern workload a legacy one is compared with.
    pub fn modern_twin(self) -> Option<Self> {
        match self {
            Self::Legacy | Self::LegacyPolled => Some(Self::Calm),
            Self::LegacyUnchanged => Some(Self::Unchanged),
            _ => None,
        }
    }

    /// The per-task change period range for `interval`.
    pub fn change_every(self, interval: Duration) -> (Duration, Duration) {
        match self {
            Self::Calm | Self::Sse | Self::Legacy | Self::LegacyPolled => (
                Duration::from_millis(CHANGE_EVERY_MS.0),
                Duration::from_millis(CHANGE_EVERY_MS.1),
            ),
            // Far beyond any run: the task's first change would come after the window.
            Self::Unchanged | Self::LegacyUnchanged => (UNCHANGED_FOR, UNCHANGED_FOR),
            // 40–60 % of the interval: every poll finds at least one change.
            Self::EveryPoll | Self::SseEveryPoll => (interval * 2 / 5, interval * 3 / 5),
            // The peer has one step length for all its tasks: half the interval.
            Self::PeerEveryPoll => (interval / 2, interval / 2),
            Self::SseProgress => (PROGRESS_EVERY, PROGRESS_EVERY),
        }
    }

    /// How the report names it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Calm => "JSON, calm",
            Self::Sse => "SSE, calm",
            Self::Unchanged => "JSON, no change",
            Self::EveryPoll => "JSON, change every poll",
            Self::SseEveryPoll => "SSE, change every poll",
            Self::PeerEveryPoll => "fastmcp peer, every poll",
            Self::SseProgress => "SSE, progress, staggered",
            Self::Legacy => "legacy, calm",
            Self::LegacyUnchanged => "legacy, no change",
            Self::LegacyPolled => "legacy, calm, polled",
        }
    }
}

/// How often a [`Workload::SseProgress`] task's status message changes.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(500);
/// The most tasks [`Workload::SseProgress`] runs with: the demo server holds every step of
/// every task (about 600 each at this rate), which at 10,000 tasks would be the biggest thing
/// measured in the run.
pub const PROGRESS_MAX_TASKS: usize = 1000;

/// The change period of [`Workload::Unchanged`]: a task's first change comes an hour after its
/// creation, long after any steady window (and `bench_job`'s 24 h limit allows its two steps).
const UNCHANGED_FOR: Duration = Duration::from_secs(3600);

/// The demo server's simulated-time factor: its other tools run 100× faster (bench_job is exact).
pub const TIME_SCALE: f64 = 0.01;
/// Per-task change period: drawn uniformly from this range (ms), so that about one poll in four
/// sees a change and tasks do not change in lockstep.
pub const CHANGE_EVERY_MS: (u64, u64) = (15_000, 25_000);

impl Plan {
    /// After the last task is created: one interval for every task's first poll, and a second.
    pub fn warmup(&self) -> Duration {
        self.interval + Duration::from_secs(1)
    }

    /// Longest time creating `n` tasks may take.
    pub fn create_budget(&self, n: usize) -> Duration {
        Duration::from_secs(60) + Duration::from_millis(10) * n as u32
    }

    /// How long every task stays working: past the window, whatever creation took.
    pub fn life(&self, n: usize) -> Duration {
        self.create_budget(n) + self.warmup() + self.window + Duration::from_secs(60)
    }

    fn serve_options(&self) -> ServeOptions {
        self.serve_options_for(Source::Poll)
    }

    fn serve_options_for(&self, source: Source) -> ServeOptions {
        ServeOptions {
            poll_interval_ms: self.interval.as_millis() as u64,
            time_scale: TIME_SCALE,
            push: source == Source::Push,
            sse: false,
            legacy: false,
            no_get_stream: false,
        }
    }

    fn steady_budget(&self, n: usize) -> Duration {
        self.create_budget(n) + self.warmup() + self.window + Duration::from_secs(120)
    }

    /// The watchdog: the whole run is abandoned (children killed) past this.
    pub fn time_budget(&self) -> Duration {
        let mut total = Duration::from_secs(120);
        let mut runs: Vec<usize> = self.tasks.clone();
        if let Some(fastmcp) = &self.fastmcp {
            runs.push(fastmcp.tasks); // the baseline
            runs.push(fastmcp.tasks); // our engine at its size, if not measured already
        }
        for n in runs {
            total += self.steady_budget(n);
        }
        if self.sources.contains(&Source::Push) {
            for &n in &self.tasks {
                total += self.steady_budget(n);
            }
        }
        for workload in self.workloads.iter().filter(|w| **w != Workload::Calm) {
            for &n in &self.tasks {
                total += self.steady_budget(n) + workload.stagger() * 2;
            }
        }
        if self.compare_exe.is_some() {
            // Every polling run and the resume once more.
            for workload in &self.workloads {
                for &n in &self.tasks {
                    total += self.steady_budget(n) + workload.stagger() * 2;
                }
            }
            if self.resume_tasks > 0 {
                total += self.create_budget(self.resume_tasks)
                    + self.interval * 2
                    + Duration::from_secs(180);
            }
        }
        if self.resume_tasks > 0 {
            total += self.create_budget(self.resume_tasks)
                + self.interval * 2
                + Duration::from_secs(180);
        }
        total
    }
}

/// One steady run of our engine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SteadyResult {
    /// Live tasks.
    pub tasks: usize,
    /// How the engine learnt about changes.
    #[serde(default)]
    pub source: Source,
    /// Stream grouping (push runs).
    #[serde(default)]
    pub scheme: Scheme,
    /// The traffic's shape.
    #[serde(default)]
    pub workload: Workload,
    /// The measurements, or why there are none.
    pub outcome: Outcome<ClientRun>,
}

/// A phase's measurements or its failure.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome<T> {
    /// Measured.
    Measured(T),
    /// Failed, with the reason.
    Failed(String),
}

impl<T> Outcome<T> {
    fn of(result: Result<T>) -> Self {
        match result {
            Ok(value) => Self::Measured(value),
            Err(error) => {
                eprintln!("  FAILED: {error}");
                Self::Failed(error.to_string())
            }
        }
    }

    /// The measurements, if any.
    pub fn measured(&self) -> Option<&T> {
        match self {
            Self::Measured(value) => Some(value),
            Self::Failed(_) => None,
        }
    }
}

/// The side-by-side comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// Tasks each client watched.
    pub tasks: usize,
    /// The fastmcp client.
    pub fastmcp: Outcome<ClientRun>,
}

/// Everything a run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// Steady runs of our engine, by task count.
    pub steady: Vec<SteadyResult>,
    /// The cold resume.
    pub resume: Option<Outcome<ResumeReport>>,
    /// The fastmcp baseline.
    pub comparison: Option<Comparison>,
    /// Steady runs with push (`--source push|both`), by task count.
    #[serde(default)]
    pub push: Vec<SteadyResult>,
    /// Steady runs (polling) of the real-server workloads, by workload then task count.
    #[serde(default)]
    pub shapes: Vec<SteadyResult>,
    /// `--compare-exe`: the other build's engine on the same polling runs ("before").
    #[serde(default)]
    pub before: Vec<SteadyResult>,
    /// `--compare-exe`: the other build's resume.
    #[serde(default)]
    pub before_resume: Option<Outcome<ResumeReport>>,
}

impl Results {
    /// Whether every phase produced numbers.
    pub fn complete(&self) -> bool {
        self.steady
            .iter()
            .chain(&self.push)
            .chain(&self.shapes)
            .all(|s| s.outcome.measured().is_some())
            && self.resume.as_ref().is_none_or(|r| r.measured().is_some())
            && self
                .comparison
                .as_ref()
                .is_none_or(|c| c.fastmcp.measured().is_some())
    }
}

/// Runs every phase of `plan`.
pub async fn execute(plan: &Plan) -> Results {
    let mut steady = Vec::new();
    let mut push = Vec::new();
    let mut shapes = Vec::new();
    let mut before = Vec::new();
    let calm = plan.workloads.contains(&Workload::Calm);
    for &n in &plan.tasks {
        for &source in plan.sources.iter().filter(|_| calm) {
            let result = SteadyResult {
                tasks: n,
                source,
                scheme: plan.push_scheme,
                workload: Workload::Calm,
                outcome: match source {
                    Source::Poll => {
                        eprintln!("steady state: our engine, {n} live tasks");
                        let outcome =
                            Outcome::of(steady_run(plan, n, Source::Poll, Workload::Calm).await);
                        before_run(plan, &mut before, n, Workload::Calm).await;
                        outcome
                    }
                    Source::Push => {
                        eprintln!("steady state: our engine with push, {n} live tasks");
                        Outcome::of(steady_run(plan, n, Source::Push, Workload::Calm).await)
                    }
                },
            };
            match source {
                Source::Poll => steady.push(result),
                Source::Push => push.push(result),
            }
        }
    }
    for &workload in plan.workloads.iter().filter(|w| **w != Workload::Calm) {
        if workload == Workload::PeerEveryPoll {
            let n = plan.fastmcp.as_ref().map_or(1000, |f| f.tasks);
            eprintln!("steady state: our engine, {n} live tasks on the fastmcp peer server");
            shapes.push(SteadyResult {
                tasks: n,
                source: Source::Poll,
                scheme: plan.push_scheme,
                workload,
                outcome: Outcome::of(peer_run(plan, &plan.exe, n).await),
            });
            if let Some(exe) = &plan.compare_exe {
                eprintln!(
                    "steady state, before ({}): {n} live tasks on the fastmcp peer server",
                    exe.display()
                );
                before.push(SteadyResult {
                    tasks: n,
                    source: Source::Poll,
                    scheme: plan.push_scheme,
                    workload,
                    outcome: Outcome::of(peer_run(plan, exe, n).await),
                });
            }
            continue;
        }
        let sizes = plan
            .tasks
            .iter()
            .filter(|&&n| workload != Workload::SseProgress || n <= PROGRESS_MAX_TASKS);
        for &n in sizes {
            eprintln!(
                "steady state: our engine, {n} live tasks, {}",
                workload.label()
            );
            shapes.push(SteadyResult {
                tasks: n,
                source: Source::Poll,
                scheme: plan.push_scheme,
                workload,
                outcome: Outcome::of(steady_run(plan, n, Source::Poll, workload).await),
            });
            before_run(plan, &mut before, n, workload).await;
        }
    }
    let comparison = match &plan.fastmcp {
        Some(fastmcp) => {
            if !steady.iter().any(|s| s.tasks == fastmcp.tasks) {
                eprintln!(
                    "steady state: our engine, {} live tasks (for the side-by-side)",
                    fastmcp.tasks
                );
                steady.push(SteadyResult {
                    tasks: fastmcp.tasks,
                    source: Source::Poll,
                    scheme: plan.push_scheme,
                    workload: Workload::Calm,
                    outcome: Outcome::of(
                        steady_run(plan, fastmcp.tasks, Source::Poll, Workload::Calm).await,
                    ),
                });
            }
            eprintln!(
                "steady state: the fastmcp 4.1.4 client, {} live tasks",
                fastmcp.tasks
            );
            Some(Comparison {
                tasks: fastmcp.tasks,
                fastmcp: Outcome::of(fastmcp_run(plan, fastmcp).await),
            })
        }
        None => None,
    };
    let resume = if plan.resume_tasks > 0 {
        eprintln!("cold resume: {} unfinished tasks", plan.resume_tasks);
        Some(Outcome::of(resume_run(plan, &plan.exe).await))
    } else {
        None
    };
    let before_resume = match &plan.compare_exe {
        Some(exe) if plan.resume_tasks > 0 => {
            eprintln!(
                "cold resume, before ({}): {} unfinished tasks",
                exe.display(),
                plan.resume_tasks
            );
            Some(Outcome::of(resume_run(plan, exe).await))
        }
        _ => None,
    };
    Results {
        steady,
        resume,
        comparison,
        push,
        shapes,
        before,
        before_resume,
    }
}

/// With `--compare-exe`, the same polling run by the other build's engine.
async fn before_run(plan: &Plan, before: &mut Vec<SteadyResult>, n: usize, workload: Workload) {
    let Some(exe) = &plan.compare_exe else {
        return;
    };
    if workload.legacy() {
        // An older build may not know the legacy workload: the comparison is with calm.
        return;
    }
    eprintln!(
        "steady state, before ({}): {n} live tasks, {}",
        exe.display(),
        workload.label()
    );
    before.push(SteadyResult {
        tasks: n,
        source: Source::Poll,
        scheme: plan.push_scheme,
        workload,
        outcome: Outcome::of(steady_run_with(plan, exe, n, Source::Poll, workload).await),
    });
}

async fn fresh_dir(path: &Path) -> Result<PathBuf> {
    if path.exists() {
        std::fs::remove_dir_all(path)
            .map_err(|e| Error::io(format!("clearing {}", path.display()), e))?;
    }
    std::fs::create_dir_all(path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    Ok(path.to_owned())
}

/// Runs a client process against a fresh demo server, then stops both (killing what does not
/// stop).
async fn client_run(
    plan: &Plan,
    name: &str,
    n: usize,
    serve: ServeOptions,
    command: impl FnOnce(&str) -> Command,
) -> Result<ClientRun> {
    let mut server = DemoProcess::start(&plan.exe, serve).await?;
    server.reset().await?;
    let (command, syncs) = count_syncs(plan, command(&server.url));
    let mut child = Child::spawn(name, command)?;
    let run = client::drive(
        &mut child,
        Some(&mut server),
        None,
        syncs.as_ref(),
        plan.create_budget(n),
        plan.warmup(),
        plan.window,
    )
    .await;
    child.finish(Duration::from_secs(30)).await;
    let run = with_syncs(run, syncs);
    server.stop().await;
    run
}

/// `command` under `perf stat` counting its syncs, when the plan counts them.
fn count_syncs(plan: &Plan, command: Command) -> (Command, Option<SyncCount>) {
    if !plan.count_syncs {
        return (command, None);
    }
    match SyncCount::wrap(command.as_std(), &plan.work_dir) {
        Some((wrapped, syncs)) => (wrapped, Some(syncs)),
        None => (command, None),
    }
}

/// The run with the syncs counted in its window (read once the process has exited).
fn with_syncs(run: Result<ClientRun>, syncs: Option<SyncCount>) -> Result<ClientRun> {
    let mut run = run?;
    run.window_calls = syncs.and_then(SyncCount::read);
    Ok(run)
}

async fn steady_run(
    plan: &Plan,
    n: usize,
    source: Source,
    workload: Workload,
) -> Result<ClientRun> {
    steady_run_with(plan, &plan.exe, n, source, workload).await
}

/// A steady run whose engine is `engine_exe`'s `steady` mode (the demo server is always ours).
async fn steady_run_with(
    plan: &Plan,
    engine_exe: &Path,
    n: usize,
    source: Source,
    workload: Workload,
) -> Result<ClientRun> {
    let data_dir = fresh_dir(&plan.work_dir.join(format!("steady-{n}"))).await?;
    let serve = ServeOptions {
        sse: workload.sse(),
        legacy: workload.legacy(),
        no_get_stream: workload.legacy() && !workload.get_stream(),
        ..plan.serve_options_for(source)
    };
    client_run(plan, "engine", n, serve, |url| {
        let options = SteadyOptions {
            url: url.to_owned(),
            tasks: n,
            window: plan.window,
            interval: plan.interval,
            warmup: plan.warmup(),
            create_budget: plan.create_budget(n) + workload.stagger(),
            life: plan.life(n) + workload.stagger(),
            change_every: workload.change_every(plan.interval),
            stagger: workload.stagger(),
            data_dir,
            source,
            push_scheme: plan.push_scheme,
            peer_steps: None,
            legacy: workload.legacy(),
        };
        let mut command = Command::new(engine_exe);
        command.arg("steady").args(steady_args(&options));
        command
    })
    .await
}

/// The `steady` child's command line for `options`.
fn steady_args(options: &SteadyOptions) -> Vec<String> {
    let mut args = vec![
        "--url".into(),
        options.url.clone(),
        "--tasks".into(),
        options.tasks.to_string(),
        "--window-ms".into(),
        options.window.as_millis().to_string(),
        "--interval-ms".into(),
        options.interval.as_millis().to_string(),
        "--warmup-ms".into(),
        options.warmup.as_millis().to_string(),
        "--create-budget-ms".into(),
        options.create_budget.as_millis().to_string(),
        "--life-ms".into(),
        options.life.as_millis().to_string(),
        "--change-min-ms".into(),
        options.change_every.0.as_millis().to_string(),
        "--change-max-ms".into(),
        options.change_every.1.as_millis().to_string(),
        "--data-dir".into(),
        options.data_dir.display().to_string(),
        "--source".into(),
        match options.source {
            Source::Poll => "poll".into(),
            Source::Push => "push".into(),
        },
        "--push-scheme".into(),
        options.push_scheme.arg().into(),
    ];
    if let Some(steps) = options.peer_steps {
        args.push("--peer-steps".into());
        args.push(steps.to_string());
    }
    if !options.stagger.is_zero() {
        args.push("--stagger-ms".into());
        args.push(options.stagger.as_millis().to_string());
    }
    if options.legacy {
        args.push("--legacy".into());
    }
    args
}

/// Our engine (`engine_exe`'s) against the fastmcp peer server instead of the demo server:
/// `long_job` tasks whose `statusMessage` changes every half interval.
async fn peer_run(plan: &Plan, engine_exe: &Path, n: usize) -> Result<ClientRun> {
    let Some(fastmcp) = &plan.fastmcp else {
        return Err(Error::Unexpected(
            "the fastmcp peer server needs --fastmcp-python".into(),
        ));
    };
    let script = fastmcp.script.with_file_name("fastmcp_server.py");
    for (path, hint) in [
        (
            &fastmcp.python,
            "install the peer with `bash .ci/setup-peer.sh`",
        ),
        (
            &script,
            "run from the repository root or pass --fastmcp-script",
        ),
    ] {
        if !path.exists() {
            return Err(Error::Missing {
                path: path.clone(),
                hint,
            });
        }
    }
    let step = plan.interval / 2;
    let life = plan.life(n);
    let steps = (life.as_millis() / step.as_millis().max(1)) as u64 + 1;
    let mut command = Command::new(&fastmcp.python);
    command
        .arg(&script)
        .arg("--port")
        .arg("0")
        .env(
            "PEER_POLL_INTERVAL_MS",
            plan.interval.as_millis().to_string(),
        )
        .env("PEER_STEP_SECONDS", step.as_secs_f64().to_string())
        // Past the run: a task must not be forgotten mid-window.
        .env("PEER_TTL_MS", (life * 2).as_millis().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut peer = command
        .spawn()
        .map_err(|e| Error::io(format!("starting {}", script.display()), e))?;
    let stdout = peer
        .stdout
        .take()
        .ok_or_else(|| Error::Unexpected("the peer has no stdout".into()))?;
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let url = match tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await {
        Ok(Ok(Some(url))) if url.starts_with("http://127.0.0.1:") => url,
        Ok(other) => {
            return Err(Error::Unexpected(format!(
                "the fastmcp peer server did not print its URL: {other:?}"
            )))
        }
        Err(_) => {
            return Err(Error::Timeout {
                what: "the fastmcp peer server to start".into(),
                after: Duration::from_secs(60),
            })
        }
    };
    let data_dir = fresh_dir(&plan.work_dir.join(format!("peer-{n}"))).await?;
    let options = SteadyOptions {
        url,
        tasks: n,
        window: plan.window,
        interval: plan.interval,
        warmup: plan.warmup(),
        create_budget: plan.create_budget(n),
        life,
        change_every: Workload::PeerEveryPoll.change_every(plan.interval),
        stagger: Duration::ZERO,
        data_dir,
        source: Source::Poll,
        push_scheme: plan.push_scheme,
        peer_steps: Some(steps),
        legacy: false,
    };
    let mut command = Command::new(engine_exe);
    command.arg("steady").args(steady_args(&options));
    let (command, syncs) = count_syncs(plan, command);
    let mut child = Child::spawn("engine", command)?;
    let run = client::drive(
        &mut child,
        None,
        peer.id().map(|pid| client::Watched { pid }),
        syncs.as_ref(),
        plan.create_budget(n),
        plan.warmup(),
        plan.window,
    )
    .await;
    child.finish(Duration::from_secs(30)).await;
    let run = with_syncs(run, syncs);
    let _ = peer.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(10), peer.wait()).await;
    run
}

async fn fastmcp_run(plan: &Plan, fastmcp: &Fastmcp) -> Result<ClientRun> {
    for (path, hint) in [
        (
            &fastmcp.python,
            "install the peer with `bash .ci/setup-peer.sh`",
        ),
        (
            &fastmcp.script,
            "run from the repository root or pass --fastmcp-script",
        ),
    ] {
        if !path.exists() {
            return Err(Error::Missing {
                path: path.clone(),
                hint,
            });
        }
    }
    let n = fastmcp.tasks;
    client_run(plan, "fastmcp client", n, plan.serve_options(), |url| {
        let mut command = Command::new(&fastmcp.python);
        command
            .arg(&fastmcp.script)
            .arg("--url")
            .arg(url)
            .arg("--tasks")
            .arg(n.to_string())
            .arg("--seconds")
            .arg(plan.window.as_secs_f64().to_string())
            .arg("--interval-ms")
            .arg(plan.interval.as_millis().to_string())
            .arg("--warmup-ms")
            .arg(plan.warmup().as_millis().to_string())
            .arg("--create-budget-s")
            .arg(plan.create_budget(n).as_secs().to_string())
            .arg("--life-ms")
            .arg(plan.life(n).as_millis().to_string())
            .arg("--change-min-ms")
            .arg(CHANGE_EVERY_MS.0.to_string())
            .arg("--change-max-ms")
            .arg(CHANGE_EVERY_MS.1.to_string());
        command
    })
    .await
}

async fn resume_run(plan: &Plan, engine_exe: &Path) -> Result<ResumeReport> {
    let mut server = DemoProcess::start(&plan.exe, plan.serve_options()).await?;
    let options = ResumeOptions {
        tasks: plan.resume_tasks,
        interval: plan.interval,
        create_budget: plan.create_budget(plan.resume_tasks),
        data_dir: fresh_dir(&plan.work_dir.join("resume")).await?,
    };
    let report = resume::measure(engine_exe, &mut server, &options).await;
    server.stop().await;
    report
}
