//! [`LegacyPeer`]: a 2025-11-25 server's tasks as the engine follows them.
//!
//! One session per server, shared by every task: taken up from the [`SessionStore`] (so a
//! restarted engine keeps the session its tasks belong to), initialized when there is none, and
//! renewed when the server ends it. A task the new session cannot see is
//! [`Error::SessionEnded`].
//!
//! A task in `input_required` gets a `tasks/result` stream that stays open (a "watcher"): the
//! server's `elicitation/create` requests on it are kept in memory, keyed by their JSON-RPC id,
//! and shown as the task's `inputRequests`. They are only answerable while this process keeps
//! the stream's session: after a restart the server's request went with the old stream, so the
//! question disappears from the task (the ledger marks it withdrawn) and no answer is sent into
//! the void ([`Error::NotWaiting`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{json, Map, Value};
use tokio::task::JoinHandle;

use crate::client::ToolCall;
use crate::client::{ClientOptions, Digest, Endpoint, Polled};
use crate::error::{Error, ErrorClass, Result};
use crate::legacy::{
    CancelOutcome, LegacyClient, LegacySession, ServerRequest, SessionEvent, Task as LegacyTask,
    TaskMetadata, TaskResultEvent, TaskStatus as LegacyStatus, TaskSupport, ToolOutcome,
    META_RELATED_TASK,
};
use crate::sensitive::Sensitive;
use crate::wire::{
    CallOutcome, RpcError, Task, ToolResult, MAX_INPUT_KEY_BYTES, MAX_INPUT_REQUESTS,
    MAX_INPUT_REQUEST_BYTES,
};

/// How long a question's `tasks/result` stream may stay silent before it is reopened: a person
/// may take this long to answer (the engine's wait cap for a question).
const QUESTION_WAIT: Duration = Duration::from_secs(3600);

/// Failed (re)openings of a question stream in a row before the watcher leaves it to the polls
/// (the next `input_required` poll starts a new one).
const MAX_WATCH_FAILURES: u32 = 8;

/// Refused server requests noted on a task's timeline; the rest are refused without a note.
const MAX_REFUSAL_NOTES: u32 = 8;

/// Session renewals one request may cause (a stored session another process started may itself
/// be gone: then one more, fresh).
const MAX_RENEWALS: usize = 2;

/// Where a server's session is kept between processes (the ledger's server row).
pub trait SessionStore: Send + Sync {
    /// The stored session, if any.
    fn load(&self) -> BoxFuture<'static, Option<LegacySession>>;
    /// Stores a new session; it is used only once stored.
    fn save(&self, session: LegacySession) -> BoxFuture<'static, std::result::Result<(), String>>;
}

/// Where a peer's [`PeerSignal`]s go.
pub type SignalSink = Arc<dyn Fn(PeerSignal) + Send + Sync>;

/// What a peer tells its owner between polls.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerSignal {
    /// The task changed in a way a poll now would show (a question arrived, its result came).
    Changed {
        /// The server's task id.
        task_id: String,
    },
    /// The server asked for something Countersign does not do (`sampling/createMessage`,
    /// `roots/list`, …); it was refused at once with a JSON-RPC error.
    Refused {
        /// The server's task id.
        task_id: String,
        /// The method refused.
        method: String,
    },
    /// The state the server pushed on the session's GET stream (`notifications/tasks/status`),
    /// for a task whose state carries no payload to fetch.
    Status {
        /// The server's task id.
        task_id: String,
        /// Its state, as a modern task.
        task: Task,
    },
    /// The session's GET stream opened (`true`) or ended (`false`): while it is open, the
    /// server's status changes arrive on it.
    Stream {
        /// Whether it is open now.
        open: bool,
    },
    /// A question was refused for what it was (another task's, too large, one too many).
    Ignored {
        /// The server's task id.
        task_id: String,
        /// Why, for the timeline.
        message: String,
    },
}

/// The legacy era's side of [`super::Peer`]. Cheap to clone.
#[derive(Clone)]
pub struct LegacyPeer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LegacyPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacyPeer")
            .field("url", &self.inner.endpoint.url)
            .finish_non_exhaustive()
    }
}

