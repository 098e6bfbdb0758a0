//! The `countersign` binary as a real process.
//!
//! The binary belongs to another package (`countersign-cli`), so `CARGO_BIN_EXE_*` is not
//! available here. [`binary`] builds it once per test process with the same cargo that runs
//! the tests (`$CARGO`, else `cargo` on PATH) and takes its path from cargo's own
//! `compiler-artifact` message, so a custom target directory works too. A build failure is a
//! test failure, never a skip.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Longest a single CLI invocation may run in a test.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    root.canonicalize().unwrap_or(root)
}

/// The path of a freshly built `countersign` binary (built at most once per test process).
pub fn binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(build).as_path()
}

fn build() -> PathBuf {
    let cargo = std::env::var_os("CARGO")
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "cargo".into());
    let output = std::process::Command::new(&cargo)
        .args([
            "build",
            "-q",
            "-p",
            "countersign-cli",
            "--bin",
            "countersign",
        ])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} to build countersign-cli: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        panic!(
            "`cargo build -p countersign-cli` failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let executable = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m.get("reason").and_then(Value::as_str) == Some("compiler-artifact"))
        .filter(|m| m.pointer("/target/name").and_then(Value::as_str) == Some("countersign"))
        .find_map(|m| {
            m.get("executable")
                .and_then(Value::as_str)
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| panic!("cargo reported no `countersign` executable:\n{stdout}"));
    assert!(
        executable.exists(),
        "cargo built {} but it does not exist",
        executable.display()
    );
    executable
}

/// What one CLI run produced.
#[derive(Debug)]
pub struct Run {
    /// The exit code (`None` if killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The last non-empty stdout line parsed as JSON (the `--json` outcome).
    pub fn json(&self) -> Value {
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_else(|| panic!("no stdout to parse as JSON; {self}"));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}); {self}"))
    }

    /// Panics unless the process exited with `code`.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "unexpected exit code; {self}");
        self
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}--- end ---",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `countersign ARGS…` with stdin closed (not a terminal) and `COUNTERSIGN_TOKEN` unset;
/// fails the test if it runs longer than [`RUN_TIMEOUT`].
pub async fn run(args: &[&str]) -> Run {
    run_with_env(args, &[]).await
}

/// As [`run`], with extra environment variables.
pub async fn run_with_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let binary = binary();
    let mut command = Command::new(binary);
    command.args(args).env_remove("COUNTERSIGN_TOKEN");
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    let output: Output = tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("countersign {args:?} ran longer than {RUN_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("waiting for countersign {args:?}: {e}"));
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `countersign demo-server --port 0 --speed SPEED` as a child process; killed on drop.
pub struct DemoProcess {
    /// The endpoint from the first stdout line.
    pub url: String,
    child: Child,
}

impl DemoProcess {
    /// Starts the demo server and waits (20 s at most) for its URL line.
    pub async fn start(speed: f64) -> DemoProcess {
        let binary = binary();
        let speed = speed.to_string();
        let mut child = Command::new(binary)
            .args(["demo-server", "--port", "0", "--speed", &speed])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} demo-server: {e}", binary.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("countersign demo-server must print its URL within 20 s")
            .expect("reading the demo server's stdout")
            .expect("the demo server must print a line before closing stdout");
        // Keep reading so the server never writes into a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let url = first.trim().to_string();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "the first stdout line of demo-server is its URL, got {url:?}"
        );
        DemoProcess { url, child }
    }
}

impl DemoProcess {
    /// Sends SIGTERM (with the system `kill`, to the pid of this child only) and waits up to
    /// 10 s for the exit code.
    pub async fn terminate(mut self) -> Option<i32> {
        let pid = self.child.id().expect("the demo server is still running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill -TERM");
        assert!(status.success(), "kill -TERM {pid} failed: {status}");
        let exit = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("the demo server must exit within 10 s of SIGTERM")
            .expect("wait for the demo server");
        exit.code()
    }
}

impl Drop for DemoProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
