//! The independent Python MCP peer for interop tests.
//!
//! Runs `tests/peers/fastmcp_server.py` (fastmcp 4.1.4 + fastmcp-tasks, installed in
//! `<repo>/.ci/venv` by `.ci/setup-peer.sh`) on a free loopback port and hands out its
//! endpoint URL (`http://127.0.0.1:PORT/mcp`). The tools and their timing are
//! described at the top of the script; its pacing is set by environment variables
//! (`PEER_STEP_SECONDS`, `PEER_POLL_INTERVAL_MS`, `PEER_TTL_MS`, ...), passed with
//! [`FastmcpPeer::start_with_env`].
//!
//! A missing venv is a test failure, never a skip. `COUNTERSIGN_PEER_PYTHON` overrides
//! the interpreter; `COUNTERSIGN_PEER_LOG=1` echoes the peer's stderr live.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long the peer may take to print its URL.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of the peer's stderr is kept for error messages.
const LOG_LIMIT: usize = 64 * 1024;

pub struct FastmcpPeer {
    /// The endpoint, exactly as the peer printed it: `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    child: Child,
    port: u16,
    env: Vec<(String, String)>,
    log: Arc<Mutex<String>>,
}

impl FastmcpPeer {
    /// Starts tests/peers/fastmcp_server.py with the venv python
    /// (`$COUNTERSIGN_PEER_PYTHON`, else `<repo>/.ci/venv/bin/python`) on a free port, with
    /// extra environment variables for the peer (e.g. `("PEER_STEP_SECONDS", "0.05")`,
    /// `("PEER_TTL_MS", "2000")`), and waits for its URL line (60 s at most). Panics, with the
    /// peer's stderr, if it cannot start; panics with a setup hint if the venv is missing.
    pub async fn start_with_env(vars: &[(&str, &str)]) -> FastmcpPeer {
        let env: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let log = Arc::new(Mutex::new(String::new()));
        match spawn(0, &env, &log).await {
            Ok((child, url, port)) => FastmcpPeer {
                url,
                child,
                port,
                env,
                log,
            },
            Err(message) => panic!("{message}"),
        }
    }

