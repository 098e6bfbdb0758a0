//! Commands over the ledger: servers, calls recorded before they are sent, the engine (`watch`),
//! the inbox, answers, cancels, adoption and the timeline. Everything here goes through
//! `countersign_core::{actions, engine, ledger}`; a running engine picks up what these commands
//! write through its change feed, and when none runs, the command starts one for as long as it
//! needs it.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use countersign_core::actions::{self, Called};
use countersign_core::engine::lock::LockError;
use countersign_core::engine::{self, Engine, EngineConfig};
use countersign_core::ledger::audit;
use countersign_core::ledger::events::{self, EventKind, StoredEvent, TaskOrigin};
use countersign_core::ledger::inputs;
use countersign_core::ledger::servers::{self, ServerRecord};
use countersign_core::ledger::tasks::{self, Filter, LedgerStatus, TaskRecord};
use countersign_core::ledger::{self, Ledger};
use countersign_core::mcp::{self, ToolCall};
use countersign_core::secret::Sensitive;
use countersign_core::secrets::{Secrets, Tokens};
use serde_json::{json, Map, Value};

use crate::follow::AnswerPolicy;
use crate::terminal::{self, say, tell};
use crate::{
    CliError, Global, EXIT_CANCELLED, EXIT_COMPLETED, EXIT_FAILED, EXIT_INPUT_NEEDED,
    EXIT_TOOL_ERROR, EXIT_UNAVAILABLE,
};

/// How long `answer`/`cancel` wait for the server's acknowledgement before saying it is pending.
const ACK_WAIT: Duration = Duration::from_secs(15);

/// The ledger and, when this process needs one, its own engine.
pub(crate) struct Desk {
    pub(crate) ledger: Arc<Ledger>,
    data_dir: PathBuf,
    engine: Option<Engine>,
    config: EngineConfig,
    /// Each server's own token, from the OS keyring (the entries the app uses too).
    tokens: Tokens,
    tokens_loaded: bool,
}

impl Desk {
    pub(crate) fn open(global: &Global) -> Result<Self, CliError> {
        let data_dir = global
            .data_dir
            .clone()
            .unwrap_or_else(ledger::default_data_dir);
        let ledger = Arc::new(Ledger::open(&data_dir)?);
        let mut config = EngineConfig::new(&data_dir);
        config.client.request_timeout = Duration::from_secs(global.timeout.max(1));
        // Ledger mode never sends `--token` anywhere: each server gets its own token from the
        // keyring, or none. (`servers add --token` stores one; direct mode keeps `--token`.)
        let tokens = Tokens::new(Secrets::default(), &data_dir);
        config.tokens = Some(tokens.provider());
        Ok(Self {
            ledger,
            data_dir,
            engine: None,
            config,
            tokens,
            tokens_loaded: false,
        })
    }

    /// Reads the tokens of the servers that have one from the keyring, once, before anything
    /// talks to a server. A token that cannot be read is said on stderr: that server's requests
    /// go without it (and will likely be refused), the others are not affected.
    async fn load_tokens(&mut self) -> Result<(), CliError> {
        if self.tokens_loaded {
            return Ok(());
        }
        self.tokens_loaded = true;
        let list = self.ledger.read(servers::list)?;
        let names: std::collections::HashMap<i64, String> =
            list.iter().map(|s| (s.id, s.name.clone())).collect();
        let with_token: Vec<i64> = list.iter().filter(|s| s.has_token).map(|s| s.id).collect();
        if with_token.is_empty() {
            return Ok(());
        }
        for (id, e) in self.tokens.load(with_token).await {
            let name = names.get(&id).map(String::as_str).unwrap_or("?");
            tell!("warning: the token of server {name} cannot be read from the OS keyring ({e}); its requests go without it");
        }
        Ok(())
    }

    /// Makes sure an engine serves this ledger: the running one, or our own. Returns the pid
    /// of another process's engine when that one serves it.
    async fn ensure_engine(&mut self) -> Result<Option<u32>, CliError> {
        if self.engine.is_some() {
            return Ok(None);
        }
        self.load_tokens().await?;
        match Engine::start(self.config.clone()).await {
            Ok(engine) => {
                self.engine = Some(engine);
                Ok(None)
            }
            Err(engine::Error::Lock(LockError::Held { pid })) => Ok(Some(pid.unwrap_or(0))),
            Err(e) => Err(e.into()),
        }
    }

