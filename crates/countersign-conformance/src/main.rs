//! `conformance-client URL`: the adapter the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`) runs as a client. It reads the scenario from
//! `MCP_CONFORMANCE_SCENARIO` and drives the real core client through it; every request goes
//! through `countersign_core::mcp::Client`, so the suite tests what the app ships.

use std::process::ExitCode;

use countersign_core::auth::{
    follow_without_browser, with_sign_in, Authorizer, ClientConfig, PreRegistered,
};
use countersign_core::mcp::{
    CallOutcome, Client, Endpoint, InputRequests, ToolCall, PROTOCOL_VERSION,
};
use countersign_core::sensitive::Sensitive;
use serde_json::{json, Map, Value};
use std::time::Duration;

type Failure = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1).filter(|a| a.starts_with("http")) else {
        eprintln!("usage: conformance-client URL (with MCP_CONFORMANCE_SCENARIO set)");
        return ExitCode::from(64);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
        .unwrap_or_else(|_| PROTOCOL_VERSION.into());
    if version != PROTOCOL_VERSION {
        eprintln!("conformance-client speaks only {PROTOCOL_VERSION}, not {version}");
        return ExitCode::from(2);
    }
    match run(&scenario, &url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client: {scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(scenario: &str, url: &str) -> Result<(), Failure> {
    let client = Client::new(Endpoint::new(url))?;
    if scenario.starts_with("auth/") {
        return run_auth(&client, url).await;
    }
    match scenario {
        "tools_call" => {
            client.discover().await?;
            client.list_tools().await?;
            let outcome = client
                .call_tool(&ToolCall::new(
                    "add_numbers",
                    object(json!({"a": 5, "b": 3})),
                ))
                .await?;
            eprintln!("add_numbers → {outcome:?}");
        }
        "request-metadata" => {
            client.discover().await?;
            client.list_tools().await?;
        }
        "sep-2322-client-request-state" => {
            // Start the echo round, run an unrelated call while it is pending, then answer it.
            let echo = ToolCall::new("test_mrtr_echo_state", object(json!({})));
            let first = client.call_tool(&echo).await?;
            client
                .call_tool(&ToolCall::new("test_mrtr_unrelated", object(json!({}))))
                .await?;
            answer_until_complete(&client, echo, first).await?;
            let no_state = ToolCall::new("test_mrtr_no_state", object(json!({})));
            let first = client.call_tool(&no_state).await?;
            answer_until_complete(&client, no_state, first).await?;
            let plain = client
                .call_tool(&ToolCall::new(
                    "test_mrtr_no_result_type",
                    object(json!({})),
                ))
                .await?;
            if !matches!(plain, CallOutcome::Complete(_)) {
                return Err("a result without resultType must read as complete".into());
            }
        }
        "http-standard-headers" => {
            let tools = client.list_tools().await?;
            for tool in &tools.tools {
                client
                    .call_tool(&ToolCall::new(tool.name.clone(), object(json!({}))))
                    .await?;
            }
            let resources = client.list_resources().await?;
            for uri in resources["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["uri"].as_str())
            {
                client.read_resource(uri).await?;
            }
            let prompts = client.list_prompts().await?;
            for name in prompts["prompts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["name"].as_str())
            {
                client.get_prompt(name, Map::new()).await?;
            }
        }
        "http-custom-headers" => {
            let context: Value = serde_json::from_str(&std::env::var("MCP_CONFORMANCE_CONTEXT")?)?;
            client.list_tools().await?;
            for call in context["toolCalls"].as_array().into_iter().flatten() {
                let name = call["name"].as_str().ok_or("toolCalls[].name missing")?;
                client
                    .call_tool(&ToolCall::new(name, call["arguments"].as_object().cloned()))
                    .await?;
            }
        }
        "http-invalid-tool-headers" => {
            let tools = client.list_tools().await?;
            for excluded in &tools.excluded {
                eprintln!("excluded {}: {}", excluded.name, excluded.reason);
            }
            for tool in &tools.tools {
                client
                    .call_tool(&ToolCall::new(
                        tool.name.clone(),
                        Some(sample_arguments(tool.input_schema())),
                    ))
                    .await?;
            }
        }
        "json-schema-ref-no-deref" => {
            let tools = client.list_tools().await?;
            eprintln!(
                "listed {} tool(s); schemas kept verbatim, no $ref fetched",
                tools.tools.len()
            );
        }
        "json-schema-2020-12-preservation" => {
            let tools = client.list_tools().await?;
            let focal = tools
                .tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .ok_or("json_schema_2020_12_tool not listed")?;
            let schema = focal
                .input_schema()
                .cloned()
                .ok_or("focal tool has no inputSchema")?;
            client
                .call_tool(&ToolCall::new(
                    "json_schema_echo",
                    object(json!({"schema": schema})),
                ))
                .await?;
        }
        other => return Err(format!("unknown scenario {other:?}").into()),
    }
    Ok(())
}

/// The client ID metadata document URL the suite expects (it never fetches it).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Every `auth/*` scenario: the same client as the app's, signing in when the mock server
/// answers `401`, the browser played by a client that follows the authorization redirect into
/// our loopback listener. Then discover, list tools, call `test-tool` (each with sign-in).
async fn run_auth(client: &Client, url: &str) -> Result<(), Failure> {
    let mut config = ClientConfig {
        metadata_document_url: Some(CLIENT_METADATA_URL.into()),
        ..ClientConfig::default()
    };
    if let Ok(context) = std::env::var("MCP_CONFORMANCE_CONTEXT") {
        let context: Value = serde_json::from_str(&context)?;
        if let (Some(id), Some(issuer)) =
            (context["client_id"].as_str(), context["issuer"].as_str())
        {
            config.pre_registered = Some(PreRegistered {
                issuer: Some(issuer.into()),
                client_id: id.into(),
                client_secret: context["client_secret"]
                    .as_str()
                    .map(|s| Sensitive::new(s.to_owned())),
            });
        }
    }
    let authorizer = Authorizer::new(url, config)?;
    let mut credentials = None;
    let timeout = Duration::from_secs(20);
    with_sign_in(
        client,
        &authorizer,
        &mut credentials,
        || client.list_tools(),
        follow_without_browser,
        timeout,
    )
    .await?;
    let call = ToolCall::new("test-tool", object(json!({})));
    let outcome = with_sign_in(
        client,
        &authorizer,
        &mut credentials,
        || client.call_tool(&call),
        follow_without_browser,
        timeout,
    )
    .await?;
    eprintln!(
        "test-tool → {}",
        if matches!(outcome, CallOutcome::Complete(_)) {
            "complete"
        } else {
            "not complete"
        }
    );
    Ok(())
}

/// Answers MRTR rounds with an automatic policy (accept, defaults where given, booleans true)
/// until the call completes.
async fn answer_until_complete(
    client: &Client,
    call: ToolCall,
    mut outcome: CallOutcome,
) -> Result<(), Failure> {
    let mut current = call;
    for _ in 0..8 {
        match outcome {
            CallOutcome::InputRequired(question) => {
                let responses = auto_answers(&question.input_requests);
                current = current.retry_with(&question, responses);
                outcome = client.call_tool(&current).await?;
            }
            CallOutcome::Complete(_) => return Ok(()),
            CallOutcome::Task(task) => {
                return Err(format!("unexpected task {}", task.task_id).into())
            }
        }
    }
    Err("too many MRTR rounds".into())
}

fn auto_answers(requests: &InputRequests) -> Map<String, Value> {
    requests
        .iter()
        .map(|(key, request)| {
            let properties = request.params["requestedSchema"]["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let content: Map<String, Value> =
                properties
                    .iter()
                    .filter_map(|(name, field)| {
                        let value = field.get("default").cloned().or_else(|| {
                            match field["type"].as_str() {
                                Some("boolean") => Some(Value::Bool(true)),
                                _ => None,
                            }
                        })?;
                        Some((name.clone(), value))
                    })
                    .collect();
            (key.clone(), json!({"action": "accept", "content": content}))
        })
        .collect()
}

/// Fills required string/integer/boolean properties with sample values.
fn sample_arguments(schema: Option<&Value>) -> Map<String, Value> {
    let mut arguments = Map::new();
    let Some(properties) = schema.and_then(|s| s["properties"].as_object()) else {
        return arguments;
    };
    for (name, field) in properties {
        let value = match field["type"].as_str() {
            Some("string") => json!("us-west1"),
            Some("integer") => json!(1),
            Some("boolean") => json!(true),
            _ => continue,
        };
        arguments.insert(name.clone(), value);
    }
    arguments
}

fn object(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}
