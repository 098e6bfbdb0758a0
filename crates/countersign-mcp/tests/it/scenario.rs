//! One scripted legacy session, shared by the recording of `fixtures/wire/server-everything.json`
//! (against the real server, in `legacy_everything.rs`) and its replay (`legacy_replay.rs`): the
//! same calls in the same order, so our request ids match the recorded ones.

use std::time::Duration;

use countersign_mcp::legacy::{
    CancelOutcome, ElicitAction, LegacyClient, TaskMetadata, TaskResultEvent, TaskStatus,
    ToolOutcome,
};
use countersign_mcp::{ClientOptions, Endpoint};
use serde_json::{json, Map, Value};

/// What the scripted session saw.
#[derive(Debug)]
pub struct Scripted {
    pub status_before_answer: TaskStatus,
    pub question: Value,
    pub report: String,
    pub status_after: TaskStatus,
    pub cancel: CancelOutcome,
}

/// initialize → tools/call (ambiguous research, as a task) → [`pause`] → tasks/get
/// (input_required) → tasks/result with the elicitation answered "programming" → tasks/get
/// (completed) → tasks/cancel (already finished) → DELETE.
pub async fn scripted_session(url: &str, pause: Duration) -> Scripted {
    let client = LegacyClient::connect(Endpoint::new(url), ClientOptions::default())
        .await
        .expect("initialize");
    let mut arguments = Map::new();
    arguments.insert("topic".into(), json!("python"));
    arguments.insert("ambiguous".into(), json!(true));
    let task = match client
        .call_tool(
            "simulate-research-query",
            Some(arguments),
            Some(TaskMetadata { ttl: Some(60_000) }),
        )
        .await
        .expect("tools/call")
    {
        ToolOutcome::Task(task) => task,
        other => panic!("expected a task, got {other:?}"),
    };
    tokio::time::sleep(pause).await;
    let status_before_answer = client
        .get_task(&task.task_id)
        .await
        .expect("tasks/get")
        .status;
    let mut stream = client
        .task_result(&task.task_id, Duration::from_secs(30))
        .await
        .expect("tasks/result");
    let mut question = Value::Null;
    let report = loop {
        match stream.next().await.expect("an event").expect("no error") {
            TaskResultEvent::Request(request) => {
                let mut content = Map::new();
                content.insert("interpretation".into(), json!("programming"));
                stream
                    .answer_elicitation(&request, &ElicitAction::Accept(content))
                    .await
                    .expect("answer taken");
                question = request.params.clone().unwrap_or_default();
            }
            TaskResultEvent::Completed(result) => {
                break result
                    .content()
                    .iter()
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .collect::<String>()
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    let status_after = client
        .get_task(&task.task_id)
        .await
        .expect("tasks/get")
        .status;
    let cancel = client
        .cancel_task(&task.task_id)
        .await
        .expect("tasks/cancel");
    client.close().await.expect("DELETE");
    Scripted {
        status_before_answer,
        question,
        report,
        status_after,
        cancel,
    }
}
