//! Every tool's lifecycle over HTTP, at time_scale 0.01.

use crate::common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn get_time_and_echo_answer_at_once() {
    let (_server, client) = start(fast()).await;
    let reply = client.call("get_time", json!({}), &no_caps()).await;
    let result = reply.result();
    assert!(
        is_timestamp(&result["structuredContent"]["now"]),
        "{result}"
    );
    assert_eq!(
        result["content"][0]["text"],
        result["structuredContent"]["now"]
    );
    let unix = client
        .call("get_time", json!({"format": "unix_ms"}), &no_caps())
        .await
        .result();
    assert_eq!(
        unix["content"][0]["text"],
        json!(unix["structuredContent"]["unixMs"].to_string())
    );
    let echo = client
        .call("echo", json!({"text": "hello"}), &full_caps())
        .await;
    assert_eq!(
        echo.result(),
        json!({
            "content": [{"type": "text", "text": "echo: hello"}],
            "structuredContent": {"text": "hello"},
            "isError": false,
            "resultType": "complete"
        }),
        "sync tools never become tasks, even when the client supports them"
    );
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_and_unknown_tools_are_protocol_errors() {
    let (_server, client) = start(fast()).await;
    let reply = client
        .call(
            "run_ci_pipeline",
            json!({"repo": "not a repo"}),
            &full_caps(),
        )
        .await;
    assert_eq!(
        reply.result(),
        json!({
            "content": [{"type": "text", "text": "argument 'repo' must look like owner/name (got \"not a repo\")"}],
            "isError": true,
            "resultType": "complete"
        })
    );
    let unknown = client.call("no_such_tool", json!({}), &full_caps()).await;
    assert_eq!(unknown.status, 400);
    assert_eq!(
        unknown.body()["error"],
        json!({"code": -32602, "message": "Invalid params: Unknown tool: no_such_tool"})
    );
}

#[tokio::test]
async fn task_tools_need_the_tasks_extension() {
    let (_server, client) = start(fast()).await;
    let reply = client
        .call("run_ci_pipeline", json!({"repo": "acme/web"}), &no_caps())
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body()["error"],
        json!({
            "code": -32021,
            "message": "Missing required client capability: tool 'run_ci_pipeline' runs only as a task \
                        (io.modelcontextprotocol/tasks); the client did not declare that for this request",
            "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
        })
    );
    let deploy = client
        .call(
            "deploy_service",
            json!({"service": "billing-api", "environment": "staging"}),
            &json!({}),
        )
        .await;
    assert_eq!(
        deploy.body()["error"]["data"],
        json!({"requiredCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}},
            "elicitation": {"form": {}}
        }})
    );
}

