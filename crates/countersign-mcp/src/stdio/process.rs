//! One running server process: newline-delimited JSON-RPC on its stdin and stdout, its stderr
//! into the server's [`StderrLog`], and the routing of what it writes to whoever waits for it.
//!
//! What the server writes goes to one of three places: the answer to one of our requests goes to
//! that request; a server request or status notification that names a task (related-task
//! `_meta`) whose `tasks/result` is open goes to that stream, as it would on HTTP; everything
//! else goes to the session stream, the stand-in for HTTP's GET stream, when one is open. A
//! server request nobody takes is refused at once, so the server never waits on us in vain.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::log::{LineCutter, StderrLog};
use super::sys::{self, Signal};
use super::StdioCommand;
use crate::error::{Error, Result};
use crate::legacy::stream::Incoming;
use crate::legacy::META_RELATED_TASK;
use crate::response::MAX_BODY_BYTES;

/// Messages waiting for a slow reader, per route; past it a notification is dropped and a
/// server request refused.
const ROUTE_CAPACITY: usize = 256;
/// Our messages waiting to be written.
const WRITE_QUEUE: usize = 256;

/// How a process ended, as the person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// "exit status 1", "killed by signal 9", or what Countersign saw go wrong.
    pub reason: String,
}

/// A running (or just ended) server process. Cheap to clone; the process is stopped when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct StdioProcess {
    inner: Arc<Proc>,
}

struct Proc {
    label: String,
    pid: u32,
    writer: mpsc::Sender<Vec<u8>>,
    routes: Arc<Mutex<Routes>>,
    exit: watch::Receiver<Option<Exit>>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Proc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proc")
            .field("label", &self.label)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if self.exit.borrow().is_none() {
            stop_group(self.pid);
        }
    }
}

/// SIGTERM to the group now, SIGKILL after the grace period if anything of it is left. The
/// direct child also dies with this process (PR_SET_PDEATHSIG) if it exits first.
fn stop_group(pgid: u32) {
    sys::signal_group(pgid, Signal::Term);
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + super::STOP_GRACE;
        while std::time::Instant::now() < deadline {
            if !sys::group_alive(pgid) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        sys::signal_group(pgid, Signal::Kill);
    });
}

#[derive(Default)]
struct Routes {
    /// Our open requests by id.
    requests: HashMap<u64, Route>,
    /// Open `tasks/result` requests by task id.
    tasks: HashMap<String, u64>,
    session: Option<mpsc::Sender<Incoming>>,
    /// stdout ended: nothing more will be routed.
    closed: bool,
}

struct Route {
    tx: mpsc::Sender<Incoming>,
    task: Option<String>,
}

impl StdioProcess {
    /// Starts `command` in its own process group, tied to this process's life.
    pub(super) fn spawn(label: &str, command: &StdioCommand, log: Arc<StderrLog>) -> Result<Self> {
        let mut cmd = tokio::process::Command::new(&command.program);
        cmd.args(&command.args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(false)
            .process_group(0);
        for (key, value) in &command.env {
            cmd.env(key, value.expose());
        }
        cmd.env(super::orphans::OWNER_VAR, std::process::id().to_string());
        if let Some(dir) = &command.cwd {
            cmd.current_dir(dir);
        }
        sys::die_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| Error::Transport {
            url: label.into(),
            message: format!("could not start `{}`: {e}", command.program),
        })?;
        let pid = child.id().unwrap_or(0);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let (writer, queue) = mpsc::channel(WRITE_QUEUE);
        let (exit_tx, exit) = watch::channel(None);
        let exit_tx = Arc::new(exit_tx);
        let routes = Arc::new(Mutex::new(Routes::default()));
        let mut tasks = Vec::new();
        if let Some(stdin) = stdin {
            tasks.push(tokio::spawn(write_loop(stdin, queue, pid)));
        }
        if let Some(stderr) = stderr {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let mut stderr = stderr;
                let mut cutter = LineCutter::default();
                let mut buf = vec![0u8; 8192];
                while let Ok(n @ 1..) = stderr.read(&mut buf).await {
                    cutter.feed(&buf[..n], |line| log.push(line));
                }
                cutter.finish(|line| log.push(line));
            }));
        }
        if let Some(stdout) = stdout {
            tasks.push(tokio::spawn(read_loop(
                stdout,
                routes.clone(),
                writer.clone(),
                log.clone(),
                exit_tx.clone(),
                pid,
            )));
        }
        tasks.push(tokio::spawn(wait_loop(child, exit_tx, log)));
        Ok(Self {
            inner: Arc::new(Proc {
                label: label.into(),
                pid,
                writer,
                routes,
                exit,
                tasks,
            }),
        })
    }

    /// The process id (also its process group's).
    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// How it ended, once it has.
    pub fn exit(&self) -> Option<Exit> {
        self.inner.exit.borrow().clone()
    }

    /// Waits until it has ended.
    pub async fn ended(&self) -> Exit {
        self.when_ended().await
    }

    /// A future that resolves when the process has ended, without keeping it alive (the last
    /// clone's drop still stops it).
    pub fn when_ended(&self) -> impl std::future::Future<Output = Exit> + Send + 'static {
        let exit = self.inner.exit.clone();
        wait_exit(exit)
    }
}

