//! Driving calls and tasks through the core client the way the console does: one client per
//! server, polls paced by the server's `pollIntervalMs` (re-read on every answer), and a
//! record of every poll so tests can assert what was observed on the way.
//!
//! Every helper panics with the task and the poll trace when the server does not get where
//! the test expects within [`POLL_DEADLINE`]: a hung test is a failure that says why.

use std::time::{Duration, Instant};

use countersign_core::mcp::{
    CallOutcome, Client, Elicitation, ElicitationResponse, InputRequests, Task, TaskState,
    TaskStatus, ToolCall, ToolResult,
};
use serde_json::{Map, Value};

/// How long one poll loop may take before the test fails.
pub const POLL_DEADLINE: Duration = Duration::from_secs(30);
/// Interval used when a task names none (neither peer does that, but the spec allows it).
pub const DEFAULT_POLL: Duration = Duration::from_millis(100);

/// A client for `url` with default options.
pub fn client(url: &str) -> Client {
    Client::new(countersign_core::mcp::Endpoint::new(url))
        .unwrap_or_else(|e| panic!("a client for {url} must build: {e}"))
}

/// A JSON object literal as the `Map` the client API takes.
pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("expected a JSON object, got {other}"),
    }
}

/// `tools/call` with these arguments.
pub async fn call(client: &Client, tool: &str, arguments: Value) -> CallOutcome {
    client
        .call_tool(&ToolCall::new(tool, Some(object(arguments))))
        .await
        .unwrap_or_else(|e| panic!("tools/call {tool} must succeed: {e} ({e:?})"))
}

/// The result of a synchronous call; panics on any other outcome.
pub fn expect_complete(tool: &str, outcome: CallOutcome) -> ToolResult {
    match outcome {
        CallOutcome::Complete(result) => result,
        other => panic!("{tool} must answer synchronously, got {other:?}"),
    }
}

/// The task handle of a call; panics on any other outcome.
pub fn expect_task(tool: &str, outcome: CallOutcome) -> Task {
    match outcome {
        CallOutcome::Task(task) => task,
        other => panic!("{tool} must create a task, got {other:?}"),
    }
}

/// The result of a completed task; panics with the task otherwise.
pub fn completed(task: &Task) -> &ToolResult {
    match &task.state {
        TaskState::Completed { result } => result,
        _ => panic!("task must be completed: {}", task.to_json()),
    }
}

/// The open questions of an `input_required` task; panics with the task otherwise.
pub fn questions(task: &Task) -> &InputRequests {
    match &task.state {
        TaskState::InputRequired { input_requests } => input_requests,
        _ => panic!("task must be input_required: {}", task.to_json()),
    }
}

/// The single question of a task asking exactly one, as (key, typed elicitation).
pub fn single_question(task: &Task) -> (String, Elicitation) {
    let asked = questions(task);
    assert_eq!(
        asked.len(),
        1,
        "exactly one question expected: {}",
        task.to_json()
    );
    let (key, request) = asked.iter().next().expect("one question");
    assert_eq!(
        request.method, "elicitation/create",
        "questions are elicitations"
    );
    let elicitation = request
        .elicitation()
        .unwrap_or_else(|| panic!("question {key} must be a well-formed elicitation: {request:?}"));
    (key.clone(), elicitation)
}

/// `{"action":"accept","content":…}` as the client's typed response serialises it.
pub fn accept(content: Value) -> Value {
    serde_json::to_value(ElicitationResponse::Accept {
        content: Some(object(content)),
    })
    .expect("serialisable")
}

/// `{"action":"accept"}` (URL mode: the user consented).
pub fn consent() -> Value {
    serde_json::to_value(ElicitationResponse::Accept { content: None }).expect("serialisable")
}

/// `{"action":"decline"}`.
pub fn decline() -> Value {
    serde_json::to_value(ElicitationResponse::Decline).expect("serialisable")
}

/// One `tasks/get` as the poll loop saw it.
#[derive(Debug, Clone)]
pub struct Poll {
    /// When the request was sent.
    pub sent: Instant,
    /// How long the loop waited before sending it (the interval in force).
    pub waited_for: Duration,
    pub status: TaskStatus,
    pub status_message: Option<String>,
    pub poll_interval_ms: Option<u64>,
}

/// Every poll of one loop, in order.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// When the loop started (the handle had just arrived).
    pub started: Option<Instant>,
    pub polls: Vec<Poll>,
}