struct Inner {
    endpoint: Endpoint,
    options: ClientOptions,
    token: RwLock<Option<Sensitive<String>>>,
    store: Arc<dyn SessionStore>,
    signals: Option<SignalSink>,
    /// The session in use; a renewal holds the lock, so only one happens at a time.
    current: tokio::sync::Mutex<Option<Current>>,
    tasks: Mutex<HashMap<String, Side>>,
    /// The session's GET stream: `notifications/tasks/status` there asks for a poll at once.
    stream: Mutex<Stream>,
    /// A stdio server: each process is one session, started by its supervisor.
    stdio: Option<crate::stdio::StdioServer>,
    /// Each tool's `taskSupport` as the session last listed it, so a call is not preceded by
    /// a whole `tools/list` every time (a big listing costs the server as much as the call).
    task_support: Mutex<Option<ToolList>>,
}

/// What one `tools/list` said of each tool's `taskSupport`, in which session, and when.
struct ToolList {
    generation: u64,
    at: tokio::time::Instant,
    support: HashMap<String, TaskSupport>,
}

/// How long a listing is used before the next call lists again: a server may change a tool
/// between restarts of a session without telling us.
const TOOL_LIST_TTL: Duration = Duration::from_secs(60);

/// The GET stream's state.
#[derive(Default)]
struct Stream {
    task: Option<JoinHandle<()>>,
    /// The server offers none (405): not asked again.
    unavailable: bool,
    /// The newest `lastUpdatedAt` heard per task: a repeated notification asks for nothing.
    stamps: HashMap<String, String>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let stream = self.stream.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(task) = &stream.task {
            task.abort();
        }
        let tasks = self.tasks.get_mut().unwrap_or_else(|e| e.into_inner());
        for side in tasks.values() {
            if let Some(watcher) = &side.watcher {
                watcher.abort();
            }
        }
    }
}

#[derive(Clone)]
struct Current {
    client: LegacyClient,
    /// 0 for the first session this peer used, one more per renewal.
    generation: u64,
}

/// What the peer keeps of one task between polls.
#[derive(Default)]
struct Side {
    /// The session generation the server last showed the task in.
    generation: Option<u64>,
    /// Open questions by key, each with the session client that received it and when.
    pending: BTreeMap<String, Pending>,
    /// The result, when the question stream delivered it before a poll asked.
    result: Option<ToolResult>,
    watcher: Option<JoinHandle<()>>,
    /// Requests refused for this task so far.
    refusals: u32,
}

/// A question the server asked and waits on.
#[derive(Clone)]
struct Pending {
    request: ServerRequest,
    client: LegacyClient,
    received: tokio::time::Instant,
}

/// One request's outcome, with the session it was made in.
struct Answered<T> {
    value: Result<T>,
    current: Current,
    renewed: bool,
}

