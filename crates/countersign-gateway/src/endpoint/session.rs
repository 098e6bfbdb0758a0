//! 2025-11-25 sessions (`initialize`, `DELETE`), and holding a call that needs a person: the
//! reply waits on an SSE stream with keep-alives for at most the configured hold.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use countersign_core::gateway::outcome::{self, Disposition};
use countersign_core::gateway::TASK_PREFIX;
use countersign_core::ledger::agents::AgentRecord;
use countersign_core::ledger::gated::{GatedMode, GatedRecord, GatedState};
use countersign_core::ledger::servers::ServerRecord;

use super::request::{bearer, Request};
use super::sender::claim_and_run;
use super::{
    json_reply, rpc_error, rpc_result, task_outcome, Link, Shared, SESSION_HEADER, WATCH_INTERVAL,
};

/// The session-era protocol versions the gateway answers `initialize` with (the agent's own
/// when it is one of these, else the newest).
const SESSION_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// Most sessions kept (the oldest is dropped beyond; its agent re-initializes).
const MAX_SESSIONS: usize = 4096;

/// A 2025-11-25 session: whose it is and for which server.
pub(super) struct Session {
    pub(super) agent_id: i64,
    pub(super) server: String,
    /// The agent declared `tasks` at `initialize`: its tools are listed as taskable.
    pub(super) tasks: bool,
}

/// Whether the session this request names declared `tasks` at `initialize`.
pub(super) fn declared_tasks(shared: &Shared, headers: &HeaderMap) -> bool {
    let Some(session) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    shared
        .sessions
        .lock()
        .ok()
        .is_some_and(|s| s.get(session).is_some_and(|s| s.tasks))
}

/// How a call of this request waits for a person: held (a 2025-11-25 session, or a 2026-07-28
/// agent without tasks) or as a task (a 2026-07-28 agent that declares tasks). `Err` is the
/// reply to a request with an unknown session, or with neither a session nor 2026-07-28.
pub(super) fn mode(
    shared: &Shared,
    headers: &HeaderMap,
    agent: &AgentRecord,
    server: &ServerRecord,
    request: &Request,
) -> Result<GatedMode, Response> {
    let session = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    match session {
        Some(session) => {
            let known = shared.sessions.lock().ok().is_some_and(|s| {
                s.get(session)
                    .is_some_and(|s| s.agent_id == agent.id && s.server == server.name)
            });
            if !known {
                return Err(json_reply(
                    StatusCode::NOT_FOUND,
                    rpc_error(&request.id, -32001, "Session not found; initialize again", None),
                ));
            }
            // A session agent that asks for a task (SEP-1686) follows it; any other waits.
            if request.method == "tools/call" && super::session_tasks::asks_for_task(request) {
                Ok(GatedMode::Task)
            } else {
                Ok(GatedMode::Held)
            }
        }
        None if request.stateless => Ok(if request.declares_tasks() {
            GatedMode::Task
        } else {
            GatedMode::Held
        }),
        None => Err(json_reply(
            StatusCode::BAD_REQUEST,
            rpc_error(
                &request.id,
                -32600,
                "Bad Request: send initialize first (2025-11-25) or MCP-Protocol-Version 2026-07-28",
                None,
            ),
        )),
    }
}

/// `DELETE /mcp/<server>` with a session id: the agent ends its session.
pub(super) async fn end_session(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> StatusCode {
    let Some(token) = bearer(&headers) else {
        return StatusCode::UNAUTHORIZED;
    };
    let agent = match shared.console.authenticate_agent(token).await {
        Ok(Some(agent)) => agent,
        Ok(None) => return StatusCode::UNAUTHORIZED,
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR,
    };
    let Some(session) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return StatusCode::BAD_REQUEST;
    };
    let Ok(mut sessions) = shared.sessions.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR;
    };
    // Only the session's own agent ends it.
    if sessions
        .get(session)
        .is_some_and(|s| s.agent_id == agent.id)
    {
        sessions.remove(session);
        StatusCode::NO_CONTENT
    } else {
        StatusCode::NOT_FOUND
    }
}

pub(super) fn initialize(
    shared: &Shared,
    agent: &AgentRecord,
    server: &ServerRecord,
    request: &Request,
) -> Response {
    let asked = request
        .params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = SESSION_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .copied()
        .unwrap_or(SESSION_VERSIONS[0]);
    // What the upstream offers, minus extensions (this generation has none).
    let mut capabilities = Map::new();
    if let Some(Value::Object(upstream)) = &server.capabilities {
        for key in ["tools", "resources", "prompts", "completions", "logging"] {
            if let Some(value) = upstream.get(key) {
                capabilities.insert(key.into(), value.clone());
            }
        }
    }
    capabilities
        .entry("tools")
        .or_insert_with(|| json!({"listChanged": false}));
    // Countersign's own tasks (the upstream's are followed by the engine, never shown).
    capabilities.insert("tasks".into(), super::session_tasks::capability());
    let tasks = request
        .params
        .get("capabilities")
        .and_then(|c| c.get("tasks"))
        .is_some();
    let session = countersign_core::gateway::new_task_id().replacen(TASK_PREFIX, "css-", 1);
    if let Ok(mut sessions) = shared.sessions.lock() {
        if sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = sessions.keys().next().cloned() {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            session.clone(),
            Session {
                agent_id: agent.id,
                server: server.name.clone(),
                tasks,
            },
        );
    }
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": format!("countersign-gateway/{}", server.name), "version": env!("CARGO_PKG_VERSION")},
        "instructions": format!(
            "Countersign gateway for {}. Some tool calls need a person's approval; such a call answers that it awaits approval and has not run: repeat the identical call after approval.",
            server.name
        ),
    });
    let mut response = json_reply(StatusCode::OK, rpc_result(&request.id, result));
    if let Ok(value) = HeaderValue::from_str(&session) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// The reply to a held request: an SSE stream with keep-alive comments until `answer` is ready,
