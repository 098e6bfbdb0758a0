//! The 2025-11-25 scenarios, driven through `countersign_core::mcp::LegacyClient`: `initialize`
//! and its session, SSE replies resumed with `Last-Event-ID` after the server's `retry:`, the
//! GET stream on which the server asks its questions, and the same sign-in as the modern era.

use std::time::Duration;

use countersign_core::auth::{follow_without_browser, with_sign_in};
use countersign_core::mcp::legacy::{ElicitAction, SessionEvent, ToolOutcome};
use countersign_core::mcp::{ClientOptions, Endpoint, LegacyClient};
use serde_json::{json, Map, Value};

use crate::answers::accepted_content;
use crate::sign_in::{self, SIGN_IN_TIMEOUT};
use crate::Failure;

/// How long the GET stream may stay silent while a call is pending.
const STREAM_IDLE: Duration = Duration::from_secs(30);

pub async fn run(scenario: &str, url: &str) -> Result<(), Failure> {
    if scenario.starts_with("auth/") {
        return run_auth(url).await;
    }
    let client = LegacyClient::connect(Endpoint::new(url), ClientOptions::default()).await?;
    eprintln!("session {:?}", client.session());
    let outcome = drive(scenario, &client).await;
    let closed = client.close().await;
    outcome?;
    Ok(closed?)
}

async fn drive(scenario: &str, client: &LegacyClient) -> Result<(), Failure> {
    match scenario {
        "initialize" => {
            client.list_tools().await?;
        }
        "tools_call" => {
            client.list_tools().await?;
            let outcome = client
                .call_tool("add_numbers", object(json!({"a": 5, "b": 3})), None)
                .await?;
            eprintln!("add_numbers → {}", describe(&outcome));
        }
        "sse-retry" => {
            // The server closes the call's stream after its priming event: the client has to
            // come back on GET with the event id, after the server's `retry:`.
            client.list_tools().await?;
            let outcome = client
                .call_tool("test_reconnection", object(json!({})), None)
                .await?;
            eprintln!("test_reconnection → {}", describe(&outcome));
        }
        "elicitation-sep1034-client-defaults" => {
            // The server asks its question on the session's GET stream, so the stream is open
            // and answered before the call that makes it ask.
            let stream = client
                .open_stream(STREAM_IDLE)
                .await?
                .ok_or("the server offers no GET stream to ask on")?;
            let answering = tokio::spawn(answer_forms(client.clone(), stream));
            client.list_tools().await?;
            let outcome = client
                .call_tool("test_client_elicitation_defaults", object(json!({})), None)
                .await;
            answering.abort();
            eprintln!("test_client_elicitation_defaults → {}", describe(&outcome?));
        }
        "json-schema-2020-12-preservation" => {
            let tools = client.list_tools().await?;
            let focal = tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .ok_or("json_schema_2020_12_tool not listed")?;
            let schema = focal
                .definition
                .get("inputSchema")
                .cloned()
                .ok_or("focal tool has no inputSchema")?;
            client
                .call_tool("json_schema_echo", object(json!({"schema": schema})), None)
                .await?;
        }
        other => return Err(format!("unknown scenario {other:?}").into()),
    }
    Ok(())
}

/// Answers the forms the server sends on the GET stream as a person accepting them would.
async fn answer_forms(
    client: LegacyClient,
    mut stream: countersign_core::mcp::legacy::SessionStream,
) {
    while let Some(event) = stream.next().await {
        match event {
            Ok(SessionEvent::Request(request)) => {
                let schema = request
                    .params
                    .as_ref()
                    .and_then(|p| p.get("requestedSchema"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let answer = ElicitAction::Accept(accepted_content(&schema)).to_result(None);
                if let Err(e) = client.respond(&request.id, answer).await {
                    eprintln!("could not answer {}: {e}", request.method);
                }
            }
            Ok(other) => eprintln!("GET stream: {other:?}"),
            Err(e) => {
                eprintln!("GET stream ended: {e}");
                return;
            }
        }
    }
}

/// Every `auth/*` scenario: the legacy client signing in when the mock server answers `401`
/// (or `403 insufficient_scope`), the same way and with the same code as the modern one: the
/// handshake, `tools/list` and `tools/call test-tool`, each with sign-in.
async fn run_auth(url: &str) -> Result<(), Failure> {
    let authorizer = sign_in::authorizer(url)?;
    let client = LegacyClient::unconnected(Endpoint::new(url), ClientOptions::default())?;
    let mut credentials = None;
    with_sign_in(
        &client,
        &authorizer,
        &mut credentials,
        || client.initialize(),
        follow_without_browser,
        SIGN_IN_TIMEOUT,
    )
    .await?;
    with_sign_in(
        &client,
        &authorizer,
        &mut credentials,
        || client.list_tools(),
        follow_without_browser,
        SIGN_IN_TIMEOUT,
    )
    .await?;
    let outcome = with_sign_in(
        &client,
        &authorizer,
        &mut credentials,
        || client.call_tool("test-tool", object(json!({})), None),
        follow_without_browser,
        SIGN_IN_TIMEOUT,
    )
    .await?;
    eprintln!("test-tool → {}", describe(&outcome));
    Ok(client.close().await?)
}

fn describe(outcome: &ToolOutcome) -> String {
    match outcome {
        ToolOutcome::Result(result) => format!("{:?}", result.0),
        ToolOutcome::Task(task) => format!("task {}", task.task_id),
    }
}

fn object(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}