async fn wait_exit(mut exit: watch::Receiver<Option<Exit>>) -> Exit {
    loop {
        if let Some(exit) = exit.borrow_and_update().clone() {
            return exit;
        }
        if exit.changed().await.is_err() {
            return Exit {
                reason: "ended".into(),
            };
        }
    }
}

impl StdioProcess {
    /// Whether its stdout ended (it may not have exited yet).
    pub fn closed(&self) -> bool {
        self.inner
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed
    }

    /// Asks the process group to stop: SIGTERM, then SIGKILL after the grace period.
    pub fn stop(&self) {
        if self.exit().is_none() {
            stop_group(self.inner.pid);
        }
    }

    /// The error every request gets once the process is gone: the session it held is over.
    pub(crate) fn ended_error(&self) -> Error {
        let reason = self
            .exit()
            .map(|e| e.reason)
            .unwrap_or_else(|| "it closed its output".into());
        Error::SessionExpired {
            url: self.inner.label.clone(),
            status: 0,
            message: format!("the server process ended ({reason})"),
        }
    }

    /// Writes a request and returns the stream its answer (and, for `tasks/result`, the task's
    /// server requests) will come on; writes a notification or response and returns `None`.
    pub(crate) async fn send(&self, body: &Value) -> Result<Option<mpsc::Receiver<Incoming>>> {
        let id = body.get("id").and_then(Value::as_u64);
        let is_request = body.get("method").is_some() && id.is_some();
        let rx = if is_request {
            let id = id.unwrap_or_default();
            let task = (body["method"] == "tasks/result")
                .then(|| body.pointer("/params/taskId").and_then(Value::as_str))
                .flatten()
                .map(str::to_owned);
            let (tx, rx) = mpsc::channel(ROUTE_CAPACITY);
            let mut routes = self.inner.routes.lock().unwrap_or_else(|e| e.into_inner());
            if routes.closed {
                return Err(self.ended_error());
            }
            routes.requests.retain(|_, route| !route.tx.is_closed());
            let Routes {
                requests, tasks, ..
            } = &mut *routes;
            tasks.retain(|_, id| requests.contains_key(id));
            if let Some(task) = &task {
                tasks.insert(task.clone(), id);
            }
            requests.insert(id, Route { tx, task });
            Some(rx)
        } else {
            None
        };
        let mut line = serde_json::to_vec(body)
            .map_err(|e| Error::InvalidRequest(format!("a request could not be encoded: {e}")))?;
        line.push(b'\n');
        if self.inner.writer.send(line).await.is_err() {
            return Err(self.ended_error());
        }
        Ok(rx)
    }

    /// The session stream: status notifications and server requests no open request takes.
    /// Opening it again replaces the previous one.
    pub(crate) fn session_stream(&self) -> Result<mpsc::Receiver<Incoming>> {
        let (tx, rx) = mpsc::channel(ROUTE_CAPACITY);
        let mut routes = self.inner.routes.lock().unwrap_or_else(|e| e.into_inner());
        if routes.closed {
            return Err(self.ended_error());
        }
        routes.session = Some(tx);
        Ok(rx)
    }
}

async fn write_loop(mut stdin: ChildStdin, mut queue: mpsc::Receiver<Vec<u8>>, pid: u32) {
    while let Some(line) = queue.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            // It stopped reading: whatever we send is lost, so the session is over.
            sys::signal_group(pid, Signal::Kill);
            return;
        }
    }
}

