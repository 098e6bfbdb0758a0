//! The core client against our demo server, in-process on `127.0.0.1:0`, at 100x speed.
//!
//! Every scenario runs in three framings: `json` (every reply `application/json`), `sse`
//! (every reply `text/event-stream` with bare `data:` lines and LF, like rmcp, errors from a
//! method inside the stream with HTTP 200) and `sse_crlf` (`event: message` and CRLF, like
//! fastmcp). Each demo tool is driven to its terminal state; the fault tests check how the
//! CLIENT reports a misbehaving server.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use countersign_core::mcp::{
    CallOutcome, Client, Elicitation, Endpoint, Error, ErrorClass, RpcError, TaskDetail, TaskState,
    TaskStatus, ToolCall, PROTOCOL_VERSION,
};
use countersign_core::sensitive::Sensitive;
use countersign_demo::{DemoConfig, DemoServer, Fault, ResponseMode};
use countersign_tests::drive::{
    accept, answer_and_finish, call, completed, consent, decline, expect_complete, expect_task,
    object, poll_to_end, poll_to_questions, questions, single_question,
};
use serde_json::{json, Value};

/// Simulated durations run 100x faster.
const TIME_SCALE: f64 = 0.01;
const POLL_MS: u64 = 20;

#[derive(Debug, Clone, Copy)]
enum Framing {
    Json,
    Sse,
    SseCrlf,
}

fn config(framing: Framing) -> DemoConfig {
    DemoConfig {
        time_scale: TIME_SCALE,
        poll_interval_ms: POLL_MS,
        default_ttl_ms: Some(60_000),
        response_mode: match framing {
            Framing::Json => ResponseMode::Json,
            Framing::Sse | Framing::SseCrlf => ResponseMode::Sse,
        },
        sse_crlf: matches!(framing, Framing::SseCrlf),
        required_token: None,
        ..DemoConfig::default()
    }
}

async fn start_with(config: DemoConfig) -> DemoServer {
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("valid address");
    DemoServer::start(addr, config)
        .await
        .expect("the demo server must start on 127.0.0.1:0")
}

/// A demo server and a client that has read its tool list (so `x-mcp-header` arguments are
/// mirrored, as the console does).
async fn start(framing: Framing) -> (DemoServer, Client) {
    let server = start_with(config(framing)).await;
    let client = countersign_tests::drive::client(&server.url());
    client.list_tools().await.expect("tools/list must succeed");
    (server, client)
}

async fn run_task(client: &Client, tool: &str, arguments: Value) -> countersign_core::mcp::Task {
    let handle = expect_task(tool, call(client, tool, arguments).await);
    poll_to_end(client, &handle).await.0
}

/// Generates one `#[tokio::test]` per framing for each scenario `async fn NAME(Framing)`.
macro_rules! in_every_framing {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn json() {
                super::$name(super::Framing::Json).await
            }
            #[tokio::test]
            async fn sse() {
                super::$name(super::Framing::Sse).await
            }
            #[tokio::test]
            async fn sse_crlf() {
                super::$name(super::Framing::SseCrlf).await
            }
        }
    )*};
}

in_every_framing!(
    discover_reports_identity_and_the_tasks_extension,
    tools_list_has_every_demo_tool_with_its_header_parameters,
    get_time_answers_at_once_with_matching_text_and_structure,
    echo_mirrors_region_into_its_header_once_the_tool_list_is_known,
    greet_answers_hello,
    run_ci_pipeline_reports_its_stages_and_passes,
    deploy_service_approved_mid_flight_rolls_out,
    deploy_service_declined_aborts_with_a_tool_error,
    batch_export_cancel_stops_after_the_current_chunk,
    slow_compute_completes_and_its_cancel_is_immediate,
    flaky_migration_fails_with_the_json_rpc_error,
    protocol_error_job_fails_with_the_json_rpc_error,
    lint_repository_completes_with_is_error,
    failing_job_completes_with_is_error,
    provision_account_takes_both_answers_in_one_update,
    connect_github_asks_for_consent_at_an_https_url,
    bench_job_completes_after_its_exact_duration,
    confirm_delete_confirmed_in_the_task_deletes,
    multi_input_takes_both_answers_in_one_update,
    multi_input_takes_answers_one_at_a_time_and_ignores_repeats,
    a_malformed_answer_is_invalid_params_and_changes_nothing,
    test_tool_with_task_asks_over_mrtr_then_runs_a_task,
    test_missing_capability_is_refused_because_we_never_declare_sampling,
    test_streaming_elicitation_asks_over_mrtr_and_finishes,
    test_logging_tool_answers_after_its_synchronous_run,
    unknown_task_id_is_unknown_task_for_get_update_and_cancel,
    a_task_is_forgotten_once_its_ttl_has_elapsed,
    http_500_is_a_transient_http_error,
    http_429_is_rate_limited_with_its_retry_after,
    malformed_json_is_an_invalid_response,
    wrong_shapes_are_invalid_responses,
    a_hangup_is_a_transient_transport_error,
    a_required_bearer_token_is_enforced_and_accepted,
);