impl LegacyPeer {
    /// A peer for the server at `endpoint`; nothing is sent until it is used. `signals`, when
    /// given, hears of changes between polls.
    pub fn new(
        endpoint: Endpoint,
        options: ClientOptions,
        store: Arc<dyn SessionStore>,
        signals: Option<SignalSink>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                token: RwLock::new(endpoint.bearer_token.clone()),
                endpoint,
                options,
                store,
                signals,
                current: tokio::sync::Mutex::new(None),
                tasks: Mutex::new(HashMap::new()),
                stream: Mutex::new(Stream::default()),
                stdio: None,
                task_support: Mutex::new(None),
            }),
        }
    }

    /// A peer for a stdio server: its process starts when a request first needs it, and a
    /// session is a process (no stored session is taken up: the process that held it is gone).
    pub fn stdio(
        server: crate::stdio::StdioServer,
        options: ClientOptions,
        store: Arc<dyn SessionStore>,
        signals: Option<SignalSink>,
    ) -> Self {
        let endpoint = Endpoint::new(server.label());
        Self {
            inner: Arc::new(Inner {
                token: RwLock::new(None),
                endpoint,
                options,
                store,
                signals,
                current: tokio::sync::Mutex::new(None),
                tasks: Mutex::new(HashMap::new()),
                stream: Mutex::new(Stream::default()),
                stdio: Some(server),
                task_support: Mutex::new(None),
            }),
        }
    }

    /// The stdio server behind this peer, if it is one.
    pub fn stdio_server(&self) -> Option<&crate::stdio::StdioServer> {
        self.inner.stdio.as_ref()
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.inner.endpoint.url
    }

    /// Replaces the bearer token (for the session in use and the ones after it).
    pub fn set_bearer_token(&self, token: Option<Sensitive<String>>) {
        *self.inner.token.write().unwrap_or_else(|e| e.into_inner()) = token.clone();
        if let Ok(current) = self.inner.current.try_lock() {
            if let Some(current) = current.as_ref() {
                current.client.set_bearer_token(token);
            }
        }
    }

    /// The bearer token sent now.
    pub fn bearer_token(&self) -> Option<Sensitive<String>> {
        self.inner
            .token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The session client in use (taken up or initialized first if needed), for requests the
    /// engine does not follow (calls, `tasks/list`). Its session is in the store.
    pub async fn client(&self) -> Result<LegacyClient> {
        Ok(self.current().await?.client)
    }

    /// Any request sent as given within the session (renewed when the server ended it), the
    /// result verbatim: the gateway's pass-through to a legacy server. A task of an ended
    /// session is unknown to the new one, which says so.
    pub async fn forward(&self, method: &str, params: Map<String, Value>) -> Result<Value> {
        let method = method.to_owned();
        self.request(move |c| {
            let (method, params) = (method.clone(), params.clone());
            async move { c.forward(&method, params).await }
        })
        .await?
        .value
    }

    /// The session as the server described it at `initialize` (its capabilities, its
    /// `serverInfo`); initialized first if there is none.
    pub async fn session(&self) -> Result<LegacySession> {
        Ok(self.current().await?.client.session())
    }

    /// `tools/call`: task-augmented (`params.task`) when the tool's `taskSupport` is `required`
    /// or `optional`, plainly otherwise. A task handle comes back as a modern handle.
    pub async fn call_tool(&self, call: &ToolCall) -> Result<CallOutcome> {
        let current = self.current().await?;
        let client = current.client;
        let support = self
            .task_support(&client, current.generation, &call.name)
            .await?;
        let as_task = support.is_some_and(|s| s != TaskSupport::Forbidden);
        let task = as_task.then(TaskMetadata::default);
        match client
            .call_tool(&call.name, call.arguments.clone(), task)
            .await?
        {
            ToolOutcome::Result(result) => Ok(CallOutcome::Complete(result)),
            ToolOutcome::Task(task) => {
                let generation = current.generation;
                self.with_side(&task.task_id, |side| side.generation = Some(generation));
                let handle =
                    Task::parse_handle(&Value::Object(modern_fields(&task))).map_err(|reason| {
                        Error::InvalidResponse {
                            method: "tools/call".into(),
                            reason,
                        }
                    })?;
                Ok(CallOutcome::Task(handle))
            }
        }
    }

    /// A tool's `taskSupport` (`None`: not listed), from the session's last listing while it
    /// is fresh and names the tool, else from a new `tools/list`.
    async fn task_support(
        &self,
        client: &LegacyClient,
        generation: u64,
        tool: &str,
    ) -> Result<Option<TaskSupport>> {
        {
            let cached = self
                .inner
                .task_support
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(list) = cached
                .as_ref()
                .filter(|l| l.generation == generation && l.at.elapsed() < TOOL_LIST_TTL)
            {
                if let Some(support) = list.support.get(tool) {
                    return Ok(Some(*support));
                }
            }
        }
        let tools = client.list_tools().await?;
        let support: HashMap<String, TaskSupport> = tools
            .into_iter()
            .map(|t| (t.name, t.task_support))
            .collect();
        let found = support.get(tool).copied();
        *self
            .inner
            .task_support
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(ToolList {
            generation,
            at: tokio::time::Instant::now(),
            support,
        });
        Ok(found)
    }

    /// `tasks/get` as a modern task (see the module doc).
    pub async fn poll_task(&self, task_id: &str, last: Option<Digest>) -> Result<Polled> {
        let sent = tokio::time::Instant::now();
        let id = task_id.to_owned();
        let answered = self
            .request(move |c| {
                let id = id.clone();
                async move { c.get_task(&id).await }
            })
            .await?;
        let task = match answered.value {
            Ok(task) => task,
            Err(e) => return Err(self.unknown_or(task_id, e, &answered.current, answered.renewed)),
        };
        let generation = answered.current.generation;
        let client = answered.current.client;
        self.with_side(task_id, |side| side.generation = Some(generation));
        if !task.status.is_terminal() {
            self.listen(&client);
        }
        let mut map = modern_fields(&task);
        match task.status {
            LegacyStatus::Working => {
                // A task that works waits on no question asked before this poll was sent (it
                // was answered, or the server gave up on it); a newer one may be for the next
                // round.
                self.with_side(task_id, |side| {
                    side.pending.retain(|_, p| p.received > sent)
                });
            }
            LegacyStatus::Cancelled => {}
            LegacyStatus::InputRequired => {
                self.watch_questions(task_id, &client);
                map.insert("inputRequests".into(), self.pending_requests(task_id));
            }
            LegacyStatus::Completed | LegacyStatus::Failed => {
                match self.outcome(task_id, &client).await? {
                    Ok(result) if task.status == LegacyStatus::Completed => {
                        map.insert("result".into(), Value::Object(result.0));
                    }
                    Ok(result) => {
                        map.insert("error".into(), failed_result_error(&task, &result));
                    }
                    Err(error) => {
                        map.insert("status".into(), Value::String("failed".into()));
                        map.insert("error".into(), json!(error));
                    }
                }
            }
        }
        if task.status.is_terminal() {
            self.forget(task_id);
        }
        let value = Value::Object(map);
        let digest = Digest::of(&value.to_string());
        if last == Some(digest) {
            return Ok(Polled::Unchanged);
        }
        let task = Task::parse_full(&value).map_err(|reason| Error::InvalidResponse {
            method: "tasks/get".into(),
            reason,
        })?;
        Ok(Polled::Changed(task, digest))
    }

    /// Sends each answer as the JSON-RPC response to the question it answers, with the
    /// related-task `_meta`. A question this process no longer holds is [`Error::NotWaiting`]:
    /// nothing is sent.
    pub async fn update_task(&self, task_id: &str, responses: Map<String, Value>) -> Result<()> {
        for (key, response) in responses {
            let held = self.with_side(task_id, |side| side.pending.get(&key).cloned());
            let Some(Pending {
                request, client, ..
            }) = held
            else {
                return Err(Error::NotWaiting { key });
            };
            let Value::Object(mut result) = response else {
                return Err(Error::InvalidRequest(format!(
                    "the answer to {key} must be a JSON object"
                )));
            };
            let meta = result
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert(META_RELATED_TASK.into(), json!({ "taskId": task_id }));
            }
            match client.respond(&request.id, result).await {
                Ok(()) => {}
                Err(Error::SessionExpired { .. }) => return Err(Error::NotWaiting { key }),
                Err(e) => return Err(e),
            }
            self.with_side(task_id, |side| side.pending.remove(&key));
        }
        Ok(())
    }

    /// `tasks/cancel`; a task that had already finished is not an error.
    pub async fn cancel_task(&self, task_id: &str) -> Result<()> {
        let id = task_id.to_owned();
        let answered = self
            .request(move |c| {
                let id = id.clone();
                async move { c.cancel_task(&id).await }
            })
            .await?;
        match answered.value {
            Ok(CancelOutcome::Cancelled(_) | CancelOutcome::AlreadyFinished { .. }) => Ok(()),
            Err(e) => Err(self.unknown_or(task_id, e, &answered.current, answered.renewed)),
        }
    }

    /// Stops keeping anything for a task (it finished, or the engine stopped following it).
    pub fn forget(&self, task_id: &str) {
        let side = self
            .inner
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(task_id);
        if let Some(watcher) = side.and_then(|s| s.watcher) {
            watcher.abort();
        }
        self.inner
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .stamps
            .remove(task_id);
    }

    async fn current(&self) -> Result<Current> {
        let mut guard = self.inner.current.lock().await;
        if let Some(current) = guard.as_ref() {
            return Ok(current.clone());
        }
        if self.inner.stdio.is_some() {
            // Generation 1: a task this process has not shown belongs to an earlier process.
            let current = Current {
                client: self.initialize().await?,
                generation: 1,
            };
            *guard = Some(current.clone());
            return Ok(current);
        }
        let client = match self.inner.store.load().await {
            Some(session) => {
                match LegacyClient::resume(self.endpoint(), self.inner.options.clone(), session) {
                    Ok(client) => client,
                    Err(_) => self.initialize().await?,
                }
            }
            None => self.initialize().await?,
        };
        let current = Current {
            client,
            generation: 0,
        };
        *guard = Some(current.clone());
        Ok(current)
    }

    /// A new session after the server ended session `expired`: the one another process stored
    /// meanwhile if there is one, else a fresh one.
    async fn renew(&self, expired: &Current) -> Result<Current> {
        let mut guard = self.inner.current.lock().await;
        if let Some(current) = guard.as_ref() {
            if current.generation != expired.generation {
                return Ok(current.clone()); // renewed by another request meanwhile
            }
        }
        let old_id = expired.client.session().session_id;
        let stored = if self.inner.stdio.is_some() {
            None
        } else {
            self.inner
                .store
                .load()
                .await
                .filter(|s| s.session_id != old_id)
                .and_then(|s| {
                    LegacyClient::resume(self.endpoint(), self.inner.options.clone(), s).ok()
                })
        };
        let client = match stored {
            Some(client) => client,
            None => self.initialize().await?,
        };
        let current = Current {
            client,
            generation: expired.generation + 1,
        };
        *guard = Some(current.clone());
        Ok(current)
    }

    async fn initialize(&self) -> Result<LegacyClient> {
        let client = match &self.inner.stdio {
            Some(server) => {
                server
                    .connect(self.inner.options.clone())
                    .await
                    .map_err(|e| match e {
                        // The new process ended before its session began: a failure to start
                        // (retried after the pause), not the end of any task's session.
                        Error::SessionExpired { url, message, .. } => {
                            Error::Transport { url, message }
                        }
                        other => other,
                    })?
            }
            None => LegacyClient::connect(self.endpoint(), self.inner.options.clone()).await?,
        };
        self.inner
            .store
            .save(client.session())
            .await
            .map_err(|reason| {
                Error::InvalidRequest(format!("the new session could not be stored: {reason}"))
            })?;
        Ok(client)
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::new(self.inner.endpoint.url.clone()).with_token(self.bearer_token())
    }

    /// Runs a request in the session, renewing it when the server ended it.
    /// `Err` only when no session could be had at all.
    async fn request<T, F, Fut>(&self, make: F) -> Result<Answered<T>>
    where
        F: Fn(LegacyClient) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut current = self.current().await?;
        let mut renewed = false;
        let mut renewals = 0;
        loop {
            let value = make(current.client.clone()).await;
            match value {
                Err(Error::SessionExpired { .. }) if renewals < MAX_RENEWALS => {
                    renewals += 1;
                    match self.renew(&current).await {
                        Ok(next) => {
                            current = next;
                            renewed = true;
                        }
                        Err(e) => {
                            return Ok(Answered {
                                value: Err(e),
                                current,
                                renewed,
                            })
                        }
                    }
                }
                value => {
                    return Ok(Answered {
                        value,
                        current,
                        renewed,
                    })
                }
            }
        }
    }

    /// An unknown task is one of an ended session when the session changed since the server
    /// last showed it (or, never shown to this peer, when this peer had to renew).
    fn unknown_or(&self, task_id: &str, error: Error, current: &Current, renewed: bool) -> Error {
        if !matches!(error, Error::UnknownTask { .. }) {
            return error;
        }
        let seen = self.with_side(task_id, |side| side.generation);
        self.forget(task_id);
        let ended = renewed || seen.map_or(current.generation > 0, |g| g < current.generation);
        if ended && self.inner.stdio.is_some() {
            Error::ProcessEnded {
                task_id: task_id.into(),
            }
        } else if ended {
            Error::SessionEnded {
                task_id: task_id.into(),
            }
        } else {
            error
        }
    }

    fn with_side<T>(&self, task_id: &str, f: impl FnOnce(&mut Side) -> T) -> T {
        let mut tasks = self.inner.tasks.lock().unwrap_or_else(|e| e.into_inner());
        f(tasks.entry(task_id.to_owned()).or_default())
    }

    fn pending_requests(&self, task_id: &str) -> Value {
        self.with_side(task_id, |side| {
            Value::Object(
                side.pending
                    .iter()
                    .map(|(key, Pending { request, .. })| {
                        let params = request.params.clone().unwrap_or_else(|| json!({}));
                        (
                            key.clone(),
                            json!({"method": request.method, "params": params}),
                        )
                    })
                    .collect(),
            )
        })
    }

    /// Keeps the session's GET stream open while tasks are followed (for a peer whose owner
    /// hears signals): a status notification there asks for that task's poll at once, and the
    /// polls stay the safety net.
    fn listen(&self, client: &LegacyClient) {
        if self.inner.signals.is_none() {
            return;
        }
        let mut stream = self.inner.stream.lock().unwrap_or_else(|e| e.into_inner());
        if stream.unavailable || stream.task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        stream.task = Some(tokio::spawn(follow_stream(
            Arc::downgrade(&self.inner),
            client.clone(),
        )));
    }

    /// Keeps a `tasks/result` stream open for the task's questions, unless one already is.
    fn watch_questions(&self, task_id: &str, client: &LegacyClient) {
        let weak = Arc::downgrade(&self.inner);
        self.with_side(task_id, |side| {
            if side.watcher.as_ref().is_some_and(|w| !w.is_finished()) {
                return;
            }
            side.watcher = Some(tokio::spawn(watch(
                weak,
                client.clone(),
                task_id.to_owned(),
            )));
        });
    }

    /// A finished task's result (`Ok`) or JSON-RPC error (`Err`), from `tasks/result`.
    async fn outcome(
        &self,
        task_id: &str,
        client: &LegacyClient,
    ) -> Result<std::result::Result<ToolResult, RpcError>> {
        if let Some(result) = self.with_side(task_id, |side| side.result.clone()) {
            return Ok(Ok(result));
        }
        let mut stream = client
            .task_result(task_id, self.inner.options.request_timeout)
            .await?;
        loop {
            match stream.next().await {
                Some(Ok(TaskResultEvent::Completed(result))) => return Ok(Ok(result)),
                Some(Ok(TaskResultEvent::Request(request))) => {
                    // A finished task has nothing left to ask.
                    let _ = client
                        .respond_error(&request.id, -32600, "the task has already finished")
                        .await;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return task_error(e).map(Err),
                None => {
                    return Err(Error::InvalidResponse {
                        method: "tasks/result".into(),
                        reason: "the stream ended without the task's result".into(),
                    })
                }
            }
        }
    }
}