async fn wait_loop(mut child: Child, exit: Arc<watch::Sender<Option<Exit>>>, log: Arc<StderrLog>) {
    let reason = match child.wait().await {
        Ok(status) => describe(status),
        Err(e) => format!("its status could not be read: {e}"),
    };
    log.note(&format!("the process ended: {reason}"));
    exit.send_if_modified(|current| {
        if current.is_none() {
            *current = Some(Exit { reason });
            true
        } else {
            false
        }
    });
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

async fn read_loop(
    stdout: ChildStdout,
    routes: Arc<Mutex<Routes>>,
    writer: mpsc::Sender<Vec<u8>>,
    log: Arc<StderrLog>,
    exit: Arc<watch::Sender<Option<Exit>>>,
    pid: u32,
) {
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let mut skipped = 0u64;
    loop {
        line.clear();
        match read_line(&mut reader, &mut line).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(LineError::TooLong) => {
                let reason = format!(
                    "it wrote a line longer than {} MiB on stdout",
                    MAX_BODY_BYTES / (1024 * 1024)
                );
                log.note(&format!("stopped: {reason}"));
                exit.send_replace(Some(Exit { reason }));
                sys::signal_group(pid, Signal::Kill);
                break;
            }
            Err(LineError::Io(e)) => {
                log.note(&format!("reading its stdout failed: {e}"));
                break;
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match Incoming::parse(text) {
            Ok(message) => route(&routes, &writer, message),
            Err(why) => {
                skipped += 1;
                // The first few say what is wrong; a server that writes nothing but noise
                // would otherwise fill the log with it.
                if skipped <= 5 {
                    log.note(&format!(
                        "skipped a line on stdout that is not JSON-RPC ({why}): {}",
                        crate::text::truncate(text, 200)
                    ));
                }
            }
        }
    }
    // Its output ended, most likely because it exited: a moment for the exit status, so the
    // requests that fail now can say how it ended.
    let mut exited = exit.subscribe();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        exited.wait_for(Option::is_some),
    )
    .await;
    let mut routes = routes.lock().unwrap_or_else(|e| e.into_inner());
    routes.closed = true;
    routes.requests.clear();
    routes.tasks.clear();
    routes.session = None;
}

enum LineError {
    TooLong,
    Io(std::io::Error),
}

/// One line (without its newline) into `line`, at most [`MAX_BODY_BYTES`]; `false` at the end.
async fn read_line(
    reader: &mut tokio::io::BufReader<ChildStdout>,
    line: &mut Vec<u8>,
) -> std::result::Result<bool, LineError> {
    loop {
        let available = reader.fill_buf().await.map_err(LineError::Io)?;
        if available.is_empty() {
            return Ok(!line.is_empty());
        }
        let (taken, done) = match available.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        let body = if done {
            &available[..taken - 1]
        } else {
            &available[..taken]
        };
        if line.len() + body.len() > MAX_BODY_BYTES {
            return Err(LineError::TooLong);
        }
        line.extend_from_slice(body);
        reader.consume(taken);
        if done {
            return Ok(true);
        }
    }
}

fn related_task(params: Option<&Value>) -> Option<String> {
    params?
        .get("_meta")?
        .get(META_RELATED_TASK)?
        .get("taskId")?
        .as_str()
        .map(str::to_owned)
}

fn route(routes: &Mutex<Routes>, writer: &mpsc::Sender<Vec<u8>>, message: Incoming) {
    let mut routes = routes.lock().unwrap_or_else(|e| e.into_inner());
    match message {
        Incoming::Response { ref id, .. } => {
            let Some(id) = id.as_u64() else { return };
            if let Some(route) = routes.requests.remove(&id) {
                if let Some(task) = &route.task {
                    routes.tasks.remove(task);
                }
                let _ = route.tx.try_send(message);
            }
        }
        Incoming::Request(ref request) => {
            let target = related_task(request.params.as_ref())
                .and_then(|task| routes.tasks.get(&task).copied())
                .and_then(|id| routes.requests.get(&id))
                .map(|route| route.tx.clone())
                .or_else(|| routes.session.clone());
            let refused = match target {
                Some(tx) => tx.try_send(message.clone()).is_err(),
                None => true,
            };
            if refused {
                let reply = json!({"jsonrpc": "2.0", "id": request.id, "error": {
                    "code": -32601,
                    "message": format!("Countersign does not support {}", request.method),
                }});
                if let Ok(mut line) = serde_json::to_vec(&reply) {
                    line.push(b'\n');
                    let _ = writer.try_send(line);
                }
            }
        }
        Incoming::Notification { ref params, .. } => {
            let by_task = related_task(params.as_ref())
                .or_else(|| params.as_ref()?.get("taskId")?.as_str().map(str::to_owned))
                .and_then(|task| routes.tasks.get(&task).copied())
                .and_then(|id| routes.requests.get(&id))
                .map(|route| route.tx.clone());
            if let Some(tx) = routes.session.clone().or(by_task) {
                let _ = tx.try_send(message);
            }
        }
    }
}
