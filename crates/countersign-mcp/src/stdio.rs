//! stdio servers: a process Countersign starts and speaks newline-delimited JSON-RPC with.
//!
//! [`StdioServer`] is one configured server: it starts the process when a request first needs
//! it, starts it again after it exits (with a growing pause, so a crash loop costs little and is
//! shown, not hidden), keeps its stderr in a bounded [`StderrLog`], and stops it with its whole
//! process group. Every process is tied to ours (`PR_SET_PDEATHSIG`), so a kill -9 of the engine
//! takes the server with it; what it started in turn is found and ended by the next engine
//! ([`sweep_orphans`]). A process is one session: when it ends, its tasks end with it.
//!
//! - `stdio/process.rs`: one running process, its framing and the routing of what it writes;
//! - `stdio/log.rs`: the bounded stderr log;
//! - `stdio/orphans.rs`: the sweep for processes a killed engine left;
//! - `stdio/sys.rs`: the system calls the standard library lacks.
//!
//! The protocol on top is the legacy client's ([`StdioServer::connect`]), after the
//! specification's stdio detection: `server/discover` first, then `initialize`.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::client::ClientOptions;
use crate::error::{Error, Result};
use crate::legacy::LegacyClient;
use crate::sensitive::Sensitive;

mod log;
mod orphans;
mod process;
mod sys;

pub use log::{StderrLog, MAX_LOG_LINES, MAX_LOG_LINE_BYTES};
pub use orphans::{sweep as sweep_orphans, OWNER_VAR};
pub use process::{Exit, StdioProcess};

/// How long a process has between SIGTERM and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// Exits counted for the pause before the next start.
const EXIT_WINDOW: Duration = Duration::from_secs(600);
/// The pause after the first exit in the window; it doubles with each further one.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// The longest pause.
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// Exits in the window from which the server counts as crash-looping.
pub const CRASH_LOOP_EXITS: usize = 3;

/// What to run: a program, its arguments, extra environment (on top of ours, as agent hosts
/// do), and its working directory.
#[derive(Debug, Clone, PartialEq)]
pub struct StdioCommand {
    /// The program, looked up on `PATH` as a shell would.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to the inherited environment; secret ones come from the keyring.
    pub env: Vec<(String, Sensitive<String>)>,
    /// The working directory, else ours.
    pub cwd: Option<PathBuf>,
}

impl StdioCommand {
    /// The command line as shown to a person: the program and its arguments, never the
    /// environment (where secrets live).
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .map(shell_word)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A configured stdio server and the process that serves it now, if any. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StdioServer {
    inner: Arc<Supervisor>,
}

/// Reads secret environment values (from the OS keyring) as a process starts: a blocking call,
/// run off the runtime's threads. `Err` says why they could not be read.
pub type SecretEnv =
    Arc<dyn Fn() -> std::result::Result<Vec<(String, Sensitive<String>)>, String> + Send + Sync>;

struct Supervisor {
    label: String,
    command: StdioCommand,
    secret_env: Option<SecretEnv>,
    log: Arc<StderrLog>,
    state: tokio::sync::Mutex<State>,
    /// A copy of what [`StdioServer::status`] shows, readable without waiting.
    shown: std::sync::Mutex<StdioStatus>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("label", &self.label)
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    current: Option<StdioProcess>,
    /// When recent processes ended (or failed to start).
    exits: VecDeque<Instant>,
    starts: u64,
}

/// A stdio server's state as the server page shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StdioStatus {
    /// The process running now.
    pub pid: Option<u32>,
    /// Processes started so far by this engine.
    pub starts: u64,
    /// Exits (and failed starts) in the last ten minutes.
    pub recent_exits: usize,
    /// How the last process ended.
    pub last_exit: Option<String>,
    /// Whether it keeps exiting ([`CRASH_LOOP_EXITS`] or more recent exits).
    pub crash_loop: bool,
}

impl StdioServer {
    /// A server named `name` (for messages: `stdio:NAME`); nothing starts yet.
    pub fn new(name: &str, command: StdioCommand) -> Self {
        Self {
            inner: Arc::new(Supervisor {
                label: format!("stdio:{name}"),
                command,
                secret_env: None,
                log: Arc::new(StderrLog::default()),
                state: tokio::sync::Mutex::new(State::default()),
                shown: std::sync::Mutex::new(StdioStatus::default()),
            }),
        }
    }

    /// The same server, whose processes also get the values `secret_env` reads (each start
    /// reads them again, so a changed secret is used from the next start). Call before use.
    pub fn with_secret_env(self, secret_env: SecretEnv) -> Self {
        let inner = Arc::try_unwrap(self.inner).unwrap_or_else(|shared| Supervisor {
            label: shared.label.clone(),
            command: shared.command.clone(),
            secret_env: None,
            log: shared.log.clone(),
            state: tokio::sync::Mutex::new(State::default()),
            shown: std::sync::Mutex::new(StdioStatus::default()),
        });
        Self {
            inner: Arc::new(Supervisor {
                secret_env: Some(secret_env),
                ..inner
            }),
        }
    }

    /// `stdio:NAME`, where a URL would be named.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// What it runs.
    pub fn command(&self) -> &StdioCommand {
        &self.inner.command
    }

    /// Its stderr (and Countersign's notes about its processes), newest last.
    pub fn log(&self) -> Vec<String> {
        self.inner.log.lines()
    }

