//! The 2026-07-28 scenarios, driven through `countersign_core::mcp::Client`: one stateless
//! request per operation, MRTR rounds answered as a person accepting the forms would.

use countersign_core::auth::{follow_without_browser, with_sign_in};
use countersign_core::mcp::{CallOutcome, Client, Endpoint, InputRequests, ToolCall};
use serde_json::{json, Map, Value};

use crate::answers::accepted_content;
use crate::sign_in::{self, SIGN_IN_TIMEOUT};
use crate::Failure;

pub async fn run(scenario: &str, url: &str) -> Result<(), Failure> {
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

/// Every `auth/*` scenario: the same client as the app's, signing in when the mock server
/// answers `401`. Then discover, list tools, call `test-tool` (each with sign-in).
async fn run_auth(client: &Client, url: &str) -> Result<(), Failure> {
    let authorizer = sign_in::authorizer(url)?;
    let mut credentials = None;
    let timeout = SIGN_IN_TIMEOUT;
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
            let content = accepted_content(&request.params["requestedSchema"]);
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