#[tokio::test]
async fn run_ci_pipeline_walks_through_its_stages() {
    let (server, client) = start(fast()).await;
    let reply = client
        .call("run_ci_pipeline", json!({"repo": "acme/web"}), &full_caps())
        .await;
    let created = reply.result();
    assert_eq!(
        created,
        with_runtime_fields(
            json!({
                "status": "working",
                "statusMessage": "stage 1/4: checkout — cloning acme/web@main",
                "ttlMs": 900000,
                "pollIntervalMs": 1000,
                "resultType": "task"
            }),
            &created
        )
    );
    assert!(is_timestamp(&created["createdAt"]));
    assert_eq!(created["createdAt"], created["lastUpdatedAt"]);
    let id = created["taskId"].as_str().unwrap_or_default().to_owned();
    assert_eq!(id.len(), 43, "256-bit base64url task ids");

    let task = client.wait_terminal(&id).await;
    let structured = task["result"]["structuredContent"].clone();
    let pipeline = structured["pipeline"].as_u64().unwrap_or_default();
    let tests = structured["tests"]["passed"].as_u64().unwrap_or_default();
    assert_eq!(
        task,
        with_runtime_fields(
            json!({
                "status": "completed",
                "statusMessage": format!("pipeline #{pipeline} passed"),
                "ttlMs": 900000,
                "pollIntervalMs": 1000,
                "resultType": "complete",
                "result": {
                    "content": [{"type": "text", "text": task["result"]["content"][0]["text"]}],
                    "structuredContent": {
                        "pipeline": pipeline,
                        "repo": "acme/web",
                        "branch": "main",
                        "commit": structured["commit"],
                        "status": "passed",
                        "stages": [
                            {"name": "checkout", "durationMs": 2000, "status": "passed"},
                            {"name": "build", "durationMs": 6000, "status": "passed"},
                            {"name": "test", "durationMs": 8000, "status": "passed"},
                            {"name": "package", "durationMs": 3000, "status": "passed"}
                        ],
                        "tests": structured["tests"],
                        "artifact": format!("web-main-{}.tar.gz", structured["commit"].as_str().unwrap_or_default())
                    },
                    "isError": false,
                    "resultType": "complete"
                }
            }),
            &task
        )
    );
    let text = task["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with(&format!(
            "Pipeline #{pipeline} for acme/web@main passed in 19 s"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("{tests}")) || text.contains(','),
        "{text}"
    );

    let changes = server.task_changes(&id).expect("changes recorded");
    let messages: Vec<&str> = changes
        .iter()
        .filter_map(|change| change.status_message.as_deref())
        .map(|message| message.split(" — ").next().unwrap_or(message))
        .collect();
    assert_eq!(
        messages,
        [
            "stage 1/4: checkout",
            "stage 2/4: build",
            "stage 3/4: test",
            "stage 4/4: package",
            format!("pipeline #{pipeline} passed").as_str()
        ]
    );
    let total = changes[4].instant - changes[0].instant;
    assert!(
        (185..=195).contains(&total.as_millis()),
        "19 simulated seconds at 0.01 = 190 ms, got {total:?}"
    );
}

async fn deploy_until_approval(client: &Client) -> (String, String, Value) {
    let id = client
        .start_task(
            "deploy_service",
            json!({"service": "billing-api", "environment": "production", "version": "v1.4.2"}),
        )
        .await;
    let task = client.wait_status(&id, "input_required").await;
    let keys = input_keys(&task);
    assert_eq!(keys.len(), 1);
    (id, keys[0].clone(), task)
}

#[tokio::test]
async fn deploy_service_asks_for_approval_then_rolls_out() {
    let (_server, client) = start(fast()).await;
    let (id, key, task) = deploy_until_approval(&client).await;
    assert_eq!(key, format!("{id}:approval-1"));
    assert_eq!(
        task,
        with_runtime_fields(
            json!({
                "status": "input_required",
                "statusMessage": "waiting for approval to deploy billing-api v1.4.2 to production",
                "ttlMs": 900000,
                "pollIntervalMs": 1000,
                "resultType": "complete",
                "inputRequests": {key.clone(): {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": "Approve deploying billing-api v1.4.2 to production? 3 instances will be replaced one at a time.",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {
                                "approve": {"type": "boolean", "title": "Approve", "description": "Allow the deployment to proceed"},
                                "reason": {"type": "string", "maxLength": 500, "title": "Reason", "description": "Why (recorded in the audit log)"}
                            },
                            "required": ["approve"]
                        }
                    }
                }}
            }),
            &task
        )
    );
    // Malformed answers are refused and change nothing.
    let bad = client
        .update(&id, json!({ &key: {"content": {"approve": true}} }))
        .await;
    assert_eq!((bad.status, bad.error_code()), (400, -32602));
    let wrong_type = client
        .update(
            &id,
            json!({ &key: {"action": "accept", "content": {"approve": "yes"}} }),
        )
        .await;
    assert_eq!(wrong_type.error_code(), -32602);
    assert_eq!(client.get_task(&id).await["status"], "input_required");

    let ack = client
        .update(
            &id,
            json!({ &key: {"action": "accept", "content": {"approve": true, "reason": "LGTM"}} }),
        )
        .await;
    assert_eq!(ack.result(), json!({"resultType": "complete"}));
    let done = client.wait_terminal(&id).await;
    assert_eq!(
        done["result"],
        json!({
            "content": [{"type": "text", "text": "Deployed billing-api v1.4.2 to production: 3/3 instances healthy. Approved with reason: LGTM."}],
            "structuredContent": {
                "service": "billing-api",
                "environment": "production",
                "version": "v1.4.2",
                "deployed": true,
                "instances": 3,
                "approvalReason": "LGTM"
            },
            "isError": false,
            "resultType": "complete"
        })
    );
    // A stale answer after completion is ignored.
    let stale = client
        .update(
            &id,
            json!({ &key: {"action": "accept", "content": {"approve": false}} }),
        )
        .await;
    assert_eq!(stale.result(), json!({"resultType": "complete"}));
    assert_eq!(client.get_task(&id).await["status"], "completed");
}

