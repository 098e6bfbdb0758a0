//! The engine: resumes every unfinished task, applies what the status sources observe to the
//! ledger, and delivers queued answers and cancels.
//!
//! One loop owns all in-memory state; it reacts to
//! - observations from the status sources (polling, and push where the server offers it) →
//!   [`tracking::record`];
//! - finished deliveries (`tasks/update`, `tasks/cancel`) → outbox acknowledgements;
//! - the change feed: a nudge from this process, or a new SQLite `data_version` (another
//!   process, e.g. `countersign answer`, committed) checked every [`EngineConfig::change_feed`]
//!   → new tasks to watch and new outbox items to deliver.

pub mod lock;
mod observe;
mod outbox;
mod peers;
mod sign_in;
mod write;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch, Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::ledger::events::NewEvent;
use crate::ledger::servers::{self, ServerRecord};
use crate::ledger::tasks::{self, TaskRecord};
use crate::ledger::{intents, EventKind, Ledger, StoredEvent, Via};
use crate::mcp::{self, Client, ClientOptions, Endpoint, Era, Peer, PeerSignal};
use crate::sensitive::Sensitive;
use crate::status::poll::{PollSource, PollStats};
use crate::status::push::{PushConfig, PushSource, PushStats};
use crate::status::{FirstCheck, Links, Observation, ServerLink, StatusSource, Watch};
use crate::tracking::Known;
use lock::{EngineLock, LockError};
use outbox::Delivered;
pub use peers::make_peer;
use write::spawn_until_committed;

/// How often the engine looks for calls whose sending process died.
const ORPHAN_CHECK: Duration = Duration::from_secs(5);

/// Unfinished tasks read per page at resume.
const RESUME_PAGE: usize = 256;

/// First wait before a ledger write that did not commit is tried again (then backoff with
/// jitter). SQLite already waited its busy timeout inside the failed attempt.
const WRITE_RETRY: Duration = Duration::from_secs(1);

/// Whether the engine can record what it learns. While the ledger is unwritable (another process
/// holds the write lock, the disk is full) changes stay pending in memory and are retried; they
/// reach the ledger, in order, once a commit succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerHealth {
    /// Every change so far is committed (or on its way).
    Writable,
    /// Writes fail; `pending` tasks have a change waiting to be committed.
    Unwritable {
        /// Tasks with a change not yet committed.
        pending: usize,
        /// Why the last write failed.
        message: String,
    },
}

/// Supplies a server's bearer token (from the OS keyring in the app, the environment in the CLI).
pub type TokenProvider = Arc<dyn Fn(&ServerRecord) -> Option<Sensitive<String>> + Send + Sync>;

/// Reads a stdio server's secret environment values (these names) from the OS keyring. A
/// blocking call: run when a process starts, off the runtime's threads.
pub type EnvSecrets =
    Arc<dyn Fn(i64, &[String]) -> Result<Vec<(String, Sensitive<String>)>, String> + Send + Sync>;

/// What refreshing a server's refused token gave (see [`SignIns::refresh`]).
#[derive(Debug)]
pub enum Reauth {
    /// A new access token (already kept in the OS keyring): polling goes on with it.
    Token(Sensitive<String>),
    /// The token cannot be refreshed (refused, revoked, none to refresh with, signed out): a
    /// person must sign in again. The message names why, never a token.
    SignInNeeded(String),
    /// The authorization server could not be asked now: the polls back off and ask again.
    Later(String),
    /// The server has no OAuth sign-in but a static token it refuses: the polls fail
    /// `unauthorized` and back off, as for any refusal (a person replaces the token).
    NotSignedIn,
}

/// The engine's way to the OAuth sign-ins kept in the OS keyring (the console implements it):
/// it needs them when a server refuses a token and when another process signed in.
pub trait SignIns: Send + Sync {
    /// Refreshes server `server_id`'s token after the server refused `refused` (the token the
    /// engine sent). Single-flight per server; a token already replaced since is returned as is.
    fn refresh(
        &self,
        server_id: i64,
        url: String,
        refused: Option<Sensitive<String>>,
    ) -> futures_util::future::BoxFuture<'static, Reauth>;
    /// Reads server `server_id` (at `url`)'s token from the OS keyring again (a sign-in or
    /// sign-out elsewhere changed it), so that clients built from now on carry it, and keeps a
    /// new sign-in fresh.
    fn reload(&self, server_id: i64, url: String) -> futures_util::future::BoxFuture<'static, ()>;
}