/// then the answer as the one event. When the request carried `_meta.progressToken`, each
/// keep-alive interval also brings a `notifications/progress` for it (a client such as the
/// TypeScript SDK with `resetTimeoutOnProgress` then keeps waiting; comments reset no client's
/// time-out). A client that hangs up drops the hold (the call stays recorded; sending it is
/// never tied to the request's life).
pub(super) fn held_reply(
    keep_alive: Duration,
    progress_token: Option<Value>,
    answer: impl std::future::Future<Output = Value> + Send + 'static,
) -> Response {
    type Answer = std::pin::Pin<Box<dyn std::future::Future<Output = Value> + Send>>;
    let message = |value: Value| Event::default().event("message").data(value.to_string());
    let answer: Answer = Box::pin(answer);
    let stream = futures_util::stream::unfold((Some(answer), 0u64), move |(answer, sent)| {
        let token = progress_token.clone();
        async move {
            let mut answer = answer?;
            let Some(token) = token else {
                let last = message(answer.await);
                return Some((Ok::<_, Infallible>(last), (None, sent)));
            };
            tokio::select! {
                value = &mut answer => Some((Ok(message(value)), (None, sent))),
                () = tokio::time::sleep(keep_alive) => {
                    let sent = sent + 1;
                    let note = json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": token,
                            "progress": sent,
                            "message": "waiting for a person to approve the call in Countersign",
                        },
                    });
                    Some((Ok(message(note)), (Some(answer), sent)))
                }
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
        .into_response()
}

/// Holds a call of an agent without tasks for at most the configured time: runs it once if it
/// is (or becomes) approved, tells the outcome if it was decided, else says it awaits approval.
pub(super) async fn hold(shared: Arc<Shared>, link: Link, call: GatedRecord) -> Value {
    let deadline = tokio::time::Instant::now() + shared.config.hold;
    let mut call = call;
    loop {
        match call.state {
            GatedState::Approved => {
                // Sent from a task of its own: a hang-up must not cut a send in half.
                let (s, l, id) = (shared.clone(), link.clone(), call.id);
                let sent = tokio::spawn(async move { claim_and_run(&s, &l, id).await });
                match sent.await {
                    Ok(Some(done)) => call = done,
                    Ok(None) | Err(_) => match shared.console.gated_row(call.id).await {
                        Ok(now) => call = now,
                        Err(_) => {
                            return outcome::refusal(
                                &outcome::unknown_text(&call),
                                Disposition::OutcomeUnknown,
                            )
                        }
                    },
                }
                continue;
            }
            GatedState::Pending | GatedState::Running => {}
            _ => {
                let upstream = match (call.state, call.upstream_task) {
                    (GatedState::Done, Some(_)) => {
                        // The upstream answered with a task: wait for it within the hold.
                        loop {
                            match shared
                                .console
                                .agent_task(call.agent_id, &call.task_id)
                                .await
                            {
                                Ok(Some(task)) if task["status"] != "working" => break Some(task),
                                Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                                    tokio::time::sleep(WATCH_INTERVAL).await
                                }
                                _ => break None,
                            }
                        }
                    }
                    _ => None,
                };
                return match upstream {
                    Some(task) => task_outcome(&task),
                    None if call.upstream_task.is_some() => outcome::notice(&format!(
                        "{} was approved and is still running upstream; Countersign tracks it (task {}). Do not repeat the call.",
                        call.tool, call.task_id
                    )),
                    None => task_outcome(&outcome::agent_task(&call, None)),
                };
            }
        }
        if tokio::time::Instant::now() >= deadline {
            if call.questions.is_some() {
                return outcome::notice(&format!(
                    "{} was approved, but {} asked questions before running it, which a person must answer in Countersign. It has not run yet. Repeat the identical call later: it runs once, with the answers.",
                    call.tool, call.server
                ));
            }
            return outcome::notice(&outcome::awaiting_text(&call));
        }
        tokio::time::sleep(WATCH_INTERVAL).await;
        match shared.console.gated_row(call.id).await {
            Ok(now) => call = now,
            Err(e) => {
                return outcome::notice(&format!(
                    "Countersign could not read the state of the call to {} ({e}); it may still be waiting for approval. Ask again later.",
                    call.tool
                ))
            }
        }
    }
}
