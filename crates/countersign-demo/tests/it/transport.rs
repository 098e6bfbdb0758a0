//! HTTP-level behaviour: header validation, envelope checks, auth, Origin, framing modes.

use crate::common::*;
use countersign_demo::{DemoConfig, ResponseMode};
use serde_json::{json, Value};

fn discover_body(client: &Client, caps: &Value) -> Vec<u8> {
    serde_json::to_vec(&client.envelope("server/discover", json!({}), caps)).expect("json")
}

#[tokio::test]
async fn discover_advertises_the_tasks_extension_and_identifies_the_server() {
    let (_server, client) = start(DemoConfig::default()).await;
    let reply = client
        .request("server/discover", json!({}), &no_caps())
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type, "application/json");
    let result = reply.result();
    assert_eq!(
        result,
        json!({
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {
                "tools": {"listChanged": false},
                "logging": {},
                "extensions": {"io.modelcontextprotocol/tasks": {}}
            },
            "instructions": result["instructions"],
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "countersign-demo", "version": env!("CARGO_PKG_VERSION")}}
        })
    );
    assert!(result["instructions"]
        .as_str()
        .is_some_and(|text| text.contains("tasks/get")));
}

#[tokio::test]
async fn accept_must_list_json_and_event_stream() {
    let (_server, client) = start(DemoConfig::default()).await;
    for accept in ["application/json", "text/event-stream", "*/*", ""] {
        let mut headers = Client::standard_headers("server/discover", &json!({}));
        headers.retain(|(name, _)| *name != "Accept");
        if !accept.is_empty() {
            headers.push(("Accept", accept.to_owned()));
        }
        let reply = client
            .post(&headers, discover_body(&client, &no_caps()))
            .await;
        assert_eq!(reply.status, 406, "Accept {accept:?}");
        assert_eq!(
            reply.raw,
            "Not Acceptable: Client must accept both application/json and text/event-stream"
        );
    }
}

#[tokio::test]
async fn protocol_version_header_is_required_and_must_match_meta() {
    let (_server, client) = start(DemoConfig::default()).await;
    let mut headers = Client::standard_headers("server/discover", &json!({}));
    headers.retain(|(name, _)| *name != "MCP-Protocol-Version");
    let body = client.envelope("server/discover", json!({}), &no_caps());
    let reply = client
        .post(&headers, serde_json::to_vec(&body).expect("json"))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body(),
        json!({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32020, "message": "Header mismatch: missing MCP-Protocol-Version header"}})
    );

    let reply = client
        .request_with(
            "server/discover",
            json!({}),
            &no_caps(),
            &[("MCP-Protocol-Version", "2025-11-25".into())],
        )
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, -32020));
}

#[tokio::test]
async fn unsupported_version_lists_the_supported_one() {
    let (_server, client) = start(DemoConfig::default()).await;
    let mut body = client.envelope("tools/list", json!({}), &no_caps());
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let mut headers = Client::standard_headers("tools/list", &json!({}));
    headers.retain(|(name, _)| *name != "MCP-Protocol-Version");
    headers.push(("MCP-Protocol-Version", "2025-11-25".into()));
    let reply = client
        .post(&headers, serde_json::to_vec(&body).expect("json"))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body(),
        json!({
            "jsonrpc": "2.0",
            "id": body["id"],
            "error": {
                "code": -32022,
                "message": "Unsupported protocol version: 2025-11-25",
                "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}
            }
        })
    );
}

#[tokio::test]
async fn meta_must_carry_version_and_capabilities() {
    let (_server, client) = start(DemoConfig::default()).await;
    let headers = Client::standard_headers("tools/list", &json!({}));
    for params in [
        json!({}),
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": "m-1", "method": "tools/list", "params": params});
        let reply = client
            .post(&headers, serde_json::to_vec(&body).expect("json"))
            .await;
        assert_eq!(reply.status, 400, "{params}");
        assert_eq!(reply.body()["id"], "m-1", "errors keep the request id");
        assert_eq!(reply.error_code(), -32602, "{params}");
    }
}

