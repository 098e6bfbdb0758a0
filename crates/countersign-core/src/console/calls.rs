//! Calls: a tool call from a face, and the calls waiting for their questions to be answered
//! (MRTR), bounded in rounds, in number and in age.

use std::collections::BTreeMap;
use std::sync::PoisonError;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::actions::{self, Called};
use crate::engine;
use crate::ledger::servers::ServerRecord;
use crate::ledger::tasks::TaskRecord;
use crate::mcp::{self, InputRequired, ToolCall, ToolResult};

use super::view::{CallAnswer, CallQuestion, ToolCallOutcome};
use super::{present, Console, Error, Result};

/// At most this many calls wait for their questions at once; a new one pushes out the oldest,
/// whose form a person most likely abandoned.
pub(super) const MAX_PENDING_CALLS: usize = 64;

/// A call whose questions have waited this long is dropped the next time the pending calls are
/// touched: its form was abandoned, and the server's questions have likely gone stale.
pub(super) const PENDING_CALL_TTL: Duration = Duration::from_secs(60 * 60);

/// A call waiting for its questions to be answered (MRTR).
pub(super) struct PendingCall {
    server: ServerRecord,
    call: ToolCall,
    question: InputRequired,
    /// `tools/call` requests sent so far for this call, the first included.
    rounds: usize,
}

/// The calls waiting for their questions to be answered, by id, bounded in number
/// ([`MAX_PENDING_CALLS`]) and in age ([`PENDING_CALL_TTL`]). Ids only grow and are never reused,
/// so the lowest id is the oldest call. Time is passed in: the console gives
/// [`Instant::now`], which tests pause and advance.
pub(super) struct PendingCalls<T> {
    calls: BTreeMap<u64, (Instant, T)>,
    next_id: u64,
}

impl<T> Default for PendingCalls<T> {
    fn default() -> Self {
        Self {
            calls: BTreeMap::new(),
            next_id: 1,
        }
    }
}

impl<T> PendingCalls<T> {
    /// Keeps `call`, asked at `now`, and returns its id. When [`MAX_PENDING_CALLS`] already
    /// wait, the oldest goes.
    pub(super) fn insert(&mut self, call: T, now: Instant) -> u64 {
        self.expire(now);
        while self.calls.len() >= MAX_PENDING_CALLS {
            self.calls.pop_first();
        }
        let id = self.next_id;
        self.next_id += 1;
        self.calls.insert(id, (now, call));
        id
    }

    /// Takes the call with this id: `None` when it was answered already, pushed out by newer
    /// calls, or waited longer than [`PENDING_CALL_TTL`].
    pub(super) fn take(&mut self, id: u64, now: Instant) -> Option<T> {
        self.expire(now);
        self.calls.remove(&id).map(|(_, call)| call)
    }

    /// Drops the calls that waited [`PENDING_CALL_TTL`] or longer.
    fn expire(&mut self, now: Instant) {
        while let Some(oldest) = self.calls.first_entry() {
            if now.saturating_duration_since(oldest.get().0) < PENDING_CALL_TTL {
                break;
            }
            oldest.remove();
        }
    }
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

impl Console {
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
            .unwrap_or_else(PoisonError::into_inner)
            .take(call_id, Instant::now())
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "call {call_id} (already answered or sent, or left unanswered too long)"
                ))
            })?;
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
        if server.is_stdio() && self.engine().is_none() {
            // A stdio server's task lives in the process the running engine started: a call
            // from here would go to a second process, whose task the engine could never see.
            let held = engine::lock::EngineLock::is_held(&self.config.data_dir)
                .ok()
                .flatten();
            if let Some(pid) = held {
                let pid =
                    pid.map_or_else(|| "another process".to_owned(), |p| format!("process {p}"));
                return Err(Error::Invalid(format!(
                    "{} is a stdio server run by the engine of {pid}: call it there (the app's resident or `countersign watch`)",
                    server.name
                )));
            }
        }
        let peer = self.peer(&server).await?;
        if let Some(client) = peer.modern() {
            // tools/list first: the client learns which arguments it mirrors into headers.
            client.list_tools().await?;
        }
        Ok(
            match actions::call(&self.ledger, &peer, &server, &call, &self.actor).await? {
                Called::Complete(result) => CallStep::Complete(result),
                Called::InputRequired(question) => {
                    let pending = PendingCall {
                        server,
                        call,
                        question: question.clone(),
                        rounds,
                    };
                    let call_id = self
                        .calls
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(pending, Instant::now());
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_new_call_past_the_bound_pushes_out_the_oldest() {
        let mut calls = PendingCalls::default();
        let mut ids = Vec::new();
        for i in 0..MAX_PENDING_CALLS {
            tokio::time::advance(Duration::from_secs(1)).await;
            ids.push(calls.insert(i, Instant::now()));
        }
        let newest = calls.insert(MAX_PENDING_CALLS, Instant::now());
        assert_eq!(calls.calls.len(), MAX_PENDING_CALLS, "the bound holds");
        assert_eq!(
            calls.take(ids[0], Instant::now()),
            None,
            "the oldest call made room for the newest"
        );
        assert_eq!(
            calls.take(ids[1], Instant::now()),
            Some(1),
            "only the oldest went"
        );
        assert_eq!(calls.take(newest, Instant::now()), Some(MAX_PENDING_CALLS));
        assert_eq!(
            calls.take(newest, Instant::now()),
            None,
            "a call is answered once"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_left_unanswered_for_an_hour_is_dropped() {
        let mut calls = PendingCalls::default();
        let old = calls.insert("old", Instant::now());
        tokio::time::advance(PENDING_CALL_TTL - Duration::from_secs(1)).await;
        let young = calls.insert("young", Instant::now());
        let answered = calls.insert("answered", Instant::now());
        assert_eq!(
            calls.take(answered, Instant::now()),
            Some("answered"),
            "a call within the hour is still there"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let touch = calls.insert("new", Instant::now());
        assert_eq!(
            calls.calls.keys().copied().collect::<Vec<_>>(),
            vec![young, touch],
            "touching the map dropped the call that waited an hour, and only it"
        );
        assert_eq!(calls.take(old, Instant::now()), None);
        tokio::time::advance(PENDING_CALL_TTL).await;
        assert_eq!(
            calls.take(young, Instant::now()),
            None,
            "taking an expired call finds nothing"
        );
        assert!(calls.calls.is_empty(), "taking also expires the rest");
    }
}