impl Inner {
    fn signal(&self, signal: PeerSignal) {
        if let Some(signals) = &self.signals {
            signals(signal);
        }
    }

    /// Whether a refusal for this task goes on its timeline: the first [`MAX_REFUSAL_NOTES`]
    /// do; a server that floods refused requests is refused as before, without a note each.
    fn note_refusal(&self, task_id: &str) -> bool {
        self.side(task_id, |side| {
            side.refusals = side.refusals.saturating_add(1);
            side.refusals <= MAX_REFUSAL_NOTES
        })
    }

    /// Whether the peer follows this task (it was polled and has not finished).
    fn follows(&self, task_id: &str) -> bool {
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(task_id)
    }

    fn side<T>(&self, task_id: &str, f: impl FnOnce(&mut Side) -> T) -> T {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        f(tasks.entry(task_id.to_owned()).or_default())
    }

    /// Keeps a question for the person, or refuses it for what it is.
    async fn ask(&self, task_id: &str, client: &LegacyClient, request: ServerRequest) {
        let task_id = task_id.to_owned();
        let key = request_key(&request.id);
        let size = request.params.as_ref().map_or(0, |p| p.to_string().len());
        let refusal = if let Some(other) = request.related_task().filter(|t| *t != task_id) {
            Some(format!(
                "the server sent a question for task {} on this task's stream; refused",
                crate::text::truncate(other, 80)
            ))
        } else if size > MAX_INPUT_REQUEST_BYTES || key.len() > MAX_INPUT_KEY_BYTES {
            Some(format!(
                "the server sent a question of {size} bytes (at most {MAX_INPUT_REQUEST_BYTES}); refused"
            ))
        } else {
            self.side(&task_id, |side| {
                if side.pending.len() >= MAX_INPUT_REQUESTS {
                    Some(format!(
                        "the server asked more than {MAX_INPUT_REQUESTS} open questions; refused"
                    ))
                } else {
                    side.pending.insert(
                        key,
                        Pending {
                            request: request.clone(),
                            client: client.clone(),
                            received: tokio::time::Instant::now(),
                        },
                    );
                    None
                }
            })
        };
        match refusal {
            Some(message) => {
                let _ = client.respond_error(&request.id, -32602, &message).await;
                if self.note_refusal(&task_id) {
                    self.signal(PeerSignal::Ignored { task_id, message });
                }
            }
            None => self.signal(PeerSignal::Changed { task_id }),
        }
    }
}