#[tokio::test]
async fn mcp_method_must_match_the_body_exactly() {
    let (_server, client) = start(DemoConfig::default()).await;
    for value in ["prompts/list", "TOOLS/LIST"] {
        let reply = client
            .request_with(
                "tools/list",
                json!({}),
                &no_caps(),
                &[("Mcp-Method", value.into())],
            )
            .await;
        assert_eq!((reply.status, reply.error_code()), (400, -32020), "{value}");
    }
    let mut headers = Client::standard_headers("tools/list", &json!({}));
    headers.retain(|(name, _)| *name != "Mcp-Method");
    let body = client.envelope("tools/list", json!({}), &no_caps());
    let reply = client
        .post(&headers, serde_json::to_vec(&body).expect("json"))
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, -32020));
    // Header names are case-insensitive.
    let reply = client
        .request_with(
            "tools/list",
            json!({}),
            &no_caps(),
            &[("mcp-method", "tools/list".into())],
        )
        .await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn mcp_name_is_required_for_tools_call_and_tasks_and_may_be_base64() {
    let (_server, client) = start(fast()).await;
    let params = json!({"name": "greet", "arguments": {"name": "Ada"}});
    let mut headers = Client::standard_headers("tools/call", &params);
    headers.retain(|(name, _)| *name != "Mcp-Name");
    let body = client.envelope("tools/call", params.clone(), &no_caps());
    let reply = client
        .post(&headers, serde_json::to_vec(&body).expect("json"))
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, -32020));

    let reply = client
        .request_with(
            "tools/call",
            params.clone(),
            &no_caps(),
            &[("Mcp-Name", "echo".into())],
        )
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, -32020));

    for accepted in ["=?base64?Z3JlZXQ=?=", "  greet  "] {
        let reply = client
            .request_with(
                "tools/call",
                params.clone(),
                &no_caps(),
                &[("Mcp-Name", accepted.into())],
            )
            .await;
        assert_eq!(reply.status, 200, "{accepted}: {}", reply.raw);
        assert_eq!(reply.result()["content"][0]["text"], "Hello, Ada!");
    }
    let reply = client
        .request_with(
            "tools/call",
            params,
            &no_caps(),
            &[("Mcp-Name", "=?base64?Z3JlZXQ?=".into())],
        )
        .await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (400, -32020),
        "bad padding"
    );

    let task_id = client
        .start_task("bench_job", json!({"duration_ms": 60_000}))
        .await;
    let get = json!({"taskId": task_id});
    let mut headers = Client::standard_headers("tasks/get", &get);
    headers.retain(|(name, _)| *name != "Mcp-Name");
    let body = client.envelope("tasks/get", get.clone(), &full_caps());
    let reply = client
        .post(&headers, serde_json::to_vec(&body).expect("json"))
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, -32020));
    let reply = client
        .request_with(
            "tasks/get",
            get,
            &full_caps(),
            &[("Mcp-Name", "someone-else".into())],
        )
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, -32020));
}

#[tokio::test]
async fn mcp_param_headers_must_mirror_x_mcp_header_arguments() {
    let (_server, client) = start(DemoConfig::default()).await;
    let params = json!({"name": "echo", "arguments": {"text": "hi", "region": "eu-west-1"}});
    let reply = client
        .request("tools/call", params.clone(), &no_caps())
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(
        reply.result(),
        json!({
            "content": [{"type": "text", "text": "echo: hi (served in eu-west-1)"}],
            "structuredContent": {"text": "hi", "region": "eu-west-1"},
            "isError": false,
            "resultType": "complete"
        })
    );
    let encoded = client
        .request_with(
            "tools/call",
            params.clone(),
            &no_caps(),
            &[("Mcp-Param-Region", "=?base64?ZXUtd2VzdC0x?=".into())],
        )
        .await;
    assert_eq!(encoded.status, 200, "{}", encoded.raw);
    let body = serde_json::to_vec(&client.envelope("tools/call", params.clone(), &no_caps()))
        .expect("json");
    for bad in [None, Some("us-east-1"), Some("=?base64?ZXUtd2VzdC0x=?=")] {
        let mut headers = Client::standard_headers("tools/call", &params);
        headers.retain(|(name, _)| *name != "Mcp-Param-Region");
        if let Some(value) = bad {
            headers.push(("Mcp-Param-Region", value.to_owned()));
        }
        let reply = client.post(&headers, body.clone()).await;
        assert_eq!((reply.status, reply.error_code()), (400, -32020), "{bad:?}");
    }
    // No region in the body: no header expected.
    let reply = client.call("echo", json!({"text": "hi"}), &no_caps()).await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn unknown_and_removed_methods_are_404() {
    // `subscriptions/listen` is served unless push is off (tests/it/push.rs covers it on).
    let (_server, client) = start(DemoConfig {
        push: false,
        ..DemoConfig::default()
    })
    .await;
    for method in [
        "tasks/list",
        "tasks/result",
        "initialize",
        "ping",
        "subscriptions/listen",
        "unknown/method",
    ] {
        let reply = client.request(method, json!({}), &full_caps()).await;
        assert_eq!(reply.status, 404, "{method}");
        assert_eq!(
            reply.body()["error"],
            json!({"code": -32601, "message": format!("Method not found: {method}"), "data": method})
        );
    }
}

#[tokio::test]
async fn envelope_errors_parse_errors_and_notifications() {
    let (_server, client) = start(DemoConfig::default()).await;
    let headers = Client::standard_headers("tools/list", &json!({}));
    let reply = client.post(&headers, b"{not json".to_vec()).await;
    assert_eq!((reply.status, reply.error_code()), (400, -32700));
    assert_eq!(reply.body()["id"], Value::Null);
    let reply = client.post(&headers, b"[]".to_vec()).await;
    assert_eq!((reply.status, reply.error_code()), (400, -32600));
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}});
    let reply = client
        .post(&headers, serde_json::to_vec(&notification).expect("json"))
        .await;
    assert_eq!((reply.status, reply.raw.as_str()), (202, ""));
    let mut text = headers.clone();
    text.push(("Content-Type", "text/plain".into()));
    let reply = client.post(&text, discover_body(&client, &no_caps())).await;
    assert_eq!(reply.status, 415);
}

