//! The task store.
//!
//! Tasks live in a sharded map (one `std::sync::Mutex` per shard, never held across an
//! `.await`). No task owns a thread or a timer: a task's state is advanced lazily, whenever it
//! is read or written, by replaying the [`Program`] steps whose deadlines have passed. Each
//! change is stamped with the instant it was *scheduled* for, not the instant it was observed,
//! so `lastUpdatedAt` and [`TaskChange`] tell when the server-side change happened. A single
//! sweeper (see `server`) drops tasks whose TTL has elapsed; reads check the TTL too, so expiry
//! is exact whatever the sweep interval.

mod owned;
mod program;

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use tokio::time::Instant;

pub(crate) use owned::{Cancelled, Created, Outcome};
pub(crate) use program::{CancelPolicy, Program, Script, Step};

use crate::clock::{scaled, Clock, Moment};
use crate::config::Era;
use crate::elicitation::{Answer, Answers, Ask};
use crate::error::{Error, Result};
use crate::wire::{ErrorObject, ResultType, TaskStatus, TaskView, ToolResult};

const SHARDS: usize = 16;
/// Upper bound of steps replayed in one advance, against programs that never wait.
const MAX_STEPS_PER_ADVANCE: usize = 100_000;

/// One observable change of a task, stamped with the server-side time it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskChange {
    /// Status after the change.
    pub status: TaskStatus,
    /// `statusMessage` after the change.
    pub status_message: Option<String>,
    /// Wall-clock time of the change (equals the task's `lastUpdatedAt` right after it).
    pub at: OffsetDateTime,
    /// Monotonic time of the change, comparable with `Instant::now()` in the same process.
    pub instant: std::time::Instant,
}

/// A task as a push notification needs it: its state now, how many changes it has been
/// through (so a subscriber that has seen `version` knows whether this is news), and when it
/// will change next on its own (the pusher's next wake-up for it).
pub(crate) struct Observed {
    pub(crate) version: usize,
    /// Exactly what `tasks/get` would return now.
    pub(crate) task: Value,
    /// The deadline of the current `working` step; `None` when only a client can move the task
    /// on (input required) or nothing ever will (terminal).
    pub(crate) next_change: Option<Instant>,
}

/// Settings every task shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskSettings {
    pub(crate) time_scale: f64,
    pub(crate) ttl: Option<Duration>,
    pub(crate) poll_interval_ms: u64,
    /// The wire shape tasks are rendered in.
    pub(crate) era: Era,
}

/// The owner of a task that no session owns (every task of the modern era).
pub(crate) const NO_OWNER: u64 = 0;

pub(crate) struct TaskStore {
    shards: Box<[Mutex<HashMap<String, TaskRecord>>]>,
    hasher: RandomState,
    clock: Clock,
    settings: TaskSettings,
}

