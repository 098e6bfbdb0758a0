//! The line protocol between the driver and the processes it starts (the demo server, the engine
//! under test, the Python client): each child writes one JSON object per line on stdout and reads
//! one command per line on stdin.
//!
//! Invariants that keep a run from hanging or leaking processes:
//! - every read from a child has a deadline;
//! - a [`Child`] is killed when dropped (also when the driver's watchdog or Ctrl-C drops the run);
//! - a child exits as soon as its stdin reaches EOF ([`Parent::attach`]), so even a driver killed
//!   with SIGKILL leaves nothing running.

use std::process::Stdio;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::time::{timeout, timeout_at, Instant};

use crate::error::{Error, Result};

/// A child process seen from the driver.
pub struct Child {
    name: String,
    process: tokio::process::Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Child {
    /// Starts `command` with piped stdin/stdout (stderr passes through).
    pub fn spawn(name: &str, mut command: Command) -> Result<Self> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut process = command
            .spawn()
            .map_err(|e| Error::io(format!("starting {name}"), e))?;
        let stdin = process.stdin.take();
        let stdout = process
            .stdout
            .take()
            .ok_or_else(|| Error::child(name, "no stdout pipe"))?;
        Ok(Self {
            name: name.to_owned(),
            process,
            stdin,
            stdout: BufReader::new(stdout).lines(),
        })
    }

    /// The next JSON object the child prints, as `T`. Lines that are not JSON objects (stray
    /// output) are passed on to stderr.
    pub async fn recv<T: DeserializeOwned>(&mut self, what: &str, within: Duration) -> Result<T> {
        let deadline = Instant::now() + within;
        loop {
            let line = timeout_at(deadline, self.stdout.next_line())
                .await
                .map_err(|_| Error::Timeout {
                    what: format!("{what} from {}", self.name),
                    after: within,
                })?
                .map_err(|e| Error::io(format!("reading from {}", self.name), e))?;
            let Some(line) = line else {
                let status = match timeout(Duration::from_secs(2), self.process.wait()).await {
                    Ok(Ok(status)) => status.to_string(),
                    _ => "no exit status".to_owned(),
                };
                return Err(Error::child(
                    &self.name,
                    format!("exited ({status}) while the driver waited for {what}"),
                ));
            };
            match serde_json::from_str::<Value>(&line) {
                Ok(value) if value.is_object() => {
                    return serde_json::from_value(value).map_err(|e| {
                        Error::child(&self.name, format!("expected {what}, got {line}: {e}"))
                    });
                }
                _ => eprintln!("[{}] {line}", self.name),
            }
        }
    }

    /// Sends one command line.
    pub async fn send(&mut self, command: &str) -> Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| Error::child(&self.name, "stdin already closed"))?;
        let write = async {
            stdin.write_all(format!("{command}\n").as_bytes()).await?;
            stdin.flush().await
        };
        timeout(Duration::from_secs(10), write)
            .await
            .map_err(|_| Error::Timeout {
                what: format!("{} to read {command:?}", self.name),
                after: Duration::from_secs(10),
            })?
            .map_err(|e| Error::io(format!("writing to {}", self.name), e))
    }

    /// Closes stdin (the child's signal to stop) and waits up to `within` for it to exit;
    /// kills it otherwise.
    pub async fn finish(mut self, within: Duration) {
        self.stdin.take();
        if timeout(within, self.process.wait()).await.is_err() {
            eprintln!("[{}] did not exit within {within:?}; killing it", self.name);
            let _ = self.process.kill().await;
        }
    }
}

/// The driver seen from a child: commands arrive on stdin, messages leave on stdout.
pub struct Parent {
    commands: mpsc::UnboundedReceiver<String>,
}

impl Parent {
    /// Starts reading stdin. When it ends (the driver closed it, exited or was killed), this
    /// process exits at once with status 3: a child never outlives its driver.
    pub fn attach() -> Self {
        let (tx, commands) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut line = String::new();
            loop {
                line.clear();
                match stdin.read_line(&mut line) {
                    Ok(0) | Err(_) => std::process::exit(3),
                    Ok(_) => {
                        if tx.send(line.trim().to_owned()).is_err() {
                            std::process::exit(3);
                        }
                    }
                }
            }
        });
        Self { commands }
    }

    /// Prints one message line and flushes it.
    pub fn emit<T: Serialize>(&self, message: &T) -> Result<()> {
        use std::io::Write as _;
        let line = serde_json::to_string(message).map_err(|e| Error::Unexpected(e.to_string()))?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .map_err(|e| Error::io("writing to the driver", e))
    }

    /// The next command, within `within`.
    pub async fn next(&mut self, within: Duration) -> Result<String> {
        timeout(within, self.commands.recv())
            .await
            .map_err(|_| Error::Timeout {
                what: "a command from the driver".into(),
                after: within,
            })?
            .ok_or_else(|| Error::child("driver", "stdin closed"))
    }

    /// Waits for exactly `word` from the driver.
    pub async fn expect(&mut self, word: &str, within: Duration) -> Result<()> {
        let got = self.next(within).await?;
        if got == word {
            Ok(())
        } else {
            Err(Error::child(
                "driver",
                format!("expected {word:?}, got {got:?}"),
            ))
        }
    }
}
