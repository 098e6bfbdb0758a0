//! The console: what a person does with Countersign, once, for every face. The desktop shell, the
//! CLI and the test rigs hold a [`Console`] and call it; none of them writes the ledger, reads
//! the keyring or builds a server client on its own.
//!
//! A console owns:
//! - the ledger handle and "engine here or elsewhere": one engine per ledger (`engine.lock`); when
//!   another process runs it, the console still reads and records, and that engine delivers;
//! - each server's token, read from and written to the OS keyring ([`Tokens`]), never another
//!   server's;
//! - every action (add/update/check/remove a server, call, answer, cancel, adopt), validated here
//!   and recorded through [`crate::actions`] (intent, audit record, event) before anything is sent;
//! - the calls waiting for their questions (MRTR) to be answered, bounded in rounds;
//! - the views every face shows ([`view`], built by [`present`]).
//!
//! Press Approve in the app, or run `countersign answer`: both end in [`Console::answer`], which
//! records the answer (question state, audit, outbox item, `input_answered`) in one synced
//! transaction and nudges the engine, which delivers it with `tasks/update`.

pub mod feed;
pub mod gateway;
pub mod link;
pub mod notifications;
pub mod present;
mod settings;
mod sign_ins;
mod signing_in;
pub mod view;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use crate::actions::{self, Called};
use crate::engine::lock::LockError;
use crate::engine::{self, Engine, EngineConfig};
use crate::ledger::events;
use crate::ledger::servers::{self, ServerRecord};
use crate::ledger::tasks::{self, TaskRecord};
use crate::ledger::{self, audit, inputs, Ledger};
use crate::mcp::{self, Client, ErrorClass, InputRequired, TaskState, ToolCall, ToolResult};
use crate::secrets::{self, Secrets, Tokens};

use view::{
    AuditEntry, AuditExport, AuditFormat, CallAnswer, CallQuestion, CommandError, EngineState,
    ErrorCode, EventView, InputRequestView, InputResponse, ServerAddRequest, ServerUpdateRequest,
    ServerView, TaskDetail, TaskView, TokenChange, ToolCallOutcome, ToolView,
};

/// Why a console action failed: one variant per thing a face tells apart.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What the person gave cannot be used (empty name, duplicate, empty task id, bad URL).
    #[error("{0}")]
    Invalid(String),
    /// No such server, task, question or call.
    #[error("{0} not found")]
    NotFound(String),
    /// The question was answered already (here, from a notification, by another process) or
    /// the server withdrew it.
    #[error("{0}")]
    AlreadyAnswered(String),
    /// The server kept answering a call with questions after every round of answers: the tool
    /// never ran.
    #[error("the server still asks questions after {rounds} rounds of answers to {tool}; giving up (the tool did not run)")]
    TooManyRounds {
        /// The tool called.
        tool: String,
        /// The rounds answered, [`mcp::MAX_MRTR_ROUNDS`].
        rounds: usize,
    },
    /// The server could not be reached or spoke wrongly.
    #[error(transparent)]
    Server(#[from] mcp::Error),
    /// The server answered in a way the ledger must refuse (a reused task id).
    #[error(transparent)]
    Refused(actions::Error),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] ledger::Error),
    /// The OS keyring is missing, locked or refused; tokens are never kept anywhere else.
    #[error("{0}; tokens are kept only in the OS keyring, never in a file")]
    Keyring(#[from] secrets::Error),
    /// The engine could not start.
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// Signing in to an OAuth-protected server failed (the message names the step; no secret).
    #[error(transparent)]
    SignIn(#[from] crate::auth::SessionError),
    /// A `countersign://` link that cannot be opened.
    #[error(transparent)]
    Link(#[from] link::LinkError),
    /// A setting that cannot be used as given (the error names the setting).
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    /// The person stopped the check before the server answered ([`Console::cancel_checks`]).
    #[error("stopped before the server answered")]
    Cancelled,
    /// A file the person asked for could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl From<actions::Error> for Error {
    fn from(e: actions::Error) -> Self {
        match e {
            actions::Error::Ledger(ledger::Error::NotFound(what)) => Self::NotFound(what),
            actions::Error::Ledger(e) => Self::Ledger(e),
            actions::Error::Mcp(e) => Self::Server(e),
            actions::Error::Invalid(why) => Self::Invalid(why),
            e @ actions::Error::TaskIdReused { .. } => Self::Refused(e),
        }
    }
}

impl Error {
    /// The code a window branches on.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Invalid(_)
            | Self::Link(_)
            | Self::Settings(_)
            | Self::Ledger(ledger::Error::Conflict(_) | ledger::Error::Invalid(_)) => {
                ErrorCode::InvalidInput
            }
            Self::Server(mcp::Error::InvalidUrl { .. } | mcp::Error::InvalidRequest(_)) => {
                ErrorCode::InvalidInput
            }
            Self::NotFound(_) | Self::Ledger(ledger::Error::NotFound(_)) => ErrorCode::NotFound,
            Self::AlreadyAnswered(_) => ErrorCode::AlreadyAnswered,
            Self::Server(e) if e.class() == ErrorClass::Transient => ErrorCode::Unavailable,
            Self::Server(_) | Self::Refused(_) | Self::TooManyRounds { .. } => ErrorCode::Server,
            Self::Keyring(_) => ErrorCode::Keyring,
            // Reaching the authorization server failed: trying again may work.
            Self::SignIn(crate::auth::SessionError::Mcp(e))
                if e.class() == ErrorClass::Transient =>
            {
                ErrorCode::Unavailable
            }
            Self::SignIn(crate::auth::SessionError::Mcp(_)) => ErrorCode::Server,
            Self::SignIn(crate::auth::SessionError::Auth(
                crate::auth::Error::Transport { .. } | crate::auth::Error::TokenRequest { .. },
            )) => ErrorCode::Unavailable,
            Self::SignIn(_) => ErrorCode::SignIn,
            Self::Cancelled => ErrorCode::Cancelled,
            Self::Ledger(_) | Self::Engine(_) | Self::Write { .. } => ErrorCode::Internal,
        }
    }
}