#[tokio::test]
async fn deploy_service_decline_aborts_with_a_tool_error() {
    let (_server, client) = start(fast()).await;
    let (id, key, _) = deploy_until_approval(&client).await;
    client
        .update(&id, json!({"not-a-key": {"action": "accept"}}))
        .await;
    assert_eq!(client.get_task(&id).await["status"], "input_required");
    client
        .update(&id, json!({ &key: {"action": "decline"} }))
        .await;
    let done = client.wait_terminal(&id).await;
    assert_eq!(
        (
            done["status"].clone(),
            done["statusMessage"].clone(),
            done["result"]["isError"].clone()
        ),
        (json!("completed"), json!("deployment aborted"), json!(true))
    );
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Deployment aborted: the approval request was declined. billing-api v1.4.2 to production was not deployed."
    );

    let (id, key, _) = deploy_until_approval(&client).await;
    client
        .update(&id, json!({ &key: {"action": "accept", "content": {"approve": false, "reason": "freeze"}} }))
        .await;
    let done = client.wait_terminal(&id).await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Deployment aborted: approval denied (freeze). billing-api v1.4.2 to production was not deployed."
    );
}

#[tokio::test]
async fn cancel_while_waiting_for_input_cancels_at_once() {
    let (_server, client) = start(fast()).await;
    let (id, _, _) = deploy_until_approval(&client).await;
    assert_eq!(
        client.cancel(&id).await.result(),
        json!({"resultType": "complete"})
    );
    let task = client.get_task(&id).await;
    assert_eq!(
        task,
        with_runtime_fields(
            json!({
                "status": "cancelled",
                "statusMessage": "cancelled at the client's request",
                "ttlMs": 900000,
                "pollIntervalMs": 1000,
                "resultType": "complete"
            }),
            &task
        )
    );
    assert_eq!(
        client.cancel(&id).await.result(),
        json!({"resultType": "complete"}),
        "idempotent"
    );
}