/// Reads the session's GET stream until it ends (the next poll opens it again), signalling
/// while it is open: the owner may then poll the server's tasks only as a safety net.
async fn follow_stream(inner: Weak<Inner>, client: LegacyClient) {
    let mut stream = match client.open_stream(QUESTION_WAIT).await {
        Ok(Some(stream)) => stream,
        Ok(None) => {
            if let Some(inner) = inner.upgrade() {
                inner
                    .stream
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .unavailable = true;
            }
            return;
        }
        Err(_) => return,
    };
    match inner.upgrade() {
        Some(inner) => inner.signal(PeerSignal::Stream { open: true }),
        None => return,
    }
    while let Some(Ok(event)) = stream.next().await {
        let Some(inner) = inner.upgrade() else { return };
        match event {
            SessionEvent::TaskStatus(task) => pushed(&inner, &client, task),
            // A question on the GET stream for a task we follow is that task's question.
            SessionEvent::Request(request) => match request.related_task().map(str::to_owned) {
                Some(task_id) if inner.follows(&task_id) => {
                    inner.ask(&task_id, &client, request).await;
                }
                _ => client.refuse(&request).await,
            },
            SessionEvent::Refused(_) | SessionEvent::Notification { .. } => {}
        }
    }
    if let Some(inner) = inner.upgrade() {
        inner.signal(PeerSignal::Stream { open: false });
    }
}