impl From<Error> for CommandError {
    fn from(e: Error) -> Self {
        let diagnosis = match &e {
            Error::Server(server) => Some(crate::diagnosis::diagnose(server.url(), server)),
            _ => None,
        };
        let field = match &e {
            Error::Settings(mistake) => mistake.key(),
            _ => None,
        };
        CommandError {
            diagnosis,
            field,
            ..CommandError::new(e.code(), e.to_string())
        }
    }
}

/// Who Countersign is when it signs in, when the person says (else: a dynamic registration
/// where the authorization server offers one).
#[derive(Debug, Clone, Default)]
pub struct SignInClient {
    /// A client id the person registered with the authorization server themselves.
    pub client_id: Option<String>,
    /// Its secret, for a confidential client (kept in the OS keyring with the sign-in only).
    pub client_secret: Option<crate::sensitive::Sensitive<String>>,
    /// The URL where our client ID metadata document is published, used where the
    /// authorization server supports them.
    pub metadata_document_url: Option<String>,
    /// A fixed loopback port for the redirect URI, for a client registered with an exact
    /// redirect URI (`http://127.0.0.1:{port}/callback`).
    pub redirect_port: Option<u16>,
}

impl SignInClient {
    /// The checked client configuration: a non-empty client id (a secret needs one), and a
    /// metadata document URL that is `https` (or `http` on a loopback host, for testing) with
    /// a path, as client ID metadata documents must be.
    pub fn config(&self) -> Result<crate::auth::ClientConfig> {
        let client_id = self.client_id.as_deref().map(str::trim);
        if client_id == Some("") {
            return Err(Error::Invalid("the client id is empty".into()));
        }
        if self.client_secret.is_some() && client_id.is_none() {
            return Err(Error::Invalid(
                "a client secret needs the client id it belongs to".into(),
            ));
        }
        if let Some(url) = &self.metadata_document_url {
            let parsed = url::Url::parse(url.trim()).map_err(|e| {
                Error::Invalid(format!("the client metadata document URL {url:?}: {e}"))
            })?;
            let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
            let scheme_ok = parsed.scheme() == "https" || (parsed.scheme() == "http" && loopback);
            if !scheme_ok || parsed.path() == "/" || parsed.path().is_empty() {
                return Err(Error::Invalid(format!(
                    "the client metadata document URL must be https with a path: {url}"
                )));
            }
        }
        if self.redirect_port == Some(0) {
            return Err(Error::Invalid(
                "the redirect port must be a port number from 1 to 65535".into(),
            ));
        }
        Ok(crate::auth::ClientConfig {
            redirect_port: self.redirect_port,
            metadata_document_url: self
                .metadata_document_url
                .as_ref()
                .map(|u| u.trim().to_owned()),
            pre_registered: client_id.map(|id| crate::auth::PreRegistered {
                issuer: None,
                client_id: id.to_owned(),
                client_secret: self.client_secret.clone(),
            }),
            ..crate::auth::ClientConfig::default()
        })
    }
}

/// Result of a console action.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// When the console starts the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At [`Console::open`] (the app: it polls and notifies for as long as it runs).
    Now,
    /// On the first [`Console::ensure_engine`] (the CLI: `tasks list` needs no engine).
    WhenNeeded,
}

/// Something a person should know that does not stop the action (a token that cannot be read).
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;

/// How to open a console.
pub struct Setup {
    /// The engine's settings (data directory, client timeouts, push, floors). The console sets
    /// `tokens` itself.
    pub config: EngineConfig,
    /// The OS keyring.
    pub secrets: Secrets,
    /// When the engine starts.
    pub start: Start,
    /// Where warnings go besides the log (the CLI prints them on stderr).
    pub warn: Option<Warn>,
}

impl Setup {
    /// Defaults for a data directory: the platform keyring, the engine when needed.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            config: EngineConfig::new(data_dir),
            secrets: Secrets::default(),
            start: Start::WhenNeeded,
            warn: None,
        }
    }
}

