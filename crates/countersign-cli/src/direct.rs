//! The direct mode: commands on a server given by URL, without a ledger. `countersign call URL …`
//! follows one tool call to its end; `discover`, `tools` and `task get|cancel|answer` ask once.
//!
//! MRTR questions are answered by re-sending the call; a task is polled no faster than its
//! `pollIntervalMs`, each status change printed as it is seen, each new question answered once.
//!
//! Each command's first request is a modern one; when its answer says the server is of the
//! 2025-11-25 generation ([`era::means_legacy`]), the command initializes a session and goes on
//! in `direct/legacy.rs`, with the same output, answers and exit codes.

pub(crate) mod legacy;

use std::collections::HashSet;
use std::future::Future;
use std::io::IsTerminal as _;
use std::time::Duration;

use countersign_core::mcp::era::{self, Connection};
use countersign_core::mcp::{
    self, CallOutcome, Client, Elicitation, ErrorClass, InputRequest, InputRequests, LegacyClient,
    Task, TaskState, ToolCall,
};
use countersign_core::scheduler;
use serde_json::{json, Map, Value};

use crate::args::{AnswerArgs, Global, RequiredAnswer};
use crate::prompt::{Answer, Prompter};
use crate::terminal::{self, say, tell};
use crate::{
    client, parse_object, CliError, EXIT_CANCELLED, EXIT_COMPLETED, EXIT_FAILED, EXIT_INPUT_NEEDED,
    EXIT_TOOL_ERROR, EXIT_WORKING,
};

/// Consecutive transient poll failures tolerated before giving up.
const MAX_POLL_FAILURES: u32 = 8;

/// What a command's first request found: the modern answer, or a server of the legacy era with
/// a session now open for the rest of the command.
enum Reached<T> {
    Modern(T),
    Legacy(LegacyClient),
}