async fn discover_reports_identity_and_the_tasks_extension(framing: Framing) {
    let (_server, client) = start(framing).await;
    let discovery = client
        .discover()
        .await
        .expect("server/discover must succeed");
    assert_eq!(
        discovery.server_info.as_ref().and_then(|i| i.get("name")),
        Some(&json!("countersign-demo")),
        "identity in _meta: {:?}",
        discovery.server_info
    );
    assert!(
        discovery.supports_tasks(),
        "the demo declares the tasks extension"
    );
    assert_eq!(discovery.supported_versions, [PROTOCOL_VERSION]);
    assert!(
        discovery
            .instructions
            .as_deref()
            .is_some_and(|i| i.starts_with("Countersign demo server.")),
        "instructions: {:?}",
        discovery.instructions
    );
}

/// The demo's tools, in `tools/list` order.
/// A tool added to the demo fails `tools_list_has_every_demo_tool_with_its_header_parameters`
/// until it is added here and driven to its end by a scenario below.
const DEMO_TOOLS: [&str; 20] = [
    "get_time",
    "echo",
    "run_ci_pipeline",
    "deploy_service",
    "batch_export",
    "flaky_migration",
    "lint_repository",
    "provision_account",
    "connect_github",
    "bench_job",
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
    "test_missing_capability",
    "test_streaming_elicitation",
    "test_logging_tool",
];

