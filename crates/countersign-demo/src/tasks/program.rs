//! What a task runs: a small state machine the store steps through lazily.

use std::collections::VecDeque;
use std::time::Duration;

use crate::elicitation::{Answers, Ask};
use crate::wire::{ErrorObject, ToolResult};

/// One stretch of a task's life, as decided by its [`Program`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Stay `working` for `duration`: simulated time scaled by `time_scale`, or exact
    /// wall-clock time when `exact` (the benchmark tool).
    Work {
        duration: Duration,
        message: Option<String>,
        exact: bool,
    },
    /// Go `input_required` with these questions (local name, question) until all are answered.
    Ask {
        message: Option<String>,
        asks: Vec<(String, Ask)>,
    },
    /// Finish with a tool result (`isError` may be true).
    Complete {
        result: ToolResult,
        message: Option<String>,
    },
    /// Finish with a JSON-RPC error.
    Fail {
        error: ErrorObject,
        message: Option<String>,
    },
}

impl Step {
    pub(crate) fn work(seconds: f64, message: impl Into<String>) -> Self {
        Self::Work {
            duration: Duration::try_from_secs_f64(seconds).unwrap_or(Duration::ZERO),
            message: Some(message.into()),
            exact: false,
        }
    }

    /// Work for exactly `duration`, ignoring `time_scale`.
    pub(crate) fn work_exact(duration: Duration, message: Option<String>) -> Self {
        Self::Work {
            duration,
            message,
            exact: true,
        }
    }

    pub(crate) fn ask(message: impl Into<String>, asks: Vec<(&str, Ask)>) -> Self {
        Self::Ask {
            message: Some(message.into()),
            asks: asks
                .into_iter()
                .map(|(name, ask)| (name.to_owned(), ask))
                .collect(),
        }
    }

    pub(crate) fn complete(result: ToolResult, message: impl Into<String>) -> Self {
        Self::Complete {
            result,
            message: Some(message.into()),
        }
    }

    pub(crate) fn fail(error: ErrorObject, message: impl Into<String>) -> Self {
        Self::Fail {
            error,
            message: Some(message.into()),
        }
    }
}

/// How a `tasks/cancel` is honoured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CancelPolicy {
    /// The task becomes `cancelled` at once.
    Immediate,
    /// The current step runs to its end first (cooperative cancellation); meanwhile the task
    /// stays `working` with this status message.
    AfterCurrentStep { message: String },
}

/// A task's behaviour. The store calls [`Program::next`] when the task starts, whenever a
/// `Work` step has elapsed, and when every question of an `Ask` step has been answered.
/// Implementations are pure state machines: no I/O, no sleeping, cheap to call under a lock.
pub(crate) trait Program: Send {
    /// The next step. `answers` is `Some` exactly when the previous step was an `Ask`.
    fn next(&mut self, answers: Option<Answers>) -> Step;

    fn cancel_policy(&self) -> CancelPolicy {
        CancelPolicy::Immediate
    }

    /// `statusMessage` of the cancelled task.
    fn cancelled_message(&self) -> String {
        "cancelled at the client's request".to_owned()
    }
}

/// A fixed sequence of steps that needs no input.
#[derive(Debug)]
pub(crate) struct Script {
    steps: VecDeque<Step>,
}

impl Script {
    pub(crate) fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Self {
            steps: steps.into_iter().collect(),
        }
    }
}

impl Program for Script {
    fn next(&mut self, _answers: Option<Answers>) -> Step {
        self.steps.pop_front().unwrap_or_else(|| {
            Step::fail(
                ErrorObject {
                    code: -32603,
                    message: "the task's script ended without a result".into(),
                    data: None,
                },
                "internal error",
            )
        })
    }
}