    fn nudge(&self) {
        if let Some(engine) = &self.engine {
            engine.nudge();
        }
    }

    pub(crate) async fn close(mut self) {
        if let Some(engine) = self.engine.take() {
            engine.shutdown().await;
        }
        self.ledger.close();
    }

    fn server(&self, name: &str) -> Result<ServerRecord, CliError> {
        self.ledger
            .read(|c| servers::by_name(c, name))?
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "no server named {name:?} (add it with `countersign servers add {name} URL`)"
                ))
            })
    }

    /// A client for `server` carrying that server's own token (if it has one).
    async fn client(&mut self, server: &ServerRecord) -> Result<mcp::Client, CliError> {
        self.load_tokens().await?;
        Ok(engine::make_client(server, &self.config)?)
    }

    fn task(&self, id: &str) -> Result<TaskRecord, CliError> {
        Ok(self.ledger.read(|c| tasks::find_one(c, id))?)
    }

    fn last_event(&self) -> Result<i64, CliError> {
        Ok(self.ledger.read(events::last_id)?)
    }

    /// Waits for an event about `task` after `cursor` that `done` accepts.
    async fn wait_for(
        &self,
        task: i64,
        cursor: i64,
        wait: Duration,
        done: impl Fn(&EventKind) -> bool,
    ) -> Result<Option<StoredEvent>, CliError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut cursor = cursor;
        while tokio::time::Instant::now() < deadline {
            let batch = self
                .ledger
                .events_after(
                    cursor,
                    256,
                    Duration::from_millis(100),
                    deadline - tokio::time::Instant::now(),
                )
                .await?;
            for event in batch {
                cursor = event.id;
                if event.task == Some(task) && done(&event.kind) {
                    return Ok(Some(event));
                }
            }
        }
        Ok(None)
    }
}

