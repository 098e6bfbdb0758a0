//! The core client against the independent Python peer (fastmcp 4.1.4 + fastmcp-tasks), so the
//! client is never only tested against our own reading of the spec.
//!
//! Each test starts its own peer (about a second) with fast pacing: 50 ms steps unless the test
//! needs longer, `pollIntervalMs` 50.

use std::time::{Duration, Instant};

use countersign_core::mcp::{
    Elicitation, Error, ErrorClass, RpcError, TaskDetail, TaskState, TaskStatus, PROTOCOL_VERSION,
};
use countersign_tests::drive::{
    accept, call, client, completed, decline, expect_complete, expect_task, object, poll_to_end,
    poll_to_questions, poll_until, single_question,
};
use countersign_tests::peer::FastmcpPeer;
use serde_json::json;

const POLL_MS: u64 = 50;

async fn fast_peer() -> FastmcpPeer {
    FastmcpPeer::start_with_env(&[
        ("PEER_STEP_SECONDS", "0.05"),
        ("PEER_POLL_INTERVAL_MS", "50"),
    ])
    .await
}

/// A task id no server has ever issued.
fn random_task_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("countersign-test-no-such-task-{nanos:x}")
}

#[tokio::test]
async fn discover_reports_the_peer_identity_and_the_tasks_extension() {
    let peer = fast_peer().await;
    let discovery = client(&peer.url)
        .discover()
        .await
        .expect("server/discover must succeed");

    assert_eq!(
        discovery.server_info,
        Some(json!({"name": "peer-fastmcp-tasks", "version": "4.1.4"})),
        "the identity lives in _meta[io.modelcontextprotocol/serverInfo]"
    );
    assert_eq!(
        discovery.server_label().as_deref(),
        Some("peer-fastmcp-tasks 4.1.4")
    );
    assert!(
        discovery.supports_tasks(),
        "the peer declares io.modelcontextprotocol/tasks: {:?}",
        discovery.capabilities
    );
    assert!(
        discovery
            .supported_versions
            .iter()
            .any(|v| v == PROTOCOL_VERSION),
        "the peer must list {PROTOCOL_VERSION}: {:?}",
        discovery.supported_versions
    );
    assert_eq!(
        discovery.instructions.as_deref(),
        Some("Countersign interop peer (fastmcp + fastmcp-tasks)."),
        "instructions come through verbatim"
    );
}

#[tokio::test]
async fn tools_list_returns_every_peer_tool_and_excludes_none() {
    let peer = fast_peer().await;
    let list = client(&peer.url)
        .list_tools()
        .await
        .expect("tools/list must succeed");

    let mut names: Vec<&str> = list.tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "approve_deploy",
            "flaky_job",
            "long_job",
            "optional_job",
            "quick_echo",
            "slow_cancellable",
            "tool_error_job"
        ],
        "the peer's seven tools"
    );
    assert!(
        list.excluded.is_empty(),
        "no peer tool breaks the x-mcp-header rules: {:?}",
        list.excluded
    );
    let echo = list
        .tools
        .iter()
        .find(|t| t.name == "quick_echo")
        .expect("quick_echo listed");
    assert_eq!(
        echo.input_schema()
            .and_then(|s| s.pointer("/properties/text/type")),
        Some(&json!("string")),
        "schemas are kept verbatim"
    );
    assert!(
        echo.header_params.is_empty(),
        "quick_echo mirrors nothing into headers"
    );
}

#[tokio::test]
async fn quick_echo_completes_synchronously_with_the_exact_text() {
    let peer = fast_peer().await;
    let outcome = call(
        &client(&peer.url),
        "quick_echo",
        json!({"text": "hello, peer"}),
    )
    .await;
    let result = expect_complete("quick_echo", outcome);

    assert_eq!(result.text(), "echo: hello, peer");
    assert!(
        !result.is_error(),
        "a plain result is not an error: {result:?}"
    );
}