#[tokio::test]
async fn batch_export_reports_progress_and_cancels_after_the_current_chunk() {
    let (server, client) = start(fast()).await;
    let id = client
        .start_task("batch_export", json!({"rows": 100000}))
        .await;
    let task = client
        .wait_until(&id, |task| {
            task["statusMessage"]
                .as_str()
                .is_some_and(|message| message.starts_with("exported 20,000"))
        })
        .await;
    assert_eq!(
        task["statusMessage"],
        "exported 20,000 of 100,000 rows (20%)"
    );
    client.cancel(&id).await;
    let pending = client.get_task(&id).await;
    assert_eq!(
        (pending["status"].clone(), pending["statusMessage"].clone()),
        (
            json!("working"),
            json!("cancellation requested; stopping after the current chunk")
        ),
        "cancellation is cooperative: the ack comes first"
    );
    let done = client.wait_terminal(&id).await;
    assert_eq!(done["status"], "cancelled");
    assert_eq!(
        done["statusMessage"],
        "cancelled after exporting 30,000 of 100,000 rows"
    );
    let changes = server.task_changes(&id).expect("changes");
    assert_eq!(
        changes.last().map(|change| change.status),
        Some(countersign_demo::TaskStatus::Cancelled)
    );

    let id = client
        .start_task("batch_export", json!({"rows": 100000, "format": "parquet"}))
        .await;
    let done = client.wait_terminal(&id).await;
    let location = done["result"]["structuredContent"]["location"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(location.starts_with("s3://demo-exports/export-") && location.ends_with(".parquet"));
    assert_eq!(
        done["result"],
        json!({
            "content": [{"type": "text", "text": format!("Exported 100,000 rows to {location} (3.8 MB).")}],
            "structuredContent": {"rows": 100000, "format": "parquet", "location": location, "bytes": 3800000},
            "isError": false,
            "resultType": "complete"
        })
    );
}

#[tokio::test]
async fn flaky_migration_fails_with_a_json_rpc_error() {
    let (_server, client) = start(fast()).await;
    let id = client.start_task("flaky_migration", json!({})).await;
    let task = client.wait_terminal(&id).await;
    assert_eq!(
        task,
        with_runtime_fields(
            json!({
                "status": "failed",
                "statusMessage": "migration failed: 2 of 3 applied",
                "ttlMs": 900000,
                "pollIntervalMs": 1000,
                "resultType": "complete",
                "error": {
                    "code": -32603,
                    "message": "Migration 0042_add_customer_index failed: lock timeout after 30 s on table orders.customers",
                    "data": {
                        "database": "orders",
                        "migration": "0042_add_customer_index",
                        "applied": ["0040_create_invoices", "0041_backfill_totals"],
                        "retryable": true
                    }
                }
            }),
            &task
        )
    );
}

#[tokio::test]
async fn lint_repository_completes_with_is_error() {
    let (_server, client) = start(fast()).await;
    let id = client
        .start_task("lint_repository", json!({"repo": "acme/web"}))
        .await;
    let task = client.wait_terminal(&id).await;
    assert_eq!(task["status"], "completed");
    assert_eq!(task["statusMessage"], "lint failed: 3 problems");
    assert_eq!(task["result"]["isError"], true);
    assert_eq!(
        task["result"]["structuredContent"]["problems"][0],
        json!({"file": "src/billing/invoice.ts", "line": 42, "rule": "no-floating-promises", "message": "Promise returned by sendInvoice() is not awaited"})
    );
    assert!(task.get("error").is_none());
}

#[tokio::test]
async fn provision_account_asks_two_questions_at_once() {
    let (_server, client) = start(fast()).await;
    let id = client
        .start_task("provision_account", json!({"email": "ada@example.com"}))
        .await;
    let task = client.wait_status(&id, "input_required").await;
    let keys = input_keys(&task);
    assert_eq!(keys, [format!("{id}:plan-1"), format!("{id}:region-2")]);
    assert_eq!(
        task["inputRequests"][&keys[0]]["params"]["requestedSchema"],
        json!({
            "type": "object",
            "properties": {
                "plan": {
                    "type": "string",
                    "oneOf": [
                        {"const": "free", "title": "Free (1 seat)"},
                        {"const": "team", "title": "Team ($12/seat/month)"},
                        {"const": "enterprise", "title": "Enterprise (SSO, audit log)"}
                    ],
                    "default": "team",
                    "title": "Plan",
                    "description": "Billing plan of the new account"
                },
                "seats": {"type": "integer", "minimum": 1, "maximum": 500, "default": 5, "title": "Seats", "description": "Number of paid seats"}
            },
            "required": ["plan", "seats"]
        })
    );
    client
        .update(
            &id,
            json!({ &keys[1]: {"action": "accept", "content": {"region": "ap-southeast-2"}} }),
        )
        .await;
    let task = client.get_task(&id).await;
    assert_eq!(
        (task["status"].clone(), input_keys(&task)),
        (json!("input_required"), vec![keys[0].clone()])
    );
    let out_of_range = client
        .update(
            &id,
            json!({ &keys[0]: {"action": "accept", "content": {"plan": "team", "seats": 900}} }),
        )
        .await;
    assert_eq!(out_of_range.error_code(), -32602);
    client
        .update(&id, json!({ &keys[0]: {"action": "accept", "content": {"plan": "enterprise", "seats": 40}} }))
        .await;
    let done = client.wait_terminal(&id).await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Provisioned an account for ada@example.com on the enterprise plan with 40 seats in ap-southeast-2; an invitation was sent."
    );
}

