//! The Rust API of `DemoServer`: faults, stats, TTL, change timelines, shutdown.

use std::time::{Duration, Instant};

use crate::common::*;
use countersign_demo::{DemoConfig, Fault, TaskStatus};
use serde_json::{json, Value};

#[tokio::test]
async fn status_and_rate_limit_faults() {
    let (server, client) = start(fast()).await;
    server.inject(Fault::Status(503), 1);
    let reply = client.request("tools/list", json!({}), &no_caps()).await;
    assert_eq!(
        (reply.status, reply.raw.as_str()),
        (503, "injected fault: HTTP 503")
    );
    server.inject(
        Fault::TooManyRequests {
            retry_after_secs: 2,
        },
        1,
    );
    let reply = client.request("tools/list", json!({}), &no_caps()).await;
    assert_eq!(reply.status, 429);
    assert_eq!(
        reply
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("2")
    );
    let reply = client.request("tools/list", json!({}), &no_caps()).await;
    assert_eq!(reply.status, 200, "faults are used up");
}

#[tokio::test]
async fn malformed_and_wrong_shape_faults() {
    let (server, client) = start(fast()).await;
    let id = client
        .start_task("bench_job", json!({"duration_ms": 60_000}))
        .await;
    server.inject_for("tasks/get", Fault::MalformedJson, 1);
    let reply = client
        .request("tasks/get", json!({"taskId": id}), &full_caps())
        .await;
    assert_eq!(
        (reply.status, reply.content_type.as_str()),
        (200, "application/json")
    );
    assert!(
        serde_json::from_str::<Value>(&reply.raw).is_err(),
        "{}",
        reply.raw
    );
    assert!(reply.raw.starts_with("{\"jsonrpc\":\"2.0\""));

    server.inject_for("tasks/get", Fault::WrongShape, 1);
    let reply = client
        .request("tasks/get", json!({"taskId": id}), &full_caps())
        .await;
    assert_eq!(
        reply.result(),
        json!({
            "resultType": "complete",
            "taskId": id,
            "createdAt": "2026-01-01T00:00:00.000000Z",
            "lastUpdatedAt": "2026-01-01T00:00:00.000000Z",
            "ttlMs": null
        }),
        "a task without status"
    );
    server.inject_for("tasks/cancel", Fault::WrongShape, 1);
    let reply = client.cancel(&id).await;
    assert_eq!(reply.result(), json!({"resultType": "task", "taskId": id}));
    assert_eq!(
        client.get_task(&id).await["status"],
        "working",
        "the faulted cancel did nothing"
    );
}

#[tokio::test]
async fn faults_can_target_one_method() {
    let (server, client) = start(fast()).await;
    server.inject_for("tools/call", Fault::Status(500), 2);
    assert_eq!(
        client
            .request("tools/list", json!({}), &no_caps())
            .await
            .status,
        200
    );
    assert_eq!(
        client
            .call("greet", json!({"name": "x"}), &no_caps())
            .await
            .status,
        500
    );
    assert_eq!(
        client
            .call("greet", json!({"name": "x"}), &no_caps())
            .await
            .status,
        500
    );
    assert_eq!(
        client
            .call("greet", json!({"name": "x"}), &no_caps())
            .await
            .status,
        200
    );
    server.inject(Fault::Status(502), 3);
    server.clear_faults();
    assert_eq!(
        client
            .request("tools/list", json!({}), &no_caps())
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn delay_fault_answers_normally_after_the_delay() {
    let (server, client) = start(fast()).await;
    server.inject(Fault::Delay(Duration::from_millis(200)), 1);
    let started = Instant::now();
    let reply = client
        .call("greet", json!({"name": "late"}), &no_caps())
        .await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(reply.result()["content"][0]["text"], "Hello, late!");
}

#[tokio::test]
async fn hangup_closes_the_connection_without_a_response() {
    let (server, client) = start(fast()).await;
    server.inject(Fault::Hangup, 1);
    let params = json!({});
    let body = client.envelope("tools/list", params.clone(), &no_caps());
    let mut request = reqwest::Client::new()
        .post(&client.url)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&body).expect("json"));
    for (name, value) in Client::standard_headers("tools/list", &params) {
        request = request.header(name, value);
    }
    let error = request
        .send()
        .await
        .expect_err("the connection is closed, no response");
    assert!(!error.is_status() && !error.is_timeout(), "{error:?}");
    assert_eq!(server.stats().hangups, 1);
    assert_eq!(
        client
            .request("tools/list", json!({}), &no_caps())
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn stats_count_methods_and_statuses_and_reset() {
    let (server, client) = start(fast()).await;
    client.request("tools/list", json!({}), &no_caps()).await;
    client.request("tools/list", json!({}), &no_caps()).await;
    client
        .request("tasks/get", json!({"taskId": "nope"}), &full_caps())
        .await;
    client.request("tasks/list", json!({}), &full_caps()).await;
    let stats = server.stats();
    assert_eq!(stats.requests_for("tools/list"), 2);
    assert_eq!(stats.requests_for("tasks/get"), 1);
    assert_eq!(stats.requests_for("tasks/list"), 1);
    assert_eq!(stats.responses_with(200), 2);
    assert_eq!(stats.responses_with(400), 1);
    assert_eq!(stats.responses_with(404), 1);
    assert_eq!(stats.total_requests(), 4);
    server.reset_stats();
    assert_eq!(server.stats(), countersign_demo::Stats::default());
}

#[tokio::test]
async fn unknown_task_is_invalid_params_with_http_400() {
    let (_server, client) = start(fast()).await;
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let params = if method == "tasks/update" {
            json!({"taskId": "00000000-0000-0000-0000-000000000000", "inputResponses": {}})
        } else {
            json!({"taskId": "00000000-0000-0000-0000-000000000000"})
        };
        let reply = client.request(method, params, &full_caps()).await;
        assert_eq!(reply.status, 400, "{method}");
        assert_eq!(
            reply.body()["error"],
            json!({"code": -32602, "message": "Unknown task: 00000000-0000-0000-0000-000000000000"})
        );
    }
    let reply = client
        .request("tasks/update", json!({"taskId": "x"}), &full_caps())
        .await;
    assert_eq!(
        reply.body()["error"]["message"],
        "Invalid params: params.inputResponses must be an object"
    );
}

#[tokio::test]
async fn tasks_methods_require_the_extension() {
    let (_server, client) = start(fast()).await;
    let reply = client
        .request("tasks/get", json!({"taskId": "gate"}), &no_caps())
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body()["error"]["data"],
        json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
    );
}

