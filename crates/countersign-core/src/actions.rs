//! What a person does — call a tool, answer a question, cancel a task, adopt a task by id — as
//! ledger writes that happen BEFORE anything is sent. A running engine picks the writes up
//! (through its nudge in-process, or the change feed from another process) and delivers them.

use serde_json::{json, Map, Value};

use crate::ledger::audit::{self, AuditAction, NewAudit};
use crate::ledger::events::NewEvent;
use crate::ledger::inputs::{self, InputState};
use crate::ledger::intents::IntentState;
use crate::ledger::outbox::{self, Delivery};
use crate::ledger::servers::{self, ServerRecord};
use crate::ledger::tasks::{self, TaskRecord};
use crate::ledger::{
    intents, now_ms, AnswerAction, CallOutcomeKind, EventKind, Ledger, TaskOrigin, Via, WriteCtx,
};
use crate::mcp::{
    self, CallOutcome, Connection, Era, InputRequired, LegacySession, Peer, ToolCall, ToolResult,
};
use crate::tracking;

/// Errors of an action.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ledger refused.
    #[error(transparent)]
    Ledger(#[from] crate::ledger::Error),
    /// The server refused or could not be reached.
    #[error(transparent)]
    Mcp(#[from] mcp::Error),
    /// The action makes no sense in the current state.
    #[error("{0}")]
    Invalid(String),
    /// A new call was answered with a task id the ledger already tracks on that server. The two
    /// tasks cannot be told apart (every later poll, answer and cancel would address both), so
    /// the new handle is not tracked and its call intent is resolved `failed`.
    #[error("the server answered a new call of {tool} with task id {task_id}, which it already used for task #{existing_row}; the call is recorded as failed")]
    TaskIdReused {
        /// The server's reused task id.
        task_id: String,
        /// The ledger row of the task that already has this id.
        existing_row: i64,
        /// The tool of the new call.
        tool: String,
    },
}

/// Result with an action's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How a recorded call ended.
#[derive(Debug, Clone)]
pub enum Called {
    /// Synchronous result.
    Complete(ToolResult),
    /// The server asks first (MRTR): answer and call again with [`ToolCall::retry_with`].
    InputRequired(InputRequired),
    /// A task, already committed to the ledger.
    Task(TaskRecord),
}

/// Resolves a call intent that created no task (its outcome in `call_intents`, `detail` kept
/// there) and appends its `call_finished` event, in the caller's transaction.
fn finish_call(
    ctx: &mut WriteCtx<'_>,
    server_id: i64,
    intent: i64,
    tool: String,
    outcome: CallOutcomeKind,
    detail: &Value,
) -> crate::ledger::Result<()> {
    let state = match outcome {
        CallOutcomeKind::Completed | CallOutcomeKind::ToolError => IntentState::Completed,
        CallOutcomeKind::InputRequired => IntentState::InputRequired,
        CallOutcomeKind::Failed => IntentState::Failed,
    };
    intents::resolve(ctx.conn, intent, state, None, Some(detail))?;
    ctx.append(NewEvent {
        task: None,
        server_id: Some(server_id),
        via: Via::Call,
        kind: EventKind::CallFinished {
            intent,
            tool,
            outcome,
        },
    })?;
    Ok(())
}

/// Calls a tool with the call intent on disk first and the task handle on disk before return.
pub async fn call(
    ledger: &Ledger,
    peer: &Peer,
    server: &ServerRecord,
    call: &ToolCall,
    actor: &str,
) -> Result<Called> {
    let server_id = server.id;
    let (tool, arguments) = (call.name.clone(), call.arguments.clone());
    // A retry that answers MRTR questions carries human decisions: audit them verbatim.
    let answers = call.input_responses.clone();
    let (server_name, actor_name) = (server.name.clone(), actor.to_owned());
    let intent = ledger
        .write(move |ctx| {
            let intent = intents::create(ctx.conn, server_id, &tool, arguments.as_ref())?;
            audit::record(
                ctx.conn,
                NewAudit {
                    actor: &actor_name,
                    action: AuditAction::Call,
                    server: Some(&server_name),
                    task_id: None,
                    input_key: None,
                    detail: match &answers {
                        None => json!({"tool": tool, "arguments": arguments, "intent": intent}),
                        Some(answers) => json!({
                            "tool": tool, "arguments": arguments, "intent": intent,
                            "inputResponses": answers,
                        }),
                    },
                },
            )?;
            ctx.append(NewEvent {
                task: None,
                server_id: Some(server_id),
                via: Via::User,
                kind: EventKind::CallStarted { intent, tool },
            })?;
            Ok(intent)
        })
        .await?;
    let tool = call.name.clone();
    let outcome = match peer.call_tool(call).await {
        Ok(outcome) => outcome,
        Err(error) => {
            let detail = json!({"code": error.code(), "message": error.to_string()});
            let t = tool.clone();
            ledger
                .write(move |ctx| {
                    finish_call(ctx, server_id, intent, t, CallOutcomeKind::Failed, &detail)
                })
                .await?;
            return Err(error.into());
        }
    };
    match outcome {
        CallOutcome::Complete(result) => {
            let value = Value::Object(result.0.clone());
            let label = if result.is_error() {
                CallOutcomeKind::ToolError
            } else {
                CallOutcomeKind::Completed
            };
            ledger
                .write(move |ctx| finish_call(ctx, server_id, intent, tool, label, &value))
                .await?;
            Ok(Called::Complete(result))
        }
        CallOutcome::InputRequired(question) => {
            let value = json!({"inputRequests": question.input_requests});
            ledger
                .write(move |ctx| {
                    finish_call(
                        ctx,
                        server_id,
                        intent,
                        tool,
                        CallOutcomeKind::InputRequired,
                        &value,
                    )
                })
                .await?;
            Ok(Called::InputRequired(question))
        }
        CallOutcome::Task(task) => {
            let arguments = call.arguments.clone();
            let task_id = task.task_id.clone();
            let written = ledger
                .write(move |ctx| {
                    // Checked here rather than left to `tasks::insert`'s conflict: a failed job
                    // rolls back, which would leave the intent `sending` for ever (and the next
                    // engine start would call its outcome unknown although it is known).
                    if let Some(existing) = tasks::row_of(ctx.conn, server_id, &task.task_id)? {
                        let detail = json!({
                            "code": "task_id_reused",
                            "message": format!("task id already used for task #{existing}"),
                            "existingRow": existing,
                            "task": task.to_json(),
                        });
                        finish_call(
                            ctx,
                            server_id,
                            intent,
                            tool,
                            CallOutcomeKind::Failed,
                            &detail,
                        )?;
                        return Ok(Err(existing));
                    }
                    let record = tasks::insert(
                        ctx.conn,
                        server_id,
                        &task,
                        Some(&tool),
                        arguments.as_ref(),
                        TaskOrigin::Call,
                    )?;
                    intents::resolve(
                        ctx.conn,
                        intent,
                        IntentState::Task,
                        Some(record.id),
                        Some(&task.to_json()),
                    )?;
                    ctx.append(NewEvent {
                        task: Some(record.id),
                        server_id: Some(server_id),
                        via: Via::Call,
                        kind: EventKind::TaskCreated {
                            task_id: task.task_id.clone(),
                            status: task.status().into(),
                            tool: Some(tool),
                            origin: TaskOrigin::Call,
                        },
                    })?;
                    tracking::record(ctx, record.id, None, &task, Via::Call)?;
                    Ok(Ok(record))
                })
                .await?;
            match written {
                Ok(record) => Ok(Called::Task(record)),
                Err(existing_row) => Err(Error::TaskIdReused {
                    task_id,
                    existing_row,
                    tool: call.name.clone(),
                }),
            }
        }
    }
}

/// Starts tracking a task created elsewhere (another client, a teammate, a link).
pub async fn adopt(
    ledger: &Ledger,
    peer: &Peer,
    server: &ServerRecord,
    task_id: &str,
    actor: &str,
) -> Result<TaskRecord> {
    let task = peer.get_task(task_id).await?;
    let (server_id, server_name, actor) = (server.id, server.name.clone(), actor.to_owned());
    Ok(ledger
        .write(move |ctx| {
            let record =
                tasks::insert(ctx.conn, server_id, &task, None, None, TaskOrigin::Adopted)?;
            audit::record(
                ctx.conn,
                NewAudit {
                    actor: &actor,
                    action: AuditAction::Adopt,
                    server: Some(&server_name),
                    task_id: Some(&task.task_id),
                    input_key: None,
                    detail: json!({"status": task.status().as_str()}),
                },
            )?;
            ctx.append(NewEvent {
                task: Some(record.id),
                server_id: Some(server_id),
                via: Via::User,
                kind: EventKind::TaskCreated {
                    task_id: task.task_id.clone(),
                    status: task.status().into(),
                    tool: None,
                    origin: TaskOrigin::Adopted,
                },
            })?;
            tracking::record(ctx, record.id, None, &task, Via::Poll)?;
            Ok(record)
        })
        .await?)
}

/// Records an answer: the question's state, the audit entry and the outbox item, in one
/// transaction, before anything is sent. `response` is the exact elicitation response.
pub async fn answer(
    ledger: &Ledger,
    task: i64,
    key: &str,
    response: Value,
    actor: &str,
) -> Result<()> {
    let action = match response
        .get("action")
        .and_then(Value::as_str)
        .and_then(AnswerAction::parse)
    {
        Some(action) => action,
        None => {
            return Err(Error::Invalid(
                "an answer needs an action of accept, decline or cancel".into(),
            ))
        }
    };
    if action == AnswerAction::Accept {
        if let Some(content) = response.get("content") {
            if !content.is_object() {
                return Err(Error::Invalid(
                    "accepted content must be a JSON object".into(),
                ));
            }
        }
    }
    let (key, actor) = (key.to_owned(), actor.to_owned());
    ledger
        .write(move |ctx| {
            let record = tasks::get(ctx.conn, task)?;
            if record.status.is_finished() {
                return Err(crate::ledger::Error::Conflict(format!(
                    "task {} is already {}",
                    record.task_id, record.status
                )));
            }
            let question = inputs::answer(ctx.conn, task, &key, &response, &actor)?;
            // The person's choice in their terms, next to the exact response: `accept` with
            // `approve: false` is a denial, and the record must say so.
            let decision = crate::decision::decide(&question.request, &response);
            audit::record(
                ctx.conn,
                NewAudit {
                    actor: &actor,
                    action: AuditAction::answer(action),
                    server: Some(&record.server),
                    task_id: Some(&record.task_id),
                    input_key: Some(&key),
                    detail: json!({
                        "question": question.request,
                        "response": response,
                        "decision": decision.map(crate::decision::Decision::as_str),
                        "waited_ms": now_ms().saturating_sub(question.requested_at),
                        "tool": record.tool,
                    }),
                },
            )?;
            let mut responses = Map::new();
            responses.insert(key.clone(), response.clone());
            outbox::enqueue(ctx.conn, task, &Delivery::Update { responses })?;
            ctx.append(NewEvent {
                task: Some(task),
                server_id: None,
                via: Via::User,
                kind: EventKind::InputAnswered {
                    key,
                    action,
                    response,
                    decision,
                    by: actor,
                },
            })?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// Records a cancel request (audit, outbox, event) before it is sent.
pub async fn cancel(ledger: &Ledger, task: i64, actor: &str) -> Result<()> {
    let actor = actor.to_owned();
    ledger
        .write(move |ctx| {
            let record = tasks::get(ctx.conn, task)?;
            if record.status.is_finished() {
                return Err(crate::ledger::Error::Conflict(format!(
                    "task {} is already {}",
                    record.task_id, record.status
                )));
            }
            audit::record(
                ctx.conn,
                NewAudit {
                    actor: &actor,
                    action: AuditAction::Cancel,
                    server: Some(&record.server),
                    task_id: Some(&record.task_id),
                    input_key: None,
                    detail: json!({"status": record.status.as_str(), "tool": record.tool}),
                },
            )?;
            outbox::enqueue(ctx.conn, task, &Delivery::Cancel)?;
            ctx.append(NewEvent {
                task: Some(task),
                server_id: None,
                via: Via::User,
                kind: EventKind::CancelRequested { by: actor },
            })?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// The pending question keys of a task (for "answer everything" in the CLI).
pub fn pending_keys(ledger: &Ledger, task: i64) -> Result<Vec<inputs::InputRecord>> {
    Ok(ledger
        .read(|conn| inputs::for_task(conn, task))?
        .into_iter()
        .filter(|q| q.state == InputState::Pending)
        .collect())
}

/// Registers a server (with what `server/discover` said, when it was asked), audited. The token,
/// if any, is the caller's to put in the keyring: this records only that one exists.
pub async fn add_server(
    ledger: &Ledger,
    name: &str,
    url: &str,
    has_token: bool,
    found: Option<&Connection>,
    actor: &str,
) -> Result<ServerRecord> {
    let address = Address::Url {
        url: url.to_owned(),
        has_token,
    };
    add(ledger, name, address, found, actor).await
}

/// Registers a stdio server (its command; secret values are the caller's, for the keyring),
/// audited with the command line and the names of its variables, never their values.
pub async fn add_stdio_server(
    ledger: &Ledger,
    name: &str,
    spec: &servers::StdioSpec,
    found: Option<&Connection>,
    actor: &str,
) -> Result<ServerRecord> {
    add(ledger, name, Address::Stdio(spec.clone()), found, actor).await
}

enum Address {
    Url { url: String, has_token: bool },
    Stdio(servers::StdioSpec),
}

async fn add(
    ledger: &Ledger,
    name: &str,
    address: Address,
    found: Option<&Connection>,
    actor: &str,
) -> Result<ServerRecord> {
    let (name, actor) = (name.to_owned(), actor.to_owned());
    let found = found.map(Profile::of);
    Ok(ledger
        .write(move |ctx| {
            let (record, detail) = match &address {
                Address::Url { url, has_token } => (
                    servers::add(ctx.conn, &name, url, *has_token)?,
                    json!({"url": url, "token": has_token}),
                ),
                Address::Stdio(spec) => (
                    servers::add_stdio(ctx.conn, &name, spec)?,
                    json!({
                        "program": spec.program,
                        "args": spec.args,
                        "env": spec.env.keys().collect::<Vec<_>>(),
                        "secretEnv": spec.secret_env,
                        "cwd": spec.cwd,
                    }),
                ),
            };
            if let Some(found) = &found {
                found.record(ctx.conn, record.id)?;
            }
            audit::record(
                ctx.conn,
                NewAudit {
                    actor: &actor,
                    action: AuditAction::ServerAdd,
                    server: Some(&name),
                    task_id: None,
                    input_key: None,
                    detail,
                },
            )?;
            ctx.append(NewEvent {
                task: None,
                server_id: Some(record.id),
                via: Via::User,
                kind: EventKind::ServerAdded {
                    name,
                    url: record.url.clone(),
                },
            })?;
            servers::get(ctx.conn, record.id)
        })
        .await?)
}

/// Changes a server's URL, token flag and poll floor, audited (never the token itself).
pub async fn update_server(
    ledger: &Ledger,
    id: i64,
    url: &str,
    has_token: bool,
    poll_floor_ms: u64,
    actor: &str,
) -> Result<ServerRecord> {
    let (url, actor) = (url.to_owned(), actor.to_owned());
    Ok(ledger
        .write(move |ctx| {
            let before = servers::get(ctx.conn, id)?;
            servers::update(ctx.conn, id, &url, has_token, poll_floor_ms)?;
            audit::record(
                ctx.conn,
                NewAudit {
                    actor: &actor,
                    action: AuditAction::ServerUpdate,
                    server: Some(&before.name),
                    task_id: None,
                    input_key: None,
                    detail: json!({
                        "url": url, "previousUrl": before.url, "token": has_token,
                        "pollFloorMs": poll_floor_ms,
                    }),
                },
            )?;
            // An event, so every window and `watch` (in any process) sees the change.
            ctx.append(NewEvent {
                task: None,
                server_id: Some(id),
                via: Via::User,
                kind: EventKind::ServerUpdated {
                    name: before.name,
                    url: url.clone(),
                },
            })?;
            servers::get(ctx.conn, id)
        })
        .await?)
}

/// Records that a server could not be reached when a person checked it, so it shows as
/// unreachable (not "unknown") until something reaches it again.
pub async fn record_unreachable(ledger: &Ledger, id: i64, message: String) -> Result<()> {
    Ok(ledger
        .write(move |ctx| {
            ctx.append(NewEvent {
                task: None,
                server_id: Some(id),
                via: Via::User,
                kind: EventKind::ServerUnreachable { message },
            })?;
            Ok(())
        })
        .await?)
}

/// What a check of a server found, as the ledger keeps it: its declarations, its era and
/// protocol version, and a legacy server's session.
struct Profile {
    capabilities: Value,
    server_info: Option<Value>,
    supports_tasks: bool,
    era: Era,
    protocol_version: String,
    session: Option<LegacySession>,
}

impl Profile {
    fn of(found: &Connection) -> Self {
        match found {
            Connection::Modern { client, discovery } => Self {
                capabilities: Value::Object(discovery.capabilities.clone()),
                server_info: discovery.server_info.clone(),
                supports_tasks: discovery.supports_tasks(),
                era: Era::Modern,
                protocol_version: client.protocol_version(),
                session: None,
            },
            Connection::Legacy(client) => {
                let session = client.session();
                Self {
                    capabilities: session.server_capabilities.clone(),
                    server_info: Some(session.server_info.clone()).filter(|v| !v.is_null()),
                    supports_tasks: session.supports_tool_tasks(),
                    era: Era::Legacy,
                    protocol_version: session.protocol_version.clone(),
                    session: Some(session),
                }
            }
        }
    }

    fn record(&self, conn: &rusqlite::Connection, id: i64) -> crate::ledger::Result<()> {
        servers::set_discovery(conn, id, &self.capabilities, self.server_info.as_ref())?;
        // A legacy server's tasks belong to the session already stored: a check keeps it (the
        // engine renews it when the server ends it), and its own session goes unused.
        let stored = match self.era {
            Era::Legacy => servers::get(conn, id)?.legacy_session,
            Era::Modern => None,
        };
        let (version, session) = match &stored {
            Some(kept) => (&kept.protocol_version, Some(kept)),
            None => (&self.protocol_version, self.session.as_ref()),
        };
        servers::set_profile(conn, id, self.era, version, session)
    }
}

/// Records what a check of the server found (either era), with a timeline event.
pub async fn record_check(ledger: &Ledger, id: i64, found: &Connection) -> Result<ServerRecord> {
    let found = Profile::of(found);
    Ok(ledger
        .write(move |ctx| {
            found.record(ctx.conn, id)?;
            let record = servers::get(ctx.conn, id)?;
            ctx.append(NewEvent {
                task: None,
                server_id: Some(id),
                via: Via::Engine,
                kind: EventKind::ServerDiscovered {
                    name: record.name.clone(),
                    supports_tasks: found.supports_tasks,
                },
            })?;
            Ok(record)
        })
        .await?)
}

/// Removes a server and everything tracked on it, audited. The caller deletes its token.
pub async fn remove_server(ledger: &Ledger, id: i64, actor: &str) -> Result<()> {
    let actor = actor.to_owned();
    ledger
        .write(move |ctx| {
            let server = servers::get(ctx.conn, id)?;
            servers::remove(ctx.conn, id)?;
            audit::record(
                ctx.conn,
                NewAudit {
                    actor: &actor,
                    action: AuditAction::ServerRemove,
                    server: Some(&server.name),
                    task_id: None,
                    input_key: None,
                    detail: json!({"url": server.url}),
                },
            )?;
            ctx.append(NewEvent {
                task: None,
                server_id: None,
                via: Via::User,
                kind: EventKind::ServerRemoved { name: server.name },
            })?;
            Ok(())
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::ledger::{events, servers};
    use crate::mcp;

    fn scratch() -> std::path::PathBuf {
        crate::ledger::scratch_dir("actions")
    }

    /// The demo server's deployment question, as the ledger stores it.
    fn deploy_question() -> Value {
        json!({"method": "elicitation/create", "params": {"mode": "form",
            "message": "Approve deployment of 'billing-api'?",
            "requestedSchema": {"type": "object", "properties": {
                "approve": {"type": "boolean", "title": "Approve"},
                "reason": {"type": "string", "title": "Reason"}}, "required": ["approve"]}}})
    }

    #[tokio::test]
    async fn accepting_the_deployment_with_approve_false_is_recorded_as_denied_everywhere() {
        let dir = scratch();
        let ledger = Ledger::open(&dir).expect("ledger");
        let (task, other) = ledger
            .write(|ctx| {
                let s = servers::add(ctx.conn, "demo", "http://127.0.0.1:1/mcp", false)?;
                let handle = |id: &str| {
                    mcp::Task::parse_handle(&json!({"taskId": id, "status": "input_required"}))
                        .expect("handle")
                };
                let a = tasks::insert(
                    ctx.conn,
                    s.id,
                    &handle("a"),
                    Some("deploy_service"),
                    None,
                    TaskOrigin::Call,
                )?;
                let b = tasks::insert(
                    ctx.conn,
                    s.id,
                    &handle("b"),
                    Some("deploy_service"),
                    None,
                    TaskOrigin::Call,
                )?;
                inputs::record(ctx.conn, a.id, "approval", &deploy_question())?;
                inputs::record(ctx.conn, b.id, "approval", &deploy_question())?;
                Ok((a.id, b.id))
            })
            .await
            .expect("setup");

        let sent =
            json!({"action": "accept", "content": {"approve": false, "reason": "not today"}});
        answer(&ledger, task, "approval", sent.clone(), "ada")
            .await
            .expect("answer");
        answer(
            &ledger,
            other,
            "approval",
            json!({"action": "accept", "content": {"approve": true}}),
            "ada",
        )
        .await
        .expect("answer");
        cancel(&ledger, other, "ada").await.expect("cancel");

        let (log, timeline, summaries) = ledger
            .read(|c| {
                Ok((
                    audit::list(c)?,
                    events::for_task(c, task)?,
                    tasks::summaries(c, &tasks::Filter::default())?,
                ))
            })
            .expect("read");
        let entry = log
            .iter()
            .find(|r| r.task_id.as_deref() == Some("a"))
            .expect("audited");
        assert_eq!(
            entry.action,
            AuditAction::AnswerAccept,
            "the elicitation action as sent"
        );
        assert_eq!(entry.detail["response"], sent, "the exact response sent");
        assert_eq!(
            entry.detail["decision"], "denied",
            "accept with approve:false is a denial in the person's terms"
        );
        let answered = timeline
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::InputAnswered { decision, .. } => Some(*decision),
                _ => None,
            })
            .expect("input_answered event");
        assert_eq!(answered, Some(Decision::Denied));
        let a = summaries.iter().find(|t| t.id == task).expect("task a");
        assert_eq!(a.last_decision, Some(Decision::Denied));
        assert!(!a.cancel_requested);
        let b = summaries.iter().find(|t| t.id == other).expect("task b");
        assert_eq!(b.last_decision, Some(Decision::Approved));
        assert!(b.cancel_requested, "cancelling is the person's act too");
        ledger.close();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