/// Engine settings.
#[derive(Clone)]
pub struct EngineConfig {
    /// Where the ledger lives.
    pub data_dir: PathBuf,
    /// The user's global minimum poll interval (per-server floors add to it).
    pub poll_floor: Duration,
    /// Concurrent requests per server.
    pub per_server_concurrency: usize,
    /// How often the change feed checks for other processes' writes.
    pub change_feed: Duration,
    /// Tokens for servers that need them.
    pub tokens: Option<TokenProvider>,
    /// Secret environment values of stdio servers.
    pub env_secrets: Option<EnvSecrets>,
    /// HTTP client settings.
    pub client: ClientOptions,
    /// Receive task changes over `subscriptions/listen` where a server offers it (polling goes
    /// on at a safety-net rate for pushed tasks, and at the normal rate everywhere else).
    pub push: bool,
    /// Push tuning (stream grouping, coalescing, timeouts).
    pub push_config: PushConfig,
    /// OAuth sign-ins: refresh on `401`, "sign-in needed", reload after a sign-in elsewhere.
    /// Without it a refused token is an `unauthorized` poll failure like any other.
    pub sign_ins: Option<Arc<dyn SignIns>>,
}

impl EngineConfig {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            poll_floor: Duration::ZERO,
            per_server_concurrency: 32,
            change_feed: Duration::from_millis(250),
            tokens: None,
            env_secrets: None,
            client: ClientOptions::default(),
            push: true,
            push_config: PushConfig::default(),
            sign_ins: None,
        }
    }
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("data_dir", &self.data_dir)
            .field("poll_floor", &self.poll_floor)
            .field("push", &self.push)
            .finish_non_exhaustive()
    }
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another engine runs on this ledger.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] crate::ledger::Error),
}

/// Rebuilds the engine's clients on its next scan (see [`Engine::link_reloader`]).
#[derive(Clone)]
pub struct LinkReloader {
    flag: Arc<std::sync::atomic::AtomicBool>,
    nudge: Arc<Notify>,
    links: Links,
}

impl LinkReloader {
    /// Gives the server's current client a new bearer token at once (its clones share it), so
    /// no poll goes out with a token the server has already replaced (an OAuth refresh may
    /// revoke the old access token the moment it issues the new one).
    pub fn set_token(&self, server_id: i64, token: Sensitive<String>) {
        if let Some(link) = self.links.get(server_id) {
            link.peer.set_bearer_token(Some(token));
        }
    }

    /// As [`Engine::reload_links`].
    pub fn reload(&self) {
        self.flag.store(true, std::sync::atomic::Ordering::SeqCst);
        self.nudge.notify_one();
    }
}

