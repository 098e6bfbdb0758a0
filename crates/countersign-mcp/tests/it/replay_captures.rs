//! Replays every recorded exchange with the two real peers (fastmcp-tasks 4.1.4 and rmcp 3.11.0,
//! `tests/fixtures/wire/`, copied from `shared/wire/`) against our client: a one-shot HTTP server
//! answers with the recorded bytes, and the test pins both what our client put on the wire
//! (headers and exact JSON) and how it read the answer.

use std::collections::HashMap;

use countersign_mcp::{
    CallOutcome, Client, Endpoint, Error, TaskState, ToolCall, PROTOCOL_VERSION,
};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

struct Captured {
    headers: HashMap<String, String>,
    body: Value,
}

/// Serves exactly one request with `status`, `content_type` and `body` (its JSON-RPC id rewritten
/// to the one our client used), and returns what the client sent.
async fn serve_once(
    status: u16,
    content_type: Option<String>,
    body: String,
    recorded_id: Value,
) -> (String, tokio::task::JoinHandle<Captured>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let handle = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        let (head_end, content_length) = loop {
            let n = socket.read(&mut buf).await.expect("read");
            assert!(n > 0, "client closed before sending a request");
            raw.extend_from_slice(&buf[..n]);
            if let Some(pos) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..pos]).to_string();
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                break (pos + 4, len);
            }
        };
        while raw.len() < head_end + content_length {
            let n = socket.read(&mut buf).await.expect("read body");
            assert!(n > 0, "client closed mid-body");
            raw.extend_from_slice(&buf[..n]);
        }
        let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
        let headers = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let request: Value = serde_json::from_slice(&raw[head_end..head_end + content_length])
            .expect("client sent JSON");
        let our_id = request["id"].to_string();
        let body = body.replacen(
            &format!("\"id\":{recorded_id}"),
            &format!("\"id\":{our_id}"),
            1,
        );
        let mut response = format!(
            "HTTP/1.1 {status} X\r\nconnection: close\r\ncontent-length: {}\r\n",
            body.len()
        );
        if let Some(ct) = content_type {
            response.push_str(&format!("content-type: {ct}\r\n"));
        }
        response.push_str("\r\n");
        response.push_str(&body);
        socket.write_all(response.as_bytes()).await.expect("write");
        socket.shutdown().await.ok();
        Captured {
            headers,
            body: request,
        }
    });
    (url, handle)
}