#[tokio::test]
async fn long_job_is_polled_at_the_servers_pace_through_its_steps_to_completion() {
    // 4 steps of 200 ms, polled every 50 ms: each step stays visible for several polls.
    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_STEP_SECONDS", "0.2"),
        ("PEER_POLL_INTERVAL_MS", "50"),
    ])
    .await;
    let client = client(&peer.url);
    let handle = expect_task(
        "long_job",
        call(&client, "long_job", json!({"steps": 4})).await,
    );

    assert_eq!(
        handle.state,
        TaskState::Working,
        "a fresh long_job is working: {}",
        handle.to_json()
    );
    assert_eq!(
        handle.detail,
        TaskDetail::Handle,
        "tools/call returns a bare handle"
    );
    assert_eq!(
        handle.poll_interval_ms,
        Some(POLL_MS),
        "the handle carries pollIntervalMs"
    );
    assert_eq!(handle.ttl_ms, Some(900_000), "fastmcp-tasks' default ttlMs");
    assert!(handle.created_at.is_some(), "the handle carries createdAt");

    let (end, trace) = poll_to_end(&client, &handle).await;
    trace.assert_paced(Duration::from_millis(POLL_MS));

    let messages = trace.messages();
    let steps: Vec<u32> = messages
        .iter()
        .map(|m| {
            m.strip_prefix("step ")
                .and_then(|rest| rest.strip_suffix("/4"))
                .and_then(|i| i.parse().ok())
                .unwrap_or_else(|| {
                    panic!("unexpected statusMessage {m:?} (all seen: {messages:?})")
                })
        })
        .collect();
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "statusMessage only moves forward: {messages:?}"
    );
    assert!(
        steps.len() >= 2,
        "the progression must be observed (at least two different steps), saw {messages:?}"
    );
    assert_eq!(
        trace.statuses(),
        [TaskStatus::Working, TaskStatus::Completed],
        "working until completed"
    );
    let result = completed(&end);
    assert_eq!(result.text(), "long_job finished after 4 steps");
    assert!(!result.is_error());
}

#[tokio::test]
async fn approve_deploy_accepted_inside_the_task_completes_approved() {
    let peer = fast_peer().await;
    let client = client(&peer.url);
    let handle = expect_task(
        "approve_deploy",
        call(&client, "approve_deploy", json!({"service": "billing-api"})).await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    let (key, elicitation) = single_question(&asking);

    let (prefix, suffix) = key
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("key {key:?} must be <taskId>:<hex>"));
    assert_eq!(
        prefix, handle.task_id,
        "fastmcp keys start with the task id"
    );
    assert!(
        suffix.len() == 16 && suffix.chars().all(|c| c.is_ascii_hexdigit()),
        "fastmcp keys end with 16 hex digits: {key:?}"
    );
    let Elicitation::Form {
        message,
        requested_schema,
    } = elicitation
    else {
        panic!("approve_deploy asks through a form: {elicitation:?}");
    };
    assert_eq!(message, "Approve deployment of 'billing-api'?");
    assert_eq!(
        requested_schema.pointer("/properties/approve/type"),
        Some(&json!("boolean"))
    );
    assert_eq!(
        requested_schema.pointer("/required"),
        Some(&json!(["approve"]))
    );

    let end = countersign_tests::drive::answer_and_finish(
        &client,
        &asking,
        object(json!({ key: accept(json!({"approve": true, "reason": "LGTM from the tests"})) })),
    )
    .await;
    let result = completed(&end);
    assert_eq!(
        result.text(),
        "approve_deploy(billing-api): approved, DEPLOYED (reason='LGTM from the tests')"
    );
    assert!(result.text().contains("approved"));
    assert!(!result.is_error());
}