/// A `notifications/tasks/status` for a followed task, once per `lastUpdatedAt`: the state
/// itself when it carries no payload to fetch, else a call for a poll (a finished task's result
/// comes from `tasks/result`).
fn pushed(inner: &Arc<Inner>, client: &LegacyClient, task: LegacyTask) {
    if !inner.follows(&task.task_id) {
        return;
    }
    {
        let mut state = inner.stream.lock().unwrap_or_else(|e| e.into_inner());
        if state.stamps.get(&task.task_id) == Some(&task.last_updated_at) {
            return;
        }
        if task.status.is_terminal() {
            state.stamps.remove(&task.task_id);
        } else {
            state
                .stamps
                .insert(task.task_id.clone(), task.last_updated_at.clone());
        }
    }
    let peer = LegacyPeer {
        inner: inner.clone(),
    };
    let mut map = modern_fields(&task);
    match task.status {
        LegacyStatus::Completed | LegacyStatus::Failed => {
            inner.signal(PeerSignal::Changed {
                task_id: task.task_id,
            });
            return;
        }
        LegacyStatus::InputRequired => {
            peer.watch_questions(&task.task_id, client);
            map.insert("inputRequests".into(), peer.pending_requests(&task.task_id));
        }
        LegacyStatus::Working | LegacyStatus::Cancelled => {}
    }
    match Task::parse_full(&Value::Object(map)) {
        Ok(state) => inner.signal(PeerSignal::Status {
            task_id: task.task_id,
            task: state,
        }),
        Err(_) => inner.signal(PeerSignal::Changed {
            task_id: task.task_id,
        }),
    }
}

