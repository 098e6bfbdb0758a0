//! `countersign-bench stdio`: what fronting a stdio server costs, with the real
//! `@modelcontextprotocol/server-filesystem` and `countersign` as real processes:
//! - an allowed `read_text_file` of a small file through `countersign gateway` (a rule allows
//!   it; the agent is a plain HTTP client, [`crate::gateway`]'s) vs. the same call made directly
//!   by a minimal client speaking newline-delimited JSON-RPC to its own server-filesystem
//!   process: p50/p90/p99 of each and the difference;
//! - `countersign watch` on a ledger with no server vs. one with idle stdio servers and no
//!   tasks: its CPU time and memory over a window, and how many server processes exist (none
//!   should: a stdio server starts when a request first needs it).
//!
//! Numbers are printed, never asserted (the machine is shared).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout, Command};

use crate::error::{Error, Result};
use crate::gateway::{ms, quantile, Agent};

/// What to run and how long.
#[derive(Debug, Clone)]
pub struct Options {
    /// Timed calls per side.
    pub calls: usize,
    /// Untimed calls per side first (process start, connections, the gateway's tools/list).
    pub warmup: usize,
    /// Each idle engine's window.
    pub idle: Duration,
    /// Stdio servers on the second idle ledger.
    pub servers: usize,
    /// The `countersign` binary.
    pub countersign: PathBuf,
    /// `.ci/tools` (Node 22 and server-filesystem).
    pub tools: PathBuf,
}

/// Bound on every single step that waits for a process.
const STEP: Duration = Duration::from_secs(30);

impl Options {
    fn node(&self) -> PathBuf {
        self.tools.join("node_modules/.bin/node")
    }

    fn script(&self) -> PathBuf {
        self.tools
            .join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
    }

    /// server-filesystem's command line over `root`.
    fn server_command(&self, root: &Path) -> Vec<String> {
        vec![
            self.node().display().to_string(),
            self.script().display().to_string(),
            root.display().to_string(),
        ]
    }
}