#[tokio::test]
async fn connect_github_uses_url_elicitation_as_a_task() {
    let (_server, client) = start(fast()).await;
    let id = client.start_task("connect_github", json!({})).await;
    let task = client.wait_status(&id, "input_required").await;
    let key = input_keys(&task).pop().unwrap_or_default();
    let params = task["inputRequests"][&key]["params"].clone();
    assert_eq!(params["mode"], "url");
    assert!(params["url"].as_str().is_some_and(
        |url| url.starts_with("https://example.com/oauth/authorize?client_id=countersign-demo")
    ));
    assert!(params["elicitationId"]
        .as_str()
        .is_some_and(|id| id.len() == 36));
    client
        .update(&id, json!({ &key: {"action": "accept"} }))
        .await;
    let done = client.wait_terminal(&id).await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Connected GitHub account @demo-user (scopes: repo:read, read:org)."
    );
}

#[tokio::test]
async fn connect_github_without_tasks_is_a_multi_round_trip_call() {
    let (_server, client) = start(fast()).await;
    let caps = json!({"elicitation": {"url": {}}});
    let first = client
        .call("connect_github", json!({"account": "acme"}), &caps)
        .await
        .result();
    assert_eq!(first["resultType"], "input_required");
    assert_eq!(first["inputRequests"]["authorize"]["params"]["mode"], "url");
    let state = first["requestState"].clone();
    assert!(state.is_string());
    let second = client
        .request(
            "tools/call",
            json!({
                "name": "connect_github",
                "arguments": {"account": "acme"},
                "inputResponses": {"authorize": {"action": "accept"}},
                "requestState": state
            }),
            &caps,
        )
        .await;
    assert_eq!(
        second.result(),
        json!({
            "content": [{"type": "text", "text": "Connected GitHub account @acme (scopes: repo:read, read:org)."}],
            "structuredContent": {"account": "acme", "scopes": ["repo:read", "read:org"]},
            "isError": false,
            "resultType": "complete"
        })
    );
    let form_only = client
        .call("connect_github", json!({}), &json!({"elicitation": {}}))
        .await;
    assert_eq!(
        form_only.body()["error"]["data"],
        json!({"requiredCapabilities": {"elicitation": {"url": {}}}})
    );
}

#[tokio::test]
async fn bench_job_takes_exactly_its_duration_whatever_the_time_scale() {
    let (server, client) = start(fast()).await;
    let id = client
        .start_task("bench_job", json!({"duration_ms": 300, "steps": 3}))
        .await;
    let done = client.wait_terminal(&id).await;
    assert_eq!(
        done["result"],
        json!({
            "content": [{"type": "text", "text": "bench_job finished after 300 ms"}],
            "structuredContent": {"durationMs": 300, "steps": 3},
            "isError": false,
            "resultType": "complete"
        })
    );
    let changes = server.task_changes(&id).expect("changes");
    let offsets: Vec<(Option<&str>, u128)> = changes
        .iter()
        .map(|change| {
            (
                change.status_message.as_deref(),
                (change.instant - changes[0].instant).as_millis(),
            )
        })
        .collect();
    assert_eq!(
        offsets,
        [
            (Some("step 1/3"), 0),
            (Some("step 2/3"), 100),
            (Some("step 3/3"), 200),
            (Some("done"), 300)
        ]
    );
}