    /// Its state now.
    pub fn status(&self) -> StdioStatus {
        self.inner
            .shown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The running process, started if there is none. After an exit the next start waits a
    /// pause that doubles with each recent exit; asked for during the pause, this is a
    /// transient error that says when it will start again.
    pub async fn process(&self) -> Result<StdioProcess> {
        let mut state = self.inner.state.lock().await;
        if let Some(current) = &state.current {
            // Closed output is as good as ended: nothing it says will reach us any more.
            match current.exit().is_some() || current.closed() {
                false => return Ok(current.clone()),
                true => {
                    current.stop();
                    state.current = None;
                    state.exits.push_back(Instant::now());
                }
            }
        }
        let now = Instant::now();
        while state
            .exits
            .front()
            .is_some_and(|t| now.duration_since(*t) > EXIT_WINDOW)
        {
            state.exits.pop_front();
        }
        if let Some(last) = state.exits.back() {
            let pause = pause_after(state.exits.len());
            let ready = *last + pause;
            if now < ready {
                let left = ready - now;
                self.show(&state, None);
                return Err(Error::Transport {
                    url: self.inner.label.clone(),
                    message: format!(
                        "the server process ended ({}); starting it again in {} s ({} exits in 10 minutes)",
                        self.status().last_exit.unwrap_or_else(|| "?".into()),
                        left.as_secs().max(1),
                        state.exits.len()
                    ),
                });
            }
        }
        state.starts += 1;
        self.inner
            .log
            .note(&format!("starting {}", self.inner.command.display()));
        let command = match self.command_with_secrets().await {
            Ok(command) => command,
            Err(reason) => {
                state.exits.push_back(Instant::now());
                self.inner.log.note(&reason);
                self.show(&state, Some(reason.clone()));
                return Err(Error::Transport {
                    url: self.inner.label.clone(),
                    message: reason,
                });
            }
        };
        match StdioProcess::spawn(&self.inner.label, &command, self.inner.log.clone()) {
            Ok(process) => {
                let ended = process.when_ended();
                let me = Arc::downgrade(&self.inner);
                // Records the exit for the page as soon as it happens, not at the next request.
                tokio::spawn(async move {
                    let exit = ended.await;
                    if let Some(inner) = me.upgrade() {
                        let mut shown = inner.shown.lock().unwrap_or_else(|e| e.into_inner());
                        shown.pid = None;
                        shown.last_exit = Some(exit.reason);
                    }
                });
                state.current = Some(process.clone());
                self.show(&state, None);
                Ok(process)
            }
            Err(e) => {
                state.exits.push_back(Instant::now());
                let reason = match &e {
                    Error::Transport { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                self.inner.log.note(&reason);
                self.show(&state, Some(reason));
                Err(e)
            }
        }
    }

    async fn command_with_secrets(&self) -> std::result::Result<StdioCommand, String> {
        let mut command = self.inner.command.clone();
        if let Some(read) = self.inner.secret_env.clone() {
            let values = tokio::task::spawn_blocking(move || read())
                .await
                .map_err(|_| "reading its secret environment failed".to_owned())?
                .map_err(|e| format!("its secret environment could not be read: {e}"))?;
            command.env.extend(values);
        }
        Ok(command)
    }

    /// A session with this server: the stdio detection on its process, then `initialize`. A
    /// server that answers the probe as a 2026-07-28 one is started afresh and asked to
    /// `initialize` without a probe: dual-era servers (the Python SDK's) serve whichever
    /// generation a process's first message speaks, and lock the process into it. Only a
    /// server that refuses that too is [`Error::ModernStdio`].
    pub async fn connect(&self, options: ClientOptions) -> Result<LegacyClient> {
        let process = self.process().await?;
        match LegacyClient::connect_stdio(process, self.label(), options.clone(), true).await {
            Err(modern @ Error::ModernStdio { .. }) => {
                self.stop().await;
                let process = self.process().await?;
                LegacyClient::connect_stdio(process, self.label(), options, false)
                    .await
                    .map_err(|_| modern)
            }
            other => other,
        }
    }

    /// Stops the running process (SIGTERM to its group, SIGKILL after [`STOP_GRACE`]) and
    /// waits for it; the next request starts a new one without a pause.
    pub async fn stop(&self) {
        let current = self.inner.state.lock().await.current.take();
        if let Some(process) = current {
            process.stop();
            let _ =
                tokio::time::timeout(STOP_GRACE + Duration::from_secs(1), process.ended()).await;
        }
        let state = self.inner.state.lock().await;
        self.show(&state, None);
    }

    fn show(&self, state: &State, failed_start: Option<String>) {
        let mut shown = self.inner.shown.lock().unwrap_or_else(|e| e.into_inner());
        shown.pid = state
            .current
            .as_ref()
            .filter(|p| p.exit().is_none())
            .map(StdioProcess::pid);
        shown.starts = state.starts;
        shown.recent_exits = state.exits.len();
        shown.crash_loop = state.exits.len() >= CRASH_LOOP_EXITS;
        if let Some(reason) = failed_start {
            shown.last_exit = Some(reason);
        }
    }
}

/// The pause before a start that follows `exits` recent exits.
fn pause_after(exits: usize) -> Duration {
    let doublings = u32::try_from(exits.saturating_sub(1))
        .unwrap_or(u32::MAX)
        .min(16);
    FIRST_PAUSE.saturating_mul(1u32 << doublings).min(MAX_PAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_and_is_capped() {
        assert_eq!(pause_after(1), Duration::from_millis(500));
        assert_eq!(pause_after(2), Duration::from_secs(1));
        assert_eq!(pause_after(4), Duration::from_secs(4));
        assert_eq!(pause_after(50), MAX_PAUSE);
    }

    #[test]
    fn a_command_line_is_shown_quoted_and_without_its_environment() {
        let command = StdioCommand {
            program: "npx".into(),
            args: vec!["-y".into(), "@scope/server".into(), "my dir".into()],
            env: vec![("TOKEN".into(), Sensitive::new("secret".into()))],
            cwd: None,
        };
        assert_eq!(command.display(), "npx -y @scope/server 'my dir'");
    }
}