    /// Kills the peer and starts it again on the same port with the same environment.
    /// The new process knows none of the old one's tasks (`tasks/get` answers -32602).
    pub async fn restart(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        append(&self.log, "----- restart -----\n");

        // The old listener is gone once the process is; retry briefly in case the
        // kernel has not released the port yet.
        let mut last_error = String::new();
        for _ in 0..20 {
            match spawn(self.port, &self.env, &self.log).await {
                Ok((child, url, _)) => {
                    self.child = child;
                    self.url = url;
                    return;
                }
                Err(message) => {
                    last_error = message;
                    if !last_error.contains("Address already in use") {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        panic!(
            "restarting the fastmcp peer on port {}: {last_error}",
            self.port
        );
    }

    /// What the peer wrote to stderr so far (the last 64 KiB), for test diagnostics.
    pub fn stderr_log(&self) -> String {
        self.log.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for FastmcpPeer {
    fn drop(&mut self) {
        // SIGKILL; kill_on_drop would do it too, and tokio reaps the process.
        let _ = self.child.start_kill();
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    root.canonicalize().unwrap_or(root)
}

/// The Node tools `.ci/setup-tools.sh` installs (Node 22, the conformance suite, the official
/// TypeScript SDK): `$COUNTERSIGN_CI_TOOLS`, else `<repo>/.ci/tools`.
pub fn ci_tools() -> PathBuf {
    match std::env::var_os("COUNTERSIGN_CI_TOOLS") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => repo_root().join(".ci/tools"),
    }
}

/// The interop venv's python (`$COUNTERSIGN_PEER_PYTHON`, else `<repo>/.ci/venv/bin/python`).
pub fn python() -> PathBuf {
    match std::env::var_os("COUNTERSIGN_PEER_PYTHON") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => repo_root().join(".ci/venv/bin/python"),
    }
}

fn append(log: &Mutex<String>, text: &str) {
    if let Ok(mut buf) = log.lock() {
        buf.push_str(text);
        if buf.len() > LOG_LIMIT {
            let mut cut = buf.len() - LOG_LIMIT;
            while !buf.is_char_boundary(cut) {
                cut += 1;
            }
            buf.drain(..cut);
        }
    }
}

/// Starts the script on `port` (0 = any free one); returns the child, its URL and port.
async fn spawn(
    port: u16,
    env: &[(String, String)],
    log: &Arc<Mutex<String>>,
) -> Result<(Child, String, u16), String> {
    let root = repo_root();
    let python = python();
    let script = root.join("tests/peers/fastmcp_server.py");
    // A bare command name (COUNTERSIGN_PEER_PYTHON=python3) is looked up on PATH.
    if python.components().count() > 1 && !python.exists() {
        panic!(
            "the fastmcp peer's Python is missing: {} does not exist.\n\
             Create it with `bash .ci/setup-peer.sh` (from {}), or point \
             COUNTERSIGN_PEER_PYTHON at a python that has `fastmcp[tasks]==4.1.4`.",
            python.display(),
            root.display()
        );
    }
    if !script.exists() {
        panic!("the fastmcp peer script is missing: {}", script.display());
    }

    let mut command = Command::new(&python);
    command
        .arg(&script)
        .arg("--port")
        .arg(port.to_string())
        .current_dir(&root)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap_or_else(|e| {
        panic!(
            "cannot run the fastmcp peer ({} {}): {e}",
            python.display(),
            script.display()
        )
    });

    let echo = std::env::var_os("COUNTERSIGN_PEER_LOG").is_some_and(|v| !v.is_empty() && v != "0");
    let stderr = child.stderr.take().expect("piped stderr");
    let stderr_log = Arc::clone(log);
    let stderr_task = tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if echo {
                eprintln!("[peer] {line}");
            }
            append(&stderr_log, &line);
            append(&stderr_log, "\n");
        }
    });

    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let waited = tokio::time::timeout(STARTUP_TIMEOUT, async {
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    let line = line.trim();
                    if line.starts_with("http://") {
                        return Ok(line.to_string());
                    }
                    append(log, &format!("[stdout] {line}\n"));
                }
                Ok(None) => return Err("it closed stdout without printing its URL".to_string()),
                Err(e) => return Err(format!("reading its stdout failed: {e}")),
            }
        }
    })
    .await;

    let failure = match waited {
        Ok(Ok(url)) => {
            let port = url
                .trim_start_matches("http://")
                .split(['/', ':'])
                .nth(1)
                .and_then(|p| p.parse::<u16>().ok());
            match port {
                Some(port) => {
                    // Keep draining stdout so the peer never writes into a closed pipe.
                    let stdout_log = Arc::clone(log);
                    tokio::spawn(async move {
                        while let Ok(Some(line)) = lines.next_line().await {
                            append(&stdout_log, &format!("[stdout] {line}\n"));
                        }
                    });
                    return Ok((child, url, port));
                }
                None => format!("it printed an unexpected URL line: {url:?}"),
            }
        }
        Ok(Err(reason)) => reason,
        Err(_) => format!("it printed no URL within {} s", STARTUP_TIMEOUT.as_secs()),
    };

    let _ = child.start_kill();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), stderr_task).await;
    let status = match status {
        Ok(Ok(s)) => s.to_string(),
        _ => "exit status unknown".to_string(),
    };
    let stderr = log.lock().map(|s| s.clone()).unwrap_or_default();
    Err(format!(
        "the fastmcp peer ({} {} --port {port}) did not start: {failure} ({status})\n\
         --- peer stderr ---\n{stderr}--- end of peer stderr ---",
        python.display(),
        script.display(),
    ))
}