#[tokio::test]
async fn bearer_token_is_enforced_with_a_challenge() {
    let (_server, client) = start(DemoConfig {
        required_token: Some("s3cret".into()),
        ..DemoConfig::default()
    })
    .await;
    let missing = client.request("tools/list", json!({}), &no_caps()).await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing
            .headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer realm=\"countersign-demo\"")
    );
    let wrong = client
        .request_with(
            "tools/list",
            json!({}),
            &no_caps(),
            &[("Authorization", "Bearer nope".into())],
        )
        .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong
        .headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("error=\"invalid_token\"")));
    let right = client
        .request_with(
            "tools/list",
            json!({}),
            &no_caps(),
            &[("Authorization", "Bearer s3cret".into())],
        )
        .await;
    assert_eq!(right.status, 200);
}

#[tokio::test]
async fn foreign_origins_are_forbidden() {
    let (_server, client) = start(DemoConfig::default()).await;
    let reply = client
        .request_with(
            "tools/list",
            json!({}),
            &no_caps(),
            &[("Origin", "https://evil.example.com".into())],
        )
        .await;
    assert_eq!(reply.status, 403);
    let reply = client
        .request_with(
            "tools/list",
            json!({}),
            &no_caps(),
            &[("Origin", "http://localhost:1420".into())],
        )
        .await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn the_endpoint_also_answers_on_the_root_path_and_only_to_post() {
    let (server, _client) = start(DemoConfig::default()).await;
    let root = Client::new(format!("http://{}/", server.local_addr()));
    let reply = root.request("tools/list", json!({}), &no_caps()).await;
    assert_eq!(reply.status, 200);
    let get = reqwest::get(server.url()).await.expect("GET sent");
    assert_eq!(get.status().as_u16(), 405);
}

#[tokio::test]
async fn tools_list_shows_schemas_and_task_support() {
    let (_server, client) = start(DemoConfig::default()).await;
    let result = client
        .request("tools/list", json!({}), &no_caps())
        .await
        .result();
    assert_eq!(
        (result["ttlMs"].clone(), result["cacheScope"].clone()),
        (json!(0), json!("private"))
    );
    let tools = result["tools"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
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
            "test_logging_tool"
        ]
    );
    let deploy = tools
        .iter()
        .find(|tool| tool["name"] == "deploy_service")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        deploy["_meta"],
        json!({"dev.countersign/taskSupport": "required"})
    );
    assert_eq!(
        deploy["inputSchema"]["properties"]["environment"],
        json!({
            "type": "string",
            "enum": ["staging", "production"],
            "description": "Target environment",
            "x-mcp-header": "Environment"
        })
    );
    assert_eq!(
        deploy["inputSchema"]["required"],
        json!(["service", "environment"])
    );
}

#[tokio::test]
async fn sse_mode_frames_every_reply_like_rmcp() {
    let (_server, client) = start(DemoConfig {
        response_mode: ResponseMode::Sse,
        ..DemoConfig::default()
    })
    .await;
    let reply = client
        .call("greet", json!({"name": "Ada"}), &no_caps())
        .await;
    assert_eq!(reply.status, 200);
    assert!(reply.is_sse(), "{}", reply.content_type);
    assert_eq!(
        reply
            .headers
            .get("x-accel-buffering")
            .and_then(|v| v.to_str().ok()),
        Some("no")
    );
    let id = reply.body()["id"].clone();
    assert_eq!(
        reply.raw,
        format!(
            "data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"Hello, Ada!\"}}],\"isError\":false,\"resultType\":\"complete\"}}}}\n\n"
        )
    );
    // Method-level errors travel inside the stream with HTTP 200, as rmcp does...
    let unknown = client
        .request("tasks/get", json!({"taskId": "nope"}), &full_caps())
        .await;
    assert_eq!(
        (unknown.status, unknown.is_sse(), unknown.error_code()),
        (200, true, -32602)
    );
    // ...while transport-level errors stay JSON with their status.
    let gated = client
        .request("tasks/get", json!({"taskId": "nope"}), &no_caps())
        .await;
    assert_eq!(
        (gated.status, gated.is_sse(), gated.error_code()),
        (400, false, -32021)
    );
}