/// A running engine. Dropping it stops the loop; [`Engine::shutdown`] waits for it.
pub struct Engine {
    ledger: Arc<Ledger>,
    nudge: Arc<Notify>,
    stop: Arc<Notify>,
    poll: Arc<PollSource>,
    push: Option<Arc<PushSource>>,
    links: Links,
    config: EngineConfig,
    loop_handle: Option<JoinHandle<()>>,
    resumed: usize,
    reload_links: Arc<std::sync::atomic::AtomicBool>,
    health: watch::Receiver<LedgerHealth>,
    _lock: EngineLock,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("ledger", &self.ledger)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Takes the engine lock, opens the ledger and resumes every unfinished task.
    pub async fn start(config: EngineConfig) -> Result<Self, Error> {
        let lock = EngineLock::acquire_creating(&config.data_dir)?;
        let ledger = Arc::new(Ledger::open(&config.data_dir)?);
        // What a killed engine's stdio servers started and left running ends now.
        tokio::task::spawn_blocking(|| {
            let swept = mcp::stdio::sweep_orphans();
            if swept > 0 {
                tracing::info!(
                    swept,
                    "ended processes a killed engine's stdio servers left"
                );
            }
        });
        let links = Links::default();
        let (obs_tx, obs_rx) = mpsc::unbounded_channel();
        let poll = Arc::new(PollSource::start(links.clone(), obs_tx.clone()));
        let push = config.push.then(|| {
            Arc::new(PushSource::with_config(
                links.clone(),
                obs_tx,
                poll.clone(),
                config.push_config.clone(),
            ))
        });
        let mut sources = vec![poll.clone() as Arc<dyn StatusSource>];
        if let Some(push) = &push {
            sources.push(push.clone() as Arc<dyn StatusSource>);
        }
        let nudge = Arc::new(Notify::new());
        let stop = Arc::new(Notify::new());

        let reload_links = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (health_tx, health) = watch::channel(LedgerHealth::Writable);
        let (reauth_tx, reauth_rx) = mpsc::unbounded_channel();
        let (signal_tx, signal_rx) = mpsc::unbounded_channel();
        let mut state = State {
            nudge: nudge.clone(),
            reprobed: HashMap::new(),
            legacy_pushed: HashSet::new(),
            poll: poll.clone(),
            signals: signal_tx,
            ledger: ledger.clone(),
            links: links.clone(),
            config: config.clone(),
            sources,
            tracked: HashMap::new(),
            task_cursor: 0,
            outbox_cursor: 0,
            delivering: HashSet::new(),
            unreachable: HashSet::new(),
            servers_seen: Vec::new(),
            reload_links: reload_links.clone(),
            written: write::Pending::default(),
            unwritten: HashSet::new(),
            health: health_tx,
            sign_in_needed: HashSet::new(),
            reauthorizing: HashSet::new(),
            plain_refusals: HashSet::new(),
            held_refusals: HashMap::new(),
            reauthed: reauth_tx,
            signed_in_cursor: 0,
        };
        let resumed = state.resume().await?;
        let loop_handle =
            tokio::spawn(state.run(obs_rx, reauth_rx, signal_rx, nudge.clone(), stop.clone()));
        Ok(Self {
            ledger,
            nudge,
            stop,
            poll,
            push,
            links,
            config,
            loop_handle: Some(loop_handle),
            resumed,
            reload_links,
            health,
            _lock: lock,
        })
    }

    /// The ledger (shared with the engine's loop).
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// Events as they are committed.
    pub fn subscribe(&self) -> broadcast::Receiver<StoredEvent> {
        self.ledger.subscribe()
    }

    /// Rebuilds every server's client on the next scan (e.g. a token was replaced in the
    /// keyring, which the ledger does not see), and scans now.
    pub fn reload_links(&self) {
        self.reload_links
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.nudge.notify_one();
    }

    /// A handle that does [`Engine::reload_links`] from another task (e.g. after a token
    /// refresh), without holding the engine.
    pub fn link_reloader(&self) -> LinkReloader {
        LinkReloader {
            flag: self.reload_links.clone(),
            nudge: self.nudge.clone(),
            links: self.links.clone(),
        }
    }

    /// Tells the engine this process wrote something it should act on now.
    pub fn nudge(&self) {
        self.nudge.notify_one();
    }

    /// How many unfinished tasks were resumed at start.
    pub fn resumed(&self) -> usize {
        self.resumed
    }

    /// Whether what the engine learns reaches the ledger; changes when writes start or stop
    /// failing (a front end shows it: nothing else can, while the ledger cannot take events).
    pub fn ledger_health(&self) -> watch::Receiver<LedgerHealth> {
        self.health.clone()
    }

    /// Poll counters.
    pub fn poll_stats(&self) -> PollStats {
        self.poll.stats()
    }

    /// Push counters (all zero when push is off).
    pub fn push_stats(&self) -> PushStats {
        self.push.as_ref().map(|p| p.stats()).unwrap_or_default()
    }