#[tokio::test]
async fn tasks_are_forgotten_after_their_ttl() {
    let (server, client) = start(DemoConfig {
        time_scale: 0.01,
        default_ttl_ms: Some(300),
        poll_interval_ms: 50,
        ..DemoConfig::default()
    })
    .await;
    let id = client
        .start_task("bench_job", json!({"duration_ms": 10}))
        .await;
    let task = client.wait_terminal(&id).await;
    assert_eq!(
        (task["ttlMs"].clone(), task["pollIntervalMs"].clone()),
        (json!(300), json!(50))
    );
    assert_eq!(server.task_count(), 1);
    tokio::time::sleep(Duration::from_millis(320)).await;
    let reply = client
        .request("tasks/get", json!({"taskId": id}), &full_caps())
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, -32602));
    assert!(server.task_changes(&id).is_none());
    // The sweeper frees tasks nobody asks about.
    client
        .start_task("bench_job", json!({"duration_ms": 10}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.task_count() > 0 {
        assert!(Instant::now() < deadline, "sweeper never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn unlimited_ttl_is_written_as_null() {
    let (_server, client) = start(DemoConfig {
        default_ttl_ms: None,
        ..fast()
    })
    .await;
    let reply = client
        .call("bench_job", json!({"duration_ms": 0}), &full_caps())
        .await;
    assert_eq!(reply.result()["ttlMs"], Value::Null);
}

#[tokio::test]
async fn task_changes_give_server_side_timestamps_matching_the_wire() {
    let (server, client) = start(fast()).await;
    let id = client
        .start_task("bench_job", json!({"duration_ms": 50}))
        .await;
    let task = client.wait_terminal(&id).await;
    let changes = server.task_changes(&id).expect("known task");
    assert_eq!(
        changes
            .iter()
            .map(|change| change.status)
            .collect::<Vec<_>>(),
        [TaskStatus::Working, TaskStatus::Completed]
    );
    let last = changes.last().expect("a change");
    let stamp = last
        .at
        .format(&time::format_description::well_known::Rfc3339)
        .expect("formats");
    let wire = time::OffsetDateTime::parse(
        task["lastUpdatedAt"].as_str().unwrap_or_default(),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("parses");
    assert!(
        (wire - last.at).abs() < time::Duration::microseconds(1),
        "{stamp} vs {wire}"
    );
    assert!(server.task_changes("nope").is_none());
}

#[tokio::test]
async fn shutdown_is_graceful_and_frees_the_port() {
    let (server, client) = start(fast()).await;
    let addr = server.local_addr();
    assert_eq!(server.url(), format!("http://{addr}/mcp"));
    let slow = tokio::spawn({
        let url = client.url.clone();
        async move {
            let client = Client::new(url);
            client
                .call("slow_compute", json!({"seconds": 20}), &no_caps())
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.shutdown().await;
    let reply = slow.await.expect("in-flight request finished");
    assert_eq!(reply.status, 200, "the in-flight request was answered");
    assert!(
        reqwest::Client::new()
            .post(&client.url)
            .send()
            .await
            .is_err(),
        "nobody listens any more"
    );
}

#[tokio::test]
async fn invalid_configuration_is_refused() {
    let error = countersign_demo::DemoServer::start(
        ([127, 0, 0, 1], 0).into(),
        DemoConfig {
            poll_interval_ms: 0,
            ..DemoConfig::default()
        },
    )
    .await
    .err()
    .expect("refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}
