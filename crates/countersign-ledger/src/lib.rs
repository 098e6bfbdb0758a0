//! The durable task ledger: one SQLite file (WAL) that outlives every crash.
//!
//! One writer per process: all writes go through [`Ledger::write`], which runs them on a dedicated
//! thread that batches whatever is queued into one transaction (each job in its own savepoint, so
//! one bad job cannot poison its neighbours) and replies only after the commit. Events appended
//! in a batch are published to subscribers after that commit, in order. A write is synced
//! (fsynced before it resolves) unless it is [`Ledger::write_relaxed`]: see [`Durability`], and
//! ARCHITECTURE.md for which writes are which. Reads use a separate connection. Other processes
//! (the CLI next to a running engine) open their own `Ledger`; SQLite serialises writers across
//! processes and the engine notices their commits through [`Ledger::data_version`].
//!
//! Tables, one module each: [`servers`], [`intents`] (call intents), [`tasks`], [`events`] (the
//! append-only timeline), [`inputs`] (questions by key), [`outbox`] (answers and cancels not yet
//! acknowledged), [`audit`] (every human decision) and [`settings`] (the person's settings);
//! the gateway's [`agents`], [`rules`] and [`gated`] calls. [`decision`] reads an answer in a
//! person's terms (approved, denied, declined, …).
#![deny(missing_docs)]
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

pub mod agents;
pub mod audit;
pub mod decision;
pub mod events;
pub mod gated;
pub mod inputs;
pub mod intents;
pub mod outbox;
pub mod rules;
pub mod servers;
pub mod settings;
pub mod tasks;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{mpsc as std_mpsc, Arc, Condvar, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use tokio::sync::{broadcast, oneshot};

pub use events::{
    AnswerAction, CallOutcomeKind, DeliveryKind, EventKind, StoredEvent, TaskOrigin, Via,
};

/// Migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_gateway.sql"),
    include_str!("../migrations/0003_gated_tool.sql"),
    include_str!("../migrations/0004_settings.sql"),
    include_str!("../migrations/0005_gated_questions.sql"),
    include_str!("../migrations/0006_server_era.sql"),
    include_str!("../migrations/0007_stdio_servers.sql"),
];

/// Errors of the ledger.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite refused an operation.
    #[error("ledger database error: {0}")]
    Sql(#[from] rusqlite::Error),
    /// The data directory could not be created or read.
    #[error("ledger directory {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Stored JSON did not parse (a corrupted or foreign row).
    #[error("ledger holds malformed JSON in {what}: {source}")]
    Json {
        /// Which column.
        what: &'static str,
        /// The parse error.
        source: serde_json::Error,
    },
    /// A named thing does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The request is not acceptable as given (a server URL with credentials in it…).
    #[error("{0}")]
    Invalid(String),
    /// The request conflicts with what is stored (duplicate name, answering a settled question…).
    #[error("{0}")]
    Conflict(String),
    /// The database was written by a newer Countersign.
    #[error("ledger schema version {found} is newer than this build understands ({known})")]
    TooNew {
        /// `user_version` found.
        found: i64,
        /// Migrations this build has.
        known: i64,
    },
    /// The writer thread is gone (the process is shutting down).
    #[error("the ledger writer has stopped")]
    WriterGone,
    /// The batch this write was part of could not be committed, so nothing of it was written
    /// (e.g. another process held the write lock past the busy timeout). Retrying can succeed.
    #[error("the ledger could not be written{}: {message}", if *.busy { " (another connection holds the write lock)" } else { "" })]
    Unwritable {
        /// SQLite said busy or locked: another connection holds the write lock.
        busy: bool,
        /// SQLite's message.
        message: String,
    },
}

impl Error {
    /// The commit failure every job of a failed batch is told about.
    fn unwritable(error: &Error) -> Self {
        match error {
            Error::Unwritable { busy, message } => Error::Unwritable {
                busy: *busy,
                message: message.clone(),
            },
            Error::Sql(e) => Error::Unwritable {
                busy: matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                ),
                message: e.to_string(),
            },
            other => Error::Unwritable {
                busy: false,
                message: other.to_string(),
            },
        }
    }
}

