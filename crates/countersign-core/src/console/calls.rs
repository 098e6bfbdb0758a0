//! Calls: a tool call from a face, and the calls waiting for their questions to be answered
//! (MRTR), bounded in rounds, in number and in age.

use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use crate::actions::{self, Called};
use crate::ledger::servers::ServerRecord;
use crate::ledger::tasks::TaskRecord;
use crate::mcp::{self, InputRequired, ToolCall, ToolResult};

use super::view::{CallAnswer, CallQuestion, ToolCallOutcome};
use super::{present, Console, Error, Result};

/// A call waiting for its questions to be answered (MRTR).
pub(super) struct PendingCall {
    server: ServerRecord,
    call: ToolCall,
    question: InputRequired,
    /// `tools/call` requests sent so far for this call, the first included.
    rounds: usize,
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
            .ok()
            .and_then(|mut calls| calls.remove(&call_id))
            .ok_or_else(|| Error::NotFound(format!("call {call_id} (already answered or sent)")))?;
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
        let client = self.client(&server).await?;
        // tools/list first: the client learns which arguments it mirrors into headers.
        client.list_tools().await?;
        Ok(
            match actions::call(&self.ledger, &client, &server, &call, &self.actor).await? {
                Called::Complete(result) => CallStep::Complete(result),
                Called::InputRequired(question) => {
                    let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut calls) = self.calls.lock() {
                        calls.insert(
                            call_id,
                            PendingCall {
                                server,
                                call,
                                question: question.clone(),
                                rounds,
                            },
                        );
                    }
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
