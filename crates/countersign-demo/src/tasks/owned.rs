//! The store as the legacy era uses it: every task belongs to the session that created it, and
//! a task of another session is as unknown as one that never existed (SEP-1686 binds tasks to
//! their session when there is no auth context). The same records and programs as the modern
//! era; only the questions travel differently (one server request per question, answered one
//! by one) and a cancel is immediate, as SEP-1686 requires the task to be `cancelled` before
//! the reply.

use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{live, render, Phase, TaskRecord, TaskStore};
use crate::error::{Error, Result};
use crate::tasks::Program;
use crate::wire::{ErrorObject, ResultType, TaskStatus, ToolResult};

/// A task just created for a session.
pub(crate) struct Created {
    pub(crate) task_id: String,
    /// The task as the era renders it.
    pub(crate) value: Value,
    /// Its change count, so a push stream opened earlier sends only what comes after.
    pub(crate) version: usize,
}

/// What `tasks/cancel` found.
pub(crate) enum Cancelled {
    /// The task is now `cancelled`; this is how it looks.
    Now(Value),
    /// It had already reached this terminal status; nothing changed.
    AlreadyTerminal(TaskStatus),
}

/// Where a task stands for `tasks/result`.
pub(crate) enum Outcome {
    Completed(ToolResult),
    Failed(ErrorObject),
    Cancelled,
    /// Working until this instant at least (the end of its current step).
    Working(Instant),
    /// Waiting for these questions: (input key, `{method, params}`).
    InputRequired(Vec<(String, Value)>),
}

impl TaskStore {
    /// Creates a task owned by the session numbered `owner`.
    pub(crate) fn create_owned(&self, program: Box<dyn Program>, owner: u64) -> Created {
        self.create_for(program, owner)
    }

    /// Runs `f` on the live task `task_id` of `owner`, advanced to now.
    fn with_owned<T>(
        &self,
        task_id: &str,
        owner: u64,
        f: impl FnOnce(&mut TaskRecord, crate::clock::Moment) -> T,
    ) -> Result<T> {
        let now = self.clock.now();
        let mut shard = self.shard(task_id);
        let record = live(&mut shard, task_id, now.instant, self.settings)?;
        if record.owner != owner {
            return Err(Error::UnknownTask {
                task_id: task_id.to_owned(),
            });
        }
        record.advance(now.instant, &self.clock, self.settings);
        Ok(f(record, now))
    }

    /// `tasks/get` of a session's task.
    pub(crate) fn get_owned(&self, task_id: &str, owner: u64) -> Result<Value> {
        let settings = self.settings;
        self.with_owned(task_id, owner, |record, _| {
            render(record.view(ResultType::Task, settings), settings)
        })
    }

    /// The change count of a session's task, if it is live.
    pub(crate) fn version_owned(&self, task_id: &str, owner: u64) -> Option<usize> {
        self.with_owned(task_id, owner, |record, _| record.changes.len())
            .ok()
    }

    /// `tasks/cancel` of a session's task: `cancelled` at once unless already terminal.
    pub(crate) fn cancel_owned(&self, task_id: &str, owner: u64) -> Result<Cancelled> {
        let settings = self.settings;
        self.with_owned(task_id, owner, |record, now| {
            let status = record.status();
            if status.is_terminal() {
                return Cancelled::AlreadyTerminal(status);
            }
            record.finish_cancelled(now);
            Cancelled::Now(render(record.view(ResultType::Task, settings), settings))
        })
    }

    /// Where a session's task stands, for `tasks/result`.
    pub(crate) fn outcome_owned(&self, task_id: &str, owner: u64) -> Result<Outcome> {
        self.with_owned(task_id, owner, |record, _| match &record.phase {
            Phase::Completed(result) => Outcome::Completed(result.clone()),
            Phase::Failed(error) => Outcome::Failed(error.clone()),
            Phase::Cancelled => Outcome::Cancelled,
            Phase::Working { until } => Outcome::Working(*until),
            Phase::InputRequired { pending, .. } => Outcome::InputRequired(
                pending
                    .iter()
                    .map(|question| (question.key.clone(), question.request.clone()))
                    .collect(),
            ),
        })
    }

    /// The answer to one question (`key`) of a session's task, as the client's response to the
    /// server request that asked it. A malformed answer changes nothing and is an error.
    pub(crate) fn answer_owned(
        &self,
        task_id: &str,
        owner: u64,
        key: &str,
        answer: Value,
    ) -> Result<()> {
        let (clock, settings) = (self.clock, self.settings);
        let mut responses = Map::new();
        responses.insert(key.to_owned(), answer);
        self.with_owned(task_id, owner, |record, now| {
            record.answer(&responses, now, &clock, settings)
        })?
    }
}
