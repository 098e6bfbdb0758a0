//! Commands over the ledger: servers, calls recorded before they are sent, the engine (`watch`),
//! the inbox, answers, cancels, adoption and the timeline. Every action goes through the core's
//! [`Console`] (the one the app uses); this module only prints. A running engine picks up what
//! these commands record through its change feed, and when none runs, the command starts one
//! for as long as it needs it.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::Duration;

use countersign_core::console::link::TaskLink;
use countersign_core::console::view::{EngineState, InputResponse, SecretText, ServerAddRequest};
use countersign_core::console::{CallStep, Console, Setup};
use countersign_core::engine::lock::LockError;
use countersign_core::engine::{self, Engine};
use countersign_core::ledger;
use countersign_core::ledger::audit;
use countersign_core::ledger::events::{EventKind, StoredEvent, TaskOrigin};
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::ledger::tasks::{Filter, LedgerStatus, TaskRecord};
use countersign_core::mcp::{self, ToolCall};
use countersign_core::sensitive::Sensitive;
use serde_json::{json, Map, Value};

use crate::direct::AnswerPolicy;
use crate::terminal::{self, say, tell};
use crate::{
    CliError, Global, EXIT_CANCELLED, EXIT_COMPLETED, EXIT_FAILED, EXIT_INPUT_NEEDED,
    EXIT_TOOL_ERROR, EXIT_UNAVAILABLE,
};

/// How long `answer`/`cancel` wait for the server's acknowledgement before saying it is pending.
const ACK_WAIT: Duration = Duration::from_secs(15);

/// The CLI's console: the core's [`Console`] (the one the app uses), opened with the engine
/// started only when a command needs one.
pub(crate) struct Desk {
    pub(crate) console: Console,
}

impl Desk {
    pub(crate) async fn open(global: &Global) -> Result<Self, CliError> {
        let data_dir = global
            .data_dir
            .clone()
            .unwrap_or_else(ledger::default_data_dir);
        let mut setup = Setup::new(&data_dir);
        setup.config.client.request_timeout = Duration::from_secs(global.timeout.max(1));
        // Ledger mode never sends `--token` anywhere: each server gets its own token from the
        // keyring, or none. (`servers add --token` stores one; direct mode keeps `--token`.)
        setup.warn = Some(Arc::new(|message: &str| tell!("warning: {message}")));
        let console = Console::open(setup).await?;
        Ok(Self { console })
    }

    /// The core console (the gateway's commands call it directly).
    pub(crate) fn console(&self) -> &Console {
        &self.console
    }

    /// The console itself, for a command that shares it (the gateway's endpoint).
    pub(crate) fn into_console(self) -> Console {
        self.console
    }

    /// Makes sure an engine serves this ledger: the running one, or our own. Returns the pid
    /// of another process's engine when that one serves it.
    pub(crate) async fn ensure_engine(&self) -> Result<Option<u32>, CliError> {
        Ok(match self.console.ensure_engine().await? {
            EngineState::Running { .. } => None,
            EngineState::Elsewhere { pid } => Some(pid.unwrap_or(0)),
        })
    }

    pub(crate) async fn close(self) {
        self.console.close().await;
    }

    pub(crate) async fn server(&self, name: &str) -> Result<ServerRecord, CliError> {
        self.console.server_named(name).await?.ok_or_else(|| {
            CliError::Usage(format!(
                "no server named {name:?} (add it with `countersign servers add {name} URL`)"
            ))
        })
    }

    async fn task(&self, id: &str) -> Result<TaskRecord, CliError> {
        Ok(self.console.find_task(id).await?)
    }

    fn last_event(&self) -> Result<i64, CliError> {
        Ok(self.console.last_event_id()?)
    }