/// Result with the ledger's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The current wall-clock time in Unix milliseconds (for records, never for scheduling).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The platform data directory for Countersign: `$XDG_DATA_HOME/countersign` (default
/// `~/.local/share/countersign`) on Linux, `~/Library/Application Support/countersign` on macOS,
/// `%APPDATA%\countersign` on Windows.
pub fn default_data_dir() -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    let base = if cfg!(windows) {
        std::env::var_os("APPDATA").map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        home().map(|h| h.join("Library/Application Support"))
    } else {
        std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| home().map(|h| h.join(".local/share")))
    };
    base.unwrap_or_else(std::env::temp_dir).join("countersign")
}

/// Creates `data_dir` (and its parents) if needed, readable by this user only (0700), and
/// tightens an existing one: the ledger holds arguments, answers, results and the audit log.
/// A shared sticky directory (such as `/tmp`, if someone points `--data-dir` at it) is left as
/// it is: it is not ours to close, and the files inside are still created 0600.
pub fn prepare_data_dir(data_dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir)?;
        let mode = std::fs::metadata(data_dir)?.permissions().mode();
        let sticky = mode & 0o1000 != 0;
        if mode & 0o077 != 0 && !sticky {
            std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(mode & 0o7700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(data_dir)
    }
}

/// Makes `path` readable and writable by this user only (0600): created empty with that mode
/// when absent (so SQLite's `-wal` and `-shm`, which copy the main file's mode, follow), and
/// tightened by path when present.
///
/// Never open an existing SQLite file with `std::fs` here: closing any descriptor of a file
/// drops every POSIX lock this process holds on it, and another `Ledger` in this process (the
/// CLI opens one, then its engine opens another) would lose its locks. SQLite could then take
/// this process for gone and delete or reset a WAL that holds committed transactions.
pub(crate) fn private_file(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        match std::fs::metadata(path) {
            Ok(meta) => {
                let mode = meta.permissions().mode();
                if mode & 0o077 != 0 {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7700))?;
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Nobody in this process has it open yet: creating it here releases no lock.
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                {
                    Ok(_) => Ok(()),
                    // Another process created it meanwhile: tighten it like any existing file.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => private_file(path),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// What a write job sees: the transaction's connection and the events it appends.
pub struct WriteCtx<'c> {
    /// The connection, inside the batch transaction and the job's savepoint.
    pub conn: &'c Connection,
    appended: Vec<StoredEvent>,
}

impl WriteCtx<'_> {
    /// Appends an event to the timeline; it is published after the commit.
    pub fn append(&mut self, event: events::NewEvent) -> Result<StoredEvent> {
        let stored = events::insert(self.conn, event)?;
        self.appended.push(stored.clone());
        Ok(stored)
    }
}

/// How soon a write must reach the disk itself (not just the OS) once it is committed.
///
/// Every commit survives a killed process (WAL: the commit is in the file before the writer
/// replies). What differs is power loss or an OS crash: a [`Durability::Synced`] commit is
/// fsynced before anyone is told it happened; a [`Durability::Relaxed`] one is fsynced with the
/// next synced commit or WAL checkpoint, so the relaxed commits since then can be lost with the
/// machine. Only what can be learnt again may be relaxed: the engine's records
/// of what a server said (the next poll says it again). Task handles, call intents, answers,
/// cancels and audit records are synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsynced before the write's future resolves (`synchronous=FULL`).
    Synced,
    /// Committed (visible, survives a killed process) but fsynced later (`synchronous=NORMAL`).
    Relaxed,
}

type Finish = Box<dyn FnOnce(Option<&Error>) + Send>;
/// A job runs inside the batch (`Some` context) and says whether its writes stand, and how to
/// reply after commit; with `None` it is told the batch could not even begin, and only replies.
type Run = Box<dyn for<'c> FnOnce(Option<&mut WriteCtx<'c>>) -> (bool, Finish) + Send>;

/// One queued write.
struct Job {
    durability: Durability,
    run: Run,
}

/// Wraps a write closure as a batch job: it runs inside the batch, says whether its writes stand,
/// and hands its outcome to `reply` once the commit is known (a failed commit fails it too).
fn job<T, F>(durability: Durability, f: F, reply: impl FnOnce(Result<T>) + Send + 'static) -> Job
where
    T: Send + 'static,
    F: for<'c> FnOnce(&mut WriteCtx<'c>) -> Result<T> + Send + 'static,
{
    let run: Run = Box::new(move |ctx| {
        let outcome = ctx.map(f);
        let ok = matches!(outcome, Some(Ok(_)));
        let finish: Finish = Box::new(move |commit_error: Option<&Error>| {
            reply(match (outcome, commit_error) {
                (Some(Ok(_)) | None, Some(e)) => Err(Error::unwritable(e)),
                (Some(other), _) => other,
                // Never happens: a job that did not run is only finished with the reason.
                (None, None) => Err(Error::WriterGone),
            });
        });
        (ok, finish)
    });
    Job { durability, run }
}