/// Sends the command's first (modern) request; when the answer could mean a server of the
/// legacy era, asks `server/discover`, the request whose answer tells the era, and initializes
/// a session if that says legacy. Otherwise the first answer stands: a modern server's refusal
/// of one request (a tool's or task's error) is the command's error, and so is an answer that
/// says nothing about the era (authorization, 5xx, the network). When the server refuses
/// `initialize` too, that refusal is the error (a timeout, a version we do not speak).
async fn first_request<T>(
    client: &Client,
    global: &Global,
    request: impl Future<Output = mcp::Result<T>>,
) -> Result<Reached<T>, CliError> {
    match request.await {
        Ok(answer) => Ok(Reached::Modern(answer)),
        Err(first) if era::means_legacy(&first) => match client.discover().await {
            Err(probe) if era::means_legacy(&probe) => {
                let (endpoint, options) = crate::endpoint(client.url(), global);
                Ok(Reached::Legacy(
                    LegacyClient::connect(endpoint, options).await?,
                ))
            }
            _ => Err(first.into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// Polls a followed task of either era at the engine's interval rule (built-in floor, one-hour
/// ceiling: a server's interval of 0 must not turn direct mode into a busy loop), backing off
/// on transient failures.
pub(crate) struct Poller {
    interval: Duration,
    failures: u32,
}

impl Poller {
    /// Paced by the server's first interval (ms), if it gave one.
    pub(crate) fn new(server_ms: Option<u64>) -> Self {
        Self {
            interval: scheduler::interval(server_ms, Duration::ZERO),
            failures: 0,
        }
    }

    /// Follows the server's latest interval.
    pub(crate) fn pace(&mut self, server_ms: Option<u64>) {
        self.interval = scheduler::interval(server_ms, Duration::ZERO);
    }

    /// Waits one interval, then asks with `get`; a transient failure is retried after a
    /// backoff ([`MAX_POLL_FAILURES`] in a row at most), any other ends the follow.
    pub(crate) async fn next<T, F, Fut>(&mut self, mut get: F) -> Result<T, CliError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = mcp::Result<T>>,
    {
        loop {
            tokio::time::sleep(self.interval).await;
            match get().await {
                Ok(answer) => {
                    self.failures = 0;
                    return Ok(answer);
                }
                Err(e) => match self.retry(&e) {
                    Some(backoff) => tokio::time::sleep(backoff).await,
                    None => return Err(e.into()),
                },
            }
        }
    }

    /// The wait before retrying a poll that failed with `e`, or `None` when it is not worth
    /// retrying.
    fn retry(&mut self, e: &mcp::Error) -> Option<Duration> {
        if e.class() != ErrorClass::Transient || self.failures >= MAX_POLL_FAILURES {
            return None;
        }
        self.failures += 1;
        let backoff = e
            .retry_after()
            .unwrap_or_else(|| self.interval.saturating_mul(1 << self.failures.min(5)))
            .min(Duration::from_secs(60));
        tell!(
            "poll failed ({e}); retrying in {:.1}s",
            backoff.as_secs_f64()
        );
        Some(backoff)
    }
}

/// Asks one question on the terminal and returns the exact response to send.
pub(crate) fn ask_one(server: &str, request: &InputRequest) -> Result<Value, CliError> {
    let Some(elicitation) = request.elicitation() else {
        tell!(
            "declining a request this console cannot serve ({})",
            request.method
        );
        return Ok(json!({"action": "decline"}));
    };
    let stdin = std::io::stdin();
    let mut prompter = Prompter::new(stdin.lock(), std::io::stderr());
    let answer = match &elicitation {
        Elicitation::Form {
            message,
            requested_schema,
        } => prompter.form(server, message, requested_schema)?,
        Elicitation::Url { message, url, .. } => {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                tell!("refusing to open a non-http(s) URL; declining");
                return Ok(json!({"action": "decline"}));
            }
            prompter.url(server, message, url)?
        }
    };
    Ok(match answer {
        Answer::Accept(Some(content)) => json!({"action": "accept", "content": content}),
        Answer::Accept(None) => json!({"action": "accept"}),
        Answer::Decline => json!({"action": "decline"}),
        Answer::Cancel => json!({"action": "cancel"}),
    })
}

/// How questions get answered.
pub(crate) enum AnswerPolicy {
    Accept(Map<String, Value>),
    Decline,
    /// Ask on the terminal; without one, stop with "input needed".
    Ask,
}

impl AnswerPolicy {
    pub(crate) fn from_args(args: &AnswerArgs) -> Result<Self, CliError> {
        Ok(match (&args.accept, args.decline) {
            (Some(json), _) => Self::Accept(parse_object("--accept", json)?),
            (None, true) => Self::Decline,
            (None, false) => Self::Ask,
        })
    }

    /// The answer without asking anyone, if the policy gives one.
    pub(crate) fn automatic(&self, request: &InputRequest) -> Option<Value> {
        let elicitation = request.elicitation()?;
        match self {
            Self::Decline => Some(json!({"action": "decline"})),
            Self::Accept(content) => Some(match elicitation {
                Elicitation::Form { .. } => json!({"action": "accept", "content": content}),
                Elicitation::Url { .. } => json!({"action": "accept"}),
            }),
            Self::Ask => None,
        }
    }
}

/// Answers every question in `requests` not in `answered`; `None` means a human is needed and
/// none can answer here.
fn answer_all(
    policy: &AnswerPolicy,
    server: &str,
    requests: &InputRequests,
    answered: &HashSet<String>,
) -> Result<Option<Map<String, Value>>, CliError> {
    let mut responses = Map::new();
    for (key, request) in requests {
        if answered.contains(key) {
            continue;
        }
        let response = match policy.automatic(request) {
            Some(r) => r,
            None => {
                if request.elicitation().is_some() && !std::io::stdin().is_terminal() {
                    return Ok(None);
                }
                ask_one(server, request)?
            }
        };
        responses.insert(key.clone(), response);
    }
    Ok(Some(responses))
}

/// `call URL TOOL …`: calls the tool and follows it to its end (a server of either era).
pub(crate) async fn call(
    url: &str,
    global: &Global,
    tool: &str,
    arguments: Option<Map<String, Value>>,
    policy: AnswerPolicy,
    no_follow: bool,
) -> Result<u8, CliError> {
    let json_out = global.json;
    let client = &client(url, global)?;
    // Learn x-mcp-header annotations (and refuse excluded tools) before calling; the answer
    // also tells the era.
    if let Reached::Legacy(session) = first_request(client, global, client.list_tools()).await? {
        let outcome = legacy::call(&session, tool, arguments, &policy, no_follow, json_out).await;
        return legacy::close(&session, outcome).await;
    }
    let mut call = ToolCall::new(tool, arguments);
    for _ in 0..countersign_core::mcp::MAX_MRTR_ROUNDS {
        match client.call_tool(&call).await? {
            CallOutcome::Complete(result) => return Ok(report_complete(&result, json_out)),
            CallOutcome::InputRequired(question) => {
                if !json_out {
                    say!(
                        "{} question(s) before the call can run",
                        question.input_requests.len()
                    );
                }
                let Some(responses) = answer_all(
                    &policy,
                    client.url(),
                    &question.input_requests,
                    &HashSet::new(),
                )?
                else {
                    return input_needed(json_out, None, &question.input_requests);
                };
                call = call.retry_with(&question, responses);
            }
            CallOutcome::Task(task) => {
                if no_follow {
                    if json_out {
                        terminal::json(&task.to_json());
                    } else {
                        say!("task {} {}", task.task_id, task.reported_status());
                    }
                    return Ok(EXIT_COMPLETED);
                }
                if !json_out {
                    print_task_line(&task);
                }
                return follow_task(client, task, &policy, json_out).await;
            }
        }
    }
    Err(CliError::Console(
        countersign_core::console::Error::TooManyRounds {
            tool: tool.to_owned(),
            rounds: countersign_core::mcp::MAX_MRTR_ROUNDS,
        },
    ))
}

async fn follow_task(
    client: &Client,
    first: Task,
    policy: &AnswerPolicy,
    json_out: bool,
) -> Result<u8, CliError> {
    let task_id = first.task_id.clone();
    let mut last_seen = (first.status(), first.status_message.clone());
    let mut poller = Poller::new(first.poll_interval_ms);
    let mut answered: HashSet<String> = HashSet::new();
    loop {
        let task = poller.next(|| client.get_task(&task_id)).await?;
        poller.pace(task.poll_interval_ms);
        let now = (task.status(), task.status_message.clone());
        if now != last_seen && !json_out {
            print_task_line(&task);
        }
        last_seen = now;
        match &task.state {
            TaskState::InputRequired { input_requests } => {
                let fresh: InputRequests = input_requests
                    .iter()
                    .filter(|(k, _)| !answered.contains(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if fresh.is_empty() {
                    continue; // answers sent; the server has not caught up yet
                }
                let Some(responses) = answer_all(policy, client.url(), &fresh, &answered)? else {
                    return input_needed(json_out, Some(&task_id), &fresh);
                };
                answered.extend(responses.keys().cloned());
                if !json_out {
                    for (key, response) in &responses {
                        say!(
                            "  answered {key}: {}",
                            response
                                .get("action")
                                .and_then(Value::as_str)
                                .unwrap_or("?")
                        );
                    }
                }
                client.update_task(&task_id, responses).await?;
            }
            _ if task.status().is_terminal() => {
                if json_out {
                    terminal::json(&outcome_json(&task));
                } else {
                    print_payload(&task);
                }
                return Ok(exit_code_for(&task));
            }
            _ => {}
        }
    }
}

fn input_needed(
    json_out: bool,
    task_id: Option<&str>,
    requests: &InputRequests,
) -> Result<u8, CliError> {
    if json_out {
        terminal::json(
            &json!({"outcome": "input_needed", "taskId": task_id, "inputRequests": serde_json::to_value(requests).unwrap_or(Value::Null)}),
        );
    } else {
        tell!("input needed and no terminal to ask on: pass --accept JSON or --decline");
        for (key, request) in requests {
            let message = request
                .params
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("");
            tell!("  {key}: {message}");
        }
    }
    Ok(EXIT_INPUT_NEEDED)
}

/// The exit code of a task's current state: how `call` exits when a task ends this way, and how
/// `task get` exits for a task in this state (an unfinished one: 4 waiting for input, 5 working).
pub(crate) fn exit_code_for(task: &Task) -> u8 {
    match &task.state {
        TaskState::Completed { result } if result.is_error() => EXIT_TOOL_ERROR,
        TaskState::Completed { .. } => EXIT_COMPLETED,
        TaskState::Failed { .. } => EXIT_FAILED,
        TaskState::Cancelled => EXIT_CANCELLED,
        TaskState::InputRequired { .. } => EXIT_INPUT_NEEDED,
        TaskState::Working => EXIT_WORKING,
    }
}

fn outcome_json(task: &Task) -> Value {
    match &task.state {
        TaskState::Completed { result } => json!({
            "outcome": if result.is_error() { "tool_error" } else { "completed" },
            "taskId": task.task_id, "result": result,
        }),
        TaskState::Failed { error } => {
            json!({"outcome": "failed", "taskId": task.task_id, "error": error})
        }
        TaskState::Cancelled => json!({"outcome": "cancelled", "taskId": task.task_id}),
        _ => json!({"outcome": "unknown", "taskId": task.task_id}),
    }
}

/// Reports a synchronous tool result (text, or the `--json` outcome object) and returns its
/// exit code.
pub(crate) fn report_complete(result: &countersign_core::mcp::ToolResult, json_out: bool) -> u8 {
    let (outcome, code) = if result.is_error() {
        ("tool_error", EXIT_TOOL_ERROR)
    } else {
        ("completed", EXIT_COMPLETED)
    };
    if json_out {
        terminal::json(&json!({"outcome": outcome, "taskId": null, "result": result}));
    } else {
        print_result(result);
    }
    code
}

pub(crate) fn print_task_line(task: &Task) {
    match &task.status_message {
        Some(m) => say!("task {} {}: {}", task.task_id, task.reported_status(), m),
        None => say!("task {} {}", task.task_id, task.reported_status()),
    }
}

pub(crate) fn print_payload(task: &Task) {
    match &task.state {
        TaskState::Completed { result } => print_result(result),
        TaskState::Failed { error } => say!("error {}: {}", error.code, error.message),
        TaskState::InputRequired { input_requests } => {
            for (key, request) in input_requests {
                let message = request
                    .params
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                say!("  question {key}: {message}");
            }
        }
        TaskState::Working | TaskState::Cancelled => {}
    }
}

fn print_result(result: &countersign_core::mcp::ToolResult) {
    if result.is_error() {
        say!("tool reported an error:");
    }
    let text = result.text();
    if !text.is_empty() {
        terminal::lines(&text);
    }
    if let Some(structured) = result.structured_content() {
        terminal::lines(&serde_json::to_string_pretty(structured).unwrap_or_default());
    }
}

// ---- commands on a server given by URL ---------------------------------------------------------

/// `discover URL`: what the server is and what it supports.
pub(crate) async fn discover(url: &str, global: &Global) -> Result<u8, CliError> {
    let (endpoint, options) = crate::endpoint(url, global);
    let connection = era::connect(endpoint, options).await?;
    let profile = connection.profile();
    let discovery = match connection {
        Connection::Modern { discovery, .. } => discovery,
        Connection::Legacy(session) => {
            legacy::discover(&session, &profile, global.json);
            return legacy::close(&session, Ok(EXIT_COMPLETED)).await;
        }
    };
    if global.json {
        let mut object = discovery.raw.clone();
        object.insert("era".into(), json!(profile.era));
        object.insert("protocolVersion".into(), json!(profile.protocol_version));
        terminal::json(&Value::Object(object));
    } else {
        say!("era:        modern ({})", profile.protocol_version);
        say!(
            "server:     {}",
            discovery
                .server_label()
                .unwrap_or_else(|| "(unnamed)".into())
        );
        say!("versions:   {}", discovery.supported_versions.join(", "));
        say!(
            "tasks:      {}",
            if discovery.supports_tasks() {
                "yes"
            } else {
                "no"
            }
        );
        let caps: Vec<&String> = discovery.capabilities.keys().collect();
        say!(
            "capabilities: {}",
            caps.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(i) = &discovery.instructions {
            say!("instructions:");
            terminal::lines(i);
        }
    }
    Ok(EXIT_COMPLETED)
}

/// `tools URL`: the server's tools, with their task support.
pub(crate) async fn tools(url: &str, global: &Global) -> Result<u8, CliError> {
    let client = client(url, global)?;
    let list = match first_request(&client, global, client.list_tools()).await? {
        Reached::Modern(list) => list,
        Reached::Legacy(session) => {
            let outcome = legacy::tools(&session, global.json).await;
            return legacy::close(&session, outcome).await;
        }
    };
    for excluded in &list.excluded {
        tell!(
            "warning: tool {:?} excluded: {}",
            excluded.name,
            excluded.reason
        );
    }
    if global.json {
        let tools: Vec<Value> = list
            .tools
            .iter()
            .map(|t| Value::Object(t.definition.clone()))
            .collect();
        let excluded: Vec<Value> = list
            .excluded
            .iter()
            .map(|e| json!({"name": e.name, "reason": e.reason}))
            .collect();
        terminal::json(&json!({"tools": tools, "excluded": excluded}));
    } else {
        for tool in &list.tools {
            let support = tool
                .task_support()
                .map(|s| format!(" [task: {s}]"))
                .unwrap_or_default();
            say!("{}{support}", tool.name);
            say!("    {}", tool.description().unwrap_or(""));
        }
    }
    Ok(EXIT_COMPLETED)
}

/// `task get URL ID`: the task's state now; exits by it.
pub(crate) async fn task_get(url: &str, task_id: &str, global: &Global) -> Result<u8, CliError> {
    let client = client(url, global)?;
    let task = match first_request(&client, global, client.get_task(task_id)).await? {
        Reached::Modern(task) => task,
        Reached::Legacy(session) => {
            let outcome = legacy::task_get(&session, task_id, global.json).await;
            return legacy::close(&session, outcome).await;
        }
    };
    if global.json {
        terminal::json(&task.to_json());
    } else {
        print_task_line(&task);
        print_payload(&task);
    }
    Ok(exit_code_for(&task))
}

/// `task cancel URL ID`.
pub(crate) async fn task_cancel(url: &str, task_id: &str, global: &Global) -> Result<u8, CliError> {
    let client = client(url, global)?;
    if let Reached::Legacy(session) =
        first_request(&client, global, client.cancel_task(task_id)).await?
    {
        let outcome = legacy::task_cancel(&session, task_id, global.json).await;
        return legacy::close(&session, outcome).await;
    }
    if global.json {
        terminal::json(&json!({"taskId": task_id, "cancelRequested": true}));
    } else {
        say!("cancel requested for task {task_id}");
    }
    Ok(EXIT_COMPLETED)
}

/// `task answer URL ID --accept/--decline`: answers every open question of the task.
pub(crate) async fn task_answer(
    url: &str,
    task_id: &str,
    answer: &RequiredAnswer,
    global: &Global,
) -> Result<u8, CliError> {
    let policy = AnswerPolicy::from_args(&AnswerArgs {
        accept: answer.accept.clone(),
        decline: answer.decline,
    })?;
    let client = client(url, global)?;
    let task = match first_request(&client, global, client.get_task(task_id)).await? {
        Reached::Modern(task) => task,
        Reached::Legacy(session) => {
            return legacy::close(&session, Err(legacy::answer_elsewhere(task_id))).await;
        }
    };
    let mcp::TaskState::InputRequired { input_requests } = &task.state else {
        return Err(CliError::Usage(format!(
            "task {task_id} is {}, not waiting for input",
            task.status()
        )));
    };
    let mut responses = Map::new();
    for (key, request) in input_requests {
        let response = policy.automatic(request).ok_or_else(|| {
            CliError::Usage(format!(
                "cannot answer {key}: unsupported request {}",
                request.method
            ))
        })?;
        responses.insert(key.clone(), response);
    }
    let keys: Vec<String> = responses.keys().cloned().collect();
    client.update_task(task_id, responses).await?;
    if global.json {
        terminal::json(&json!({"taskId": task_id, "answered": keys}));
    } else {
        say!("answered {} question(s) of task {task_id}", keys.len());
    }
    Ok(EXIT_COMPLETED)
}