    /// Records an answer given as the elicitation response JSON (`{"action": …}`).
    async fn answer(&self, row: i64, key: &str, response: Value) -> Result<(), CliError> {
        let response: InputResponse = serde_json::from_value(response)
            .map_err(|e| CliError::Usage(format!("not an answer: {e}")))?;
        Ok(self.console.answer(row, key, &response).await?)
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
                .console
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
    with: SignInWith,
    json_out: bool,
) -> Result<u8, CliError> {
    // The token given is this server's: discovery carries it, the keyring keeps it.
    let request = |discover: bool, token: Option<Sensitive<String>>| ServerAddRequest {
        name: name.to_owned(),
        url: url.to_owned(),
        token: token.map(SecretText),
        discover,
    };
    // A server that answers 401 without a token we were given needs an OAuth sign-in: the
    // console registers it undiscovered, then signs in (which discovers it with the token).
    let record = desk
        .console
        .add_server_signing_in(
            request(discover, token),
            with.client,
            opener(with.browser),
            SIGN_IN_TIMEOUT,
        )
        .await?;
    if json_out {
        terminal::json(&serde_json::to_value(&record).unwrap_or(Value::Null));
    } else {
        let identity = record
            .server_info
            .as_ref()
            .and_then(|i| i.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("not discovered");
        match era_of(&record) {
            Some(era) => say!(
                "added server {} → {} ({identity}; {era})",
                record.name,
                record.url
            ),
            None => say!("added server {} → {} ({identity})", record.name, record.url),
        }
    }
    Ok(EXIT_COMPLETED)
}

/// How long the CLI waits for the person to finish signing in in the browser.
const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);

/// `servers login NAME`: signs in (again) to an OAuth-protected server.
pub(crate) async fn servers_login(
    desk: &Desk,
    name: &str,
    with: SignInWith,
    json_out: bool,
) -> Result<u8, CliError> {
    let server = desk.server(name).await?;
    let record = desk
        .console
        .sign_in_as(
            server.id,
            with.client,
            opener(with.browser),
            SIGN_IN_TIMEOUT,
        )
        .await?;
    if json_out {
        terminal::json(&json!({"signedIn": record.name}));
    } else {
        say!("signed in to {}", record.name);
    }
    Ok(EXIT_COMPLETED)
}

/// `servers logout NAME [--forget-client]`: forgets the server's tokens (and, asked, its
/// client registration).
pub(crate) async fn servers_logout(
    desk: &Desk,
    name: &str,
    forget_client: bool,
    json_out: bool,
) -> Result<u8, CliError> {
    let server = desk.server(name).await?;
    if forget_client {
        desk.console.forget_sign_in(server.id).await?;
    } else {
        desk.console.sign_out(server.id).await?;
    }
    if json_out {
        terminal::json(&json!({"signedOut": name, "clientForgotten": forget_client}));
    } else if forget_client {
        say!("signed out of {name} and forgot its client registration; `countersign servers login {name}` registers again");
    } else {
        say!("signed out of {name}; `countersign servers login {name}` signs in again as the same client");
    }
    Ok(EXIT_COMPLETED)
}

/// How to sign in: as which client, and whether to open a browser.
pub(crate) struct SignInWith {
    /// Pre-registered client, metadata document URL (default: dynamic registration).
    pub(crate) client: countersign_core::console::SignInClient,
    /// Open the browser (else only print the URL).
    pub(crate) browser: bool,
}

/// Shows the authorization URL (its host first) and, unless `--no-browser`, opens the browser.
fn opener(
    browser: bool,
) -> impl Fn(String) -> std::future::Ready<countersign_core::auth::Result<()>> {
    move |url: String| {
        let host = countersign_core::notice::link_host(&url).unwrap_or_else(|| url.clone());
        tell!("sign in at {host} in your browser:\n  {url}");
        if browser {
            if let Err(e) = countersign_core::browser::open(&url) {
                tell!("could not open a browser ({e}); open the URL above yourself");
            }
        }
        std::future::ready(Ok(()))
    }
}

pub(crate) async fn servers_list(desk: &Desk, json_out: bool) -> Result<u8, CliError> {
    let list = desk.console.server_records().await?;
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
            let era = era_of(&s).unwrap_or_else(|| "-".into());
            let address = crate::stdio_mode::command_line(&s);
            say!("{:<16} {:<40} {era:<18} {identity}", s.name, address);
        }
    }
    Ok(EXIT_COMPLETED)
}