#[tokio::test]
async fn conformance_fixtures_behave_as_the_suite_expects() {
    let (_server, client) = start(fast()).await;
    assert_eq!(
        client
            .call("greet", json!({"name": "World"}), &full_caps())
            .await
            .result(),
        json!({"content": [{"type": "text", "text": "Hello, World!"}], "isError": false, "resultType": "complete"})
    );
    // slow_compute: a task with the extension, synchronous without.
    let sync = client
        .call("slow_compute", json!({"seconds": 0}), &no_caps())
        .await
        .result();
    assert_eq!(sync["resultType"], "complete");
    let id = client
        .start_task("slow_compute", json!({"seconds": 60}))
        .await;
    client.cancel(&id).await;
    assert_eq!(client.get_task(&id).await["status"], "cancelled");

    let id = client.start_task("failing_job", json!({})).await;
    let task = client.wait_terminal(&id).await;
    assert_eq!(
        (task["status"].clone(), task["result"]["isError"].clone()),
        (json!("completed"), json!(true))
    );

    let id = client.start_task("protocol_error_job", json!({})).await;
    let task = client.wait_terminal(&id).await;
    assert_eq!(task["status"], "failed");
    assert_eq!(task["error"]["code"], -32603);
    assert!(task.get("result").is_none());

    let id = client
        .start_task("confirm_delete", json!({"filename": "a.txt"}))
        .await;
    let task = client.wait_status(&id, "input_required").await;
    let key = input_keys(&task).pop().unwrap_or_default();
    client
        .update(
            &id,
            json!({ &key: {"action": "accept", "content": {"confirm": true}} }),
        )
        .await;
    let task = client.wait_terminal(&id).await;
    assert_eq!(task["result"]["content"][0]["text"], "Deleted a.txt.");

    let id = client.start_task("multi_input", json!({})).await;
    let task = client.wait_status(&id, "input_required").await;
    let keys = input_keys(&task);
    assert_eq!(keys.len(), 2);
    for key in &keys {
        client
            .update(
                &id,
                json!({ key: {"action": "accept", "content": {"name": "rec", "confirm": true}} }),
            )
            .await;
    }
    let task = client.wait_terminal(&id).await;
    assert_eq!(
        task["result"]["content"][0]["text"],
        "multi_input received both answers: name=rec, confirm=true"
    );
}

#[tokio::test]
async fn test_tool_with_task_gathers_a_name_over_mrtr_then_creates_a_task() {
    let (_server, client) = start(fast()).await;
    let caps = json!({"extensions": {TASKS: {}}, "elicitation": {}});
    let first = client
        .call("test_tool_with_task", json!({}), &caps)
        .await
        .result();
    assert_eq!(
        first,
        json!({
            "resultType": "input_required",
            "inputRequests": {"user_name": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "What is your name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200, "title": "Name", "description": "Used in the greeting"}},
                        "required": ["name"]
                    }
                }
            }},
            "requestState": first["requestState"]
        })
    );
    let resend = |state: Value, responses: Value| json!({"name": "test_tool_with_task", "arguments": {}, "inputResponses": responses, "requestState": state});
    let answer = json!({"user_name": {"action": "accept", "content": {"name": "Alice"}}});

    // Tampered or misplaced state is refused.
    let tampered = format!("x{}", first["requestState"].as_str().unwrap_or_default());
    let reply = client
        .request("tools/call", resend(json!(tampered), answer.clone()), &caps)
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, -32602));
    let other_args = json!({"name": "test_tool_with_task", "arguments": {"x": 1}, "inputResponses": answer, "requestState": first["requestState"]});
    let reply = client.request("tools/call", other_args, &caps).await;
    assert_eq!(
        reply.body()["error"]["message"],
        "Invalid params: requestState does not belong to this call"
    );
    // Malformed responses are refused; without responses the question comes again.
    let reply = client
        .request(
            "tools/call",
            resend(first["requestState"].clone(), json!({"user_name": 12345})),
            &caps,
        )
        .await;
    assert_eq!(reply.error_code(), -32602);
    let again = client
        .request(
            "tools/call",
            resend(first["requestState"].clone(), json!({})),
            &caps,
        )
        .await
        .result();
    assert_eq!(again["resultType"], "input_required");

    let second = client
        .request(
            "tools/call",
            resend(first["requestState"].clone(), answer),
            &caps,
        )
        .await
        .result();
    assert_eq!(second["resultType"], "task");
    assert!(second.get("requestState").is_none());
    let id = second["taskId"].as_str().unwrap_or_default().to_owned();
    let task = client.wait_terminal(&id).await;
    assert_eq!(
        task["result"]["content"][0]["text"],
        "Hello, Alice! (your name was gathered over MRTR before this task started)"
    );
}

