//! The app's handle on the core: the ledger, the engine (when this process runs it), tokens,
//! and one method per thing the window does. Every action is a `countersign_core::actions` call:
//! recorded in the ledger (with its audit entry) before anything is sent; the engine delivers.
//!
//! One engine per ledger: if another process (e.g. `countersign watch`) holds `engine.lock`,
//! the console still reads the ledger and records actions, and that engine delivers them; this
//! app then neither polls nor notifies ([`EngineState::Elsewhere`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use countersign_core::actions::{self, Called};
use countersign_core::engine::lock::LockError;
use countersign_core::engine::{self, Engine, EngineConfig};
use countersign_core::ledger::events::{self, StoredEvent};
use countersign_core::ledger::servers::{self, ServerRecord};
use countersign_core::ledger::tasks;
use countersign_core::ledger::{audit, inputs, Ledger};
use countersign_core::mcp::{self, Client, ErrorClass, InputRequired, TaskState, ToolCall};
use countersign_core::secrets::{self, Secrets};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use crate::ipc::{
    AuditEntry, AuditExport, AuditFormat, CallAnswer, CallQuestion, CommandError, EngineState,
    ErrorCode, EventView, InputRequestView, InputResponse, ServerAddRequest, ServerUpdateRequest,
    ServerView, TaskDetail, TaskView, TokenChange, ToolCallOutcome, ToolView,
};
use crate::views;
use countersign_core::secrets::Tokens;

/// Result of a console call: errors are already in the IPC shape.
pub type Result<T, E = CommandError> = std::result::Result<T, E>;