impl Trace {
    /// The status messages seen, consecutive duplicates (and absent ones) dropped.
    pub fn messages(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for poll in &self.polls {
            if let Some(m) = &poll.status_message {
                if out.last() != Some(m) {
                    out.push(m.clone());
                }
            }
        }
        out
    }

    /// The statuses seen, consecutive duplicates dropped.
    pub fn statuses(&self) -> Vec<TaskStatus> {
        let mut out = Vec::new();
        for poll in &self.polls {
            if out.last() != Some(&poll.status) {
                out.push(poll.status);
            }
        }
        out
    }

    /// Panics unless no poll was sent sooner than the interval the server asked for in the
    /// answer before it (the handle's for the first poll).
    pub fn assert_paced(&self, first_interval: Duration) {
        let mut previous = self.started.expect("the trace has a start");
        let mut interval = first_interval;
        for (index, poll) in self.polls.iter().enumerate() {
            let gap = poll.sent.duration_since(previous);
            assert!(
                gap >= interval,
                "poll #{index} came {gap:?} after the previous answer, sooner than the {interval:?} the server asked for"
            );
            previous = poll.sent;
            if let Some(ms) = poll.poll_interval_ms {
                interval = Duration::from_millis(ms);
            }
        }
    }

    fn describe(&self) -> String {
        self.polls
            .iter()
            .map(|p| format!("{} {:?}", p.status, p.status_message))
            .collect::<Vec<_>>()
            .join(" → ")
    }
}

/// Polls `task` (just returned by `tools/call` or a previous loop) until `done` holds, never
/// faster than the server's `pollIntervalMs`; returns the last state and the trace.
pub async fn poll_until(
    client: &Client,
    task: &Task,
    what: &str,
    done: impl Fn(&Task) -> bool,
) -> (Task, Trace) {
    let started = Instant::now();
    let mut trace = Trace {
        started: Some(started),
        polls: Vec::new(),
    };
    let mut interval = task
        .poll_interval_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_POLL);
    loop {
        if started.elapsed() > POLL_DEADLINE {
            panic!(
                "task {} did not become {what} within {POLL_DEADLINE:?}; seen: {}",
                task.task_id,
                trace.describe()
            );
        }
        tokio::time::sleep(interval).await;
        let sent = Instant::now();
        let now = client.get_task(&task.task_id).await.unwrap_or_else(|e| {
            panic!(
                "tasks/get {} failed while waiting for {what}: {e} ({e:?}); seen: {}",
                task.task_id,
                trace.describe()
            )
        });
        assert_eq!(
            now.task_id, task.task_id,
            "tasks/get answers for the task asked"
        );
        trace.polls.push(Poll {
            sent,
            waited_for: interval,
            status: now.status(),
            status_message: now.status_message.clone(),
            poll_interval_ms: now.poll_interval_ms,
        });
        if let Some(ms) = now.poll_interval_ms {
            interval = Duration::from_millis(ms);
        }
        if done(&now) {
            return (now, trace);
        }
        if now.status().is_terminal() {
            panic!(
                "task {} ended {} while waiting for {what}: {}; seen: {}",
                task.task_id,
                now.status(),
                now.to_json(),
                trace.describe()
            );
        }
    }
}

/// Polls until the task is terminal.
pub async fn poll_to_end(client: &Client, task: &Task) -> (Task, Trace) {
    poll_until(client, task, "terminal", |t| t.status().is_terminal()).await
}

/// Polls until the task asks for input (failing if it ends first).
pub async fn poll_to_questions(client: &Client, task: &Task) -> Task {
    poll_until(client, task, "input_required", |t| {
        t.status() == TaskStatus::InputRequired
    })
    .await
    .0
}

/// Answers with `tasks/update` and polls to the end. Answers are eventually consistent: polls
/// that still show the answered questions are skipped.
pub async fn answer_and_finish(
    client: &Client,
    task: &Task,
    responses: Map<String, Value>,
) -> Task {
    let answered: Vec<String> = responses.keys().cloned().collect();
    client
        .update_task(&task.task_id, responses)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "tasks/update {} must be acknowledged: {e} ({e:?})",
                task.task_id
            )
        });
    let (end, _) = poll_until(client, task, "terminal after the answers", |t| {
        if let TaskState::InputRequired { input_requests } = &t.state {
            // A new question (a key not answered) would be a surprise for these tests.
            assert!(
                input_requests.keys().all(|k| answered.contains(k)),
                "task asked a new question after being answered: {}",
                t.to_json()
            );
        }
        t.status().is_terminal()
    })
    .await;
    end
}
