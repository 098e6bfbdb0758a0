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
//! - the calls waiting for their questions (MRTR) to be answered, bounded in rounds, in number
//!   and in age ([`Console::answer_call`]);
//! - the views every face shows ([`view`], built by [`present`]).
//!
//! Press Approve in the app, or run `countersign answer`: both end in [`Console::answer`], which
//! records the answer (question state, audit, outbox item, `input_answered`) in one synced
//! transaction and nudges the engine, which delivers it with `tasks/update`.

mod audit;
mod calls;
pub mod feed;
pub mod gateway;
pub mod hosts;
mod inbox;
pub mod link;
pub mod notifications;
pub mod present;
mod records;
mod servers;
mod settings;
mod sign_ins;
mod signing_in;
mod stdio;
mod tasks;
pub mod view;

pub use calls::CallStep;
use calls::{PendingCall, PendingCalls};

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::actions;
use crate::engine::lock::LockError;
use crate::engine::{self, Engine, EngineConfig};
use crate::ledger::{self, Ledger};
use crate::mcp::{self, ErrorClass};
use crate::secrets::{self, Secrets, Tokens};

use view::{CommandError, EngineState, ErrorCode};

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
    /// A host's configuration file could not be read, rewritten or restored.
    #[error(transparent)]
    Hosts(#[from] crate::hosts::Error),
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
            Self::Hosts(crate::hosts::Error::Io { .. }) => ErrorCode::Internal,
            Self::Hosts(_) => ErrorCode::InvalidInput,
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
    /// The calls waiting for their questions to be answered (MRTR), bounded in number and age.
    calls: Mutex<PendingCalls<PendingCall>>,
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
        config.env_secrets = Some(tokens.env_provider());
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
            actor: ledger::audit::os_user(),
            warn,
            calls: Mutex::default(),
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
        let Ok(list) = self.ledger.read_async(ledger::servers::list).await else {
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
                let list = self.ledger.read_async(ledger::servers::list).await?;
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