    /// A modern client for a registered server (with its token), sharing the engine's
    /// connection pool.
    pub fn client_for(&self, server: &ServerRecord) -> Result<Client, mcp::Error> {
        match self.links.get(server.id) {
            Some(link) if link.peer.url() == server.url => match link.peer.modern() {
                Some(client) => Ok(client.clone()),
                None => make_client(server, &self.config),
            },
            _ => make_client(server, &self.config),
        }
    }

    /// The server's peer as the engine uses it (for a legacy server: the engine's session and
    /// the questions it holds).
    pub fn peer_for(&self, server: &ServerRecord) -> Result<Peer, mcp::Error> {
        // A modern client holds nothing but its token: a fresh one carries the token as it is
        // now (a sign-in a moment ago included), which the engine's link may not have yet.
        let shared = server.is_stdio() || server.era == Some(Era::Legacy);
        match self.links.get(server.id) {
            Some(link) if shared && link.peer.url() == server.url => {
                if let Some(token) = self.config.tokens.as_ref().and_then(|t| t(server)) {
                    link.peer.set_bearer_token(Some(token));
                }
                Ok(link.peer)
            }
            _ => make_peer(server, &self.config, &self.ledger, None),
        }
    }

    /// Stops the loop and waits for it; queued ledger writes are flushed.
    pub async fn shutdown(mut self) {
        self.stop.notify_one();
        if let Some(handle) = self.loop_handle.take() {
            let _ = handle.await;
        }
        self.ledger.close();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(handle) = self.loop_handle.take() {
            handle.abort();
        }
    }
}

/// Builds the client for a server from its record and the engine settings.
pub fn make_client(server: &ServerRecord, config: &EngineConfig) -> Result<Client, mcp::Error> {
    let token = config.tokens.as_ref().and_then(|t| t(server));
    Client::with_options(
        Endpoint::new(server.url.clone()).with_token(token),
        config.client.clone(),
        None,
    )
}

struct Tracked {
    server_id: i64,
    task_id: String,
    known: Known,
    failures: u32,
    ttl_ms: Option<u64>,
    /// Wall-clock Unix ms after which the server may have discarded the task.
    expires_at: Option<i64>,
    /// The newest `lastUpdatedAt` applied (see [`Tracked::is_stale`]).
    last_updated: Option<time::OffsetDateTime>,
    /// A write of this task's change is in flight or waiting to be retried: `known` and
    /// `failures` still describe what is committed, and observations wait in `next`.
    writing: bool,
    /// The newest observation that arrived while writing (older ones are superseded by it).
    next: Option<Observation>,
    /// Failed write attempts in a row (for the retry backoff).
    write_failures: u32,
}

/// How far back a `lastUpdatedAt` may be and still count as a race rather than a server clock
/// that stepped back (which must not freeze the task until the clock catches up).
const STALE_WINDOW: time::Duration = time::Duration::minutes(5);

impl Tracked {
    /// Whether `task` is older than a state already applied. Two sources race: a poll answered
    /// just before a change can reach the engine after the pushed change (and during a stream
    /// switch the old and new stream can interleave), and applying it would roll the timeline
    /// back. Records the newest stamp otherwise.
    fn is_stale(&mut self, task: &mcp::Task) -> bool {
        let Some(at) = task.last_updated_at.as_deref().and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        }) else {
            return false;
        };
        match self.last_updated {
            Some(last) if at < last && last - at <= STALE_WINDOW => true,
            Some(last) if at < last => {
                self.last_updated = Some(at); // the server's clock stepped back: follow it
                false
            }
            _ => {
                self.last_updated = Some(at);
                false
            }
        }
    }
}

/// What committing an observation changes in memory: applied only once the write commits, so a
/// change that fails to commit is still a change at the next attempt.
struct Applied {
    known: Option<Known>,
    ttl_ms: Option<u64>,
    failures: u32,
    /// The task is finished (or concluded): stop tracking it once committed.
    done: bool,
    server: ServerChange,
}

/// A server's reachability, changed in memory when a write is planned (so other tasks of the
/// server do not record it again) and undone if that write fails.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ServerChange {
    None,
    Recovered,
    Down,
}