/// Why the console could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The ledger could not be opened (permissions, a newer schema, a corrupt file).
    #[error("cannot open the ledger: {0}")]
    Ledger(#[from] countersign_core::ledger::Error),
    /// The engine failed to start for a reason other than another engine running.
    #[error("cannot start the engine: {0}")]
    Engine(#[from] engine::Error),
}

/// An MRTR call waiting for its questions to be answered.
struct PendingCall {
    server: ServerRecord,
    call: ToolCall,
    question: InputRequired,
}

/// A pending question and whether a desktop notification was already shown for it.
pub struct InboxEntry {
    /// What the inbox shows.
    pub view: InputRequestView,
    /// The `inputs` row (for [`Console::mark_notified`]).
    pub input_id: i64,
    /// Set once notified (or deliberately not: do-not-disturb, already on screen).
    pub notified: bool,
}

/// The ledger, the engine and the user's tokens, behind the commands.
pub struct Console {
    ledger: Arc<Ledger>,
    engine: Option<Engine>,
    state: EngineState,
    config: EngineConfig,
    tokens: Tokens,
    data_dir: PathBuf,
    actor: String,
    calls: Mutex<HashMap<u64, PendingCall>>,
    next_call: AtomicU64,
}

fn ledger_error(e: countersign_core::ledger::Error) -> CommandError {
    use countersign_core::ledger::Error as L;
    match e {
        L::NotFound(what) => CommandError::new(ErrorCode::NotFound, format!("{what} not found")),
        L::Conflict(why) => CommandError::new(ErrorCode::InvalidInput, why),
        other => CommandError::new(ErrorCode::Internal, other.to_string()),
    }
}

fn mcp_error(e: mcp::Error) -> CommandError {
    let code = match (&e, e.class()) {
        (mcp::Error::InvalidUrl { .. } | mcp::Error::InvalidRequest(_), _) => {
            ErrorCode::InvalidInput
        }
        (_, ErrorClass::Transient) => ErrorCode::Unavailable,
        _ => ErrorCode::Server,
    };
    CommandError::new(code, e.to_string())
}

fn action_error(e: actions::Error) -> CommandError {
    match e {
        actions::Error::Ledger(e) => ledger_error(e),
        actions::Error::Mcp(e) => mcp_error(e),
        actions::Error::Invalid(why) => CommandError::new(ErrorCode::InvalidInput, why),
        e @ actions::Error::TaskIdReused { .. } => {
            CommandError::new(ErrorCode::Server, e.to_string())
        }
    }
}

fn keyring_error(e: secrets::Error) -> CommandError {
    CommandError::new(ErrorCode::Keyring, e.to_string())
}

impl Console {
    /// Opens the ledger in `data_dir` and starts the engine on it, unless another process runs
    /// one. Tokens are read from the keyring first, so the first polls after a restart carry them.
    pub async fn open(data_dir: &Path, secrets: Secrets) -> Result<Self, OpenError> {
        let tokens = Tokens::new(secrets, data_dir);
        let with_token: Vec<i64> = {
            let ledger = Ledger::open(data_dir)?;
            let list = ledger.read(servers::list)?;
            ledger.close();
            list.into_iter()
                .filter(|s| s.has_token)
                .map(|s| s.id)
                .collect()
        };
        for (id, e) in tokens.load(with_token).await {
            tracing::warn!(
                server = id,
                "token unavailable, requests go without it: {e}"
            );
        }
        let mut config = EngineConfig::new(data_dir);
        config.tokens = Some(tokens.provider());
        let (engine, state) = match Engine::start(config.clone()).await {
            Ok(engine) => {
                let resumed = engine.resumed().min(u32::MAX as usize) as u32;
                (Some(engine), EngineState::Running { resumed })
            }
            Err(engine::Error::Lock(LockError::Held { pid })) => {
                tracing::warn!(?pid, "another engine runs on this ledger: not polling here");
                (None, EngineState::Elsewhere { pid })
            }
            Err(e) => return Err(e.into()),
        };
        let ledger = match &engine {
            Some(engine) => engine.ledger().clone(),
            None => Arc::new(Ledger::open(data_dir)?),
        };
        Ok(Self {
            ledger,
            engine,
            state,
            config,
            tokens,
            data_dir: data_dir.to_owned(),
            actor: audit::os_user(),
            calls: Mutex::default(),
            next_call: AtomicU64::new(1),
        })
    }

    /// Whether this process runs the engine.
    pub fn engine_state(&self) -> EngineState {
        self.state.clone()
    }

    /// Whether this process polls and notifies.
    pub fn runs_engine(&self) -> bool {
        self.engine.is_some()
    }

    /// The ledger's directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The OS user recorded in the audit log.
    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// The keyring entry name of a server's token (for diagnostics and tests).
    pub fn token_entry(&self, server: i64) -> (String, String) {
        (
            self.tokens.service().to_owned(),
            self.tokens.entry_name(server),
        )
    }

    /// Tells our engine to look at the ledger now (another process's engine notices by itself).
    fn nudge(&self) {
        if let Some(engine) = &self.engine {
            engine.nudge();
        }
    }

    /// Events this process commits, as a wake-up for the feed (which reads by cursor).
    pub fn subscribe(&self) -> broadcast::Receiver<StoredEvent> {
        self.ledger.subscribe()
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> countersign_core::ledger::Result<T> + Send + 'static,
    ) -> Result<T> {
        self.ledger.read_async(f).await.map_err(ledger_error)
    }

    /// The newest event id.
    pub async fn last_event_id(&self) -> Result<i64> {
        self.read(events::last_id).await
    }

    /// Events after `cursor`, oldest first.
    pub async fn events_since(&self, cursor: i64, limit: usize) -> Result<Vec<StoredEvent>> {
        self.read(move |c| events::since(c, cursor, limit)).await
    }

    /// The inbox with notification bookkeeping.
    pub async fn inbox_entries(&self) -> Result<Vec<InboxEntry>> {
        let items = self.read(inputs::inbox).await?;
        Ok(items
            .iter()
            .map(|item| InboxEntry {
                view: views::inbox_item(item),
                input_id: item.input.id,
                notified: item.input.notified_at.is_some(),
            })
            .collect())
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
    pub async fn mark_notified(&self, input_ids: Vec<i64>) -> Result<()> {
        self.ledger
            .write(move |ctx| {
                for id in input_ids {
                    inputs::mark_notified(ctx.conn, id)?;
                }
                Ok(())
            })
            .await
            .map_err(ledger_error)
    }

    /// Answers a question: recorded with its audit entry, then delivered by the engine.
    pub async fn answer(&self, task_row: i64, key: &str, response: InputResponse) -> Result<()> {
        let k = key.to_owned();
        let current = self.read(move |c| inputs::get(c, task_row, &k)).await?;
        if current.state != inputs::InputState::Pending {
            return Err(CommandError::new(
                ErrorCode::AlreadyAnswered,
                match current.state {
                    inputs::InputState::Superseded => "The server withdrew this question.",
                    _ => "This question was already answered.",
                },
            ));
        }
        let response = serde_json::to_value(&response)
            .map_err(|e| CommandError::new(ErrorCode::Internal, e.to_string()))?;
        actions::answer(&self.ledger, task_row, key, response, &self.actor)
            .await
            .map_err(|e| match e {
                // Answered or withdrawn between our check and the write, or the task ended.
                actions::Error::Ledger(countersign_core::ledger::Error::Conflict(why)) => {
                    CommandError::new(ErrorCode::AlreadyAnswered, why)
                }
                e => action_error(e),
            })?;
        self.nudge();
        Ok(())
    }

    /// Task rows, newest first.
    pub async fn tasks(&self, limit: Option<u32>) -> Result<Vec<TaskView>> {
        let list = self
            .read(move |c| tasks::summaries(c, limit.map(|l| l as usize)))
            .await?;
        Ok(list.iter().map(views::task).collect())
    }

    /// One task row.
    pub async fn task(&self, row: i64) -> Result<TaskView> {
        Ok(views::task(
            &self.read(move |c| tasks::summary(c, row)).await?,
        ))
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
            task: views::task(&summary),
            server_url: record.server_url,
            arguments: record.arguments,
            result,
            error,
            inputs: questions.iter().map(views::input).collect(),
            events: timeline
                .iter()
                .map(views::event)
                .collect::<Vec<EventView>>(),
        })
    }

    /// Asks the server to cancel a task (recorded first; the engine delivers).
    pub async fn cancel(&self, row: i64) -> Result<()> {
        actions::cancel(&self.ledger, row, &self.actor)
            .await
            .map_err(action_error)?;
        self.nudge();
        Ok(())
    }

    /// Starts tracking a task created elsewhere.
    pub async fn adopt(&self, server_id: i64, task_id: &str) -> Result<TaskView> {
        let task_id = task_id.trim();
        if task_id.is_empty() {
            return Err(CommandError::new(
                ErrorCode::InvalidInput,
                "a task id is needed",
            ));
        }
        let server = self.server_record(server_id).await?;
        let client = self.client(&server)?;
        let record = actions::adopt(&self.ledger, &client, &server, task_id, &self.actor)
            .await
            .map_err(action_error)?;
        self.nudge();
        self.task(record.id).await
    }

    async fn server_record(&self, id: i64) -> Result<ServerRecord> {
        self.read(move |c| servers::get(c, id)).await
    }

    fn client(&self, server: &ServerRecord) -> Result<Client> {
        engine::make_client(server, &self.config).map_err(mcp_error)
    }

    /// Registered servers with their reachability.
    pub async fn servers(&self) -> Result<Vec<ServerView>> {
        let (list, seen) = self
            .read(|c| Ok((servers::list(c)?, events::reachability(c)?)))
            .await?;
        Ok(list
            .iter()
            .map(|s| views::server(s, seen.iter().find(|r| r.server_id == s.id)))
            .collect())
    }

    async fn server_view(&self, id: i64) -> Result<ServerView> {
        self.servers()
            .await?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| {
                CommandError::new(ErrorCode::NotFound, format!("server #{id} not found"))
            })
    }

    /// A registered server by name.
    pub async fn server_named(&self, name: &str) -> Result<Option<ServerRecord>> {
        let name = name.to_owned();
        self.read(move |c| servers::by_name(c, &name)).await
    }

    /// Registers a server; its token goes to the keyring only.
    pub async fn server_add(&self, request: ServerAddRequest) -> Result<ServerView> {
        let name = request.name.trim().to_owned();
        let url = request.url.trim().to_owned();
        if name.is_empty() {
            return Err(CommandError::new(
                ErrorCode::InvalidInput,
                "a server needs a name",
            ));
        }
        if self.server_named(&name).await?.is_some() {
            return Err(CommandError::new(
                ErrorCode::InvalidInput,
                format!("a server named {name:?} already exists"),
            ));
        }
        let token = request
            .token
            .map(|t| t.0)
            .filter(|t| !t.expose().trim().is_empty());
        // The client validates the URL (http/https, a host) before anything is stored.
        let probe = Client::with_options(
            mcp::Endpoint::new(url.clone()).with_token(token.clone()),
            self.config.client.clone(),
            None,
        )
        .map_err(mcp_error)?;
        let discovery = if request.discover {
            Some(probe.discover().await.map_err(mcp_error)?)
        } else {
            None
        };
        // Stored without the token flag: the engine builds a server's link when the flag flips,
        // which happens only once the token is in the keyring and the cache.
        let record = actions::add_server(
            &self.ledger,
            &name,
            &url,
            false,
            discovery.as_ref(),
            &self.actor,
        )
        .await
        .map_err(action_error)?;
        if let Some(token) = token {
            if let Err(e) = self.tokens.store(record.id, token).await {
                // A server whose token could not be kept would fail every request: undo.
                let _ = actions::remove_server(&self.ledger, record.id, &self.actor).await;
                return Err(keyring_error(e));
            }
            self.set_token_flag(record.id, true).await?;
        }
        self.nudge();
        self.server_view(record.id).await
    }

    /// Flips `has_token` without an audit entry (part of an audited add or update).
    async fn set_token_flag(&self, id: i64, has_token: bool) -> Result<()> {
        self.ledger
            .write(move |ctx| {
                let s = servers::get(ctx.conn, id)?;
                servers::update(ctx.conn, id, &s.url, has_token, s.poll_floor_ms)
            })
            .await
            .map_err(ledger_error)
    }

    /// Changes URL, poll floor and token.
    pub async fn server_update(&self, request: ServerUpdateRequest) -> Result<ServerView> {
        let before = self.server_record(request.id).await?;
        let url = request.url.trim().to_owned();
        Client::new(mcp::Endpoint::new(url.clone())).map_err(mcp_error)?;
        let has_token = match request.token {
            TokenChange::Keep => before.has_token,
            TokenChange::Set { token } if token.0.expose().trim().is_empty() => before.has_token,
            TokenChange::Set { token } => {
                self.tokens
                    .store(before.id, token.0)
                    .await
                    .map_err(keyring_error)?;
                if let Some(engine) = &self.engine {
                    // The ledger cannot see a replaced token: have the engine rebuild its clients.
                    engine.reload_links();
                }
                true
            }
            TokenChange::Clear => {
                self.tokens.delete(before.id).await.map_err(keyring_error)?;
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
        .await
        .map_err(action_error)?;
        self.nudge();
        self.server_view(before.id).await
    }

    /// Removes a server, everything tracked on it, and its token.
    pub async fn server_remove(&self, id: i64) -> Result<()> {
        let server = self.server_record(id).await?;
        // Secret first: a server row without its secret is harmless, an orphaned secret is not.
        self.tokens.delete(server.id).await.map_err(keyring_error)?;
        actions::remove_server(&self.ledger, server.id, &self.actor)
            .await
            .map_err(action_error)?;
        self.nudge();
        Ok(())
    }

    /// Asks `server/discover` again and records what it says.
    pub async fn server_check(&self, id: i64) -> Result<ServerView> {
        let server = self.server_record(id).await?;
        let discovery = self.client(&server)?.discover().await.map_err(mcp_error)?;
        actions::record_discovery(&self.ledger, id, &discovery)
            .await
            .map_err(action_error)?;
        self.server_view(id).await
    }

    /// The tools of a server.
    pub async fn tools(&self, server_id: i64) -> Result<Vec<ToolView>> {
        let server = self.server_record(server_id).await?;
        let list = self
            .client(&server)?
            .list_tools()
            .await
            .map_err(mcp_error)?;
        Ok(list.tools.iter().map(views::tool).collect())
    }

    /// Calls a tool (intent and task handle recorded before and as they happen).
    pub async fn call(
        &self,
        server_id: i64,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<ToolCallOutcome> {
        let server = self.server_record(server_id).await?;
        self.run_call(server, ToolCall::new(name, Some(arguments)))
            .await
    }

    /// Answers the questions of an MRTR call and sends it again.
    pub async fn call_answer(
        &self,
        call_id: u64,
        answers: Vec<CallAnswer>,
    ) -> Result<ToolCallOutcome> {
        let pending = self
            .calls
            .lock()
            .ok()
            .and_then(|mut calls| calls.remove(&call_id))
            .ok_or_else(|| {
                CommandError::new(
                    ErrorCode::NotFound,
                    "this call was already answered or sent",
                )
            })?;
        let mut responses = Map::new();
        for a in answers {
            let value = serde_json::to_value(&a.response)
                .map_err(|e| CommandError::new(ErrorCode::Internal, e.to_string()))?;
            responses.insert(a.key, value);
        }
        let retry = pending.call.retry_with(&pending.question, responses);
        self.run_call(pending.server, retry).await
    }

    async fn run_call(&self, server: ServerRecord, call: ToolCall) -> Result<ToolCallOutcome> {
        let client = self.client(&server)?;
        // tools/list first: the client learns which arguments it mirrors into headers.
        client.list_tools().await.map_err(mcp_error)?;
        match actions::call(&self.ledger, &client, &server, &call, &self.actor)
            .await
            .map_err(action_error)?
        {
            Called::Complete(result) => Ok(ToolCallOutcome::Complete {
                result: Value::Object(result.0),
            }),
            Called::InputRequired(question) => {
                let questions = question
                    .input_requests
                    .iter()
                    .map(|(key, request)| CallQuestion {
                        key: key.clone(),
                        request: views::input_kind(
                            &serde_json::to_value(request).unwrap_or(Value::Null),
                        ),
                    })
                    .collect();
                let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut calls) = self.calls.lock() {
                    calls.insert(
                        call_id,
                        PendingCall {
                            server,
                            call,
                            question,
                        },
                    );
                }
                Ok(ToolCallOutcome::InputRequired { call_id, questions })
            }
            Called::Task(record) => {
                self.nudge();
                Ok(ToolCallOutcome::Task {
                    task: self.task(record.id).await?,
                })
            }
        }
    }

    /// The audit log, oldest first.
    pub async fn audit(&self) -> Result<Vec<AuditEntry>> {
        Ok(self
            .read(audit::list)
            .await?
            .iter()
            .map(views::audit)
            .collect())
    }

    /// Writes the audit log to a file in `dir` (the data directory when `None`).
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
                    .map_err(|e| CommandError::new(ErrorCode::Internal, e.to_string()))?,
            ),
        };
        let path = dir.join(format!("countersign-audit-{stamp}.{ext}"));
        let write = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text));
        write.map_err(|e| {
            CommandError::new(
                ErrorCode::Internal,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
        Ok(AuditExport {
            path: path.display().to_string(),
            records: records.len().min(u32::MAX as usize) as u32,
        })
    }
}