/// The ledger: a writer thread, a reader connection and an event feed.
pub struct Ledger {
    path: PathBuf,
    inbox: Arc<Inbox>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    reader: Arc<Mutex<Connection>>,
    events: broadcast::Sender<StoredEvent>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("path", &self.path).finish()
    }
}

/// The file name of the ledger inside the data directory.
pub const LEDGER_FILE: &str = "ledger.sqlite3";

fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // FULL: a committed task handle survives power loss, not just a killed process.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Room for every statement of the hot paths (observations, a call's intent and task, the
    // change feed, the CLI's reads) so none is evicted and parsed again.
    conn.set_prepared_statement_cache_capacity(128);
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(Error::TooNew {
            found: version,
            known,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

impl Ledger {
    /// Opens (creating if needed) the ledger in `data_dir`, migrating it to this build's schema.
    pub fn open(data_dir: &Path) -> Result<Self> {
        prepare_data_dir(data_dir).map_err(|source| Error::Io {
            path: data_dir.to_owned(),
            source,
        })?;
        let path = data_dir.join(LEDGER_FILE);
        for file in [LEDGER_FILE, "ledger.sqlite3-wal", "ledger.sqlite3-shm"] {
            let file = data_dir.join(file);
            if file == path || file.exists() {
                private_file(&file).map_err(|source| Error::Io { path: file, source })?;
            }
        }
        let mut write_conn = open_connection(&path)?;
        migrate(&mut write_conn)?;
        let reader = open_connection(&path)?;
        let (events, _) = broadcast::channel(16_384);
        let inbox = Arc::new(Inbox::new(GROUP_WINDOW));
        let publisher = events.clone();
        let writer_inbox = Arc::clone(&inbox);
        let writer = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || writer_loop(write_conn, &writer_inbox, publisher))
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            path,
            inbox,
            writer: Mutex::new(Some(writer)),
            reader: Arc::new(Mutex::new(reader)),
            events,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Events committed by this process, in commit order.
    pub fn subscribe(&self) -> broadcast::Receiver<StoredEvent> {
        self.events.subscribe()
    }

    /// Queues `f` for the next write batch NOW (so writes keep the order of these calls) and
    /// returns a future that resolves after the batch commits and is fsynced
    /// ([`Durability::Synced`]).
    pub fn write<T, F>(&self, f: F) -> impl std::future::Future<Output = Result<T>> + Send + 'static
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&mut WriteCtx<'c>) -> Result<T> + Send + 'static,
    {
        self.write_with(Durability::Synced, f)
    }

    /// [`Ledger::write`] for what can be learnt again ([`Durability::Relaxed`]): such writes are
    /// grouped, so a burst of them costs one commit and no fsync of its own.
    pub fn write_relaxed<T, F>(
        &self,
        f: F,
    ) -> impl std::future::Future<Output = Result<T>> + Send + 'static
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&mut WriteCtx<'c>) -> Result<T> + Send + 'static,
    {
        self.write_with(Durability::Relaxed, f)
    }

    fn write_with<T, F>(
        &self,
        durability: Durability,
        f: F,
    ) -> impl std::future::Future<Output = Result<T>> + Send + 'static
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&mut WriteCtx<'c>) -> Result<T> + Send + 'static,
    {
        let (reply, done) = oneshot::channel::<Result<T>>();
        let submitted = self.submit(job(durability, f, move |outcome| {
            let _ = reply.send(outcome);
        }));
        async move {
            submitted?;
            done.await.map_err(|_| Error::WriterGone)?
        }
    }

    /// [`Ledger::write`] for synchronous callers (the CLI outside any runtime).
    pub fn write_blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&mut WriteCtx<'c>) -> Result<T> + Send + 'static,
    {
        let (reply, done) = std_mpsc::channel::<Result<T>>();
        self.submit(job(Durability::Synced, f, move |outcome| {
            let _ = reply.send(outcome);
        }))?;
        done.recv().map_err(|_| Error::WriterGone)?
    }

    fn submit(&self, job: Job) -> Result<()> {
        self.inbox.submit(job)
    }

    /// Runs a read on the reader connection (blocking; call from a blocking context or
    /// through [`Ledger::read_async`]).
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.reader.lock().map_err(|_| Error::WriterGone)?;
        f(&conn)
    }

    /// Runs a read on a blocking thread.
    pub async fn read_async<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            let conn = reader.lock().map_err(|_| Error::WriterGone)?;
            f(&conn)
        })
        .await
        .map_err(|_| Error::WriterGone)?
    }

    /// SQLite's `data_version`: changes when ANOTHER connection (e.g. the CLI in another process)
    /// commits. Cheap: no disk read.
    pub fn data_version(&self) -> Result<i64> {
        self.read(|conn| Ok(conn.pragma_query_value(None, "data_version", |r| r.get(0))?))
    }

    /// Waits until events after `cursor` exist (written by any process), then returns up to
    /// `limit` of them; empty after `timeout`. This process's commits wake the wait at once (the
    /// broadcast); other processes' are seen by reading again every `every`.
    pub async fn events_after(
        &self,
        cursor: i64,
        limit: usize,
        every: std::time::Duration,
        timeout: std::time::Duration,
    ) -> Result<Vec<StoredEvent>> {
        let now = tokio::time::Instant::now();
        // Checked: a caller's timeout too large for an `Instant` waits as long as one can.
        let deadline = now
            .checked_add(timeout)
            .or_else(|| now.checked_add(std::time::Duration::from_secs(3600)))
            .unwrap_or(now);
        // Subscribed before reading, so a commit between the read and the wait still wakes it.
        let mut wake = self.events.subscribe();
        loop {
            let batch = self
                .read_async(move |c| events::since(c, cursor, limit))
                .await?;
            let now = tokio::time::Instant::now();
            if !batch.is_empty() || now >= deadline {
                return Ok(batch);
            }
            let nap = every.min(deadline - now);
            tokio::select! {
                // Lagged or a commit: read again either way. Closed (the ledger is closing):
                // fall back to the timer.
                r = wake.recv() => if let Err(broadcast::error::RecvError::Closed) = r {
                    tokio::time::sleep(nap).await;
                },
                _ = tokio::time::sleep(nap) => {}
            }
        }
    }

    /// Stops the writer after it drains what is queued.
    pub fn close(&self) {
        self.inbox.close();
        if let Ok(mut writer) = self.writer.lock() {
            if let Some(handle) = writer.take() {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer's open transaction: committed by [`Batch::commit`], rolled back when dropped
/// uncommitted (a job's SQL failed, or the commit itself did), so nothing half-written stays.
struct Batch<'c>(&'c Connection);

impl Batch<'_> {
    fn commit(self) -> Result<()> {
        self.0.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            if let Err(e) = self.0.execute_batch("ROLLBACK") {
                tracing::error!(error = %e, "cannot roll back a failed ledger batch");
            }
        }
    }
}