/// Runs both measurements and prints their tables.
pub async fn run(options: Options) -> Result<()> {
    for (path, what) in [
        (options.script(), "server-filesystem"),
        (options.node(), "Node 22"),
    ] {
        if !path.is_file() {
            return Err(Error::Unexpected(format!(
                "{what} is not installed at {}: run `bash .ci/setup-tools.sh`",
                path.display()
            )));
        }
    }
    if !options.countersign.is_file() {
        return Err(Error::Unexpected(format!(
            "no countersign binary at {}: build countersign-cli in the same profile (or pass --countersign)",
            options.countersign.display()
        )));
    }
    let dir = std::env::temp_dir().join(format!("countersign-bench-stdio-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create the work directory", e))?;
    let outcome = measure(&dir, &options).await;
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

async fn measure(dir: &Path, options: &Options) -> Result<()> {
    let files = dir.join("files");
    std::fs::create_dir_all(&files).map_err(|e| Error::io("create the served directory", e))?;
    let file = files.join("notes.txt");
    std::fs::write(&file, "a small file the benchmark reads\n".repeat(8))
        .map_err(|e| Error::io("write the file to read", e))?;
    let path = file.display().to_string();

    let mut direct = RawStdio::start(&options.server_command(&files)).await?;
    let (gateway, agent) = Gateway::start(&dir.join("gateway"), options, &files).await?;

    for _ in 0..options.warmup {
        direct.read(&path).await?;
        read_through(&agent, &path).await?;
    }
    // Alternate the sides call by call, so a burst of load from the machine's other work hits
    // both alike. The third side is what the gateway's legacy peer sends the server per call:
    // `tools/list` (for the tool's taskSupport) before the `tools/call`.
    let (mut d, mut l, mut g) = (
        Vec::with_capacity(options.calls),
        Vec::with_capacity(options.calls),
        Vec::with_capacity(options.calls),
    );
    for _ in 0..options.calls {
        let start = Instant::now();
        direct.read(&path).await?;
        d.push(start.elapsed());
        let start = Instant::now();
        direct.request("tools/list", json!({})).await?;
        direct.read(&path).await?;
        l.push(start.elapsed());
        let start = Instant::now();
        read_through(&agent, &path).await?;
        g.push(start.elapsed());
    }
    direct.stop().await;
    drop(gateway);
    d.sort();
    l.sort();
    g.sort();
    println!(
        "stdio: an allowed read_text_file on server-filesystem, in ms ({} calls each after {} untimed)",
        options.calls, options.warmup
    );
    println!("| side | p50 | p90 | p99 |");
    println!("|---|---|---|---|");
    let row = |label: &str, v: &[Duration]| {
        println!(
            "| {label} | {} | {} | {} |",
            ms(quantile(v, 0.5)),
            ms(quantile(v, 0.9)),
            ms(quantile(v, 0.99))
        );
    };
    row(
        "direct (raw newline-delimited JSON-RPC on the server's stdio)",
        &d,
    );
    row(
        "direct, `tools/list` then the read (a client that lists before each call)",
        &l,
    );
    row(
        "through `countersign gateway` (HTTP agent → gateway → stdio)",
        &g,
    );
    let added = |label: &str, over: &[Duration]| {
        println!(
            "| {label} | {} | {} | {} |",
            ms(quantile(&g, 0.5).saturating_sub(quantile(over, 0.5))),
            ms(quantile(&g, 0.9).saturating_sub(quantile(over, 0.9))),
            ms(quantile(&g, 0.99).saturating_sub(quantile(over, 0.99)))
        );
    };
    added("added by the gateway (over the direct read)", &d);

    println!();
    let empty = idle(&dir.join("idle-0"), options, &files, 0).await?;
    let with = idle(&dir.join("idle-n"), options, &files, options.servers).await?;
    println!(
        "stdio: `countersign watch` idle, no tasks, {:.0} s window",
        options.idle.as_secs_f64()
    );
    println!("| | 0 stdio servers | {} stdio servers |", options.servers);
    println!("|---|---|---|");
    println!(
        "| CPU in the window (ms) | {} | {} |",
        empty.cpu.as_millis(),
        with.cpu.as_millis()
    );
    println!(
        "| RSS at the end / peak (MiB) | {:.1} / {:.1} | {:.1} / {:.1} |",
        empty.rss_kb as f64 / 1024.0,
        empty.peak_kb as f64 / 1024.0,
        with.rss_kb as f64 / 1024.0,
        with.peak_kb as f64 / 1024.0
    );
    println!(
        "| server processes seen (most at once, sampled every 250 ms) | {} | {} |",
        empty.servers_seen, with.servers_seen
    );
    Ok(())
}

/// The gateway path's call, checked: not an error, and the file's text back.
async fn read_through(agent: &Agent, path: &str) -> Result<()> {
    let result = agent.call("read_text_file", json!({"path": path})).await?;
    if result.get("isError").and_then(Value::as_bool) == Some(true)
        || result.pointer("/content/0/text").is_none()
    {
        return Err(Error::Unexpected(format!(
            "read_text_file through the gateway: {result}"
        )));
    }
    Ok(())
}

/// A minimal stdio MCP client: one request at a time, newline-delimited JSON-RPC.
struct RawStdio {
    process: tokio::process::Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl RawStdio {
    async fn start(command: &[String]) -> Result<Self> {
        let mut process = Command::new(&command[0])
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::io("starting server-filesystem", e))?;
        let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
            return Err(Error::child("server-filesystem", "no stdio pipes"));
        };
        let mut client = Self {
            process,
            stdin,
            lines: BufReader::new(stdout).lines(),
            next_id: 1,
        };
        client
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "countersign-bench", "version": "1"}}),
            )
            .await?;
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(client)
    }

    async fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| Error::io("writing to server-filesystem", e))
    }

    /// Sends a request and waits for its response (skipping notifications).
    async fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let wait = async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .map_err(|e| Error::io("reading from server-filesystem", e))?
                    .ok_or_else(|| Error::child("server-filesystem", "closed its stdout"))?;
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                // A request of the server's own may carry the same id: only a response counts.
                if message.get("method").is_none()
                    && message.get("id").and_then(Value::as_u64) == Some(id)
                {
                    return message.get("result").cloned().ok_or_else(|| {
                        Error::Unexpected(format!("{method} on server-filesystem: {message}"))
                    });
                }
            }
        };
        tokio::time::timeout(STEP, wait)
            .await
            .map_err(|_| Error::Timeout {
                what: format!("server-filesystem's answer to {method}"),
                after: STEP,
            })?
    }

    async fn read(&mut self, path: &str) -> Result<()> {
        let result = self
            .request(
                "tools/call",
                json!({"name": "read_text_file", "arguments": {"path": path}}),
            )
            .await?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(Error::Unexpected(format!(
                "read_text_file directly: {result}"
            )));
        }
        Ok(())
    }

    async fn stop(mut self) {
        let _ = self.process.kill().await;
    }
}