async fn tools_list_has_every_demo_tool_with_its_header_parameters(framing: Framing) {
    let (_server, client) = start(framing).await;
    let list = client.list_tools().await.expect("tools/list must succeed");
    let names: Vec<&str> = list.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, DEMO_TOOLS, "every demo tool, in server order");
    assert!(
        list.excluded.is_empty(),
        "no demo tool breaks the x-mcp-header rules: {:?}",
        list.excluded
    );
    let header = |tool: &str| {
        let tool = list.tools.iter().find(|t| t.name == tool).expect("listed");
        tool.header_params
            .iter()
            .map(|p| (p.path.join("."), p.name.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        header("echo"),
        [("region".to_string(), "Region".to_string())]
    );
    assert_eq!(
        header("deploy_service"),
        [("environment".to_string(), "Environment".to_string())]
    );
    assert_eq!(header("get_time"), []);
}

async fn get_time_answers_at_once_with_matching_text_and_structure(framing: Framing) {
    let (_server, client) = start(framing).await;
    let result = expect_complete("get_time", call(&client, "get_time", json!({})).await);
    let structured = result
        .structured_content()
        .expect("get_time has structuredContent");
    assert_eq!(
        Some(result.text().as_str()),
        structured["now"].as_str(),
        "text is the RFC 3339 time"
    );
    assert!(structured["unixMs"]
        .as_i64()
        .is_some_and(|ms| ms > 1_700_000_000_000));

    let unix = expect_complete(
        "get_time",
        call(&client, "get_time", json!({"format": "unix_ms"})).await,
    );
    assert!(
        unix.text().parse::<i64>().is_ok(),
        "unix_ms format is a number: {:?}",
        unix.text()
    );

    let bad = expect_complete(
        "get_time",
        call(&client, "get_time", json!({"format": "julian"})).await,
    );
    assert!(
        bad.is_error(),
        "bad arguments are a tool error, not a protocol error"
    );
    assert_eq!(
        bad.text(),
        "argument 'format' must be one of: rfc3339, unix_ms"
    );
}

async fn echo_mirrors_region_into_its_header_once_the_tool_list_is_known(framing: Framing) {
    let server = start_with(config(framing)).await;
    let fresh = countersign_tests::drive::client(&server.url());
    // Before tools/list the client cannot know the x-mcp-header: the server refuses the call.
    let refused = fresh
        .call_tool(&ToolCall::new(
            "echo",
            Some(object(json!({"text": "hi", "region": "eu-west-1"}))),
        ))
        .await
        .expect_err("echo with region but no Mcp-Param-Region must be refused");
    assert!(
        matches!(&refused, Error::HeaderMismatch { method, message } if method == "tools/call" && message.contains("Mcp-Param-Region")),
        "-32020 names the missing header: {refused:?}"
    );

    fresh.list_tools().await.expect("tools/list");
    let result = expect_complete(
        "echo",
        call(&fresh, "echo", json!({"text": "hi", "region": "eu-west-1"})).await,
    );
    assert_eq!(result.text(), "echo: hi (served in eu-west-1)");
    assert_eq!(
        result.structured_content(),
        Some(&json!({"text": "hi", "region": "eu-west-1"}))
    );
    // Non-ASCII values travel base64-encoded and still match the body.
    let result = expect_complete(
        "echo",
        call(&fresh, "echo", json!({"text": "é", "region": "zürich-1"})).await,
    );
    assert_eq!(result.text(), "echo: é (served in zürich-1)");
}

async fn greet_answers_hello(framing: Framing) {
    let (_server, client) = start(framing).await;
    let result = expect_complete(
        "greet",
        call(&client, "greet", json!({"name": "Ada"})).await,
    );
    assert_eq!(result.text(), "Hello, Ada!");
    assert!(!result.is_error());
}

async fn run_ci_pipeline_reports_its_stages_and_passes(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task(
        "run_ci_pipeline",
        call(&client, "run_ci_pipeline", json!({"repo": "acme/web"})).await,
    );
    assert_eq!(handle.detail, TaskDetail::Handle);
    assert_eq!(handle.state, TaskState::Working);
    assert_eq!(handle.poll_interval_ms, Some(POLL_MS));
    assert_eq!(handle.ttl_ms, Some(60_000));
    assert_eq!(
        handle
            .status_message
            .as_deref()
            .map(|m| m.starts_with("stage 1/4: checkout")),
        Some(true),
        "the handle shows the first stage: {:?}",
        handle.status_message
    );
    // The task exists before the handle is sent: an immediate tasks/get resolves.
    let now = client
        .get_task(&handle.task_id)
        .await
        .expect("the task exists at once");
    assert_eq!(now.detail, TaskDetail::Full);

    let (end, trace) = poll_to_end(&client, &handle).await;
    trace.assert_paced(Duration::from_millis(POLL_MS));
    let stages: Vec<String> = trace
        .messages()
        .into_iter()
        .filter(|m| m.starts_with("stage "))
        .map(|m| m[..9].to_string())
        .collect();
    assert!(
        stages.windows(2).all(|w| w[0] < w[1]),
        "stages move forward: {stages:?}"
    );
    assert!(
        stages.len() >= 2,
        "the stage progression is observed: {:?}",
        trace.messages()
    );

    let result = completed(&end);
    assert!(!result.is_error());
    assert!(result.text().starts_with("Pipeline #"), "{}", result.text());
    assert!(
        result.text().contains("for acme/web@main passed in 19 s"),
        "{}",
        result.text()
    );
    let structured = result.structured_content().expect("structured result");
    assert_eq!(structured["status"], "passed");
    assert_eq!(structured["repo"], "acme/web");
    assert_eq!(
        end.status_message
            .as_deref()
            .map(|m| m.ends_with(" passed")),
        Some(true)
    );
}

async fn deploy_service_approved_mid_flight_rolls_out(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task(
        "deploy_service",
        call(
            &client,
            "deploy_service",
            json!({"service": "billing-api", "environment": "staging", "version": "v2.0.1"}),
        )
        .await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    assert_eq!(
        asking.status_message.as_deref(),
        Some("waiting for approval to deploy billing-api v2.0.1 to staging")
    );
    let (key, elicitation) = single_question(&asking);
    assert!(
        key.starts_with(&format!("{}:", handle.task_id)),
        "demo keys start with the task id: {key}"
    );
    let Elicitation::Form {
        message,
        requested_schema,
    } = elicitation
    else {
        panic!("deploy_service asks through a form: {elicitation:?}");
    };
    assert_eq!(
        message,
        "Approve deploying billing-api v2.0.1 to staging? 2 instances will be replaced one at a time."
    );
    assert_eq!(
        requested_schema.pointer("/properties/approve/type"),
        Some(&json!("boolean"))
    );
    assert_eq!(
        requested_schema.pointer("/properties/reason/type"),
        Some(&json!("string"))
    );

    let end = answer_and_finish(
        &client,
        &asking,
        object(json!({ key: accept(json!({"approve": true, "reason": "LGTM"})) })),
    )
    .await;
    let result = completed(&end);
    assert!(!result.is_error());
    assert_eq!(
        result.text(),
        "Deployed billing-api v2.0.1 to staging: 2/2 instances healthy. Approved with reason: LGTM."
    );
    assert_eq!(
        result.structured_content().and_then(|s| s.get("deployed")),
        Some(&json!(true))
    );
}

async fn deploy_service_declined_aborts_with_a_tool_error(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task(
        "deploy_service",
        call(
            &client,
            "deploy_service",
            json!({"service": "billing-api", "environment": "production", "version": "v3"}),
        )
        .await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    let (key, _) = single_question(&asking);
    let end = answer_and_finish(&client, &asking, object(json!({ key: decline() }))).await;
    let result = completed(&end);
    assert!(result.is_error(), "an aborted deployment is a tool error");
    assert_eq!(
        result.text(),
        "Deployment aborted: the approval request was declined. billing-api v3 to production was not deployed."
    );
}

async fn batch_export_cancel_stops_after_the_current_chunk(framing: Framing) {
    // 2,000,000 rows: 120 s simulated in ten chunks; at 0.05 each chunk takes 600 ms, ample
    // time for the cancel to land inside the first one.
    let server = start_with(DemoConfig {
        time_scale: 0.05,
        ..config(framing)
    })
    .await;
    let client = countersign_tests::drive::client(&server.url());
    let handle = expect_task(
        "batch_export",
        call(&client, "batch_export", json!({"rows": 2000000})).await,
    );
    client
        .cancel_task(&handle.task_id)
        .await
        .expect("tasks/cancel must be acknowledged");
    let (end, trace) = poll_to_end(&client, &handle).await;

    assert_eq!(end.state, TaskState::Cancelled, "{}", end.to_json());
    assert_eq!(
        end.status_message.as_deref(),
        Some("cancelled after exporting 200,000 of 2,000,000 rows"),
        "the chunk in flight (the first) was finished"
    );
    let messages = trace.messages();
    assert!(
        messages.len() <= 2,
        "nothing but the cooperative-cancel message before the end: {messages:?}"
    );
    if messages.len() == 2 {
        assert_eq!(
            messages[0],
            "cancellation requested; stopping after the current chunk"
        );
    }
    client
        .cancel_task(&handle.task_id)
        .await
        .expect("cancel after the end is an idempotent ack");
    assert_eq!(
        client.get_task(&handle.task_id).await.expect("known").state,
        TaskState::Cancelled
    );
}

async fn slow_compute_completes_and_its_cancel_is_immediate(framing: Framing) {
    let (_server, client) = start(framing).await;
    let end = run_task(
        &client,
        "slow_compute",
        json!({"seconds": 2.5, "label": "pi"}),
    )
    .await;
    assert_eq!(
        completed(&end).text(),
        "slow_compute finished after 2.5 s (pi)"
    );

    let long = expect_task(
        "slow_compute",
        call(&client, "slow_compute", json!({"seconds": 3600})).await,
    );
    client
        .cancel_task(&long.task_id)
        .await
        .expect("tasks/cancel must be acknowledged");
    let now = client
        .get_task(&long.task_id)
        .await
        .expect("the task is known");
    assert_eq!(
        now.state,
        TaskState::Cancelled,
        "slow_compute cancels at once"
    );
    assert_eq!(
        now.status_message.as_deref(),
        Some("cancelled at the client's request")
    );
}

async fn flaky_migration_fails_with_the_json_rpc_error(framing: Framing) {
    let (_server, client) = start(framing).await;
    let end = run_task(&client, "flaky_migration", json!({})).await;
    let TaskState::Failed { error } = &end.state else {
        panic!("flaky_migration must fail: {}", end.to_json());
    };
    assert_eq!(error.code, -32603);
    assert_eq!(
        error.message,
        "Migration 0042_add_customer_index failed: lock timeout after 30 s on table orders.customers"
    );
    assert_eq!(
        error.data.as_ref().and_then(|d| d.get("applied")),
        Some(&json!(["0040_create_invoices", "0041_backfill_totals"]))
    );
    assert_eq!(
        end.status_message.as_deref(),
        Some("migration failed: 2 of 3 applied")
    );
}

async fn protocol_error_job_fails_with_the_json_rpc_error(framing: Framing) {
    let (_server, client) = start(framing).await;
    let end = run_task(&client, "protocol_error_job", json!({})).await;
    assert_eq!(
        end.state,
        TaskState::Failed {
            error: RpcError {
                code: -32603,
                message: "protocol_error_job crashed: internal failure (deliberate)".into(),
                data: Some(json!({"deliberate": true})),
            }
        }
    );
}

async fn lint_repository_completes_with_is_error(framing: Framing) {
    let (_server, client) = start(framing).await;
    let end = run_task(&client, "lint_repository", json!({"repo": "acme/web"})).await;
    assert_eq!(
        end.status(),
        TaskStatus::Completed,
        "a tool error completes the task"
    );
    let result = completed(&end);
    assert!(result.is_error());
    assert!(
        result
            .text()
            .starts_with("Lint failed for acme/web (recommended rules): 3 problems in 2 of "),
        "{}",
        result.text()
    );
    assert_eq!(
        result
            .structured_content()
            .and_then(|s| s.get("problems"))
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(3)
    );
}

async fn failing_job_completes_with_is_error(framing: Framing) {
    let (_server, client) = start(framing).await;
    let end = run_task(&client, "failing_job", json!({})).await;
    let result = completed(&end);
    assert!(result.is_error());
    assert_eq!(
        result.text(),
        "failing_job failed: the job reported an error (deliberate)"
    );
}

async fn provision_account_takes_both_answers_in_one_update(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task(
        "provision_account",
        call(
            &client,
            "provision_account",
            json!({"email": "ada@example.com"}),
        )
        .await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    let asked = questions(&asking);
    assert_eq!(
        asked.len(),
        2,
        "two questions at once: {}",
        asking.to_json()
    );
    let key_for = |field: &str| -> String {
        asked
            .iter()
            .find(|(_, r)| match r.elicitation() {
                Some(Elicitation::Form {
                    requested_schema, ..
                }) => requested_schema
                    .pointer(&format!("/properties/{field}"))
                    .is_some(),
                _ => false,
            })
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| panic!("a form asking for {field}: {}", asking.to_json()))
    };
    let (plan_key, region_key) = (key_for("plan"), key_for("region"));
    assert_ne!(plan_key, region_key);

    let end = answer_and_finish(
        &client,
        &asking,
        object(json!({
            plan_key: accept(json!({"plan": "enterprise", "seats": 12})),
            region_key: accept(json!({"region": "ap-southeast-2"})),
        })),
    )
    .await;
    let result = completed(&end);
    assert!(!result.is_error());
    assert_eq!(
        result.text(),
        "Provisioned an account for ada@example.com on the enterprise plan with 12 seats in ap-southeast-2; an invitation was sent."
    );
}

async fn connect_github_asks_for_consent_at_an_https_url(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task(
        "connect_github",
        call(&client, "connect_github", json!({"account": "octo"})).await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    let (key, elicitation) = single_question(&asking);
    let Elicitation::Url {
        url,
        message,
        elicitation_id,
    } = elicitation
    else {
        panic!("connect_github asks through URL mode: {elicitation:?}");
    };
    assert!(
        url.starts_with("https://example.com/oauth/authorize?client_id=countersign-demo&scope=repo%3Aread&state="),
        "an https authorization URL: {url}"
    );
    assert!(
        message.starts_with("Authorize Countersign Demo"),
        "{message}"
    );
    assert!(
        elicitation_id.is_some_and(|id| !id.is_empty()),
        "URL mode carries an elicitationId"
    );

    let end = answer_and_finish(&client, &asking, object(json!({ key: consent() }))).await;
    let result = completed(&end);
    assert!(!result.is_error());
    assert_eq!(
        result.text(),
        "Connected GitHub account @octo (scopes: repo:read, read:org)."
    );
}

async fn bench_job_completes_after_its_exact_duration(framing: Framing) {
    let (_server, client) = start(framing).await;
    let started = Instant::now();
    let end = run_task(
        &client,
        "bench_job",
        json!({"duration_ms": 120, "steps": 3}),
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(120),
        "bench_job ignores the time scale"
    );
    let result = completed(&end);
    assert_eq!(result.text(), "bench_job finished after 120 ms");
    assert_eq!(
        result.structured_content(),
        Some(&json!({"durationMs": 120, "steps": 3}))
    );
}

async fn confirm_delete_confirmed_in_the_task_deletes(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task(
        "confirm_delete",
        call(&client, "confirm_delete", json!({"filename": "report.pdf"})).await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    let (key, elicitation) = single_question(&asking);
    assert!(
        matches!(&elicitation, Elicitation::Form { message, .. } if message == "Delete report.pdf? This cannot be undone."),
        "{elicitation:?}"
    );
    let end = answer_and_finish(
        &client,
        &asking,
        object(json!({ key: accept(json!({"confirm": true})) })),
    )
    .await;
    assert_eq!(completed(&end).text(), "Deleted report.pdf.");
}

async fn multi_input_takes_both_answers_in_one_update(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task("multi_input", call(&client, "multi_input", json!({})).await);
    let asking = poll_to_questions(&client, &handle).await;
    let asked = questions(&asking);
    assert_eq!(asked.len(), 2, "{}", asking.to_json());
    let mut responses = serde_json::Map::new();
    for (key, request) in asked {
        let Some(Elicitation::Form {
            requested_schema, ..
        }) = request.elicitation()
        else {
            panic!("form questions only: {request:?}");
        };
        let answer = if requested_schema.pointer("/properties/name").is_some() {
            accept(json!({"name": "Ada"}))
        } else {
            accept(json!({"confirm": true}))
        };
        responses.insert(key.clone(), answer);
    }
    let end = answer_and_finish(&client, &asking, responses).await;
    assert_eq!(
        completed(&end).text(),
        "multi_input received both answers: name=Ada, confirm=true"
    );
}

async fn multi_input_takes_answers_one_at_a_time_and_ignores_repeats(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task("multi_input", call(&client, "multi_input", json!({})).await);
    let asking = poll_to_questions(&client, &handle).await;
    let asked = questions(&asking);
    let key_with = |field: &str| -> String {
        asked
            .iter()
            .find(|(_, r)| {
                matches!(r.elicitation(), Some(Elicitation::Form { requested_schema, .. })
                    if requested_schema.pointer(&format!("/properties/{field}")).is_some())
            })
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| panic!("a form asking for {field}: {}", asking.to_json()))
    };
    let (name_key, confirm_key) = (key_with("name"), key_with("confirm"));

    client
        .update_task(
            &handle.task_id,
            object(json!({ name_key.clone(): accept(json!({"name": "Bob"})) })),
        )
        .await
        .expect("a partial answer is acknowledged");
    let half = client.get_task(&handle.task_id).await.expect("known");
    let open: Vec<&String> = questions(&half).keys().collect();
    assert_eq!(
        open,
        [&confirm_key],
        "only the unanswered question stays open"
    );

    // Re-sending the answered key (as after a crash) is ignored; the other completes the round.
    let end = answer_and_finish(
        &client,
        &half,
        object(json!({
            name_key: accept(json!({"name": "Mallory"})),
            confirm_key: accept(json!({"confirm": true})),
        })),
    )
    .await;
    assert_eq!(
        completed(&end).text(),
        "multi_input received both answers: name=Bob, confirm=true"
    );
}

async fn a_malformed_answer_is_invalid_params_and_changes_nothing(framing: Framing) {
    let (_server, client) = start(framing).await;
    let handle = expect_task(
        "confirm_delete",
        call(&client, "confirm_delete", json!({"filename": "a.txt"})).await,
    );
    let asking = poll_to_questions(&client, &handle).await;
    let (key, _) = single_question(&asking);

    let error = client
        .update_task(
            &handle.task_id,
            object(json!({ key.clone(): accept(json!({"confirm": "yes please"})) })),
        )
        .await
        .expect_err("a string where the form wants a boolean");
    assert!(
        matches!(&error, Error::InvalidParams { method, message, .. } if method == "tasks/update" && message.contains(&key)),
        "a rejected answer is InvalidParams naming the key, not UnknownTask: {error:?}"
    );
    let still = client.get_task(&handle.task_id).await.expect("known");
    assert_eq!(single_question(&still).0, key, "the question is still open");
    let end = answer_and_finish(
        &client,
        &still,
        object(json!({ key: accept(json!({"confirm": false})) })),
    )
    .await;
    assert_eq!(
        completed(&end).text(),
        "Kept a.txt: deletion was not confirmed."
    );
}

async fn test_tool_with_task_asks_over_mrtr_then_runs_a_task(framing: Framing) {
    let (_server, client) = start(framing).await;
    let first = ToolCall::new("test_tool_with_task", Some(object(json!({}))));
    let CallOutcome::InputRequired(question) = client.call_tool(&first).await.expect("tools/call")
    else {
        panic!("test_tool_with_task asks over MRTR first");
    };
    assert!(
        question.request_state.is_some(),
        "the demo seals a requestState"
    );
    let keys: Vec<&String> = question.input_requests.keys().collect();
    assert_eq!(keys, ["user_name"]);

    let retry = first.retry_with(
        &question,
        object(json!({"user_name": accept(json!({"name": "Ada"}))})),
    );
    assert_eq!(
        retry.request_state, question.request_state,
        "requestState is echoed byte for byte"
    );
    let handle = expect_task(
        "test_tool_with_task",
        client.call_tool(&retry).await.expect("the re-sent call"),
    );
    let (end, _) = poll_to_end(&client, &handle).await;
    assert_eq!(
        completed(&end).text(),
        "Hello, Ada! (your name was gathered over MRTR before this task started)"
    );
}

async fn test_missing_capability_is_refused_because_we_never_declare_sampling(framing: Framing) {
    let (_server, client) = start(framing).await;
    let error = client
        .call_tool(&ToolCall::new(
            "test_missing_capability",
            Some(object(json!({}))),
        ))
        .await
        .expect_err("sampling is deprecated and never declared by the console");
    assert!(
        matches!(&error, Error::MissingCapability { method, required, .. }
            if method == "tools/call" && *required == json!({"sampling": {}})),
        "-32021 with data.requiredCapabilities: {error:?}"
    );
    assert_eq!(error.code(), "missing_capability");
    assert_eq!(error.class(), ErrorClass::Permanent);
}

async fn test_streaming_elicitation_asks_over_mrtr_and_finishes(framing: Framing) {
    let (_server, client) = start(framing).await;
    let first = ToolCall::new("test_streaming_elicitation", Some(object(json!({}))));
    let CallOutcome::InputRequired(question) = client.call_tool(&first).await.expect("tools/call")
    else {
        panic!("test_streaming_elicitation asks over MRTR");
    };
    let keys: Vec<&String> = question.input_requests.keys().collect();
    assert_eq!(keys, ["proceed"]);
    assert!(
        matches!(question.input_requests["proceed"].elicitation(), Some(Elicitation::Form { message, .. }) if message == "Continue?"),
        "{question:?}"
    );
    let retry = first.retry_with(
        &question,
        object(json!({"proceed": accept(json!({"proceed": true}))})),
    );
    let result = expect_complete(
        "test_streaming_elicitation",
        client.call_tool(&retry).await.expect("re-sent call"),
    );
    assert_eq!(result.text(), "Finished after your confirmation.");

    let retry = first.retry_with(&question, object(json!({"proceed": decline()})));
    let result = expect_complete(
        "test_streaming_elicitation",
        client.call_tool(&retry).await.expect("re-sent call"),
    );
    assert_eq!(result.text(), "Stopped: not confirmed.");
}

async fn test_logging_tool_answers_after_its_synchronous_run(framing: Framing) {
    let (_server, client) = start(framing).await;
    let result = expect_complete(
        "test_logging_tool",
        call(&client, "test_logging_tool", json!({})).await,
    );
    assert_eq!(result.text(), "test_logging_tool finished 3 steps");
    assert!(!result.is_error());
}

async fn unknown_task_id_is_unknown_task_for_get_update_and_cancel(framing: Framing) {
    let (_server, client) = start(framing).await;
    let id = "bm8tc3VjaC10YXNr";
    let get = client
        .get_task(id)
        .await
        .expect_err("tasks/get of an unknown id");
    let update = client
        .update_task(id, object(json!({"k": decline()})))
        .await
        .expect_err("tasks/update of an unknown id");
    let cancel = client
        .cancel_task(id)
        .await
        .expect_err("tasks/cancel of an unknown id");
    for (method, error) in [
        ("tasks/get", get),
        ("tasks/update", update),
        ("tasks/cancel", cancel),
    ] {
        assert!(
            matches!(&error, Error::UnknownTask { task_id, .. } if task_id == id),
            "{method}: expected UnknownTask, got {error:?}"
        );
        assert_eq!(error.code(), "unknown_task", "{method}");
        assert_eq!(error.class(), ErrorClass::Lost, "{method}");
    }
}

async fn a_task_is_forgotten_once_its_ttl_has_elapsed(framing: Framing) {
    let server = start_with(DemoConfig {
        default_ttl_ms: Some(1000),
        ..config(framing)
    })
    .await;
    let client = countersign_tests::drive::client(&server.url());
    let handle = expect_task(
        "slow_compute",
        call(&client, "slow_compute", json!({"seconds": 3600})).await,
    );
    let created = Instant::now();
    assert_eq!(handle.ttl_ms, Some(1000));
    assert_eq!(
        client
            .get_task(&handle.task_id)
            .await
            .expect("known at first")
            .status(),
        TaskStatus::Working
    );

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let gone = client
        .get_task(&handle.task_id)
        .await
        .expect_err("forgotten after its TTL");
    assert!(created.elapsed() >= Duration::from_millis(1000));
    assert!(
        matches!(&gone, Error::UnknownTask { task_id, .. } if task_id == &handle.task_id),
        "an expired handle is UnknownTask: {gone:?}"
    );
    assert_eq!(gone.class(), ErrorClass::Lost);
}

async fn http_500_is_a_transient_http_error(framing: Framing) {
    let (server, client) = start(framing).await;
    server.inject(Fault::Status(500), 1);
    let error = client.discover().await.expect_err("an injected 500");
    assert!(
        matches!(&error, Error::Http { status: 500, method, retry_after: None, .. } if method == "server/discover"),
        "{error:?}"
    );
    assert_eq!(error.code(), "http");
    assert_eq!(
        error.class(),
        ErrorClass::Transient,
        "5xx is worth retrying"
    );
    client
        .discover()
        .await
        .expect("the fault was used up: the next request succeeds");
    let stats = server.stats();
    assert_eq!(stats.faults, 1);
    assert_eq!(stats.responses_with(500), 1);
}

async fn http_429_is_rate_limited_with_its_retry_after(framing: Framing) {
    let (server, client) = start(framing).await;
    let handle = expect_task(
        "slow_compute",
        call(&client, "slow_compute", json!({"seconds": 3600})).await,
    );
    server.inject_for(
        "tasks/get",
        Fault::TooManyRequests {
            retry_after_secs: 7,
        },
        1,
    );
    let error = client
        .get_task(&handle.task_id)
        .await
        .expect_err("an injected 429");
    assert!(
        matches!(&error, Error::RateLimited { method, retry_after: Some(after) } if method == "tasks/get" && *after == Duration::from_secs(7)),
        "{error:?}"
    );
    assert_eq!(error.retry_after(), Some(Duration::from_secs(7)));
    assert_eq!(error.class(), ErrorClass::Transient);
    assert_eq!(error.code(), "rate_limited");
    client
        .get_task(&handle.task_id)
        .await
        .expect("the next poll succeeds");
}

async fn malformed_json_is_an_invalid_response(framing: Framing) {
    let (server, client) = start(framing).await;
    server.inject(Fault::MalformedJson, 1);
    let error = client
        .call_tool(&ToolCall::new(
            "greet",
            Some(object(json!({"name": "Ada"}))),
        ))
        .await
        .expect_err("a truncated body");
    assert!(
        matches!(&error, Error::InvalidResponse { method, .. } if method == "tools/call"),
        "{error:?}"
    );
    assert_eq!(error.code(), "invalid_response");
    let result = expect_complete(
        "greet",
        call(&client, "greet", json!({"name": "Ada"})).await,
    );
    assert_eq!(
        result.text(),
        "Hello, Ada!",
        "the next request is unaffected"
    );
}

async fn wrong_shapes_are_invalid_responses(framing: Framing) {
    let (server, client) = start(framing).await;
    let handle = expect_task(
        "slow_compute",
        call(&client, "slow_compute", json!({"seconds": 3600})).await,
    );

    server.inject_for("tasks/get", Fault::WrongShape, 1);
    let error = client
        .get_task(&handle.task_id)
        .await
        .expect_err("a task without status");
    assert!(
        matches!(&error, Error::InvalidResponse { method, reason } if method == "tasks/get" && reason.contains("status")),
        "{error:?}"
    );

    server.inject_for("tasks/update", Fault::WrongShape, 1);
    let error = client
        .update_task(&handle.task_id, object(json!({})))
        .await
        .expect_err("a task handle in answer to tasks/update");
    assert!(
        matches!(&error, Error::InvalidResponse { method, .. } if method == "tasks/update"),
        "{error:?}"
    );

    server.inject_for("tasks/cancel", Fault::WrongShape, 1);
    let error = client
        .cancel_task(&handle.task_id)
        .await
        .expect_err("a task handle in answer to tasks/cancel");
    assert!(
        matches!(&error, Error::InvalidResponse { method, .. } if method == "tasks/cancel"),
        "{error:?}"
    );

    server.inject_for("tools/list", Fault::WrongShape, 1);
    let error = client
        .list_tools()
        .await
        .expect_err("tools that are not a list");
    assert!(
        matches!(&error, Error::InvalidResponse { method, .. } if method == "tools/list"),
        "{error:?}"
    );

    server.inject_for("server/discover", Fault::WrongShape, 1);
    let error = client
        .discover()
        .await
        .expect_err("supportedVersions that is not a list");
    assert!(
        matches!(&error, Error::InvalidResponse { method, .. } if method == "server/discover"),
        "{error:?}"
    );

    server.inject_for("tools/call", Fault::WrongShape, 1);
    let error = client
        .call_tool(&ToolCall::new(
            "greet",
            Some(object(json!({"name": "Ada"}))),
        ))
        .await
        .expect_err("a handle without status");
    assert!(
        matches!(&error, Error::InvalidResponse { method, .. } if method == "tools/call"),
        "{error:?}"
    );

    assert_eq!(server.stats().faults, 6);
    assert_eq!(
        client
            .get_task(&handle.task_id)
            .await
            .expect("the real task is untouched")
            .status(),
        TaskStatus::Working
    );
}

async fn a_hangup_is_a_transient_transport_error(framing: Framing) {
    let (server, client) = start(framing).await;
    server.inject(Fault::Hangup, 1);
    let error = client
        .discover()
        .await
        .expect_err("the server closed the connection");
    assert!(
        matches!(&error, Error::Transport { .. } | Error::Connect { .. }),
        "a hang-up is a transport failure: {error:?}"
    );
    assert_eq!(error.class(), ErrorClass::Transient);
    assert_eq!(server.stats().hangups, 1);
    client.discover().await.expect("a new connection works");
}

async fn a_required_bearer_token_is_enforced_and_accepted(framing: Framing) {
    let server = start_with(DemoConfig {
        required_token: Some("s3cret-token".into()),
        ..config(framing)
    })
    .await;

    let anonymous = countersign_tests::drive::client(&server.url());
    let error = anonymous.discover().await.expect_err("no token");
    assert!(
        matches!(&error, Error::Unauthorized { status: 401, method, www_authenticate: Some(challenge) }
            if method == "server/discover" && challenge.starts_with("Bearer realm=\"countersign-demo\"")),
        "{error:?}"
    );
    assert_eq!(error.code(), "unauthorized");
    assert_eq!(
        error.class(),
        ErrorClass::Permanent,
        "retrying without credentials cannot help"
    );

    let wrong = Client::new(
        Endpoint::new(server.url()).with_token(Some(Sensitive::new("guess".to_string()))),
    )
    .expect("client");
    let error = wrong.discover().await.expect_err("a wrong token");
    assert!(
        matches!(&error, Error::Unauthorized { status: 401, www_authenticate: Some(c), .. } if c.contains("invalid_token")),
        "{error:?}"
    );

    let authorised = Client::new(
        Endpoint::new(server.url()).with_token(Some(Sensitive::new("s3cret-token".to_string()))),
    )
    .expect("client");
    let discovery = authorised
        .discover()
        .await
        .expect("the right token is accepted");
    assert!(discovery.supports_tasks());
    authorised
        .list_tools()
        .await
        .expect("tools/list with the token");
    let end = run_task(&authorised, "protocol_error_job", json!({})).await;
    assert_eq!(
        end.status(),
        TaskStatus::Failed,
        "tasks/* carry the token too"
    );
}
