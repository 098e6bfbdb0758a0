//! Store behaviour under paused tokio time: lazy advancement, change stamps, TTL, answers,
//! cancellation policies.

use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::elicitation::Form;

fn store(ttl: Option<Duration>) -> TaskStore {
    TaskStore::new(
        Clock::new(),
        TaskSettings {
            time_scale: 1.0,
            ttl,
            poll_interval_ms: 500,
            era: crate::config::Era::Modern,
        },
    )
}

fn id_of(created: &Value) -> String {
    created["taskId"].as_str().unwrap_or_default().to_owned()
}

fn question(name: &'static str) -> Ask {
    Ask::form(
        format!("{name}?"),
        Form::new().boolean(name, "Yes", "", None),
    )
}

/// Asks `rounds` times (one question, then two at once), then completes with the answers.
struct Interview {
    round: u32,
    seen: Vec<String>,
}

impl Program for Interview {
    fn next(&mut self, answers: Option<Answers>) -> Step {
        if let Some(answers) = answers {
            self.seen.extend(answers.keys().cloned());
        }
        self.round += 1;
        match self.round {
            1 => Step::work(1.0, "warming up"),
            2 => Step::ask("one question", vec![("first", question("first"))]),
            3 => Step::ask(
                "two questions",
                vec![("second", question("second")), ("third", question("third"))],
            ),
            _ => Step::complete(ToolResult::text(self.seen.join(",")), "done"),
        }
    }
}

fn accept(field: &str) -> Value {
    json!({"action": "accept", "content": {field: true}})
}

