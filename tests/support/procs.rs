//! `countersign` processes over one data directory: commands that run to their end, and
//! long-lived ones (`watch`, a call in flight) that a test kills with SIGKILL at a chosen moment.
//!
//! The binary comes from [`crate::cli::binary`] (built once per test process). The data
//! directory is a fresh temporary directory, removed when the test passes and kept (its path
//! printed) when it fails, so the ledger of a failed run can be inspected.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use crate::ledger_view::{wait_for, LedgerView};

/// Longest a command that should finish may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A data directory and the CLI over it.
pub struct DataDir {
    path: PathBuf,
}

/// How a finished command ended.
#[derive(Debug)]
pub struct Exit {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Exit {
    /// The last non-empty stdout line as JSON (the `--json` outcome).
    pub fn json(&self) -> Value {
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_else(|| panic!("no stdout; {self}"));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}); {self}"))
    }

    /// Panics unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "unexpected exit code; {self}");
        self
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}--- end ---",
            self.code, self.stdout, self.stderr
        )
    }
}

impl DataDir {
    /// A fresh, empty data directory named after the test.
    pub fn new(label: &str) -> DataDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "countersign-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        DataDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A view of its ledger (waits for the file to exist).
    pub fn ledger(&self) -> LedgerView {
        LedgerView::open(&self.path)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(crate::cli::binary());
        command
            .arg("--data-dir")
            .arg(&self.path)
            .args(args)
            .env_remove("COUNTERSIGN_TOKEN")
            .env_remove("COUNTERSIGN_DATA_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Runs `countersign --data-dir DIR ARGS…` to its end ([`COMMAND_TIMEOUT`] at most).
    pub async fn run(&self, args: &[&str]) -> Exit {
        self.run_with_env(args, &[]).await
    }

    /// As [`DataDir::run`], with extra environment variables (e.g. `BROWSER`).
    pub async fn run_with_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Exit {
        let mut command = self.command(args);
        command.envs(vars.iter().copied());
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run countersign {args:?}: {e}"));
        let output = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("countersign {args:?} ran longer than {COMMAND_TIMEOUT:?}"))
            .unwrap_or_else(|e| panic!("waiting for countersign {args:?}: {e}"));
        Exit {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs a command that must exit 0 and returns its `--json` outcome.
    pub async fn run_json(&self, args: &[&str]) -> Value {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let exit = self.run(&full).await;
        exit.expect_code(0);
        exit.json()
    }

    /// Starts `countersign --data-dir DIR ARGS…` in the background.
    pub fn spawn(&self, args: &[&str]) -> Proc {
        let mut child = self
            .command(args)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run countersign {args:?}: {e}"));
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        drain(child.stdout.take().expect("piped stdout"), stdout.clone());
        drain(child.stderr.take().expect("piped stderr"), stderr.clone());
        Proc {
            child,
            label: args.join(" "),
            stdout,
            stderr,
        }
    }

    /// Starts `countersign watch --json` and waits until its engine has started (its
    /// `engine_started` event is in the ledger).
    pub async fn watch(&self) -> Proc {
        let before = self.engine_starts();
        let mut watch = self.spawn(&["--json", "watch"]);
        wait_for(
            "`countersign watch` to start its engine",
            Duration::from_secs(15),
            || {
                if let Ok(Some(status)) = watch.child.try_wait() {
                    panic!(
                        "`countersign watch` exited early ({status}); stderr: {}",
                        watch.stderr()
                    );
                }
                (self.engine_starts() > before).then_some(())
            },
        )
        .await;
        watch
    }

    /// How many `engine_started` events the ledger holds (0 before the ledger exists).
    pub fn engine_starts(&self) -> usize {
        if !self.path.join(crate::ledger_view::LEDGER_FILE).exists() {
            return 0;
        }
        self.ledger().events_of("engine_started").len()
    }

    /// `countersign call SERVER TOOL ARGS --no-follow`: the task id (its handle is on disk).
    pub async fn call_no_follow(&self, server: &str, tool: &str, args: &str) -> String {
        let out = self
            .run_json(&["call", server, tool, args, "--no-follow"])
            .await;
        out["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("call --no-follow prints the task id: {out}"))
            .to_owned()
    }

    /// Registers a server by name (discovering it first).
    pub async fn add_server(&self, name: &str, url: &str) {
        let added = self.run_json(&["servers", "add", name, url]).await;
        assert_eq!(
            added["name"], name,
            "servers add echoes the server: {added}"
        );
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "kept the data directory of the failed test: {}",
                self.path.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn drain(stream: impl AsyncRead + Unpin + Send + 'static, into: Arc<Mutex<String>>) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut text = into.lock().unwrap_or_else(PoisonError::into_inner);
            text.push_str(&line);
            text.push('\n');
        }
    });
}

/// A background `countersign` process; SIGKILLed when dropped.
pub struct Proc {
    child: Child,
    label: String,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// What it printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `kill -9`: no shutdown code runs, nothing is flushed. Waits until it is gone.
    pub async fn kill9(&mut self) {
        let _ = self.child.start_kill(); // SIGKILL on Unix
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "`countersign {}` did not die within 10 s of SIGKILL",
                    self.label
                )
            })
            .unwrap_or_else(|e| panic!("waiting for `countersign {}`: {e}", self.label));
    }

    /// Waits for it to exit on its own ([`COMMAND_TIMEOUT`] at most).
    pub async fn finish(mut self) -> Exit {
        let status = tokio::time::timeout(COMMAND_TIMEOUT, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "`countersign {}` ran longer than {COMMAND_TIMEOUT:?}",
                    self.label
                )
            })
            .unwrap_or_else(|e| panic!("waiting for `countersign {}`: {e}", self.label));
        // Let the drain tasks take the last lines.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Exit {
            code: status.code(),
            stdout: self.stdout(),
            stderr: self.stderr(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