/// Holds a task's `tasks/result` open while it lasts: questions go to the peer, the result is
/// kept for the poll that sees the task finished.
async fn watch(inner: Weak<Inner>, client: LegacyClient, task_id: String) {
    let mut failures = 0u32;
    loop {
        match client.task_result(&task_id, QUESTION_WAIT).await {
            Ok(mut stream) => {
                while let Some(event) = stream.next().await {
                    let Some(inner) = inner.upgrade() else { return };
                    match event {
                        Ok(TaskResultEvent::Request(request)) => {
                            failures = 0;
                            inner.ask(&task_id, &client, request).await;
                        }
                        Ok(TaskResultEvent::Refused(request)) => {
                            if inner.note_refusal(&task_id) {
                                inner.signal(PeerSignal::Refused {
                                    task_id: task_id.clone(),
                                    method: request.method,
                                });
                            }
                        }
                        Ok(TaskResultEvent::Status(_)) => inner.signal(PeerSignal::Changed {
                            task_id: task_id.clone(),
                        }),
                        Ok(TaskResultEvent::Completed(result)) => {
                            inner.side(&task_id, |side| side.result = Some(result));
                            inner.signal(PeerSignal::Changed { task_id });
                            return;
                        }
                        Err(e) if e.class() == ErrorClass::Transient => break,
                        // The task's own failure, or the session gone: the polls tell.
                        Err(_) => {
                            inner.signal(PeerSignal::Changed { task_id });
                            return;
                        }
                    }
                }
            }
            Err(e) if e.class() == ErrorClass::Transient => {}
            Err(_) => return,
        }
        failures += 1;
        if failures > MAX_WATCH_FAILURES {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500).saturating_mul(1 << failures.min(6))).await;
    }
}