/// `countersign --data-dir DIR ARGS…`, run to completion; its stdout.
async fn cli(options: &Options, data_dir: &Path, args: &[&str]) -> Result<String> {
    let output = tokio::time::timeout(
        STEP,
        Command::new(&options.countersign)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| Error::Timeout {
        what: format!("countersign {}", args.join(" ")),
        after: STEP,
    })?
    .map_err(|e| Error::io("running countersign", e))?;
    if !output.status.success() {
        return Err(Error::Unexpected(format!(
            "countersign {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `servers add NAME [--env MARK] -- server-filesystem ROOT`.
async fn add_server(
    options: &Options,
    data_dir: &Path,
    name: &str,
    mark: Option<&str>,
    root: &Path,
) -> Result<()> {
    let command = options.server_command(root);
    let mut args = vec!["servers", "add", name];
    if let Some(mark) = mark {
        args.extend(["--env", mark]);
    }
    args.push("--");
    args.extend(command.iter().map(String::as_str));
    cli(options, data_dir, &args).await.map(drop)
}

/// A `countersign gateway` process; killed when dropped.
struct Gateway {
    _process: tokio::process::Child,
}

impl Gateway {
    /// A ledger with server-filesystem as `files`, a rule allowing `read_text_file` and an
    /// agent, and the gateway on it; the agent pointed at `files`.
    async fn start(data_dir: &Path, options: &Options, root: &Path) -> Result<(Self, Agent)> {
        add_server(options, data_dir, "files", None, root).await?;
        cli(
            options,
            data_dir,
            &["policy", "set", "files", "read_text_file", "allow"],
        )
        .await?;
        let added = cli(options, data_dir, &["agents", "add", "bench", "--json"]).await?;
        let token = serde_json::from_str::<Value>(&added)
            .ok()
            .and_then(|v| v.get("token").and_then(Value::as_str).map(str::to_owned))
            .ok_or_else(|| Error::Unexpected(format!("agents add --json printed {added}")))?;
        let mut process = Command::new(&options.countersign)
            .arg("--data-dir")
            .arg(data_dir)
            .args(["gateway", "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::io("starting countersign gateway", e))?;
        let stdout = process
            .stdout
            .take()
            .ok_or_else(|| Error::child("countersign gateway", "no stdout pipe"))?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(STEP, lines.next_line())
            .await
            .map_err(|_| Error::Timeout {
                what: "countersign gateway's URL line".into(),
                after: STEP,
            })?
            .map_err(|e| Error::io("reading countersign gateway", e))?
            .ok_or_else(|| Error::child("countersign gateway", "exited before its URL line"))?;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let base = first.trim().to_owned();
        if !(base.starts_with("http://") && base.ends_with('/')) {
            return Err(Error::child(
                "countersign gateway",
                format!("its first line is not its base URL: {base:?}"),
            ));
        }
        let agent = Agent {
            http: reqwest::Client::new(),
            url: format!("{base}files"),
            token: Some(token),
        };
        Ok((Self { _process: process }, agent))
    }
}

/// One idle engine's figures.
struct Idle {
    cpu: Duration,
    rss_kb: u64,
    peak_kb: u64,
    servers_seen: usize,
}

/// `countersign watch` on a fresh ledger with `servers` stdio servers and no task: its CPU
/// time over the window (after a settling pause), its memory, and the server processes.
async fn idle(data_dir: &Path, options: &Options, root: &Path, servers: usize) -> Result<Idle> {
    let mark = format!("COUNTERSIGN_BENCH_MARK=idle-{}", std::process::id());
    // A command on the ledger creates it, so both runs start from a ledger that exists.
    cli(options, data_dir, &["servers", "list"]).await?;
    for n in 0..servers {
        add_server(options, data_dir, &format!("files{n}"), Some(&mark), root).await?;
    }
    let mut process = Command::new(&options.countersign)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("watch")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::io("starting countersign watch", e))?;
    let pid = process
        .id()
        .ok_or_else(|| Error::child("countersign watch", "no pid"))?;
    if let Some(stdout) = process.stdout.take() {
        let mut lines = BufReader::new(stdout).lines();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    }
    let settle = (options.idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(5));
    let mut seen = 0;
    let sample = |seen: &mut usize| *seen = (*seen).max(processes_marked(&mark));
    let until = Instant::now() + settle;
    while Instant::now() < until {
        sample(&mut seen);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let before = read_proc(pid)?;
    let until = Instant::now() + options.idle;
    while Instant::now() < until {
        sample(&mut seen);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let after = read_proc(pid)?;
    sample(&mut seen);
    if let Ok(Some(status)) = process.try_wait() {
        return Err(Error::child(
            "countersign watch",
            format!("exited ({status}) during the window"),
        ));
    }
    let _ = process.kill().await;
    Ok(Idle {
        cpu: after.0.saturating_sub(before.0),
        rss_kb: after.1,
        peak_kb: after.2,
        servers_seen: seen,
    })
}

/// CPU time, RSS and peak RSS (KiB) of `pid`.
fn read_proc(pid: u32) -> Result<(Duration, u64, u64)> {
    let read = |file: &str| {
        let path = format!("/proc/{pid}/{file}");
        std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {path}"), e))
    };
    let (stat, status) = (read("stat")?, read("status")?);
    let unreadable = || Error::Unexpected(format!("cannot read /proc/{pid}"));
    Ok((
        crate::usage::cpu_from_stat(&stat).ok_or_else(unreadable)?,
        crate::usage::status_kb(&status, "VmRSS").ok_or_else(unreadable)?,
        crate::usage::status_kb(&status, "VmHWM").ok_or_else(unreadable)?,
    ))
}

/// Live (not zombie) processes whose environment holds `marker`.
fn processes_marked(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            state != Some("Z")
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
                    .unwrap_or(false)
        })
        .count()
}