/// Why the console could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The ledger could not be opened (permissions, a newer schema, a corrupt file).
    #[error("cannot open the ledger: {0}")]
    Ledger(#[from] ledger::Error),
    /// The engine failed to start for a reason other than another engine running.
    #[error("cannot start the engine: {0}")]
    Engine(#[from] engine::Error),
}

/// Who serves the ledger, once the console has asked.
enum Here {
    /// This process.
    Running(Engine),
    /// Another process holds `engine.lock`.
    Elsewhere { pid: Option<u32> },
}

/// A call waiting for its questions to be answered (MRTR).
struct PendingCall {
    server: ServerRecord,
    call: ToolCall,
    question: InputRequired,
    /// `tools/call` requests sent so far for this call, the first included.
    rounds: usize,
}

/// Where a call stands after one round.
#[derive(Debug)]
pub enum CallStep {
    /// The tool ran and returned at once.
    Complete(ToolResult),
    /// The server asks first; answer with [`Console::answer_call`] and this id.
    Questions {
        /// The pending call's id (this process only).
        call_id: u64,
        /// What is asked.
        question: InputRequired,
    },
    /// The server created a task; its handle is committed.
    Task(TaskRecord),
}

/// A pending question and whether a desktop notification was already shown for it.
struct InboxEntry {
    /// What the inbox shows.
    pub view: InputRequestView,
    /// The `inputs` row (for [`Console::mark_notified`]).
    pub input_id: i64,
    /// Set once notified (or deliberately not: do-not-disturb, already on screen).
    pub notified: bool,
}

/// The ledger, the engine, the tokens and every action, behind every face.
pub struct Console {
    ledger: Arc<Ledger>,
    here: OnceCell<Here>,
    config: EngineConfig,
    tokens: Tokens,
    tokens_read: OnceCell<()>,
    data_dir: PathBuf,
    actor: String,
    warn: Option<Warn>,
    calls: Mutex<HashMap<u64, PendingCall>>,
    next_call: AtomicU64,
    /// One token refresher per signed-in server (a new sign-in replaces it), shared with the
    /// engine's sign-ins (a sign-in in another process starts one here too).
    refreshers: sign_ins::Refreshers,
    /// Whether the refreshers of servers signed in before this process started are running.
    refreshers_resumed: std::sync::atomic::AtomicBool,
    /// One refresh at a time per server, shared by the refreshers and the engine's refresh on
    /// `401`.
    flights: sign_ins::Flights,
    /// Bumped by [`Console::cancel_checks`]: every server check waiting at that moment stops.
    checks: tokio::sync::watch::Sender<u64>,
}

impl Console {
    /// Opens the ledger in the setup's data directory and, with [`Start::Now`], starts the
    /// engine on it unless another process runs one.
    pub async fn open(setup: Setup) -> Result<Self, OpenError> {
        let Setup {
            mut config,
            secrets,
            start,
            warn,
        } = setup;
        let data_dir = config.data_dir.clone();
        let tokens = Tokens::new(secrets, &data_dir);
        config.tokens = Some(tokens.provider());
        let flights = sign_ins::Flights::default();
        let refreshers = sign_ins::Refreshers::new(warn.clone());
        config.sign_ins = Some(Arc::new(sign_ins::KeyringSignIns {
            tokens: tokens.clone(),
            flights: flights.clone(),
            refreshers: refreshers.clone(),
        }));
        let mut console = Self {
            ledger: Arc::new(Ledger::open(&data_dir)?),
            here: OnceCell::new(),
            config,
            tokens,
            tokens_read: OnceCell::new(),
            data_dir,
            actor: audit::os_user(),
            warn,
            calls: Mutex::default(),
            next_call: AtomicU64::new(1),
            refreshers,
            refreshers_resumed: Default::default(),
            flights,
            checks: tokio::sync::watch::Sender::new(0),
        };
        if start == Start::Now {
            console.ensure_engine().await.map_err(|e| match e {
                Error::Engine(e) => OpenError::Engine(e),
                Error::Ledger(e) => OpenError::Ledger(e),
                other => OpenError::Ledger(ledger::Error::Invalid(other.to_string())),
            })?;
            // Events the engine commits are published on its own handle: read through it, so
            // `subscribe` wakes for them.
            if let Some(Here::Running(engine)) = console.here.get() {
                let own = std::mem::replace(&mut console.ledger, engine.ledger().clone());
                own.close();
            }
        }
        Ok(console)
    }

    /// Makes sure an engine serves this ledger: ours (started now if need be, after the tokens
    /// are read) or another process's.
    pub async fn ensure_engine(&self) -> Result<EngineState> {
        let here = self
            .here
            .get_or_try_init(|| async {
                self.read_tokens().await?;
                match Engine::start(self.config.clone()).await {
                    Ok(engine) => Ok(Here::Running(engine)),
                    Err(engine::Error::Lock(LockError::Held { pid })) => {
                        tracing::warn!(
                            ?pid,
                            "another engine runs on this ledger: not polling here"
                        );
                        Ok(Here::Elsewhere { pid })
                    }
                    Err(e) => Err(Error::Engine(e)),
                }
            })
            .await?;
        if let Here::Running(engine) = here {
            if !self.refreshers_resumed.swap(true, Ordering::SeqCst) {
                self.refreshers.set_reloader(engine.link_reloader());
                self.resume_refreshers().await;
            }
        }
        Ok(state_of(here))
    }

    /// Starts the refreshers of servers signed in earlier (their sign-in is in the keyring): the
    /// engine polls with their tokens, so this process keeps them fresh. A token that expired
    /// while nothing ran is refreshed at once.
    async fn resume_refreshers(&self) {
        let Ok(list) = self.ledger.read_async(servers::list).await else {
            return;
        };
        for server in list.into_iter().filter(|s| s.has_token) {
            let Ok(Some(credentials)) = self.tokens.load_credentials(server.id).await else {
                continue;
            };
            if let Ok(authorizer) =
                crate::auth::Authorizer::new(&server.url, crate::auth::ClientConfig::default())
            {
                self.keep_fresh(server.id, authorizer, credentials);
            }
        }
    }

    /// Who serves the ledger, if the console has asked yet.
    pub fn engine_state(&self) -> Option<EngineState> {
        self.here.get().map(state_of)
    }

    /// This process's engine, when it runs one.
    pub fn engine(&self) -> Option<&Engine> {
        match self.here.get() {
            Some(Here::Running(engine)) => Some(engine),
            _ => None,
        }
    }

    /// Whether this process polls and notifies.
    pub fn runs_engine(&self) -> bool {
        self.engine().is_some()
    }

    /// The ledger (reads; every write goes through an action here).
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// The ledger's directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The OS user recorded in the audit log.
    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// The keyring service and entry name of a server's token (for diagnostics and tests).
    pub fn token_entry(&self, server: i64) -> (String, String) {
        (
            self.tokens.service().to_owned(),
            self.tokens.entry_name(server),
        )
    }

    /// Stops our engine (if any) and closes the ledger.
    pub async fn close(self) {
        self.refreshers.stop_all();
        if let Some(Here::Running(engine)) = self.here.into_inner() {
            engine.shutdown().await;
        }
        self.ledger.close();
    }

    fn warn(&self, message: &str) {
        tracing::warn!("{message}");
        if let Some(warn) = &self.warn {
            warn(message);
        }
    }

    /// Reads the tokens of the servers that have one, once, before anything talks to a server.
    /// A token that cannot be read is a warning: that server's requests go without it (and will
    /// likely be refused); the others are not affected.
    async fn read_tokens(&self) -> Result<()> {
        self.tokens_read
            .get_or_try_init(|| async {
                let list = self.ledger.read_async(servers::list).await?;
                let with_token: Vec<i64> =
                    list.iter().filter(|s| s.has_token).map(|s| s.id).collect();
                for (id, e) in self.tokens.load(with_token).await {
                    let name = list
                        .iter()
                        .find(|s| s.id == id)
                        .map_or("?", |s| s.name.as_str());
                    self.warn(&format!(
                        "the token of server {name} cannot be read from the OS keyring ({e}); its requests go without it"
                    ));
                }
                Ok::<(), Error>(())
            })
            .await
            .map(|_| ())
    }

    /// Tells our engine to look at the ledger now (another process's engine notices by itself).
    pub fn nudge(&self) {
        if let Some(engine) = self.engine() {
            engine.nudge();
        }
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> ledger::Result<T> + Send + 'static,
    ) -> Result<T> {
        Ok(self.ledger.read_async(f).await?)
    }

    // ---- questions ------------------------------------------------------------------------

    /// The inbox with notification bookkeeping.
    async fn inbox_entries(&self) -> Result<Vec<InboxEntry>> {
        let items = self.read(inputs::inbox).await?;
        Ok(items
            .iter()
            .map(|item| InboxEntry {
                view: present::inbox_item(item),
                input_id: item.input.id,
                notified: item.input.notified_at.is_some(),
            })
            .collect())
    }

    /// How much waits for a person: the inbox's questions and the agents' calls held for a
    /// decision (the tray's and the window title's count). A list that cannot be read counts as
    /// empty: the count is a hint, the inbox says the rest.
    pub async fn waiting_count(&self) -> u32 {
        let questions = self.inbox().await.map(|l| l.len()).unwrap_or(0);
        let calls = self
            .pending_gated_calls()
            .await
            .map(|l| l.len())
            .unwrap_or(0);
        u32::try_from(questions + calls).unwrap_or(u32::MAX)
    }

    /// Every pending question, oldest first.
    pub async fn inbox(&self) -> Result<Vec<InputRequestView>> {
        Ok(self
            .inbox_entries()
            .await?
            .into_iter()
            .map(|e| e.view)
            .collect())
    }

    /// Records that these questions were notified (or deliberately not), so no restart notifies
    /// them: one write for the whole batch, however many questions a server sent at once.
    async fn mark_notified(&self, input_ids: Vec<i64>) -> Result<()> {
        self.ledger
            .write(move |ctx| {
                for id in input_ids {
                    inputs::mark_notified(ctx.conn, id)?;
                }
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// The questions of a task still waiting for an answer.
    pub async fn pending_questions(&self, task_row: i64) -> Result<Vec<inputs::InputRecord>> {
        self.read(move |c| {
            Ok(inputs::for_task(c, task_row)?
                .into_iter()
                .filter(|q| q.state == inputs::InputState::Pending)
                .collect())
        })
        .await
    }

    /// Answers a question: recorded (question state, audit, outbox, event) in one synced
    /// transaction, then delivered by the engine.
    pub async fn answer(&self, task_row: i64, key: &str, response: &InputResponse) -> Result<()> {
        let k = key.to_owned();
        let current = self.read(move |c| inputs::get(c, task_row, &k)).await?;
        match current.state {
            inputs::InputState::Pending => {}
            inputs::InputState::Superseded => {
                return Err(Error::AlreadyAnswered(
                    "The server withdrew this question.".into(),
                ))
            }
            _ => {
                return Err(Error::AlreadyAnswered(
                    "This question was already answered.".into(),
                ))
            }
        }
        let response = serde_json::to_value(response)
            .map_err(|e| Error::Invalid(format!("the answer cannot be encoded: {e}")))?;
        actions::answer(&self.ledger, task_row, key, response, &self.actor)
            .await
            .map_err(|e| match e {
                // Answered or withdrawn between our check and the write, or the task ended.
                actions::Error::Ledger(ledger::Error::Conflict(why)) => Error::AlreadyAnswered(why),
                e => e.into(),
            })?;
        self.nudge();
        Ok(())
    }

    // ---- tasks ----------------------------------------------------------------------------

    /// Task rows, newest first.
    pub async fn tasks(&self, limit: Option<u32>) -> Result<Vec<TaskView>> {
        let list = self
            .read(move |c| {
                let filter = tasks::Filter {
                    limit: limit.map(|l| l as usize),
                    ..tasks::Filter::default()
                };
                tasks::summaries(c, &filter)
            })
            .await?;
        Ok(list.iter().map(present::task).collect())
    }

    /// The tasks matching `filter`, newest first, as lists show them.
    pub async fn tasks_matching(&self, filter: tasks::Filter) -> Result<Vec<TaskView>> {
        let list = self.read(move |c| tasks::summaries(c, &filter)).await?;
        Ok(list.iter().map(present::task).collect())
    }

    /// One task row.
    pub async fn task(&self, row: i64) -> Result<TaskView> {
        Ok(present::task(
            &self.read(move |c| tasks::summary(c, row)).await?,
        ))
    }

    /// A task by row number, task id or unique prefix (what a person types).
    pub async fn find_task(&self, id: &str) -> Result<TaskRecord> {
        let id = id.to_owned();
        self.read(move |c| tasks::find_one(c, &id)).await
    }

    /// One task with its questions, timeline, arguments and outcome.
    pub async fn task_detail(&self, row: i64) -> Result<TaskDetail> {
        let (summary, record, questions, timeline) = self
            .read(move |c| {
                Ok((
                    tasks::summary(c, row)?,
                    tasks::get(c, row)?,
                    inputs::for_task(c, row)?,
                    events::for_task(c, row)?,
                ))
            })
            .await?;
        let (result, error) = match record.task().map(|t| t.state) {
            Some(TaskState::Completed { result }) => (Some(Value::Object(result.0)), None),
            Some(TaskState::Failed { error }) => (None, serde_json::to_value(error).ok()),
            _ => (None, None),
        };
        Ok(TaskDetail {
            task: present::task(&summary),
            server_url: record.server_url,
            arguments: record.arguments,
            result,
            error,
            inputs: questions.iter().map(present::input).collect(),
            events: timeline
                .iter()
                .map(present::event)
                .collect::<Vec<EventView>>(),
        })
    }

    /// Asks the server to cancel a task (recorded first; the engine delivers).
    pub async fn cancel(&self, row: i64) -> Result<()> {
        actions::cancel(&self.ledger, row, &self.actor).await?;
        self.nudge();
        Ok(())
    }

    /// The link to a tracked task, `countersign://task/<server URL>/<task id>`: the URL rather
    /// than our name for the server, so it opens in a teammate's ledger too.
    pub async fn task_link(&self, row: i64) -> Result<String> {
        let record = self.read(move |c| tasks::get(c, row)).await?;
        Ok(link::TaskLink::to_url(&record.server_url, &record.task_id).to_string())
    }

    /// What opening a `countersign://` link means here: a tracked task to show, a task of a
    /// registered server to adopt (after the person confirms), or a server to add first. Reads
    /// only; nothing is adopted or added without the person.
    pub async fn open_link(&self, text: &str) -> Result<link::LinkTarget> {
        let parsed = link::TaskLink::parse(text)?;
        let server = match &parsed.server {
            link::LinkServer::Name(name) => Some(
                self.server_named(name)
                    .await?
                    .ok_or_else(|| Error::NotFound(format!("server {name:?}")))?,
            ),
            link::LinkServer::Url(url) => self
                .server_records()
                .await?
                .into_iter()
                .find(|s| same_endpoint(&s.url, url)),
        };
        let Some(server) = server else {
            let link::LinkServer::Url(url) = parsed.server else {
                return Err(Error::Invalid("a link without a server".into()));
            };
            return Ok(link::LinkTarget::AddServer {
                url,
                task_id: parsed.task_id,
            });
        };
        let (server_id, task_id) = (server.id, parsed.task_id.clone());
        let row = self
            .read(move |c| tasks::row_of(c, server_id, &task_id))
            .await?;
        Ok(match row {
            Some(row) => link::LinkTarget::Tracked { row },
            None => link::LinkTarget::Adopt {
                server_id,
                server: server.name,
                task_id: parsed.task_id,
            },
        })
    }

    /// Starts tracking a task created elsewhere, by its id on a registered server.
    pub async fn adopt(&self, server_id: i64, task_id: &str) -> Result<TaskRecord> {
        let task_id = task_id.trim();
        if task_id.is_empty() {
            return Err(Error::Invalid("a task id is needed".into()));
        }
        let server = self.server(server_id).await?;
        let client = self.client(&server).await?;
        let record = actions::adopt(&self.ledger, &client, &server, task_id, &self.actor).await?;
        self.nudge();
        Ok(record)
    }

    // ---- servers --------------------------------------------------------------------------

    /// A registered server.
    pub async fn server(&self, id: i64) -> Result<ServerRecord> {
        self.read(move |c| servers::get(c, id)).await
    }

    /// A registered server by name.
    pub async fn server_named(&self, name: &str) -> Result<Option<ServerRecord>> {
        let name = name.to_owned();
        self.read(move |c| servers::by_name(c, &name)).await
    }

    /// Registered servers as records.
    pub async fn server_records(&self) -> Result<Vec<ServerRecord>> {
        self.read(servers::list).await
    }

    /// Registered servers with their health.
    pub async fn servers(&self) -> Result<Vec<ServerView>> {
        let (list, seen, sign_ins) = self
            .read(|c| {
                Ok((
                    servers::list(c)?,
                    events::reachability(c)?,
                    events::sign_in_states(c)?,
                ))
            })
            .await?;
        Ok(list
            .iter()
            .map(|s| {
                present::server(
                    s,
                    seen.iter().find(|r| r.server_id == s.id),
                    sign_ins.iter().find(|r| r.server_id == s.id),
                    self.tokens.sign_in_info(s.id),
                )
            })
            .collect())
    }

    /// One server with its health.
    pub async fn server_view(&self, id: i64) -> Result<ServerView> {
        self.servers()
            .await?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| Error::NotFound(format!("server #{id}")))
    }

    /// A client for `server` carrying that server's own token (if it has one).
    pub async fn client(&self, server: &ServerRecord) -> Result<Client> {
        self.read_tokens().await?;
        Ok(engine::make_client(server, &self.config)?)
    }

    /// Registers a server: the name and URL are checked, the server asked what it is (with the
    /// token given, which is this server's), the row recorded, and the token kept in the OS
    /// keyring only. When the keyring cannot keep it, the server is not added.
    pub async fn add_server(&self, request: ServerAddRequest) -> Result<ServerRecord> {
        let name = request.name.trim().to_owned();
        let url = request.url.trim().to_owned();
        if name.is_empty() {
            return Err(Error::Invalid("a server needs a name".into()));
        }
        if self.server_named(&name).await?.is_some() {
            return Err(Error::Invalid(format!(
                "a server named {name:?} already exists"
            )));
        }
        let token = request
            .token
            .map(|t| t.0)
            .filter(|t| !t.expose().trim().is_empty());
        // The client validates the URL (http/https, a host, no credentials) before anything is
        // stored.
        let probe = Client::with_options(
            mcp::Endpoint::new(url.clone()).with_token(token.clone()),
            self.config.client.clone(),
            None,
        )?;
        let discovery = if request.discover {
            Some(self.unless_cancelled(probe.discover()).await??)
        } else {
            None
        };
        // Stored without the token flag: the engine builds a server's client when the flag
        // flips, which happens only once the token is in the keyring and the cache.
        let mut record = actions::add_server(
            &self.ledger,
            &name,
            &url,
            false,
            discovery.as_ref(),
            &self.actor,
        )
        .await?;
        if let Some(token) = token {
            if let Err(e) = self.tokens.store(record.id, token).await {
                // A server whose token could not be kept would fail every request: undo.
                if let Err(undo) =
                    actions::remove_server(&self.ledger, record.id, &self.actor).await
                {
                    self.warn(&format!(
                        "server {name} stays registered without its token: {undo}"
                    ));
                }
                return Err(e.into());
            }
            match self.set_token_flag(record.id, true).await {
                Ok(flagged) => record = flagged,
                Err(e) => {
                    // Neither a token nobody knows of nor a server without its token stays.
                    let _ = self.tokens.delete(record.id).await;
                    let _ = actions::remove_server(&self.ledger, record.id, &self.actor).await;
                    return Err(e);
                }
            }
        }
        self.nudge();
        Ok(record)
    }

    /// Flips `has_token` without an audit entry (part of an audited add), with the
    /// `server_updated` event every window and engine follows.
    async fn set_token_flag(&self, id: i64, has_token: bool) -> Result<ServerRecord> {
        Ok(self
            .ledger
            .write(move |ctx| {
                let s = servers::get(ctx.conn, id)?;
                servers::update(ctx.conn, id, &s.url, has_token, s.poll_floor_ms)?;
                ctx.append(events::NewEvent {
                    task: None,
                    server_id: Some(id),
                    via: events::Via::User,
                    kind: events::EventKind::ServerUpdated {
                        name: s.name.clone(),
                        url: s.url.clone(),
                    },
                })?;
                servers::get(ctx.conn, id)
            })
            .await?)
    }

    /// Changes a server's URL, poll floor and token.
    pub async fn update_server(&self, request: ServerUpdateRequest) -> Result<ServerRecord> {
        let before = self.server(request.id).await?;
        let url = request.url.trim().to_owned();
        Client::new(mcp::Endpoint::new(url.clone()))?;
        let has_token = match request.token {
            TokenChange::Keep => before.has_token,
            TokenChange::Set { token } if token.0.expose().trim().is_empty() => before.has_token,
            TokenChange::Set { token } => {
                self.tokens.store(before.id, token.0).await?;
                if let Some(engine) = self.engine() {
                    // The ledger cannot see a replaced token: have the engine rebuild its clients.
                    engine.reload_links();
                }
                true
            }
            TokenChange::Clear => {
                self.tokens.delete(before.id).await?;
                false
            }
        };
        actions::update_server(
            &self.ledger,
            before.id,
            &url,
            has_token,
            request.poll_floor_ms,
            &self.actor,
        )
        .await?;
        self.nudge();
        self.server(before.id).await
    }

    /// Signs in to the OAuth-protected server `id`: discovery from its `401`, registration, the
    /// browser step (`open` shows the person the authorization URL; the loopback listener waits
    /// at most `timeout`), the token request. The sign-in goes to the OS keyring only, and the
    /// engine sends its access token to this server from then on. A server that does not ask
    /// for a sign-in is refused ([`Error::Invalid`]).
    pub async fn sign_in<F, Fut>(&self, id: i64, open: F, timeout: Duration) -> Result<ServerRecord>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = crate::auth::Result<()>>,
    {
        self.sign_in_as(id, SignInClient::default(), open, timeout)
            .await
    }

    /// [`Console::sign_in`] as a client the person chose: a client they registered with the
    /// authorization server themselves (its secret goes to the OS keyring with the sign-in and
    /// nowhere else), and/or our client ID metadata document at their URL.
    pub async fn sign_in_as<F, Fut>(
        &self,
        id: i64,
        client: SignInClient,
        open: F,
        timeout: Duration,
    ) -> Result<ServerRecord>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = crate::auth::Result<()>>,
    {
        let config = client.config()?;
        let server = self.server(id).await?;
        let client = Client::with_options(
            mcp::Endpoint::new(server.url.clone()),
            self.config.client.clone(),
            None,
        )?;
        // The last sign-in keeps its registration (a new one only for a new authorization
        // server), also after a sign-out; an unreadable one is simply replaced.
        let mut credentials = self.tokens.load_credentials(id).await.ok().flatten();
        let kept = match credentials {
            Some(_) => None,
            None => self.tokens.load_registration(id).await.ok().flatten(),
        };
        let authorizer = crate::auth::Authorizer::new(&server.url, config)
            .map_err(crate::auth::SessionError::from)?
            .remembering(kept);
        let before = credentials.as_ref().map(|c| c.tokens.access_token.clone());
        let discovery = crate::auth::with_sign_in(
            &client,
            &authorizer,
            &mut credentials,
            || client.discover(),
            open,
            timeout,
        )
        .await?;
        // Only a 401 leads to a new token (signed in or refreshed): same token, open server.
        let Some(credentials) =
            credentials.filter(|c| Some(&c.tokens.access_token) != before.as_ref())
        else {
            return Err(Error::Invalid(format!(
                "{} does not ask for a sign-in",
                server.name
            )));
        };
        self.tokens.store_credentials(id, &credentials).await?;
        actions::record_discovery(&self.ledger, id, &discovery).await?;
        let record = self.set_token_flag(id, true).await?;
        // Every engine (here or in another process) reloads the token and resumes the server's
        // tasks if they waited for this sign-in.
        self.record_sign_in(id, events::EventKind::SignedIn).await?;
        self.nudge();
        self.keep_fresh(id, authorizer, credentials);
        Ok(record)
    }

    /// Registers a server and, when it answers `401` without a token given (it is
    /// OAuth-protected), signs in to it (see [`Console::sign_in`]). A sign-in that fails leaves
    /// the server registered, waiting for a sign-in, and returns the sign-in's error.
    pub async fn add_server_signing_in<F, Fut>(
        &self,
        request: ServerAddRequest,
        client: SignInClient,
        open: F,
        timeout: Duration,
    ) -> Result<ServerRecord>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = crate::auth::Result<()>>,
    {
        let static_token = request
            .token
            .as_ref()
            .is_some_and(|t| !t.0.expose().trim().is_empty());
        let undiscovered = ServerAddRequest {
            discover: false,
            token: None,
            ..request.clone()
        };
        match self.add_server(request).await {
            // Registered undiscovered; the sign-in discovers it with the token.
            Err(Error::Server(mcp::Error::Unauthorized { status: 401, .. })) if !static_token => {
                // Checked before anything is registered: a bad client URL adds nothing.
                client.config()?;
                let added = self.add_server(undiscovered).await?;
                self.sign_in_as(added.id, client, open, timeout).await
            }
            other => other,
        }
    }

    /// Keeps server `id`'s sign-in fresh for as long as this process runs an engine (see
    /// [`sign_ins::Refreshers`]).
    fn keep_fresh(
        &self,
        id: i64,
        authorizer: crate::auth::Authorizer,
        credentials: crate::auth::Credentials,
    ) {
        self.refreshers.keep_fresh(
            id,
            authorizer.server().to_owned(),
            credentials,
            self.tokens.clone(),
            self.flights.clone(),
        );
    }

    /// Appends a server's `signed_in`/`signed_out`, the event engines act on.
    async fn record_sign_in(&self, id: i64, kind: events::EventKind) -> Result<()> {
        self.ledger
            .write(move |ctx| {
                ctx.append(events::NewEvent {
                    task: None,
                    server_id: Some(id),
                    via: events::Via::User,
                    kind,
                })?;
                Ok(())
            })
            .await?;
        Ok(())
    }

    fn stop_refreshing(&self, id: i64) {
        self.refreshers.stop(id);
    }

    /// Signs out of server `id`: its OAuth tokens leave the keyring (and the engine stops
    /// sending them); the client registration stays in the keyring, so the next sign-in is the
    /// same client and the server's tasks for that client resume. The server and its tasks
    /// stay. [`Console::forget_sign_in`] forgets the registration too.
    pub async fn sign_out(&self, id: i64) -> Result<ServerRecord> {
        self.signing_out(id, false).await
    }

    /// Signs out of server `id` and forgets its client registration: the next sign-in registers
    /// anew (a new client to the server, which may not know the old client's tasks).
    pub async fn forget_sign_in(&self, id: i64) -> Result<ServerRecord> {
        self.signing_out(id, true).await
    }

    async fn signing_out(&self, id: i64, forget_client: bool) -> Result<ServerRecord> {
        let server = self.server(id).await?;
        self.stop_refreshing(id);
        if forget_client {
            self.tokens.delete_credentials(id).await?;
        } else {
            self.tokens.delete_tokens(id).await?;
        }
        let record = if server.has_token && self.tokens.get(id).is_none() {
            self.set_token_flag(id, false).await?
        } else {
            server
        };
        self.record_sign_in(id, events::EventKind::SignedOut)
            .await?;
        self.nudge();
        Ok(record)
    }

    /// Removes a server, everything tracked on it, and its token.
    pub async fn remove_server(&self, id: i64) -> Result<()> {
        let server = self.server(id).await?;
        // The secret first: a server row without its secret is harmless, an orphaned secret is
        // not. (A server without one needs no keyring at all: the CLI works without one.)
        if server.has_token {
            self.tokens.delete(server.id).await?;
        }
        self.stop_refreshing(server.id);
        // An OAuth sign-in has no flag in the ledger; where there is no keyring there is none.
        match self.tokens.delete_credentials(server.id).await {
            Ok(()) | Err(secrets::Error::NoKeyring { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        actions::remove_server(&self.ledger, server.id, &self.actor).await?;
        self.nudge();
        Ok(())
    }

    /// Asks `server/discover` again and records what it says.
    pub async fn check_server(&self, id: i64) -> Result<ServerRecord> {
        let server = self.server(id).await?;
        let client = self.client(&server).await?;
        let discovery = match self.unless_cancelled(client.discover()).await? {
            Ok(discovery) => discovery,
            Err(e) => {
                // A server that cannot be reached shows as unreachable, not "unknown" (a server
                // added anyway has no tasks, so the engine would never say so).
                if e.class() == mcp::ErrorClass::Transient {
                    actions::record_unreachable(&self.ledger, id, e.to_string()).await?;
                }
                return Err(e.into());
            }
        };
        actions::record_discovery(&self.ledger, id, &discovery).await?;
        self.server(id).await
    }

    /// Stops every server check waiting for its server now (adding with discovery, checking):
    /// each ends with [`Error::Cancelled`] and records nothing. The server may still see the
    /// request; a check only reads.
    pub fn cancel_checks(&self) {
        self.checks
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// `work`, unless [`Console::cancel_checks`] is called before it ends.
    async fn unless_cancelled<T>(&self, work: impl std::future::Future<Output = T>) -> Result<T> {
        let mut cancelled = self.checks.subscribe();
        tokio::select! {
            done = work => Ok(done),
            _ = cancelled.changed() => Err(Error::Cancelled),
        }
    }

    /// The tools of a server.
    pub async fn tools(&self, server_id: i64) -> Result<Vec<ToolView>> {
        let server = self.server(server_id).await?;
        let list = self.client(&server).await?.list_tools().await?;
        Ok(list.tools.iter().map(present::tool).collect())
    }

    // ---- calls ----------------------------------------------------------------------------

    /// Calls a tool: the intent is recorded before `tools/call` is sent, a task handle is
    /// committed before this returns.
    pub async fn call(&self, server_id: i64, call: ToolCall) -> Result<CallStep> {
        let server = self.server(server_id).await?;
        self.run_call(server, call, 1).await
    }

    /// Answers the questions a server asked before running a tool, and sends the call again.
    pub async fn answer_call(
        &self,
        call_id: u64,
        responses: Map<String, Value>,
    ) -> Result<CallStep> {
        let pending = self
            .calls
            .lock()
            .ok()
            .and_then(|mut calls| calls.remove(&call_id))
            .ok_or_else(|| Error::NotFound(format!("call {call_id} (already answered or sent)")))?;
        if pending.rounds >= mcp::MAX_MRTR_ROUNDS {
            // A server that answers every round of answers with new questions must not keep a
            // call (and its intents) going for ever: at most this many `tools/call`s, as in the
            // CLI's direct mode.
            return Err(Error::TooManyRounds {
                tool: pending.call.name.clone(),
                rounds: pending.rounds,
            });
        }
        let retry = pending.call.retry_with(&pending.question, responses);
        self.run_call(pending.server, retry, pending.rounds + 1)
            .await
    }

    async fn run_call(
        &self,
        server: ServerRecord,
        call: ToolCall,
        rounds: usize,
    ) -> Result<CallStep> {
        let client = self.client(&server).await?;
        // tools/list first: the client learns which arguments it mirrors into headers.
        client.list_tools().await?;
        Ok(
            match actions::call(&self.ledger, &client, &server, &call, &self.actor).await? {
                Called::Complete(result) => CallStep::Complete(result),
                Called::InputRequired(question) => {
                    let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut calls) = self.calls.lock() {
                        calls.insert(
                            call_id,
                            PendingCall {
                                server,
                                call,
                                question: question.clone(),
                                rounds,
                            },
                        );
                    }
                    CallStep::Questions { call_id, question }
                }
                Called::Task(record) => {
                    self.nudge();
                    CallStep::Task(record)
                }
            },
        )
    }

    /// A call's step as a window shows it.
    pub async fn call_view(&self, step: CallStep) -> Result<ToolCallOutcome> {
        Ok(match step {
            CallStep::Complete(result) => ToolCallOutcome::Complete {
                result: Value::Object(result.0),
            },
            CallStep::Questions { call_id, question } => ToolCallOutcome::InputRequired {
                call_id,
                questions: question
                    .input_requests
                    .iter()
                    .map(|(key, request)| CallQuestion {
                        key: key.clone(),
                        request: present::input_kind(
                            &serde_json::to_value(request).unwrap_or(Value::Null),
                        ),
                    })
                    .collect(),
            },
            CallStep::Task(record) => ToolCallOutcome::Task {
                task: self.task(record.id).await?,
            },
        })
    }

    /// The answers of a window's MRTR form as the call's `inputResponses`.
    pub fn call_responses(answers: Vec<CallAnswer>) -> Result<Map<String, Value>> {
        answers
            .into_iter()
            .map(|a| {
                serde_json::to_value(&a.response)
                    .map(|v| (a.key, v))
                    .map_err(|e| Error::Invalid(format!("the answer cannot be encoded: {e}")))
            })
            .collect()
    }

    // ---- audit ----------------------------------------------------------------------------

    /// The audit log, oldest first.
    pub async fn audit(&self) -> Result<Vec<AuditEntry>> {
        Ok(self
            .read(audit::list)
            .await?
            .iter()
            .map(present::audit)
            .collect())
    }

    /// Writes the audit log to a file in `dir` (`exports/` in the data directory when `None`).
    pub async fn audit_export(
        &self,
        format: AuditFormat,
        dir: Option<PathBuf>,
    ) -> Result<AuditExport> {
        let records = self.read(audit::list).await?;
        let dir = dir.unwrap_or_else(|| self.data_dir.join("exports"));
        let stamp = time::OffsetDateTime::now_utc()
            .format(time::macros::format_description!(
                "[year][month][day]-[hour][minute][second]"
            ))
            .unwrap_or_else(|_| "now".into());
        let (ext, text) = match format {
            AuditFormat::Csv => ("csv", audit::to_csv(&records)),
            AuditFormat::Json => (
                "json",
                serde_json::to_string_pretty(&records)
                    .map_err(|e| Error::Invalid(format!("the audit log cannot be encoded: {e}")))?,
            ),
        };
        let path = dir.join(format!("countersign-audit-{stamp}.{ext}"));
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
        Ok(AuditExport {
            path: path.display().to_string(),
            records: records.len().min(u32::MAX as usize) as u32,
        })
    }
}

fn state_of(here: &Here) -> EngineState {
    match here {
        Here::Running(engine) => EngineState::Running {
            resumed: engine.resumed().min(u32::MAX as usize) as u32,
        },
        Here::Elsewhere { pid } => EngineState::Elsewhere { pid: *pid },
    }
}

/// Whether two endpoint URLs are the same server (a trailing `/` and the scheme and host's case
/// aside, as URLs compare).
fn same_endpoint(a: &str, b: &str) -> bool {
    let norm = |u: &str| {
        reqwest::Url::parse(u)
            .map(|p| p.to_string().trim_end_matches('/').to_owned())
            .unwrap_or_else(|_| u.trim_end_matches('/').to_owned())
    };
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sensitive::Sensitive;

    fn client(id: Option<&str>, secret: bool, url: Option<&str>) -> SignInClient {
        SignInClient {
            client_id: id.map(str::to_owned),
            client_secret: secret.then(|| Sensitive::new("s3cr3t".to_owned())),
            metadata_document_url: url.map(str::to_owned),
            redirect_port: None,
        }
    }

    #[test]
    fn a_pre_registered_client_is_used_for_the_issuer_the_server_names() {
        let config = client(Some(" my-client "), true, None)
            .config()
            .expect("a client id with its secret");
        let pre = config.pre_registered.expect("pre-registered");
        assert_eq!(pre.client_id, "my-client");
        assert_eq!(pre.issuer, None, "bound to this server's issuer at sign-in");
        assert!(pre.client_secret.is_some());
        assert!(SignInClient::default()
            .config()
            .expect("the default")
            .pre_registered
            .is_none());
    }

    #[test]
    fn bad_sign_in_clients_are_refused_before_anything_is_sent() {
        for (bad, why) in [
            (client(Some("  "), false, None), "an empty client id"),
            (client(None, true, None), "a secret without a client id"),
            (
                client(None, false, Some("http://example.com/client.json")),
                "a metadata document over http on a public host",
            ),
            (
                client(None, false, Some("https://example.com")),
                "a metadata document URL without a path",
            ),
            (client(None, false, Some("not a url")), "not a URL"),
        ] {
            let error = bad.config().expect_err(why);
            assert!(matches!(error, Error::Invalid(_)), "{why}: {error:?}");
            assert!(
                !error.to_string().contains("s3cr3t"),
                "{why}: no secret in {error}"
            );
        }
        let ok = client(
            None,
            false,
            Some("https://example.com/countersign/client.json"),
        )
        .config()
        .expect("an https metadata document URL with a path");
        assert_eq!(
            ok.metadata_document_url.as_deref(),
            Some("https://example.com/countersign/client.json")
        );
        client(None, false, Some("http://127.0.0.1:8000/client.json"))
            .config()
            .expect("http on a loopback host, for testing");
    }
}