fn input_keys(task: &Value) -> Vec<String> {
    task["inputRequests"]
        .as_object()
        .map(|requests| requests.keys().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn script_advances_lazily_and_stamps_each_change_at_its_scheduled_time() {
    let store = store(None);
    let created = store.create(Box::new(Script::new([
        Step::work(1.0, "a"),
        Step::work(2.0, "b"),
        Step::complete(ToolResult::text("ok"), "done"),
    ])));
    let id = id_of(&created);
    assert_eq!(
        created,
        json!({
            "taskId": id,
            "status": "working",
            "statusMessage": "a",
            "createdAt": created["createdAt"],
            "lastUpdatedAt": created["createdAt"],
            "ttlMs": null,
            "pollIntervalMs": 500,
            "resultType": "task"
        })
    );
    // Nobody looks for a while: the store replays both transitions on the next read.
    tokio::time::advance(Duration::from_millis(3500)).await;
    let task = store.get(&id).expect("task exists");
    assert_eq!(task["status"], "completed");
    assert_eq!(
        task["result"],
        json!({"content": [{"type": "text", "text": "ok"}], "isError": false, "resultType": "complete"})
    );
    let changes = store.changes(&id).expect("task exists");
    let offsets: Vec<(TaskStatus, Option<&str>, Duration)> = changes
        .iter()
        .map(|change| {
            (
                change.status,
                change.status_message.as_deref(),
                change.instant - changes[0].instant,
            )
        })
        .collect();
    assert_eq!(
        offsets,
        vec![
            (TaskStatus::Working, Some("a"), Duration::ZERO),
            (TaskStatus::Working, Some("b"), Duration::from_secs(1)),
            (TaskStatus::Completed, Some("done"), Duration::from_secs(3)),
        ],
        "changes are stamped when they were due, not when they were observed"
    );
    assert_eq!(
        changes[2].at - changes[0].at,
        time::Duration::seconds(3),
        "wall-clock stamps agree with the instants"
    );
    assert_ne!(task["lastUpdatedAt"], task["createdAt"]);
}

#[tokio::test(start_paused = true)]
async fn unchanged_steps_do_not_bump_last_updated_at() {
    let store = store(None);
    let id = id_of(&store.create(Box::new(Script::new([
        Step::work(1.0, "same"),
        Step::work(1.0, "same"),
        Step::work(5.0, "other"),
    ]))));
    tokio::time::advance(Duration::from_millis(1500)).await;
    let task = store.get(&id).expect("task exists");
    assert_eq!(task["lastUpdatedAt"], task["createdAt"]);
    assert_eq!(store.changes(&id).map(|changes| changes.len()), Some(1));
}

#[tokio::test(start_paused = true)]
async fn ttl_elapsed_means_unknown_task() {
    let store = store(Some(Duration::from_secs(2)));
    let id = id_of(&store.create(Box::new(Script::new([Step::complete(
        ToolResult::text("ok"),
        "done",
    )]))));
    let other = id_of(&store.create(Box::new(Script::new([Step::work(60.0, "long")]))));
    tokio::time::advance(Duration::from_millis(1999)).await;
    assert_eq!(
        store.get(&id).map(|task| task["ttlMs"].clone()).ok(),
        Some(json!(2000))
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(matches!(store.get(&id), Err(Error::UnknownTask { .. })));
    assert!(matches!(store.cancel(&id), Err(Error::UnknownTask { .. })));
    assert_eq!(store.len(), 1, "the read forgot the expired task");
    assert_eq!(store.sweep(), 1, "the sweeper drops the other one");
    assert!(store.changes(&other).is_none());
}

#[tokio::test(start_paused = true)]
async fn answers_are_validated_partial_answers_wait_and_keys_are_never_reused() {
    let store = store(None);
    let id = id_of(&store.create(Box::new(Interview {
        round: 0,
        seen: Vec::new(),
    })));
    tokio::time::advance(Duration::from_secs(1)).await;
    let task = store.get(&id).expect("task exists");
    assert_eq!(task["status"], "input_required");
    let first = input_keys(&task);
    assert_eq!(first, vec![format!("{id}:first-1")]);
    assert_eq!(
        task["inputRequests"][&first[0]]["method"],
        "elicitation/create"
    );

    // A malformed answer to an outstanding key rejects the update and changes nothing.
    let bad = json!({ &first[0]: {"content": {"first": true}} });
    assert!(matches!(
        store.update(&id, bad.as_object().expect("object")),
        Err(Error::InvalidParams { .. })
    ));
    let wrong_type = json!({ &first[0]: {"action": "accept", "content": {"first": "yes"}} });
    assert!(store
        .update(&id, wrong_type.as_object().expect("object"))
        .is_err());
    assert_eq!(input_keys(&store.get(&id).expect("task exists")), first);

    // Unknown keys are ignored.
    let unknown = json!({"nope": {"whatever": 1}});
    assert!(store
        .update(&id, unknown.as_object().expect("object"))
        .is_ok());
    assert_eq!(
        store.get(&id).expect("task exists")["status"],
        "input_required"
    );

    let answer = json!({ &first[0]: accept("first") });
    assert!(store
        .update(&id, answer.as_object().expect("object"))
        .is_ok());
    let task = store.get(&id).expect("task exists");
    let second = input_keys(&task);
    assert_eq!(
        second,
        vec![format!("{id}:second-2"), format!("{id}:third-3")],
        "new keys, never the answered one"
    );

    // Re-sending the old answer is ignored; a partial answer keeps the task waiting.
    assert!(store
        .update(&id, answer.as_object().expect("object"))
        .is_ok());
    let partial = json!({ &second[1]: accept("third") });
    assert!(store
        .update(&id, partial.as_object().expect("object"))
        .is_ok());
    let task = store.get(&id).expect("task exists");
    assert_eq!(task["status"], "input_required");
    assert_eq!(input_keys(&task), vec![second[0].clone()]);

    let rest = json!({ &second[0]: accept("second") });
    assert!(store.update(&id, rest.as_object().expect("object")).is_ok());
    let task = store.get(&id).expect("task exists");
    assert_eq!(task["status"], "completed");
    assert_eq!(task["result"]["content"][0]["text"], "first,second,third");
    assert!(task.get("inputRequests").is_none());
}

struct Chunks;

impl Program for Chunks {
    fn next(&mut self, _answers: Option<Answers>) -> Step {
        Step::work(10.0, "chunk")
    }

    fn cancel_policy(&self) -> CancelPolicy {
        CancelPolicy::AfterCurrentStep {
            message: "stopping after this chunk".into(),
        }
    }

    fn cancelled_message(&self) -> String {
        "stopped".into()
    }
}

#[tokio::test(start_paused = true)]
async fn cooperative_cancellation_waits_for_the_current_step() {
    let store = store(None);
    let id = id_of(&store.create(Box::new(Chunks)));
    tokio::time::advance(Duration::from_secs(4)).await;
    assert!(store.cancel(&id).is_ok());
    let task = store.get(&id).expect("task exists");
    assert_eq!(
        (task["status"].clone(), task["statusMessage"].clone()),
        (json!("working"), json!("stopping after this chunk"))
    );
    tokio::time::advance(Duration::from_secs(6)).await;
    let task = store.get(&id).expect("task exists");
    assert_eq!(
        (task["status"].clone(), task["statusMessage"].clone()),
        (json!("cancelled"), json!("stopped"))
    );
    let changes = store.changes(&id).expect("task exists");
    let last = changes.last().expect("changes");
    assert_eq!(last.instant - changes[0].instant, Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn immediate_cancellation_and_cancel_after_completion() {
    let store = store(None);
    let running = id_of(&store.create(Box::new(Script::new([Step::work(60.0, "long")]))));
    assert!(store.cancel(&running).is_ok());
    let task = store.get(&running).expect("task exists");
    assert_eq!(task["status"], "cancelled");
    assert!(task.get("result").is_none() && task.get("error").is_none());

    let done = id_of(&store.create(Box::new(Script::new([Step::complete(
        ToolResult::text("ok"),
        "done",
    )]))));
    assert!(
        store.cancel(&done).is_ok(),
        "cancel of a finished task is an idempotent ack"
    );
    assert_eq!(
        store.get(&done).expect("task exists")["status"],
        "completed"
    );
}

#[tokio::test(start_paused = true)]
async fn failed_tasks_carry_the_error_and_nothing_else() {
    let store = store(None);
    let id = id_of(&store.create(Box::new(Script::new([Step::fail(
        ErrorObject {
            code: -32603,
            message: "boom".into(),
            data: Some(json!({"retryable": true})),
        },
        "crashed",
    )]))));
    let task = store.get(&id).expect("task exists");
    assert_eq!(
        task,
        json!({
            "taskId": id,
            "status": "failed",
            "statusMessage": "crashed",
            "createdAt": task["createdAt"],
            "lastUpdatedAt": task["createdAt"],
            "ttlMs": null,
            "pollIntervalMs": 500,
            "resultType": "complete",
            "error": {"code": -32603, "message": "boom", "data": {"retryable": true}}
        })
    );
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_tasks_are_cheap_to_hold_and_poll() {
    let store = store(Some(Duration::from_secs(900)));
    let ids: Vec<String> = (0..10_000)
        .map(|_| {
            id_of(&store.create(Box::new(Script::new([
                Step::work(5.0, "w"),
                Step::work(5.0, "x"),
            ]))))
        })
        .collect();
    assert_eq!(store.len(), 10_000);
    tokio::time::advance(Duration::from_secs(6)).await;
    for id in &ids {
        assert_eq!(store.get(id).expect("task exists")["statusMessage"], "x");
    }
    assert_eq!(store.sweep(), 0);
}