pub(crate) async fn servers_add(
    desk: &Desk,
    name: &str,
    url: &str,
    token: Option<Sensitive<String>>,
    discover: bool,
    json_out: bool,
) -> Result<u8, CliError> {
    // Validate the URL through the client, and learn what the server is, before storing it;
    // the token given is this server's, so discovery carries it.
    let probe = mcp::Client::new(mcp::Endpoint::new(url).with_token(token.clone()))?;
    let discovery = if discover {
        Some(probe.discover().await?)
    } else {
        None
    };
    let actor = audit::os_user();
    // Stored without the token flag: the flag flips once the token is in the keyring, so a
    // running engine never builds this server's client with a token it cannot read.
    let mut record =
        actions::add_server(&desk.ledger, name, url, false, discovery.as_ref(), &actor).await?;
    if let Some(token) = token {
        if let Err(e) = desk.tokens.store(record.id, token).await {
            // A server whose token could not be kept would fail every request: undo the add.
            let _ = actions::remove_server(&desk.ledger, record.id, &actor).await;
            return Err(CliError::Keyring(e));
        }
        let id = record.id;
        record = desk
            .ledger
            .write(move |ctx| {
                let s = servers::get(ctx.conn, id)?;
                servers::update(ctx.conn, id, &s.url, true, s.poll_floor_ms)?;
                servers::get(ctx.conn, id)
            })
            .await?;
    }
    if json_out {
        terminal::json(&serde_json::to_value(&record).unwrap_or(Value::Null));
    } else {
        let identity = record
            .server_info
            .as_ref()
            .and_then(|i| i.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("not discovered");
        say!("added server {} → {} ({identity})", record.name, record.url);
    }
    Ok(EXIT_COMPLETED)
}

pub(crate) fn servers_list(desk: &Desk, json_out: bool) -> Result<u8, CliError> {
    let list = desk.ledger.read(servers::list)?;
    if json_out {
        terminal::json(&serde_json::to_value(&list).unwrap_or(Value::Null));
    } else if list.is_empty() {
        say!("no servers; add one with `countersign servers add NAME URL`");
    } else {
        for s in list {
            let identity = s
                .server_info
                .as_ref()
                .and_then(|i| i.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("-");
            say!("{:<16} {:<40} {identity}", s.name, s.url);
        }
    }
    Ok(EXIT_COMPLETED)
}

pub(crate) async fn servers_remove(
    desk: &Desk,
    name: &str,
    json_out: bool,
) -> Result<u8, CliError> {
    let server = desk.server(name)?;
    // The token first: a server row without its secret is harmless, a secret left behind by a
    // removed server is not.
    if server.has_token {
        desk.tokens
            .delete(server.id)
            .await
            .map_err(CliError::Keyring)?;
    }
    actions::remove_server(&desk.ledger, server.id, &audit::os_user()).await?;
    if json_out {
        terminal::json(&json!({"removed": name}));
    } else {
        say!("removed server {name} and the tasks tracked on it");
    }
    Ok(EXIT_COMPLETED)
}

/// `countersign watch`: the engine in the foreground, printing events as lines.
pub(crate) async fn watch(desk: &mut Desk, json_out: bool) -> Result<u8, CliError> {
    let mut cursor = desk.last_event()?;
    // A second engine on the same ledger would double-poll and double-notify: refuse.
    if let Some(pid) = desk.ensure_engine().await? {
        return Err(engine::Error::Lock(LockError::Held {
            pid: Some(pid).filter(|p| *p != 0),
        })
        .into());
    }
    let resumed = desk.engine.as_ref().map(Engine::resumed).unwrap_or(0);
    tell!(
        "countersign engine on {} — resumed {resumed} unfinished task(s); Ctrl-C to stop",
        desk.data_dir.display()
    );
    // The ledger cannot carry news of its own unwritability: that goes to stderr.
    let mut health = match desk.engine.as_ref() {
        Some(engine) => engine.ledger_health(),
        None => tokio::sync::watch::channel(engine::LedgerHealth::Writable).1,
    };
    let stop = crate::shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Ok(()) = health.changed() => match &*health.borrow_and_update() {
                engine::LedgerHealth::Unwritable { pending, message } => tell!(
                    "engine: cannot write the ledger ({message}); {pending} task change(s) kept and retried"
                ),
                engine::LedgerHealth::Writable => {
                    tell!("engine: the ledger is writable again; pending changes are recorded")
                }
            },
            batch = desk.ledger.events_after(cursor, 512, Duration::from_millis(100), Duration::from_millis(500)) => {
                for event in batch? {
                    cursor = event.id;
                    print_event(&event, json_out);
                }
            }
        }
    }
    Ok(EXIT_COMPLETED)
}

pub(crate) fn print_event(event: &StoredEvent, json_out: bool) {
    if json_out {
        terminal::json(&serde_json::to_value(event).unwrap_or(Value::Null));
    } else {
        say!("{}", event_line(event));
    }
}

/// One event as a line of text (server text in it is neutralised when printed).
fn event_line(event: &StoredEvent) -> String {
    let at = time_of_day(event.at);
    let who = match (&event.server, &event.task_id) {
        (Some(s), Some(t)) => format!("{s}/{t}"),
        (Some(s), None) => s.clone(),
        (None, Some(t)) => t.clone(),
        (None, None) => "-".into(),
    };
    format!("{at} {who} {}", describe(&event.kind))
}

fn time_of_day(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("{h:02}:{m:02}:{s:02}Z")
}