#[tokio::test]
async fn sse_crlf_framing_matches_fastmcp() {
    let (_server, client) = start(DemoConfig {
        response_mode: ResponseMode::Sse,
        sse_crlf: true,
        ..DemoConfig::default()
    })
    .await;
    let reply = client
        .call("greet", json!({"name": "Ada"}), &no_caps())
        .await;
    assert!(
        reply.raw.starts_with("event: message\r\ndata: {"),
        "{:?}",
        reply.raw
    );
    assert!(reply.raw.ends_with("}\r\n\r\n"), "{:?}", reply.raw);
    assert_eq!(reply.result()["content"][0]["text"], "Hello, Ada!");
}

#[tokio::test]
async fn mixed_mode_streams_progress_only_when_asked() {
    let (_server, client) = start(DemoConfig {
        response_mode: ResponseMode::Mixed,
        time_scale: 0.01,
        ..DemoConfig::default()
    })
    .await;
    let plain = client
        .call("greet", json!({"name": "Ada"}), &no_caps())
        .await;
    assert_eq!(plain.content_type, "application/json");

    let mut body = client.envelope(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 2, "label": "p"}}),
        &no_caps(),
    );
    body["params"]["_meta"]["progressToken"] = json!("p-1");
    let headers = Client::standard_headers("tools/call", &body["params"]);
    let reply = client
        .post(&headers, serde_json::to_vec(&body).expect("json"))
        .await;
    assert!(reply.is_sse());
    assert!(reply.raw.starts_with(": ping\n\n"), "{:?}", reply.raw);
    assert_eq!(
        reply.messages,
        vec![
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p-1", "progress": 0, "total": 2, "message": "computing: 0/2 s (p)"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p-1", "progress": 1, "total": 2, "message": "computing: 1/2 s (p)"}}),
            json!({"jsonrpc": "2.0", "id": body["id"], "result": {
                "content": [{"type": "text", "text": "slow_compute finished after 2 s (p)"}],
                "structuredContent": {"seconds": 2.0, "label": "p"},
                "isError": false,
                "resultType": "complete"
            }}),
        ]
    );
    // A streaming tool without a token still streams (keep-alive comments, no notifications).
    let reply = client
        .call("slow_compute", json!({"seconds": 1}), &no_caps())
        .await;
    assert!(reply.is_sse());
    assert_eq!(reply.messages.len(), 1);
}

#[tokio::test]
async fn json_mode_answers_synchronous_runs_after_the_work() {
    let (_server, client) = start(fast()).await;
    let started = std::time::Instant::now();
    let reply = client
        .call("slow_compute", json!({"seconds": 5}), &no_caps())
        .await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(50));
    assert_eq!(reply.content_type, "application/json");
    assert_eq!(
        reply.result()["content"][0]["text"],
        "slow_compute finished after 5 s"
    );
    let too_long = client
        .call("slow_compute", json!({"seconds": 61}), &no_caps())
        .await;
    assert_eq!(too_long.result()["isError"], true);
}

#[tokio::test]
async fn logs_are_streamed_only_when_the_request_sets_a_log_level() {
    let (_server, client) = start(DemoConfig {
        response_mode: ResponseMode::Mixed,
        ..DemoConfig::default()
    })
    .await;
    let quiet = client
        .call("test_logging_tool", json!({}), &no_caps())
        .await;
    assert!(quiet.is_sse());
    assert_eq!(
        quiet.messages.len(),
        1,
        "no log notifications: {}",
        quiet.raw
    );

    let params = json!({"name": "test_logging_tool", "arguments": {}});
    let mut body = client.envelope("tools/call", params.clone(), &no_caps());
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let headers = Client::standard_headers("tools/call", &params);
    let logged = client
        .post(&headers, serde_json::to_vec(&body).expect("json"))
        .await;
    let logs: Vec<Value> = logged
        .messages
        .iter()
        .filter(|message| message["method"] == "notifications/message")
        .cloned()
        .collect();
    assert_eq!(
        logs,
        (1..=3)
            .map(|step| json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "logger": "countersign-demo", "data": format!("step {step}/3")}}))
            .collect::<Vec<_>>()
    );
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("warning");
    let filtered = client
        .post(&headers, serde_json::to_vec(&body).expect("json"))
        .await;
    assert_eq!(
        filtered.messages.len(),
        1,
        "info logs are below the warning threshold"
    );
}
