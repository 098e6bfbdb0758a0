//! `tasks/result` and the questions it carries.
//!
//! A finished task's result is answered at once (as any reply). An unfinished one gets an SSE
//! response that stays open: each question of the task goes out on it as a server request
//! (`elicitation/create`, or whatever method the tool's question names) with a server-side id
//! and the related-task `_meta`; the client answers each with a JSON-RPC response in a POST of
//! its own ([`answered`]), which resumes the task; the stream ends with the tool's result (or
//! its error) once the task is terminal. The stream sleeps until the task's current step ends
//! or the client changed something (an answer, a cancel), never polling.
//!
//! A question keeps its request id until answered, so a stream opened again after a drop asks
//! it again under the same id and a late answer still counts. An answer the task cannot take
//! (malformed) leaves the question outstanding; it is asked again under a new id.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::methods::{outgoing, reply};
use super::session::Session;
use super::wire::{self, mcp_error, response};
use crate::app::App;
use crate::tasks::Outcome;
use crate::wire::ErrorObject;

/// `tasks/result` of `task_id`.
pub(super) fn open(app: &Arc<App>, session: &Arc<Session>, id: Value, task_id: String) -> Response {
    match app.store.outcome_owned(&task_id, session.serial) {
        Err(_) => reply(
            app,
            session,
            id,
            Err(mcp_error(-32602, format!("Task not found: {task_id}"))),
        ),
        Ok(outcome) => match finished(&outcome, &task_id) {
            Some(answer) => {
                session.forget_questions(&task_id);
                reply(app, session, id, answer)
            }
            None => waiting(app, session, id, task_id),
        },
    }
}

/// The answer of a terminal task: its result with the related-task `_meta`, or its error.
fn finished(outcome: &Outcome, task_id: &str) -> Option<Result<Value, ErrorObject>> {
    match outcome {
        Outcome::Completed(result) => Some(Ok(wire::tool_result(result, Some(task_id)))),
        Outcome::Failed(error) => Some(Err(error.clone())),
        // As the SDK's store: a cancelled task has no result to give.
        Outcome::Cancelled => Some(Err(ErrorObject {
            code: -32603,
            message: format!("Task {task_id} has no result stored"),
            data: None,
        })),
        Outcome::Working(_) | Outcome::InputRequired(_) => None,
    }
}

struct Waiting {
    app: Arc<App>,
    session: Arc<Session>,
    id: Value,
    task_id: String,
    /// Request ids already sent on this stream.
    sent: HashSet<u64>,
    done: bool,
}

fn waiting(app: &Arc<App>, session: &Arc<Session>, id: Value, task_id: String) -> Response {
    let state = Waiting {
        app: app.clone(),
        session: session.clone(),
        id,
        task_id,
        sent: HashSet::new(),
        done: false,
    };
    let keepalive = app.config.listen_keepalive;
    let stream = futures_util::stream::unfold(state, move |mut state| async move {
        let chunk = next_chunk(&mut state, keepalive).await?;
        Some((Ok::<_, Infallible>(Bytes::from(chunk)), state))
    });
    response(
        StatusCode::OK,
        "text/event-stream",
        Body::from_stream(stream),
        Some(&session.header),
    )
}

/// What the stream writes next: questions not sent yet, the final answer, or a keep-alive
/// after a quiet `keepalive`; `None` ends the stream.
async fn next_chunk(state: &mut Waiting, keepalive: Duration) -> Option<Vec<u8>> {
    if state.done {
        return None;
    }
    let quiet_until = Instant::now() + keepalive;
    let session = state.session.clone();
    loop {
        let changed = session.changed.notified();
        tokio::pin!(changed);
        // Registered before looking, so a change made while we look is not missed.
        changed.as_mut().enable();
        if state.session.has_ended() {
            state.done = true;
            return None;
        }
        let outcome = match state
            .app
            .store
            .outcome_owned(&state.task_id, state.session.serial)
        {
            Ok(outcome) => outcome,
            Err(_) => {
                // Expired while waiting.
                state.done = true;
                let error = mcp_error(-32602, format!("Task not found: {}", state.task_id));
                return Some(message(state.id.clone(), Err(error)));
            }
        };
        if let Some(answer) = finished(&outcome, &state.task_id) {
            state.done = true;
            state.session.forget_questions(&state.task_id);
            return Some(message(state.id.clone(), answer));
        }
        let until = match outcome {
            Outcome::Working(until) => Some(until),
            Outcome::InputRequired(questions) => {
                let chunk = ask(state, &questions);
                if !chunk.is_empty() {
                    return Some(chunk);
                }
                None
            }
            _ => None,
        };
        tokio::select! {
            () = &mut changed => {}
            () = sleep_until(until) => {}
            () = tokio::time::sleep_until(quiet_until) => return Some(wire::PING.to_vec()),
        }
    }
}

/// The server requests for the questions this stream has not sent yet.
fn ask(state: &mut Waiting, questions: &[(String, Value)]) -> Vec<u8> {
    let mut chunk = Vec::new();
    for (key, question) in questions {
        let request_id = state.session.ask(&state.task_id, key);
        if !state.sent.insert(request_id) {
            continue;
        }
        let method = question
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("elicitation/create");
        let request = json!({
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": wire::request_params(question.get("params"), &state.task_id),
        });
        chunk.extend_from_slice(&wire::event(
            &serde_json::to_vec(&request).unwrap_or_default(),
        ));
    }
    chunk
}

fn message(id: Value, answer: Result<Value, ErrorObject>) -> Vec<u8> {
    wire::event(&outgoing(id, answer).to_bytes())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The client's response to one of our requests: the answer to a task's question. An error
/// response counts as the person cancelling the question. Responses to nothing we asked are
/// dropped, as the SDK drops them.
pub(super) fn answered(app: &App, session: &Session, id: &Value, answer: Result<Value, Value>) {
    let Some(question) = id.as_u64().and_then(|id| session.answered(id)) else {
        tracing::debug!(%id, "a response to no question of ours");
        return;
    };
    let answer = answer.unwrap_or_else(|_| json!({"action": "cancel"}));
    match app
        .store
        .answer_owned(&question.task_id, session.serial, &question.key, answer)
    {
        Ok(()) => app.hub.touched(&question.task_id),
        Err(error) => tracing::debug!(%error, "an answer the task could not take"),
    }
    session.changed.notify_waiters();
}