struct State {
    ledger: Arc<Ledger>,
    /// The polling source (also among `sources`), for a poll a legacy peer's signal asks for.
    poll: Arc<PollSource>,
    /// Where legacy peers signal changes between polls, by server.
    signals: mpsc::UnboundedSender<(i64, PeerSignal)>,
    /// Wakes the loop's scan (after a re-probe recorded a new era).
    nudge: Arc<Notify>,
    /// Legacy servers whose GET stream is open: their tasks are polled at the safety-net rate.
    legacy_pushed: HashSet<i64>,
    /// When each server's era was last probed again after a failure that may mean it changed.
    reprobed: HashMap<i64, tokio::time::Instant>,
    links: Links,
    config: EngineConfig,
    sources: Vec<Arc<dyn StatusSource>>,
    tracked: HashMap<i64, Tracked>,
    task_cursor: i64,
    outbox_cursor: i64,
    delivering: HashSet<i64>,
    unreachable: HashSet<i64>,
    servers_seen: Vec<(i64, String, u64, bool, Option<Era>)>,
    /// Set by [`Engine::reload_links`]: rebuild every client on the next scan.
    reload_links: Arc<std::sync::atomic::AtomicBool>,
    /// Observation writes in flight, and retries waiting for their backoff.
    written: write::Pending,
    /// Tasks whose last write failed and waits to be retried.
    unwritten: HashSet<i64>,
    health: watch::Sender<LedgerHealth>,
    /// Servers waiting for a person to sign in again: their tasks stay tracked but unwatched
    /// (no request goes out with a token the server refuses) until a `signed_in` event.
    sign_in_needed: HashSet<i64>,
    /// Servers whose refused token is being refreshed (one refresh at a time per server).
    reauthorizing: HashSet<i64>,
    /// Servers whose refusals a refresh cannot help (a static token, or the authorization
    /// server unreachable): recorded as `poll_failed` like any failure, until a poll succeeds.
    plain_refusals: HashSet<i64>,
    /// The refused polls that started a server's refresh, held until it ends: if the refusal
    /// turns out plain (a static token, or the authorization server unreachable) they are
    /// recorded then, so the first refusal of a streak is on the timeline too.
    held_refusals: HashMap<i64, Vec<Observation>>,
    /// Where refreshes report back to the loop.
    reauthed: mpsc::UnboundedSender<(i64, Reauth)>,
    /// The last `signed_in` event acted on.
    signed_in_cursor: i64,
}

fn expires_at(record: &TaskRecord) -> Option<i64> {
    let ttl = crate::ledger::tasks::sql_ms(record.ttl_ms?);
    let created = record
        .created_text
        .as_deref()
        .and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        })
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .unwrap_or(record.created_at);
    Some(created.saturating_add(ttl))
}

impl State {
    async fn resume(&mut self) -> Result<usize, Error> {
        self.conclude_orphaned_calls().await?;
        self.refresh_links().await?;
        // An outage still open when the last engine died stays open until a server answers.
        let reachability = self
            .ledger
            .read_async(crate::ledger::events::reachability)
            .await?;
        self.unreachable.extend(
            reachability
                .into_iter()
                .filter(|r| !r.reachable)
                .map(|r| r.server_id),
        );
        // A server that needed a sign-in when the last engine stopped still does, unless a
        // `signed_in` came after: its tasks wait, unpolled.
        let (sign_ins, last_event) = self
            .ledger
            .read_async(|c| {
                Ok((
                    crate::ledger::events::sign_in_states(c)?,
                    crate::ledger::events::last_id(c)?,
                ))
            })
            .await?;
        self.signed_in_cursor = last_event;
        if self.config.sign_ins.is_some() {
            self.sign_in_needed.extend(
                sign_ins
                    .into_iter()
                    .filter(|s| s.needed.is_some())
                    .map(|s| s.server_id),
            );
        }
        // Page by page: a whole ledger of records (with their last states) held at once was
        // resume's memory peak, above the steady state's.
        let mut resumed = 0;
        let mut after = 0;
        loop {
            let page = self
                .ledger
                .read_async(move |c| tasks::unfinished_page(c, after, RESUME_PAGE))
                .await?;
            let Some(last) = page.last() else { break };
            after = last.id;
            let full = page.len() == RESUME_PAGE;
            resumed += page.len();
            for record in page {
                self.track(record, FirstCheck::Spread);
            }
            if !full {
                break;
            }
        }
        self.ledger
            .write(move |ctx| {
                ctx.append(NewEvent {
                    task: None,
                    server_id: None,
                    via: Via::Engine,
                    kind: EventKind::EngineStarted { resumed },
                })?;
                Ok(())
            })
            .await?;
        Ok(resumed)
    }