impl TaskStore {
    pub(crate) fn new(clock: Clock, settings: TaskSettings) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            clock,
            settings,
        }
    }

    fn shard(&self, task_id: &str) -> MutexGuard<'_, HashMap<String, TaskRecord>> {
        let index = (self.hasher.hash_one(task_id) as usize) % self.shards.len();
        // A panic while holding a shard cannot leave a record half-written in a way that
        // matters more than losing the server, so recover the guard instead of propagating.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates a task running `program` and returns its `CreateTaskResult`. The task is in the
    /// store before this returns, so an immediate `tasks/get` resolves.
    pub(crate) fn create(&self, program: Box<dyn Program>) -> Value {
        self.create_for(program, NO_OWNER).value
    }

    fn create_for(&self, program: Box<dyn Program>, owner: u64) -> Created {
        let now = self.clock.now();
        let id = new_task_id();
        let mut record = TaskRecord::start(id.clone(), now, program, self.settings);
        record.owner = owner;
        record.advance(now.instant, &self.clock, self.settings);
        let value = render(record.view(ResultType::Task, self.settings), self.settings);
        let version = record.changes.len();
        self.shard(&id).insert(id.clone(), record);
        Created {
            task_id: id,
            value,
            version,
        }
    }

    /// `tasks/get`: the task with its payload, `resultType: "complete"`.
    pub(crate) fn get(&self, task_id: &str) -> Result<Value> {
        let now = self.clock.now();
        let mut shard = self.shard(task_id);
        let record = live(&mut shard, task_id, now.instant, self.settings)?;
        record.advance(now.instant, &self.clock, self.settings);
        Ok(render(record.detailed_view(self.settings), self.settings))
    }

    /// `tasks/update`: delivers the responses to outstanding questions. Responses for unknown
    /// or already-answered keys are ignored; a malformed response to an outstanding key rejects
    /// the whole update and changes nothing.
    pub(crate) fn update(&self, task_id: &str, responses: &Map<String, Value>) -> Result<()> {
        let now = self.clock.now();
        let mut shard = self.shard(task_id);
        let record = live(&mut shard, task_id, now.instant, self.settings)?;
        record.advance(now.instant, &self.clock, self.settings);
        record.answer(responses, now, &self.clock, self.settings)
    }

    /// `tasks/cancel`: cooperative; a task that already finished stays finished.
    pub(crate) fn cancel(&self, task_id: &str) -> Result<()> {
        let now = self.clock.now();
        let mut shard = self.shard(task_id);
        let record = live(&mut shard, task_id, now.instant, self.settings)?;
        record.advance(now.instant, &self.clock, self.settings);
        record.cancel(now);
        Ok(())
    }

    /// The task now (advancing it first), for push; `None` if unknown or expired.
    pub(crate) fn observe(&self, task_id: &str) -> Option<Observed> {
        let now = self.clock.now();
        let mut shard = self.shard(task_id);
        let record = live(&mut shard, task_id, now.instant, self.settings).ok()?;
        record.advance(now.instant, &self.clock, self.settings);
        Some(Observed {
            version: record.changes.len(),
            task: render(record.detailed_view(self.settings), self.settings),
            next_change: match record.phase {
                Phase::Working { until } => Some(until),
                _ => None,
            },
        })
    }

    /// Whether a task with this id is held and its TTL has not elapsed.
    pub(crate) fn contains(&self, task_id: &str) -> bool {
        let now = Instant::now();
        let shard = self.shard(task_id);
        shard.get(task_id).is_some_and(|record| {
            self.settings
                .ttl
                .is_none_or(|ttl| !record.expired(now, ttl))
        })
    }

    /// Every change of the task so far (advancing it to now first), or `None` if unknown.
    pub(crate) fn changes(&self, task_id: &str) -> Option<Vec<TaskChange>> {
        let now = self.clock.now();
        let mut shard = self.shard(task_id);
        let record = live(&mut shard, task_id, now.instant, self.settings).ok()?;
        record.advance(now.instant, &self.clock, self.settings);
        Some(record.changes.clone())
    }

    /// Drops the tasks whose TTL has elapsed; returns how many.
    pub(crate) fn sweep(&self) -> usize {
        let Some(ttl) = self.settings.ttl else {
            return 0;
        };
        let now = Instant::now();
        let mut dropped = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            let before = shard.len();
            shard.retain(|_, record| !record.expired(now, ttl));
            dropped += before - shard.len();
        }
        dropped
    }

    /// Number of tasks held (expired ones not yet swept included).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// Looks a task up, forgetting it if its TTL has elapsed.
fn live<'a>(
    shard: &'a mut HashMap<String, TaskRecord>,
    task_id: &str,
    now: Instant,
    settings: TaskSettings,
) -> Result<&'a mut TaskRecord> {
    let unknown = || Error::UnknownTask {
        task_id: task_id.to_owned(),
    };
    if let Some(ttl) = settings.ttl {
        if shard
            .get(task_id)
            .is_some_and(|record| record.expired(now, ttl))
        {
            shard.remove(task_id);
            return Err(unknown());
        }
    }
    shard.get_mut(task_id).ok_or_else(unknown)
}

/// A task as the configured era shows it.
fn render(view: TaskView<'_>, settings: TaskSettings) -> Value {
    match settings.era {
        Era::Modern => view.to_value(),
        Era::Legacy => crate::legacy::wire::task(&view),
    }
}

/// 256 random bits, base64url: unguessable, as task ids may act as bearer handles.
fn new_task_id() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A question waiting for its answer.
struct Pending {
    key: String,
    name: String,
    ask: Ask,
    request: Value,
}

/// Where a task is. Exactly one payload per status, by construction.
enum Phase {
    Working {
        until: Instant,
    },
    InputRequired {
        pending: Vec<Pending>,
        /// Answers received so far for this round, by local name.
        answered: Answers,
    },
    Completed(ToolResult),
    Failed(ErrorObject),
    Cancelled,
}