/// A question's key: its JSON-RPC id as text (numbers as written, strings as they are).
fn request_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The modern task fields of a legacy task (no payload yet).
fn modern_fields(task: &LegacyTask) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("taskId".into(), Value::String(task.task_id.clone()));
    let status = serde_json::to_value(task.status).unwrap_or(Value::Null);
    map.insert("status".into(), status);
    if let Some(message) = &task.status_message {
        map.insert("statusMessage".into(), Value::String(message.clone()));
    }
    map.insert("createdAt".into(), Value::String(task.created_at.clone()));
    map.insert(
        "lastUpdatedAt".into(),
        Value::String(task.last_updated_at.clone()),
    );
    map.insert(
        "ttlMs".into(),
        task.ttl.map(Value::from).unwrap_or(Value::Null),
    );
    if let Some(interval) = task.poll_interval {
        map.insert("pollIntervalMs".into(), Value::from(interval));
    }
    map
}

/// A failed task whose `tasks/result` is an (`isError`) tool result: its text as the error, the
/// result kept whole in `data`.
fn failed_result_error(task: &LegacyTask, result: &ToolResult) -> Value {
    let text = result.text();
    let message = if text.trim().is_empty() {
        task.status_message.clone().unwrap_or_default()
    } else {
        crate::text::truncate(&text, 2000)
    };
    json!({"code": -32603, "message": message, "data": {"result": Value::Object(result.0.clone())}})
}

/// A finished task's JSON-RPC error as the server sent it, or the failure to fetch it.
fn task_error(error: Error) -> Result<RpcError> {
    match error {
        Error::Rpc { error, .. } => Ok(error),
        Error::InvalidParams { message, data, .. } => Ok(RpcError {
            code: -32602,
            message,
            data,
        }),
        Error::MethodNotFound { method } => Ok(RpcError {
            code: -32601,
            message: format!("method not found: {method}"),
            data: None,
        }),
        other => Err(other),
    }
}