fn describe(kind: &EventKind) -> String {
    match kind {
        EventKind::TaskCreated {
            status,
            tool,
            origin,
            ..
        } => format!(
            "task_created {status} ({}{})",
            tool.as_deref().unwrap_or("?"),
            if *origin == TaskOrigin::Adopted {
                ", adopted"
            } else {
                ""
            }
        ),
        EventKind::TaskUpdated {
            status,
            previous_status,
            status_message,
        } => {
            let change = if status == previous_status {
                status.to_string()
            } else {
                format!("{previous_status} → {status}")
            };
            match status_message {
                Some(m) => format!("task_updated {change}: {m}"),
                None => format!("task_updated {change}"),
            }
        }
        EventKind::InputRequested { key, request } => format!(
            "input_requested {key}: {}",
            request["params"]["message"].as_str().unwrap_or("")
        ),
        EventKind::InputAnswered {
            key, action, by, ..
        } => format!("input_answered {key}: {action} by {by}"),
        EventKind::TaskFinished {
            status,
            result,
            error,
        } => {
            let detail = match (result, error) {
                (Some(r), _) => mcp::ToolResult::parse(r)
                    .map(|r| r.text())
                    .unwrap_or_default(),
                (_, Some(e)) => format!("{} {}", e["code"], e["message"].as_str().unwrap_or("")),
                _ => String::new(),
            };
            format!("task_finished {status} {detail}")
                .trim_end()
                .to_owned()
        }
        EventKind::PollFailed {
            code,
            message,
            retry_in_ms,
        } => format!(
            "poll_failed [{code}] {message}; retrying in {:.1}s",
            *retry_in_ms as f64 / 1000.0
        ),
        other => serde_json::to_value(other)
            .map(|v| compact(other.name(), &v))
            .unwrap_or_else(|_| other.name().into()),
    }
}

fn compact(name: &str, value: &Value) -> String {
    let mut fields: Vec<String> = Vec::new();
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            if k == "kind" {
                continue;
            }
            fields.push(format!(
                "{k}={}",
                v.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
            ));
        }
    }
    if fields.is_empty() {
        name.into()
    } else {
        format!("{name} {}", fields.join(" "))
    }
}

pub(crate) fn tasks_list(
    desk: &Desk,
    status: Option<&str>,
    server: Option<String>,
    tool: Option<String>,
    json_out: bool,
) -> Result<u8, CliError> {
    let status = match status {
        Some(s) => Some(LedgerStatus::parse(s).ok_or_else(|| CliError::Usage(format!("unknown status {s:?} (working, input_required, completed, failed, cancelled, expired, lost)")))?),
        None => None,
    };
    let list = desk.ledger.read(|c| {
        tasks::list(
            c,
            &Filter {
                status,
                server,
                tool,
                limit: None,
            },
        )
    })?;
    if json_out {
        terminal::json(&serde_json::to_value(&list).unwrap_or(Value::Null));
    } else if list.is_empty() {
        say!("no tasks");
    } else {
        for t in list {
            say!(
                "#{:<5} {:<14} {:<12} {:<20} {} {}",
                t.id,
                t.status.as_str(),
                t.server,
                t.tool.as_deref().unwrap_or("(adopted)"),
                t.task_id,
                t.status_message.as_deref().unwrap_or("")
            );
        }
    }
    Ok(EXIT_COMPLETED)
}

pub(crate) fn task_show(desk: &Desk, id: &str, json_out: bool) -> Result<u8, CliError> {
    let task = desk.task(id)?;
    let row = task.id;
    let timeline = desk.ledger.read(|c| events::for_task(c, row))?;
    let questions = desk.ledger.read(|c| inputs::for_task(c, row))?;
    if json_out {
        terminal::json(&json!({"task": task, "questions": questions, "timeline": timeline}));
        return Ok(EXIT_COMPLETED);
    }
    say!(
        "task #{} {} on {} ({})",
        task.id,
        task.task_id,
        task.server,
        task.server_url
    );
    say!(
        "  tool:      {}",
        task.tool.as_deref().unwrap_or("(adopted)")
    );
    if let Some(args) = &task.arguments {
        say!("  arguments: {args}");
    }
    say!(
        "  status:    {}{}",
        task.status,
        task.status_message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default()
    );
    if let Some(e) = &task.poll_error {
        say!("  polling:   failing: {e}");
    }
    say!("  timeline:");
    for event in &timeline {
        say!("    {}", event_line(event));
    }
    Ok(EXIT_COMPLETED)
}