fn load(peer: &str) -> Vec<Value> {
    let path = format!(
        "{}/tests/fixtures/wire/{peer}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("fixture present");
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// The `_meta` our client must put on every request, exactly.
fn expected_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}},
            "elicitation": {"form": {}, "url": {}}
        },
        "io.modelcontextprotocol/clientInfo": {"name": "countersign", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// Exchanges whose recorded request a well-behaved client would send (the others deliberately
/// break headers, drop capabilities or call removed methods).
fn replayable(exchange: &Value) -> bool {
    let name = exchange["name"].as_str().unwrap_or_default();
    !name.starts_with("hdr_") || name == "hdr_setup_task" || name == "hdr_cleanup_cancel"
}

async fn replay(peer: &str) -> usize {
    let mut replayed = 0;
    for exchange in load(peer) {
        let name = exchange["name"].as_str().unwrap_or_default().to_owned();
        let request = &exchange["request"]["body"];
        let method = request["method"].as_str().unwrap_or_default().to_owned();
        let caps = &request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
        let declares_tasks = caps["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some();
        if !replayable(&exchange)
            || !declares_tasks
            || !matches!(
                method.as_str(),
                "server/discover"
                    | "tools/list"
                    | "tools/call"
                    | "tasks/get"
                    | "tasks/update"
                    | "tasks/cancel"
            )
        {
            continue;
        }
        let response = &exchange["response"];
        let status = response["status"].as_u64().expect("status") as u16;
        let content_type = response["content_type"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let body = response["body_raw"].as_str().unwrap_or_default().to_owned();
        let (url, server) = serve_once(status, content_type, body, request["id"].clone()).await;
        let client = Client::new(Endpoint::new(url)).expect("client");
        let params = request["params"].as_object().cloned().unwrap_or_default();
        let task_id = params
            .get("taskId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();

        let outcome: Result<String, Error> = match method.as_str() {
            "server/discover" => client
                .discover()
                .await
                .map(|d| format!("discover tasks={}", d.supports_tasks())),
            "tools/list" => client
                .list_tools()
                .await
                .map(|l| format!("tools {}", l.tools.len())),
            "tools/call" => {
                let call = ToolCall {
                    name: params["name"].as_str().unwrap_or_default().into(),
                    arguments: params.get("arguments").and_then(Value::as_object).cloned(),
                    input_responses: None,
                    request_state: None,
                };
                client.call_tool(&call).await.map(|o| match o {
                    CallOutcome::Complete(r) => format!("complete isError={}", r.is_error()),
                    CallOutcome::InputRequired(_) => "input_required".into(),
                    CallOutcome::Task(t) => format!("task {} {}", t.task_id, t.status()),
                })
            }
            "tasks/get" => client.get_task(&task_id).await.map(|t| match &t.state {
                TaskState::InputRequired { input_requests } => {
                    format!("input_required {}", input_requests.len())
                }
                TaskState::Completed { result } => {
                    format!("completed isError={}", result.is_error())
                }
                TaskState::Failed { error } => format!("failed {}", error.code),
                other => other.status().to_string(),
            }),
            "tasks/update" => {
                let responses: Map<String, Value> = params
                    .get("inputResponses")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                client
                    .update_task(&task_id, responses)
                    .await
                    .map(|()| "ack".into())
            }
            "tasks/cancel" => client.cancel_task(&task_id).await.map(|()| "ack".into()),
            _ => unreachable!("filtered above"),
        };
        let sent = server.await.expect("server task");

        // What we sent: the recorded request with our id and our _meta, nothing more or less.
        let mut expected_body = request.clone();
        expected_body["id"] = sent.body["id"].clone();
        expected_body["params"]["_meta"] = expected_meta();
        assert_eq!(sent.body, expected_body, "{peer}/{name}: request body");
        assert_eq!(
            sent.headers.get("mcp-protocol-version").map(String::as_str),
            Some(PROTOCOL_VERSION),
            "{peer}/{name}"
        );
        assert_eq!(
            sent.headers.get("mcp-method"),
            Some(&method),
            "{peer}/{name}"
        );
        assert_eq!(
            sent.headers.get("accept").map(String::as_str),
            Some("application/json, text/event-stream"),
            "{peer}/{name}"
        );
        assert_eq!(
            sent.headers.get("content-type").map(String::as_str),
            Some("application/json"),
            "{peer}/{name}"
        );
        let recorded_name = exchange["request"]["headers"]["Mcp-Name"].as_str();
        assert_eq!(
            sent.headers.get("mcp-name").map(String::as_str),
            recorded_name,
            "{peer}/{name}: Mcp-Name"
        );

        // How we read the answer: derived from the recorded response, independently of our parser.
        let message = response["messages"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m.get("id").is_some()).cloned())
            .or_else(|| {
                serde_json::from_str(response["body_raw"].as_str().unwrap_or_default()).ok()
            })
            .expect("recorded response has a JSON-RPC message");
        match (&message.get("error"), &outcome) {
            (Some(error), Err(e)) => {
                let code = error["code"].as_i64().expect("code");
                let expected = match (code, method.as_str()) {
                    (-32602, "tasks/get" | "tasks/cancel") => "unknown_task",
                    (-32602, "tasks/update")
                        if error["message"]
                            .as_str()
                            .unwrap_or("")
                            .contains("not found")
                            || error["message"]
                                .as_str()
                                .unwrap_or("")
                                .contains("unknown task") =>
                    {
                        "unknown_task"
                    }
                    (-32602, _) => "invalid_params",
                    (-32601, _) => "method_not_found",
                    (-32021, _) => "missing_capability",
                    (-32020, _) => "header_mismatch",
                    _ => "rpc",
                };
                assert_eq!(e.code(), expected, "{peer}/{name}: {e}");
            }
            (None, Ok(summary)) => {
                let result = &message["result"];
                let expected = match method.as_str() {
                    "server/discover" => "discover tasks=true".to_owned(),
                    "tools/list" => format!(
                        "tools {}",
                        result["tools"].as_array().map(Vec::len).unwrap_or(0)
                    ),
                    "tools/call" if result["resultType"] == "task" => {
                        format!(
                            "task {} {}",
                            result["taskId"].as_str().unwrap_or(""),
                            result["status"].as_str().unwrap_or("")
                        )
                    }
                    "tools/call" => format!(
                        "complete isError={}",
                        result["isError"].as_bool().unwrap_or(false)
                    ),
                    "tasks/get" => match result["status"].as_str().unwrap_or("") {
                        "input_required" => format!(
                            "input_required {}",
                            result["inputRequests"]
                                .as_object()
                                .map(Map::len)
                                .unwrap_or(0)
                        ),
                        "completed" => format!(
                            "completed isError={}",
                            result["result"]["isError"].as_bool().unwrap_or(false)
                        ),
                        "failed" => format!("failed {}", result["error"]["code"]),
                        other => other.to_owned(),
                    },
                    _ => "ack".to_owned(),
                };
                assert_eq!(summary, &expected, "{peer}/{name}");
            }
            (_, other) => panic!("{peer}/{name}: recorded {message} but client produced {other:?}"),
        }
        replayed += 1;
    }
    replayed
}

#[tokio::test]
async fn replays_every_fastmcp_exchange() {
    let n = replay("fastmcp").await;
    eprintln!("replayed {n} fastmcp exchanges");
    assert!(
        n >= 45,
        "expected to replay most of the 65 fastmcp exchanges, replayed {n}"
    );
}

#[tokio::test]
async fn replays_every_rmcp_exchange() {
    let n = replay("rmcp").await;
    eprintln!("replayed {n} rmcp exchanges");
    assert!(
        n >= 45,
        "expected to replay most of the 65 rmcp exchanges, replayed {n}"
    );
}