impl std::ops::Deref for Batch<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.0
    }
}

/// Most jobs one transaction takes: bounds the latency of the first job in a burst.
const MAX_BATCH: usize = 512;

/// How long a batch of relaxed writes waits for more to join it, from its first job. Polls
/// that each find a change arrive spread over the interval when tasks were started one after
/// another (200 a second for 1,000 tasks at 5 s, one every 5 ms): a commit per change then
/// costs its WAL frames, locks and thread hand-offs alone, several times the cost of the poll.
/// Waiting this long puts about ten such changes in one commit, and delays what a server said
/// by at most this much on top of a poll interval of seconds. A synced write ends the wait at
/// once.
pub const GROUP_WINDOW: std::time::Duration = std::time::Duration::from_millis(50);

/// The writer's queue. Submitting wakes the writer only when it must act: when it is idle, or,
/// while it gathers relaxed writes, for a synced write or a full batch. A relaxed write joining
/// a gathering batch is a push under an uncontended lock, not a thread hand-off.
struct Inbox {
    state: Mutex<InboxState>,
    wake: Condvar,
    /// [`GROUP_WINDOW`], but for tests.
    window: std::time::Duration,
}

#[derive(Default)]
struct InboxState {
    jobs: VecDeque<Job>,
    /// Synced jobs among `jobs`.
    synced: usize,
    /// No more jobs are taken; the writer drains the queue and stops.
    closed: bool,
    waiting: Waiting,
}