#[tokio::test]
async fn confirm_delete_without_tasks_uses_mrtr() {
    let (_server, client) = start(fast()).await;
    let caps = json!({"elicitation": {}});
    let first = client
        .call("confirm_delete", json!({"filename": "b.txt"}), &caps)
        .await
        .result();
    assert_eq!(first["resultType"], "input_required");
    let reply = client
        .request(
            "tools/call",
            json!({
                "name": "confirm_delete",
                "arguments": {"filename": "b.txt"},
                "inputResponses": {"confirm": {"action": "decline"}},
                "requestState": first["requestState"]
            }),
            &caps,
        )
        .await;
    assert_eq!(
        reply.result(),
        json!({
            "content": [{"type": "text", "text": "Kept b.txt: deletion was not confirmed."}],
            "structuredContent": {"filename": "b.txt", "deleted": false},
            "isError": false,
            "resultType": "complete"
        })
    );
}

#[tokio::test]
async fn test_missing_capability_needs_sampling_and_samples_over_mrtr() {
    let (_server, client) = start(fast()).await;
    let refused = client
        .call("test_missing_capability", json!({}), &no_caps())
        .await;
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.body()["error"]["data"],
        json!({"requiredCapabilities": {"sampling": {}}})
    );
    let caps = json!({"sampling": {}});
    let first = client
        .call("test_missing_capability", json!({}), &caps)
        .await
        .result();
    assert_eq!(
        first["inputRequests"],
        json!({"summary": {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise in one line: 3 pipelines passed, 1 deployment awaits approval."}}],
                "maxTokens": 60
            }
        }})
    );
    let elicit_answer = client
        .request(
            "tools/call",
            json!({
                "name": "test_missing_capability",
                "arguments": {},
                "inputResponses": {"summary": {"action": "accept", "content": {}}},
                "requestState": first["requestState"]
            }),
            &caps,
        )
        .await;
    assert_eq!(
        elicit_answer.error_code(),
        -32602,
        "an ElicitResult does not answer a sampling request"
    );
    let second = client
        .request(
            "tools/call",
            json!({
                "name": "test_missing_capability",
                "arguments": {},
                "inputResponses": {"summary": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "All green but one approval."},
                    "model": "test-model",
                    "stopReason": "endTurn"
                }},
                "requestState": first["requestState"]
            }),
            &caps,
        )
        .await;
    assert_eq!(
        second.result(),
        json!({
            "content": [{"type": "text", "text": "Summary from test-model: All green but one approval."}],
            "structuredContent": {"summary": "All green but one approval.", "model": "test-model"},
            "isError": false,
            "resultType": "complete"
        })
    );
}

#[tokio::test]
async fn test_streaming_elicitation_asks_with_an_input_required_result() {
    let (_server, client) = start(fast()).await;
    let caps = json!({"elicitation": {}});
    let first = client
        .call("test_streaming_elicitation", json!({}), &caps)
        .await;
    assert_eq!(first.messages.len(), 1);
    let first = first.result();
    assert_eq!(first["resultType"], "input_required");
    let done = client
        .request(
            "tools/call",
            json!({
                "name": "test_streaming_elicitation",
                "arguments": {},
                "inputResponses": {"proceed": {"action": "accept", "content": {"proceed": true}}},
                "requestState": first["requestState"]
            }),
            &caps,
        )
        .await;
    assert_eq!(
        done.result()["content"][0]["text"],
        "Finished after your confirmation."
    );
}