/// The era and version a check found, as `servers` prints them: `legacy 2025-11-25`.
fn era_of(server: &ServerRecord) -> Option<String> {
    let era = match server.era? {
        mcp::Era::Modern => "modern",
        mcp::Era::Legacy => "legacy",
    };
    Some(match &server.protocol_version {
        Some(version) => format!("{era} {version}"),
        None => era.to_owned(),
    })
}

pub(crate) async fn servers_remove(
    desk: &Desk,
    name: &str,
    json_out: bool,
) -> Result<u8, CliError> {
    let server = desk.server(name).await?;
    desk.console.remove_server(server.id).await?;
    if json_out {
        terminal::json(&json!({"removed": name}));
    } else {
        say!("removed server {name} and the tasks tracked on it");
    }
    Ok(EXIT_COMPLETED)
}

/// `countersign watch`: the engine in the foreground, printing events as lines.
pub(crate) async fn watch(desk: &Desk, json_out: bool) -> Result<u8, CliError> {
    let mut cursor = desk.last_event()?;
    // A second engine on the same ledger would double-poll and double-notify: refuse.
    if let Some(pid) = desk.ensure_engine().await? {
        return Err(engine::Error::Lock(LockError::Held {
            pid: Some(pid).filter(|p| *p != 0),
        })
        .into());
    }
    let resumed = desk.console.engine().map(Engine::resumed).unwrap_or(0);
    tell!(
        "countersign engine on {} — resumed {resumed} unfinished task(s); Ctrl-C to stop",
        desk.console.data_dir().display()
    );
    // The ledger cannot carry news of its own unwritability: that goes to stderr.
    let mut health = match desk.console.engine() {
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
            batch = desk.console.events_after(cursor, 512, Duration::from_millis(100), Duration::from_millis(500)) => {
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

pub(crate) async fn tasks_list(
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
    let filter = Filter {
        status,
        server,
        tool,
        limit: None,
    };
    if json_out {
        // The records as they are stored (state, arguments, result): what scripts read.
        let list = desk.console.task_records(&filter)?;
        terminal::json(&serde_json::to_value(&list).unwrap_or(Value::Null));
        return Ok(EXIT_COMPLETED);
    }
    let list = desk.console.tasks_matching(filter).await?;
    if list.is_empty() {
        say!("no tasks");
    }
    for t in list {
        // How it ended in the person's terms, the same words as the app's task list.
        let status = match &t.outcome {
            Some(outcome) => format!("{} · {outcome}", t.status.as_str()),
            None => t.status.as_str().to_owned(),
        };
        say!(
            "#{:<5} {:<14} {:<12} {:<20} {} {}",
            t.row,
            status,
            t.server_name,
            t.tool_name.as_deref().unwrap_or("(adopted)"),
            t.task_id,
            t.status_message.as_deref().unwrap_or("")
        );
    }
    Ok(EXIT_COMPLETED)
}

pub(crate) async fn task_show(desk: &Desk, id: &str, json_out: bool) -> Result<u8, CliError> {
    let task = desk.task(id).await?;
    let row = task.id;
    let (timeline, questions) = desk.console.task_history(row)?;
    // The link the app's "Copy link" gives: it opens this task in the app (a teammate's too).
    let link = TaskLink::to_url(&task.server_url, &task.task_id).to_string();
    if json_out {
        terminal::json(
            &json!({"task": task, "link": link, "questions": questions, "timeline": timeline}),
        );
        return Ok(EXIT_COMPLETED);
    }
    say!(
        "task #{} {} on {} ({})",
        task.id,
        task.task_id,
        task.server,
        task.server_url
    );
    say!("  link:      {link}");
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
    let items = desk.console.inbox_records()?;
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
    let records = desk.console.audit_records()?;
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
    desk: &Desk,
    task: i64,
    cursor: i64,
    what: &str,
    json_out: bool,
    done: impl Fn(&EventKind) -> Option<Result<(), String>>,
) -> Result<u8, CliError> {
    let other = desk.ensure_engine().await?;
    desk.console.nudge();
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
    desk: &Desk,
    id: &str,
    key: Option<&str>,
    policy: &AnswerPolicy,
    json_out: bool,
) -> Result<u8, CliError> {
    let task = desk.task(id).await?;
    let pending = desk.console.pending_questions(task.id).await?;
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
    let mut keys = Vec::new();
    for question in &chosen {
        let request: mcp::InputRequest = serde_json::from_value(question.request.clone())
            .map_err(|e| CliError::Usage(format!("stored question is malformed: {e}")))?;
        let response = policy
            .automatic(&request)
            .ok_or_else(|| CliError::Usage("answer with --accept JSON or --decline".into()))?;
        desk.answer(task.id, &question.key, response).await?;
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

pub(crate) async fn cancel(desk: &Desk, id: &str, json_out: bool) -> Result<u8, CliError> {
    let task = desk.task(id).await?;
    let cursor = desk.last_event()?;
    desk.console.cancel(task.id).await?;
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
    desk: &Desk,
    server: &str,
    task_id: &str,
    json_out: bool,
) -> Result<u8, CliError> {
    let server = desk.server(server).await?;
    let record = desk.console.adopt(server.id, task_id).await?;
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

/// `countersign adopt NAME --list`: the tasks the server lists, and which are tracked.
pub(crate) async fn adoptable(desk: &Desk, server: &str, json_out: bool) -> Result<u8, CliError> {
    let server = desk.server(server).await?;
    let list = desk.console.adoptable(server.id).await?;
    if json_out {
        terminal::json(&serde_json::to_value(&list).unwrap_or(Value::Null));
        return Ok(EXIT_COMPLETED);
    }
    say!("{}", list.note);
    if list.tasks.is_empty() {
        say!("no tasks listed");
    }
    for task in &list.tasks {
        let tracked = task
            .tracked
            .map(|row| format!("tracked as #{row}"))
            .unwrap_or_else(|| "not tracked".into());
        say!(
            "{}  {}  {}  {}  {}",
            task.task_id,
            task.status,
            task.created_at,
            tracked,
            task.status_message.as_deref().unwrap_or("")
        );
    }
    Ok(EXIT_COMPLETED)
}

/// `countersign call NAME TOOL …`: recorded before it is sent; `--no-follow` returns once the
/// handle is on disk, otherwise follows the task through the ledger to its end.
pub(crate) async fn call(
    desk: &Desk,
    server: &str,
    tool: &str,
    arguments: Option<Map<String, Value>>,
    policy: AnswerPolicy,
    no_follow: bool,
    json_out: bool,
) -> Result<u8, CliError> {
    let server = desk.server(server).await?;
    if server.is_stdio() {
        crate::stdio_mode::own_for_call(desk, &server, no_follow).await?;
    }
    // The console bounds the rounds of questions (as direct mode does) and records an intent
    // per round.
    let mut step = desk
        .console
        .call(server.id, ToolCall::new(tool, arguments))
        .await?;
    let record = loop {
        match step {
            CallStep::Complete(result) => {
                return Ok(crate::direct::report_complete(&result, json_out))
            }
            CallStep::Questions { call_id, question } => {
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
                step = desk.console.answer_call(call_id, responses).await?;
            }
            CallStep::Task(record) => break record,
        }
    };
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
    desk: &Desk,
    record: TaskRecord,
    policy: &AnswerPolicy,
    json_out: bool,
) -> Result<u8, CliError> {
    let other = desk.ensure_engine().await?;
    if let Some(pid) = other {
        tell!("following through the running engine (pid {pid})");
    }
    desk.console.nudge();
    if !json_out {
        say!("task {} {}", record.task_id, record.status);
    }
    let mut cursor = desk
        .console
        .task_history(record.id)?
        .0
        .last()
        .map(|e| e.id - 1)
        .unwrap_or(0);
    loop {
        let batch = desk
            .console
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
                            crate::direct::ask_one(&record.server, &parsed)?
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
                    desk.answer(record.id, key, response).await?;
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