impl Phase {
    fn status(&self) -> TaskStatus {
        match self {
            Self::Working { .. } => TaskStatus::Working,
            Self::InputRequired { .. } => TaskStatus::InputRequired,
            Self::Completed(_) => TaskStatus::Completed,
            Self::Failed(_) => TaskStatus::Failed,
            Self::Cancelled => TaskStatus::Cancelled,
        }
    }
}

struct TaskRecord {
    id: String,
    /// The legacy session the task belongs to ([`NO_OWNER`] in the modern era).
    owner: u64,
    created: Moment,
    updated: Moment,
    message: Option<String>,
    phase: Phase,
    /// `None` once the task is terminal.
    program: Option<Box<dyn Program>>,
    cancel_requested: bool,
    /// Counter behind input keys: keys are never reused over the task's life.
    keys_issued: u64,
    changes: Vec<TaskChange>,
}

impl TaskRecord {
    fn start(
        id: String,
        now: Moment,
        mut program: Box<dyn Program>,
        settings: TaskSettings,
    ) -> Self {
        let first = program.next(None);
        let mut record = Self {
            id,
            owner: NO_OWNER,
            created: now,
            updated: now,
            message: None,
            phase: Phase::Working { until: now.instant },
            program: Some(program),
            cancel_requested: false,
            keys_issued: 0,
            changes: Vec::new(),
        };
        record.apply(first, now, settings);
        if record.changes.is_empty() {
            record.touch(now);
        }
        record
    }

    fn expired(&self, now: Instant, ttl: Duration) -> bool {
        self.created
            .instant
            .checked_add(ttl)
            .is_some_and(|deadline| deadline <= now)
    }

    fn status(&self) -> TaskStatus {
        self.phase.status()
    }

    /// Records a visible change at `at`.
    fn touch(&mut self, at: Moment) {
        self.updated = at;
        self.changes.push(TaskChange {
            status: self.status(),
            status_message: self.message.clone(),
            at: at.wall,
            instant: at.instant.into_std(),
        });
    }

    /// Replays every step whose deadline is at or before `now`, each at its own deadline.
    fn advance(&mut self, now: Instant, clock: &Clock, settings: TaskSettings) {
        for _ in 0..MAX_STEPS_PER_ADVANCE {
            let Phase::Working { until } = self.phase else {
                return;
            };
            if until > now {
                return;
            }
            let at = clock.at(until);
            if self.cancel_requested {
                self.finish_cancelled(at);
                return;
            }
            let Some(program) = self.program.as_mut() else {
                self.fail_internal("task lost its program", at);
                return;
            };
            let step = program.next(None);
            self.apply(step, at, settings);
        }
        let at = clock.at(now);
        self.fail_internal("task program did not settle", at);
    }

    fn apply(&mut self, step: Step, at: Moment, settings: TaskSettings) {
        let before = (self.status(), self.message.clone());
        let payload_changed = match step {
            Step::Work {
                duration,
                message,
                exact,
            } => {
                let duration = if exact {
                    duration
                } else {
                    scaled(duration, settings.time_scale)
                };
                let until = at
                    .instant
                    .checked_add(duration)
                    // Saturate a year ahead rather than overflow.
                    .or_else(|| at.instant.checked_add(Duration::from_secs(86_400 * 365)))
                    .unwrap_or(at.instant);
                self.phase = Phase::Working { until };
                self.message = message;
                false
            }
            Step::Ask { message, asks } => {
                let pending = asks
                    .into_iter()
                    .map(|(name, ask)| {
                        self.keys_issued += 1;
                        Pending {
                            key: format!("{}:{}-{}", self.id, name, self.keys_issued),
                            request: ask.to_request(),
                            name,
                            ask,
                        }
                    })
                    .collect();
                self.phase = Phase::InputRequired {
                    pending,
                    answered: Answers::new(),
                };
                self.message = message;
                true
            }
            Step::Complete { result, message } => {
                self.phase = Phase::Completed(result);
                self.message = message;
                self.program = None;
                true
            }
            Step::Fail { error, message } => {
                self.phase = Phase::Failed(error);
                self.message = message;
                self.program = None;
                true
            }
        };
        if payload_changed || before != (self.status(), self.message.clone()) {
            self.touch(at);
        }
    }