pub(crate) fn inbox(desk: &Desk, json_out: bool) -> Result<u8, CliError> {
    let items = desk.ledger.read(inputs::inbox)?;
    if json_out {
        terminal::json(&serde_json::to_value(&items).unwrap_or(Value::Null));
        return Ok(EXIT_COMPLETED);
    }
    if items.is_empty() {
        say!("inbox empty: no question waits for an answer");
    }
    let now = ledger::now_ms();
    for item in items {
        let waited = (now - item.input.requested_at).max(0) / 1000;
        let message = item.input.request["params"]["message"]
            .as_str()
            .unwrap_or("");
        say!(
            "{} {} [{}] {} (waiting {waited}s, key {})",
            item.server,
            item.task_id,
            item.tool.as_deref().unwrap_or("?"),
            message,
            item.input.key
        );
    }
    Ok(EXIT_COMPLETED)
}

pub(crate) fn audit_log(desk: &Desk, csv: bool, json_out: bool) -> Result<u8, CliError> {
    let records = desk.ledger.read(audit::list)?;
    if csv {
        terminal::exact(&audit::to_csv(&records));
    } else if json_out {
        terminal::json(&serde_json::to_value(&records).unwrap_or(Value::Null));
    } else {
        for r in records {
            say!(
                "{} {} {} {} {} {}",
                time_of_day(r.at),
                r.actor,
                r.action,
                r.server.unwrap_or_default(),
                r.task_id.unwrap_or_default(),
                r.detail
            );
        }
    }
    Ok(EXIT_COMPLETED)
}

/// Waits for the engine to deliver; starts our own if none runs.
async fn await_delivery(
    desk: &mut Desk,
    task: i64,
    cursor: i64,
    what: &str,
    json_out: bool,
    done: impl Fn(&EventKind) -> Option<Result<(), String>>,
) -> Result<u8, CliError> {
    let other = desk.ensure_engine().await?;
    desk.nudge();
    let found = desk
        .wait_for(task, cursor, ACK_WAIT, |k| done(k).is_some())
        .await?;
    let outcome = found.as_ref().and_then(|e| done(&e.kind));
    let (code, status, message) = match outcome {
        Some(Ok(())) => (EXIT_COMPLETED, "delivered", format!("{what} delivered")),
        Some(Err(m)) => (EXIT_UNAVAILABLE, "refused", format!("{what} refused by the server: {m}")),
        None => (
            EXIT_COMPLETED,
            "pending",
            match other {
                Some(pid) => format!("{what} recorded; the running engine (pid {pid}) delivers it as soon as the server answers"),
                None => format!("{what} recorded; delivery still pending (the server did not answer in {}s); `countersign watch` keeps trying", ACK_WAIT.as_secs()),
            },
        ),
    };
    if json_out {
        terminal::json(&json!({"delivery": status, "message": message}));
    } else {
        say!("{message}");
    }
    Ok(code)
}

pub(crate) async fn answer(
    desk: &mut Desk,
    id: &str,
    key: Option<&str>,
    policy: &AnswerPolicy,
    json_out: bool,
) -> Result<u8, CliError> {
    let task = desk.task(id)?;
    let pending = actions::pending_keys(&desk.ledger, task.id)?;
    let chosen: Vec<_> = pending
        .into_iter()
        .filter(|q| key.is_none_or(|k| q.key == k))
        .collect();
    if chosen.is_empty() {
        return Err(CliError::Usage(match key {
            Some(k) => format!("task {} has no pending question {k:?}", task.task_id),
            None => format!("task {} has no pending question", task.task_id),
        }));
    }
    let cursor = desk.last_event()?;
    let actor = audit::os_user();
    let mut keys = Vec::new();
    for question in &chosen {
        let request: mcp::InputRequest = serde_json::from_value(question.request.clone())
            .map_err(|e| CliError::Usage(format!("stored question is malformed: {e}")))?;
        let response = policy
            .automatic(&request)
            .ok_or_else(|| CliError::Usage("answer with --accept JSON or --decline".into()))?;
        actions::answer(&desk.ledger, task.id, &question.key, response, &actor).await?;
        keys.push(question.key.clone());
    }
    await_delivery(
        desk,
        task.id,
        cursor,
        &format!("answer to {} question(s)", keys.len()),
        json_out,
        move |k| match k {
            EventKind::UpdateAcknowledged { keys: acked }
                if keys.iter().all(|q| acked.contains(q)) =>
            {
                Some(Ok(()))
            }
            EventKind::UpdateFailed { message, .. } => Some(Err(message.clone())),
            _ => None,
        },
    )
    .await
}