    fn track(&mut self, record: TaskRecord, first: FirstCheck) {
        self.task_cursor = self.task_cursor.max(record.id);
        if record.status.is_finished() || self.tracked.contains_key(&record.id) {
            return;
        }
        let known = record.task().map(|t| Known::of(&t)).unwrap_or(Known {
            status: record.status,
            message: record.status_message.clone(),
            keys: Vec::new(),
        });
        let watch = Watch {
            task: record.id,
            server_id: record.server_id,
            task_id: record.task_id.clone(),
            poll_interval_ms: record.poll_interval_ms,
            first,
        };
        self.tracked.insert(
            record.id,
            Tracked {
                server_id: record.server_id,
                task_id: record.task_id.clone(),
                known,
                // A polling error stored by an earlier engine is a streak still open (the process
                // died during it): the next good answer closes it with `poll_recovered`.
                failures: u32::from(record.poll_error.is_some()),
                ttl_ms: record.ttl_ms,
                expires_at: expires_at(&record),
                last_updated: None,
                writing: false,
                next: None,
                write_failures: 0,
            },
        );
        if self.sign_in_needed.contains(&record.server_id) {
            return; // watched once a person signs in again
        }
        for source in &self.sources {
            source.watch(watch.clone());
        }
        if self.legacy_pushed.contains(&record.server_id) {
            self.poll.cover(record.id, true);
        }
    }

    fn untrack(&mut self, task: i64) {
        self.tracked.remove(&task);
        if self.unwritten.remove(&task) {
            self.report_health(None);
        }
        self.unwatch(task);
    }

    /// Stops every source from checking `task` (which stays tracked until its last write commits).
    fn unwatch(&self, task: i64) {
        for source in &self.sources {
            source.unwatch(task);
        }
    }

    /// Re-reads the servers table and the person's poll floor (settings) and (re)builds links
    /// whose URL, floor or token changed: a new floor holds from each task's next interval.
    async fn refresh_links(&mut self) -> Result<(), Error> {
        let (servers, stored) = self
            .ledger
            .read_async(|c| Ok((servers::list(c)?, crate::ledger::settings::all(c)?)))
            .await?;
        // A bad stored value reads as its default here; the console logs it where it is read.
        let global = crate::settings::Settings::from_rows(&stored).0.poll_floor();
        let base = self.config.poll_floor.max(global);
        let floor = move |server_ms: u64| base.max(Duration::from_millis(server_ms));
        let seen: Vec<(i64, String, u64, bool, Option<Era>)> = servers
            .iter()
            .map(|s| {
                let ms = floor(s.poll_floor_ms).as_millis() as u64;
                (s.id, s.url.clone(), ms, s.has_token, s.era)
            })
            .collect();
        let forced = self
            .reload_links
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        if seen == self.servers_seen && !forced {
            return Ok(());
        }
        self.servers_seen = seen;
        let ids: HashSet<i64> = servers.iter().map(|s| s.id).collect();
        for gone in self.links.ids().into_iter().filter(|id| !ids.contains(id)) {
            self.links.remove(gone);
            let orphans: Vec<i64> = self
                .tracked
                .iter()
                .filter(|(_, t)| t.server_id == gone)
                .map(|(id, _)| *id)
                .collect();
            for task in orphans {
                self.untrack(task);
            }
        }
        for server in servers {
            // A legacy peer holds its session's open questions: kept across a refresh (a new
            // token is handed to it), rebuilt only when the server's URL or era changed.
            if let Some(link) = self.links.get(server.id) {
                if let Peer::Legacy(peer) = &link.peer {
                    let legacy = server.era == Some(Era::Legacy) || server.is_stdio();
                    if legacy && peer.url() == server.url {
                        let token = self.config.tokens.as_ref().and_then(|t| t(&server));
                        peer.set_bearer_token(token);
                        self.links.set(
                            server.id,
                            ServerLink {
                                floor: floor(server.poll_floor_ms),
                                ..link
                            },
                        );
                        continue;
                    }
                }
            }
            // The old peer's stream goes with it: its tasks are polled at their own pace again.
            self.legacy_stream(server.id, false);
            match make_peer(
                &server,
                &self.config,
                &self.ledger,
                Some(self.signals.clone()),
            ) {
                Ok(peer) => self.links.set(
                    server.id,
                    ServerLink {
                        peer,
                        floor: floor(server.poll_floor_ms),
                        permits: Arc::new(Semaphore::new(
                            self.config.per_server_concurrency.max(1),
                        )),
                    },
                ),
                Err(e) => {
                    tracing::warn!(server = %server.name, error = %e, "cannot build a client for server")
                }
            }
        }
        Ok(())
    }