    fn fail_internal(&mut self, detail: &str, at: Moment) {
        self.phase = Phase::Failed(ErrorObject {
            code: -32603,
            message: format!("Internal error: {detail}"),
            data: None,
        });
        self.message = Some("internal error".to_owned());
        self.program = None;
        self.touch(at);
    }

    fn finish_cancelled(&mut self, at: Moment) {
        self.message = Some(
            self.program
                .as_ref()
                .map(|program| program.cancelled_message())
                .unwrap_or_else(|| "cancelled".to_owned()),
        );
        self.phase = Phase::Cancelled;
        self.program = None;
        self.touch(at);
    }

    fn cancel(&mut self, now: Moment) {
        let policy = match (&self.phase, &self.program) {
            (Phase::Working { .. }, Some(program)) => program.cancel_policy(),
            (Phase::InputRequired { .. }, _) => CancelPolicy::Immediate,
            // Terminal: cancel is an idempotent no-op.
            _ => return,
        };
        match policy {
            CancelPolicy::Immediate => self.finish_cancelled(now),
            CancelPolicy::AfterCurrentStep { message } => {
                if !self.cancel_requested {
                    self.cancel_requested = true;
                    self.message = Some(message);
                    self.touch(now);
                }
            }
        }
    }

    fn answer(
        &mut self,
        responses: &Map<String, Value>,
        now: Moment,
        clock: &Clock,
        settings: TaskSettings,
    ) -> Result<()> {
        let all_answered = {
            let Phase::InputRequired { pending, answered } = &mut self.phase else {
                // Nothing is outstanding: every key is unknown or already answered.
                return Ok(());
            };
            // Validate everything first so that a bad update changes nothing.
            let mut accepted = Vec::new();
            for (index, question) in pending.iter().enumerate() {
                let Some(raw) = responses.get(&question.key) else {
                    continue;
                };
                let answer = Answer::parse(raw)
                    .and_then(|answer| question.ask.check(&answer).map(|()| answer))
                    .map_err(|detail| {
                        Error::invalid_params(format!(
                            "inputResponses[{:?}]: {detail}",
                            question.key
                        ))
                    })?;
                accepted.push((index, answer));
            }
            if accepted.is_empty() {
                return Ok(());
            }
            for (index, answer) in accepted.into_iter().rev() {
                let question = pending.remove(index);
                answered.insert(question.name, answer);
            }
            pending.is_empty().then(|| std::mem::take(answered))
        };
        let Some(answers) = all_answered else {
            // Partial answer: still waiting, with fewer questions.
            self.touch(now);
            return Ok(());
        };
        let Some(program) = self.program.as_mut() else {
            self.fail_internal("task lost its program", now);
            return Ok(());
        };
        let step = program.next(Some(answers));
        self.apply(step, now, settings);
        self.advance(now.instant, clock, settings);
        Ok(())
    }

    /// What `tasks/get` shows: the payload too in the modern era; the legacy era's status has
    /// none (its result comes from `tasks/result`), so nothing is copied for it.
    fn detailed_view(&self, settings: TaskSettings) -> TaskView<'_> {
        let result_type = match settings.era {
            Era::Modern => ResultType::Complete,
            Era::Legacy => ResultType::Task,
        };
        self.view(result_type, settings)
    }

    fn view(&self, result_type: ResultType, settings: TaskSettings) -> TaskView<'_> {
        let detailed = result_type == ResultType::Complete;
        let (input_requests, result, error) = match &self.phase {
            Phase::InputRequired { pending, .. } if detailed => (
                Some(
                    pending
                        .iter()
                        .map(|question| (question.key.clone(), question.request.clone()))
                        .collect(),
                ),
                None,
                None,
            ),
            Phase::Completed(result) if detailed => (None, Some(result), None),
            Phase::Failed(error) if detailed => (None, None, Some(error)),
            _ => (None, None, None),
        };
        TaskView {
            task_id: &self.id,
            status: self.status(),
            status_message: self.message.as_deref(),
            created_at: self.created.rfc3339(),
            last_updated_at: self.updated.rfc3339(),
            ttl_ms: settings
                .ttl
                .map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            poll_interval_ms: settings.poll_interval_ms,
            result_type,
            input_requests,
            result,
            error,
        }
    }
}

#[cfg(test)]
mod tests;