pub(crate) async fn cancel(desk: &mut Desk, id: &str, json_out: bool) -> Result<u8, CliError> {
    let task = desk.task(id)?;
    let cursor = desk.last_event()?;
    actions::cancel(&desk.ledger, task.id, &audit::os_user()).await?;
    await_delivery(
        desk,
        task.id,
        cursor,
        "cancel request",
        json_out,
        |k| match k {
            EventKind::CancelAcknowledged => Some(Ok(())),
            EventKind::CancelFailed { message } => Some(Err(message.clone())),
            _ => None,
        },
    )
    .await
}

pub(crate) async fn adopt(
    desk: &mut Desk,
    server: &str,
    task_id: &str,
    json_out: bool,
) -> Result<u8, CliError> {
    let server = desk.server(server)?;
    let client = desk.client(&server).await?;
    let record = actions::adopt(&desk.ledger, &client, &server, task_id, &audit::os_user()).await?;
    desk.nudge();
    if json_out {
        terminal::json(&serde_json::to_value(&record).unwrap_or(Value::Null));
    } else {
        say!(
            "adopted task {} on {} as #{} ({})",
            record.task_id,
            record.server,
            record.id,
            record.status
        );
    }
    Ok(EXIT_COMPLETED)
}

/// `countersign call NAME TOOL …`: recorded before it is sent; `--no-follow` returns once the
/// handle is on disk, otherwise follows the task through the ledger to its end.
pub(crate) async fn call(
    desk: &mut Desk,
    server: &str,
    tool: &str,
    arguments: Option<Map<String, Value>>,
    policy: AnswerPolicy,
    no_follow: bool,
    json_out: bool,
) -> Result<u8, CliError> {
    let server = desk.server(server)?;
    let client = desk.client(&server).await?;
    let _ = client.list_tools().await?;
    let actor = audit::os_user();
    let mut call = ToolCall::new(tool, arguments);
    // The same bound as direct mode: a server that answers every round of answers with new
    // questions must not keep this command (and its call intents) going for ever.
    let mut rounds = 0;
    let record = loop {
        if rounds == mcp::MAX_MRTR_ROUNDS {
            return Err(CliError::MrtrRounds {
                tool: tool.to_owned(),
                rounds,
            });
        }
        rounds += 1;
        match actions::call(&desk.ledger, &client, &server, &call, &actor).await? {
            Called::Complete(result) => {
                return Ok(crate::follow::report_complete(&result, json_out))
            }
            Called::InputRequired(question) => {
                let mut responses = Map::new();
                for (key, request) in &question.input_requests {
                    let Some(response) = policy.automatic(request) else {
                        if json_out {
                            terminal::json(
                                &json!({"outcome": "input_needed", "taskId": null, "inputRequests": question.input_requests}),
                            );
                        } else {
                            tell!("the server asks before running the tool; answer with --accept JSON or --decline");
                        }
                        return Ok(EXIT_INPUT_NEEDED);
                    };
                    responses.insert(key.clone(), response);
                }
                call = call.retry_with(&question, responses);
            }
            Called::Task(record) => break record,
        }
    };
    desk.nudge();
    if no_follow {
        if json_out {
            terminal::json(
                &json!({"taskId": record.task_id, "row": record.id, "status": record.status, "server": record.server, "task": record.state}),
            );
        } else {
            say!(
                "task {} recorded as #{} ({}); `countersign watch` follows it",
                record.task_id,
                record.id,
                record.status
            );
        }
        return Ok(EXIT_COMPLETED);
    }
    follow(desk, record, &policy, json_out).await
}