    /// Calls whose sending process died before the answer arrived: their outcome is unknown.
    /// A call still in flight in a live process (another CLI, this app) is left alone.
    async fn conclude_orphaned_calls(&self) -> Result<(), Error> {
        let orphans: Vec<_> = self
            .ledger
            .read_async(intents::in_flight)
            .await?
            .into_iter()
            .filter(|intent| !intents::owner_alive(intent))
            .collect();
        if orphans.is_empty() {
            return Ok(());
        }
        self.ledger
            .write(move |ctx| {
                for intent in orphans {
                    if intents::conclude_unknown(ctx.conn, intent.id)? {
                        ctx.append(NewEvent {
                            task: None,
                            server_id: Some(intent.server_id),
                            via: Via::Engine,
                            kind: EventKind::CallOutcomeUnknown {
                                intent: intent.id,
                                tool: intent.tool,
                            },
                        })?;
                    }
                }
                Ok(())
            })
            .await?;
        Ok(())
    }

    async fn run(
        mut self,
        mut observations: mpsc::UnboundedReceiver<Observation>,
        mut reauthed: mpsc::UnboundedReceiver<(i64, Reauth)>,
        mut signals: mpsc::UnboundedReceiver<(i64, PeerSignal)>,
        nudge: Arc<Notify>,
        stop: Arc<Notify>,
    ) {
        let (delivered_tx, mut delivered_rx) = mpsc::unbounded_channel::<Delivered>();
        let mut feed = tokio::time::interval(self.config.change_feed);
        feed.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut data_version = self.ledger.data_version().unwrap_or(0);
        // A caller in another process may die mid-call while we run: look for orphans now and then.
        let mut orphan_check = tokio::time::interval(ORPHAN_CHECK);
        orphan_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Deliver whatever a previous process left undelivered.
        self.scan(&delivered_tx).await;
        loop {
            tokio::select! {
                biased;
                _ = stop.notified() => break,
                // Before new observations: a commit frees its task for the next change.
                outcome = self.written.next() => self.written(outcome),
                Some(observation) = observations.recv() => self.observe(observation),
                Some(delivered) = delivered_rx.recv() => self.delivered(delivered),
                Some((server_id, outcome)) = reauthed.recv() => self.reauthed(server_id, outcome),
                Some((server_id, signal)) = signals.recv() => self.peer_signal(server_id, signal),
                _ = nudge.notified() => self.scan(&delivered_tx).await,
                _ = orphan_check.tick() => {
                    if let Err(e) = self.conclude_orphaned_calls().await {
                        tracing::warn!(error = %e, "cannot check for orphaned calls");
                    }
                }
                _ = feed.tick() => {
                    let now = self.ledger.data_version().unwrap_or(data_version);
                    if now != data_version {
                        data_version = now;
                        self.scan(&delivered_tx).await;
                    }
                }
            }
        }
    }
}