/// What the writer is waiting for, which decides whether a new job wakes it.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// Committing, or about to look at the queue: it sees every job without being woken.
    #[default]
    Busy,
    /// An empty queue: any job.
    AnyJob,
    /// Relaxed jobs within the group window: a synced job or a full batch.
    SyncedOrFull,
}

impl Inbox {
    fn new(window: std::time::Duration) -> Self {
        Self {
            state: Mutex::default(),
            wake: Condvar::new(),
            window,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        // A panic while holding the lock leaves the queue consistent (pushes and pops only).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn submit(&self, job: Job) -> Result<()> {
        let mut state = self.lock();
        if state.closed {
            return Err(Error::WriterGone);
        }
        let synced = job.durability == Durability::Synced;
        state.synced += usize::from(synced);
        state.jobs.push_back(job);
        let wake = match state.waiting {
            Waiting::Busy => false,
            Waiting::AnyJob => true,
            Waiting::SyncedOrFull => synced || state.jobs.len() >= MAX_BATCH,
        };
        if wake {
            state.waiting = Waiting::Busy;
            drop(state);
            self.wake.notify_one();
        }
        Ok(())
    }

    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// The next batch: everything queued (at most [`MAX_BATCH`]), and while only relaxed
    /// writes are queued, whatever arrives within [`GROUP_WINDOW`] of the first. `None` once
    /// the inbox is closed and drained.
    fn next_batch(&self) -> Option<Vec<Job>> {
        let mut state = self.lock();
        while state.jobs.is_empty() {
            if state.closed {
                return None;
            }
            state.waiting = Waiting::AnyJob;
            state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let started = std::time::Instant::now();
        while state.synced == 0 && state.jobs.len() < MAX_BATCH && !state.closed {
            let Some(left) = self.window.checked_sub(started.elapsed()) else {
                break;
            };
            if left.is_zero() {
                break;
            }
            state.waiting = Waiting::SyncedOrFull;
            state = self
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state.waiting = Waiting::Busy;
        let take = state.jobs.len().min(MAX_BATCH);
        let batch: Vec<Job> = state.jobs.drain(..take).collect();
        let synced = batch
            .iter()
            .filter(|j| j.durability == Durability::Synced)
            .count();
        state.synced -= synced;
        Some(batch)
    }
}

fn writer_loop(conn: Connection, inbox: &Inbox, events: broadcast::Sender<StoredEvent>) {
    // The connection opens with FULL; switched only when the kind of batch changes.
    let mut current = Durability::Synced;
    while let Some(mut batch) = inbox.next_batch() {
        let wanted = if batch.iter().any(|j| j.durability == Durability::Synced) {
            Durability::Synced
        } else {
            Durability::Relaxed
        };
        let mut finishes: Vec<Finish> = Vec::with_capacity(batch.len());
        let mut appended = Vec::new();
        let commit = (|| -> Result<()> {
            if wanted != current {
                let level = match wanted {
                    Durability::Synced => "FULL",
                    Durability::Relaxed => "NORMAL",
                };
                match conn.pragma_update(None, "synchronous", level) {
                    Ok(()) => current = wanted,
                    // A relaxed batch under FULL is only slower; a synced one must not commit
                    // under NORMAL, so it fails (its callers retry) rather than lie.
                    Err(e) if wanted == Durability::Relaxed => {
                        tracing::warn!(error = %e, "cannot relax the ledger's sync level")
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            // The batch's transaction by hand, with cached statements: rusqlite's `Transaction`
            // parses BEGIN and COMMIT afresh for every batch, and when polls arrive one at a
            // time (a server whose tasks were created over seconds) every change is a batch.
            conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            let tx = Batch(&conn);
            for job in batch.drain(..) {
                // Two statements per job, every job: cached, not parsed afresh each time.
                tx.prepare_cached("SAVEPOINT job")?.execute([])?;
                let mut ctx = WriteCtx {
                    conn: &tx,
                    appended: Vec::new(),
                };
                let (ok, finish) = (job.run)(Some(&mut ctx));
                let job_events = std::mem::take(&mut ctx.appended);
                finishes.push(finish);
                if ok {
                    tx.prepare_cached("RELEASE job")?.execute([])?;
                    appended.extend(job_events);
                } else {
                    // The job failed: nothing half-written stays in the ledger.
                    tx.execute_batch("ROLLBACK TO job; RELEASE job")?;
                }
            }
            tx.commit()
        })();
        let error = commit.err();
        if let Some(e) = &error {
            tracing::warn!(error = %e, jobs = finishes.len() + batch.len(), "a ledger batch did not commit");
            // Jobs the failed transaction never reached are told why, rather than seeing their
            // reply channel close as if the writer had stopped.
            for job in batch.drain(..) {
                let (_, finish) = (job.run)(None);
                finishes.push(finish);
            }
        }
        for finish in finishes {
            finish(error.as_ref());
        }
        if error.is_none() {
            for event in appended {
                let _ = events.send(event);
            }
        }
    }
}

/// A fresh directory for a unit test's ledger: `countersign-<what>-<pid>-<nanos>` under the
/// system's temporary directory. For this crate's tests and those of the crates above it.
#[cfg(any(test, feature = "test-support"))]
pub fn scratch_dir(what: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("countersign-{what}-{}-{nanos}", std::process::id()))
}

#[cfg(test)]
mod inbox_tests {
    use super::*;

    fn relaxed() -> Job {
        job(Durability::Relaxed, |_| Ok(()), |_: Result<()>| {})
    }

    fn synced() -> Job {
        job(Durability::Synced, |_| Ok(()), |_: Result<()>| {})
    }

    fn kinds(batch: &[Job]) -> Vec<Durability> {
        batch.iter().map(|j| j.durability).collect()
    }

    /// `next_batch` on a thread of its own; its batch, or `None` if it is still waiting after
    /// 10 s (a wake-up that never came).
    fn gather(inbox: &Arc<Inbox>) -> std_mpsc::Receiver<Option<Vec<Job>>> {
        let (tx, rx) = std_mpsc::channel();
        let inbox = Arc::clone(inbox);
        std::thread::spawn(move || {
            let _ = tx.send(inbox.next_batch());
        });
        rx
    }

    fn wait_until_gathering(inbox: &Inbox, waiting: Waiting) {
        while inbox.lock().waiting != waiting {
            std::thread::yield_now();
        }
    }

    const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);
    const PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

    #[test]
    fn relaxed_writes_join_the_batch_until_a_synced_one_ends_the_wait() {
        let inbox = Arc::new(Inbox::new(HOUR));
        let batch = gather(&inbox);
        wait_until_gathering(&inbox, Waiting::AnyJob);
        inbox.submit(relaxed()).unwrap();
        wait_until_gathering(&inbox, Waiting::SyncedOrFull);
        inbox.submit(relaxed()).unwrap();
        inbox.submit(relaxed()).unwrap();
        assert!(batch.try_recv().is_err(), "relaxed writes keep gathering");
        inbox.submit(synced()).unwrap();
        let batch = batch.recv_timeout(PATIENCE).unwrap().unwrap();
        use Durability::*;
        assert_eq!(kinds(&batch), [Relaxed, Relaxed, Relaxed, Synced]);
        assert_eq!(inbox.lock().synced, 0);
    }

    #[test]
    fn a_full_batch_ends_the_wait_and_the_rest_waits_for_the_next() {
        let inbox = Arc::new(Inbox::new(HOUR));
        let batch = gather(&inbox);
        for _ in 0..MAX_BATCH + 3 {
            inbox.submit(relaxed()).unwrap();
        }
        let batch = batch.recv_timeout(PATIENCE).unwrap().unwrap();
        assert_eq!(batch.len(), MAX_BATCH);
        assert_eq!(inbox.lock().jobs.len(), 3);
    }

    #[test]
    fn a_synced_write_is_taken_at_once_with_what_is_queued_before_it() {
        let inbox = Arc::new(Inbox::new(HOUR));
        inbox.submit(relaxed()).unwrap();
        inbox.submit(synced()).unwrap();
        let batch = gather(&inbox).recv_timeout(PATIENCE).unwrap().unwrap();
        assert_eq!(kinds(&batch), [Durability::Relaxed, Durability::Synced]);
    }

    #[test]
    fn closing_ends_the_wait_then_the_writer_stops_once_drained() {
        let inbox = Arc::new(Inbox::new(HOUR));
        inbox.submit(relaxed()).unwrap();
        let batch = gather(&inbox);
        wait_until_gathering(&inbox, Waiting::SyncedOrFull);
        inbox.close();
        assert_eq!(batch.recv_timeout(PATIENCE).unwrap().unwrap().len(), 1);
        assert!(matches!(inbox.submit(relaxed()), Err(Error::WriterGone)));
        assert!(gather(&inbox).recv_timeout(PATIENCE).unwrap().is_none());
    }
}