async fn follow(
    desk: &mut Desk,
    record: TaskRecord,
    policy: &AnswerPolicy,
    json_out: bool,
) -> Result<u8, CliError> {
    let other = desk.ensure_engine().await?;
    if let Some(pid) = other {
        tell!("following through the running engine (pid {pid})");
    }
    desk.nudge();
    if !json_out {
        say!("task {} {}", record.task_id, record.status);
    }
    let mut cursor = desk
        .ledger
        .read(|c| events::for_task(c, record.id))?
        .last()
        .map(|e| e.id - 1)
        .unwrap_or(0);
    let actor = audit::os_user();
    loop {
        let batch = desk
            .ledger
            .events_after(
                cursor,
                512,
                Duration::from_millis(100),
                Duration::from_secs(1),
            )
            .await?;
        for event in batch {
            cursor = event.id;
            if event.task != Some(record.id) {
                continue;
            }
            match &event.kind {
                EventKind::TaskUpdated { .. }
                | EventKind::PollFailed { .. }
                | EventKind::PollRecovered { .. }
                    if !json_out =>
                {
                    print_event(&event, false)
                }
                EventKind::InputRequested { key, request } => {
                    let parsed: mcp::InputRequest = serde_json::from_value(request.clone())
                        .map_err(|e| CliError::Usage(format!("malformed question: {e}")))?;
                    let response = match policy.automatic(&parsed) {
                        Some(r) => r,
                        None if std::io::stdin().is_terminal() => {
                            crate::follow::ask_one(&record.server, &parsed)?
                        }
                        None => {
                            if json_out {
                                terminal::json(
                                    &json!({"outcome": "input_needed", "taskId": record.task_id, "inputRequests": {key.clone(): request}}),
                                );
                            } else {
                                tell!("input needed and no terminal to ask on: answer with `countersign answer {} --accept JSON` or --decline", record.task_id);
                            }
                            return Ok(EXIT_INPUT_NEEDED);
                        }
                    };
                    if !json_out {
                        say!(
                            "  answering {key}: {}",
                            response["action"].as_str().unwrap_or("?")
                        );
                    }
                    actions::answer(&desk.ledger, record.id, key, response, &actor).await?;
                    desk.nudge();
                }
                EventKind::TaskFinished {
                    status,
                    result,
                    error,
                } => {
                    let is_error = result
                        .as_ref()
                        .and_then(|r| r.get("isError"))
                        .and_then(Value::as_bool)
                        == Some(true);
                    let code = match status {
                        LedgerStatus::Completed if is_error => EXIT_TOOL_ERROR,
                        LedgerStatus::Completed => EXIT_COMPLETED,
                        LedgerStatus::Failed => EXIT_FAILED,
                        LedgerStatus::Cancelled => EXIT_CANCELLED,
                        // `task_finished` is only written for the three terminal statuses
                        // above; anything else here would be a corrupted ledger.
                        LedgerStatus::Working
                        | LedgerStatus::InputRequired
                        | LedgerStatus::Expired
                        | LedgerStatus::Lost => EXIT_UNAVAILABLE,
                    };
                    if json_out {
                        let outcome = match code {
                            EXIT_TOOL_ERROR => "tool_error",
                            EXIT_COMPLETED => "completed",
                            EXIT_FAILED => "failed",
                            _ => "cancelled",
                        };
                        let mut out = json!({"outcome": outcome, "taskId": record.task_id});
                        if let Some(r) = result {
                            out["result"] = r.clone();
                        }
                        if let Some(e) = error {
                            out["error"] = e.clone();
                        }
                        terminal::json(&out);
                    } else {
                        print_event(&event, false);
                    }
                    return Ok(code);
                }
                EventKind::TaskLost { message } => {
                    if json_out {
                        terminal::json(
                            &json!({"outcome": "lost", "taskId": record.task_id, "error": {"message": message}}),
                        );
                    } else {
                        print_event(&event, false);
                    }
                    return Ok(EXIT_UNAVAILABLE);
                }
                EventKind::TaskExpired { .. } => {
                    if json_out {
                        terminal::json(&json!({"outcome": "expired", "taskId": record.task_id}));
                    } else {
                        print_event(&event, false);
                    }
                    return Ok(EXIT_UNAVAILABLE);
                }
                _ => {}
            }
        }
    }
}