#[tokio::test]
async fn approve_deploy_declined_inside_the_task_completes_declined() {
    let peer = fast_peer().await;
    let client = client(&peer.url);
    let handle = expect_task(
        "approve_deploy",
        call(&client, "approve_deploy", json!({"service": "payments"})).await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    let (key, _) = single_question(&asking);

    let end = countersign_tests::drive::answer_and_finish(
        &client,
        &asking,
        object(json!({ key: decline() })),
    )
    .await;
    let result = completed(&end);
    assert_eq!(
        result.text(),
        "approve_deploy(payments): declined (user action=decline); not deployed"
    );
    assert!(result.text().contains("declined"));
    assert!(
        !result.is_error(),
        "a declined approval is a normal result on fastmcp"
    );
}

#[tokio::test]
async fn a_malformed_answer_is_invalid_params_not_unknown_task_and_changes_nothing() {
    let peer = fast_peer().await;
    let client = client(&peer.url);
    let handle = expect_task(
        "approve_deploy",
        call(&client, "approve_deploy", json!({"service": "web"})).await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    let (key, _) = single_question(&asking);

    let error = client
        .update_task(
            &handle.task_id,
            object(json!({ key.clone(): {"content": {"approve": true}} })),
        )
        .await
        .expect_err("an answer without action is rejected by fastmcp");
    assert!(
        matches!(&error, Error::InvalidParams { method, .. } if method == "tasks/update"),
        "a rejected answer to a live task is not a lost task: {error:?}"
    );
    assert_eq!(error.class(), ErrorClass::Permanent);

    let still = client
        .get_task(&handle.task_id)
        .await
        .expect("the task is still known");
    let (same_key, _) = single_question(&still);
    assert_eq!(
        same_key, key,
        "the question is still open, under the same key"
    );
}

#[tokio::test]
async fn flaky_job_ends_failed_with_the_json_rpc_error() {
    let peer = fast_peer().await;
    let client = client(&peer.url);
    let handle = expect_task("flaky_job", call(&client, "flaky_job", json!({})).await);
    let (end, _) = poll_to_end(&client, &handle).await;

    assert_eq!(
        end.state,
        TaskState::Failed {
            error: RpcError {
                code: -32603,
                message: "flaky_job exploded (deliberate)".into(),
                data: Some(json!({"attempt": 1})),
            }
        },
        "a protocol error inside the task is status failed with the error inlined: {}",
        end.to_json()
    );
}

#[tokio::test]
async fn tool_error_job_completes_with_an_is_error_result() {
    let peer = fast_peer().await;
    let client = client(&peer.url);
    let handle = expect_task(
        "tool_error_job",
        call(&client, "tool_error_job", json!({})).await,
    );
    let (end, _) = poll_to_end(&client, &handle).await;

    assert_eq!(
        end.status(),
        TaskStatus::Completed,
        "a tool-level error is not a failed task"
    );
    let result = completed(&end);
    assert!(result.is_error(), "isError must be true: {result:?}");
    assert_eq!(
        result.text(),
        "tool_error_job failed (deliberate tool-level error)"
    );
}

#[tokio::test]
async fn slow_cancellable_is_acknowledged_and_ends_cancelled() {
    let peer = fast_peer().await;
    let client = client(&peer.url);
    let handle = expect_task(
        "slow_cancellable",
        call(&client, "slow_cancellable", json!({"seconds": 30})).await,
    );
    let (running, _) = poll_until(&client, &handle, "sleeping", |t| {
        t.status_message
            .as_deref()
            .is_some_and(|m| m.starts_with("sleeping "))
    })
    .await;
    assert_eq!(running.status(), TaskStatus::Working);

    client
        .cancel_task(&handle.task_id)
        .await
        .expect("tasks/cancel must be acknowledged");
    let (end, _) = poll_to_end(&client, &running).await;
    assert_eq!(
        end.state,
        TaskState::Cancelled,
        "cancelled, with no payload: {}",
        end.to_json()
    );

    client
        .cancel_task(&handle.task_id)
        .await
        .expect("cancelling a cancelled task is an idempotent ack");
    let again = client
        .get_task(&handle.task_id)
        .await
        .expect("the cancelled task is still known");
    assert_eq!(
        again.state,
        TaskState::Cancelled,
        "terminal states never change"
    );
}

#[tokio::test]
async fn an_unknown_task_id_is_unknown_task_for_get_update_and_cancel() {
    let peer = fast_peer().await;
    let client = client(&peer.url);
    let id = random_task_id();

    let get = client
        .get_task(&id)
        .await
        .expect_err("tasks/get of a random id must fail");
    let update = client
        .update_task(&id, object(json!({"k": decline()})))
        .await
        .expect_err("tasks/update of a random id must fail");
    let cancel = client
        .cancel_task(&id)
        .await
        .expect_err("tasks/cancel of a random id must fail");

    for (method, error) in [
        ("tasks/get", get),
        ("tasks/update", update),
        ("tasks/cancel", cancel),
    ] {
        match &error {
            Error::UnknownTask { task_id, message } => {
                assert_eq!(task_id, &id, "{method}: the error names the id asked about");
                assert!(
                    message.contains("not found"),
                    "{method}: the peer's message is kept: {message:?}"
                );
            }
            other => panic!("{method}: expected UnknownTask, got {other:?}"),
        }
        assert_eq!(error.code(), "unknown_task", "{method}");
        assert_eq!(
            error.class(),
            ErrorClass::Lost,
            "{method}: a forgotten handle is lost, not failed"
        );
    }
}

#[tokio::test]
async fn a_finished_task_is_forgotten_after_its_ttl() {
    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_STEP_SECONDS", "0.05"),
        ("PEER_POLL_INTERVAL_MS", "50"),
        ("PEER_TTL_MS", "2000"),
    ])
    .await;
    let client = client(&peer.url);
    let handle = expect_task(
        "long_job",
        call(&client, "long_job", json!({"steps": 1})).await,
    );
    let created = Instant::now();
    assert_eq!(handle.ttl_ms, Some(2000), "ttlMs reflects PEER_TTL_MS");

    let (end, _) = poll_to_end(&client, &handle).await;
    assert_eq!(completed(&end).text(), "long_job finished after 1 steps");

    // Poll slowly past the TTL: known until it expires, then unknown for good.
    let gone = loop {
        assert!(
            created.elapsed() < Duration::from_secs(15),
            "the task was still known {:?} after creation with ttlMs 2000",
            created.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        match client.get_task(&handle.task_id).await {
            Ok(task) => assert_eq!(
                task.status(),
                TaskStatus::Completed,
                "until forgotten it stays completed"
            ),
            Err(error) => break error,
        }
    };
    let forgotten_after = created.elapsed();
    assert!(
        matches!(&gone, Error::UnknownTask { task_id, .. } if task_id == &handle.task_id),
        "an expired task is UnknownTask, not a failure: {gone:?}"
    );
    assert_eq!(gone.code(), "unknown_task");
    assert!(
        forgotten_after >= Duration::from_millis(1500),
        "forgotten only once the TTL has (about) elapsed, not after {forgotten_after:?}"
    );
    let again = client
        .get_task(&handle.task_id)
        .await
        .expect_err("a forgotten task stays forgotten");
    assert_eq!(again.code(), "unknown_task");
}

#[tokio::test]
async fn optional_job_becomes_a_task_because_the_client_declares_the_extension() {
    // The peer answers in SSE only when a request carries a progressToken, which our client
    // never sends; what this checks is that an OPTIONAL tool is tasked for us.
    let peer = fast_peer().await;
    let client = client(&peer.url);
    let handle = expect_task(
        "optional_job",
        call(&client, "optional_job", json!({"seconds": 0.2})).await,
    );
    assert_eq!(handle.state, TaskState::Working);
    let (end, _) = poll_to_end(&client, &handle).await;
    let result = completed(&end);
    assert_eq!(result.text(), "optional_job done after 0.2 s");
    assert!(!result.is_error());
}
