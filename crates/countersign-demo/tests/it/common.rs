//! A minimal, strict MCP 2026-07-28 client for driving the demo server over real HTTP.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use countersign_demo::{DemoConfig, DemoServer};
use serde_json::{json, Value};

pub const TASKS: &str = "io.modelcontextprotocol/tasks";

/// (tool, argument, header) of every `x-mcp-header` annotation in the demo's tool list.
const MIRRORED: [(&str, &str, &str); 2] = [
    ("echo", "region", "Mcp-Param-Region"),
    ("deploy_service", "environment", "Mcp-Param-Environment"),
];

/// Capabilities of a console: tasks plus both elicitation modes.
pub fn full_caps() -> Value {
    json!({"extensions": {TASKS: {}}, "elicitation": {"form": {}, "url": {}}})
}

pub fn no_caps() -> Value {
    json!({})
}

pub async fn start(config: DemoConfig) -> (DemoServer, Client) {
    let server = DemoServer::start(([127, 0, 0, 1], 0).into(), config)
        .await
        .expect("demo server starts");
    let client = Client::new(server.url());
    (server, client)
}

/// Fast pacing for tool lifecycles.
pub fn fast() -> DemoConfig {
    DemoConfig {
        time_scale: 0.01,
        ..DemoConfig::default()
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub content_type: String,
    pub raw: String,
    /// Every JSON-RPC message of the body (one for JSON, all `data:` events for SSE).
    pub messages: Vec<Value>,
}

impl Reply {
    /// The final message (the response).
    pub fn body(&self) -> Value {
        self.messages.last().cloned().unwrap_or(Value::Null)
    }

    pub fn result(&self) -> Value {
        let body = self.body();
        assert!(
            body.get("result").is_some(),
            "expected a result, got HTTP {} {}",
            self.status,
            self.raw
        );
        body["result"].clone()
    }

    pub fn error_code(&self) -> i64 {
        self.body()["error"]["code"].as_i64().unwrap_or_default()
    }

    pub fn is_sse(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }
}

pub fn parse_sse(raw: &str) -> Vec<Value> {
    raw.split('\n')
        .map(|line| line.trim_end_matches('\r'))
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim_start()).ok())
        .collect()
}

pub struct Client {
    http: reqwest::Client,
    pub url: String,
    next_id: AtomicI64,
}

impl Client {
    pub fn new(url: String) -> Self {
        Self {
            http: reqwest::Client::new(),
            url,
            next_id: AtomicI64::new(1),
        }
    }

    pub fn id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// POSTs `body` with exactly these headers (plus Content-Type unless given).
    pub async fn post(&self, headers: &[(&str, String)], body: Vec<u8>) -> Reply {
        let mut request = self.http.post(&self.url).body(body);
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        {
            request = request.header("Content-Type", "application/json");
        }
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        let response = request.send().await.expect("request sent");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let content_type = headers
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let raw = response.text().await.expect("body read");
        let messages = if content_type.starts_with("text/event-stream") {
            parse_sse(&raw)
        } else {
            serde_json::from_str(&raw)
                .map(|value| vec![value])
                .unwrap_or_default()
        };
        Reply {
            status,
            headers,
            content_type,
            raw,
            messages,
        }
    }

    /// The headers a conforming client sends for `method` with `params`.
    pub fn standard_headers(method: &str, params: &Value) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream".to_owned()),
            ("MCP-Protocol-Version", "2026-07-28".to_owned()),
            ("Mcp-Method", method.to_owned()),
        ];
        let name = match method {
            "tools/call" => params.get("name"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => params.get("taskId"),
            _ => None,
        };
        if let Some(name) = name.and_then(Value::as_str) {
            headers.push(("Mcp-Name", name.to_owned()));
        }
        // The demo's x-mcp-header annotations, mirrored as a conforming client must.
        for (tool, argument, header) in MIRRORED {
            if params.get("name").and_then(Value::as_str) != Some(tool) {
                continue;
            }
            match params.get("arguments").and_then(|args| args.get(argument)) {
                Some(Value::String(value)) => headers.push((header, value.clone())),
                Some(Value::Null) | None => {}
                Some(other) => headers.push((header, other.to_string())),
            }
        }
        headers
    }

    pub fn envelope(&self, method: &str, mut params: Value, caps: &Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "demo-tests", "version": "0"}
        });
        json!({"jsonrpc": "2.0", "id": self.id(), "method": method, "params": params})
    }

    /// A well-formed request; `extra` headers are added (or replace standard ones).
    pub async fn request_with(
        &self,
        method: &str,
        params: Value,
        caps: &Value,
        extra: &[(&'static str, String)],
    ) -> Reply {
        let mut headers = Self::standard_headers(method, &params);
        for (name, value) in extra {
            headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
            headers.push((name, value.clone()));
        }
        let body = self.envelope(method, params, caps);
        self.post(&headers, serde_json::to_vec(&body).expect("json"))
            .await
    }

    pub async fn request(&self, method: &str, params: Value, caps: &Value) -> Reply {
        self.request_with(method, params, caps, &[]).await
    }

    pub async fn call(&self, tool: &str, arguments: Value, caps: &Value) -> Reply {
        self.request(
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            caps,
        )
        .await
    }

    /// Calls a task tool and returns the task id, checking the CreateTaskResult shape.
    pub async fn start_task(&self, tool: &str, arguments: Value) -> String {
        let reply = self.call(tool, arguments, &full_caps()).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        let result = reply.result();
        assert_eq!(result["resultType"], "task", "{}", reply.raw);
        for absent in ["result", "error", "inputRequests", "requestState"] {
            assert!(
                result.get(absent).is_none(),
                "CreateTaskResult has {absent}"
            );
        }
        result["taskId"].as_str().expect("taskId").to_owned()
    }

    pub async fn get_task(&self, task_id: &str) -> Value {
        let reply = self
            .request("tasks/get", json!({"taskId": task_id}), &full_caps())
            .await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        reply.result()
    }

    pub async fn update(&self, task_id: &str, responses: Value) -> Reply {
        self.request(
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": responses}),
            &full_caps(),
        )
        .await
    }

    pub async fn cancel(&self, task_id: &str) -> Reply {
        self.request("tasks/cancel", json!({"taskId": task_id}), &full_caps())
            .await
    }

    /// Polls until `done` holds for the task (10 s at most).
    pub async fn wait_until(&self, task_id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let task = self.get_task(task_id).await;
            if done(&task) {
                return task;
            }
            assert!(Instant::now() < deadline, "task never got there: {task}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub async fn wait_status(&self, task_id: &str, status: &str) -> Value {
        self.wait_until(task_id, |task| task["status"] == status)
            .await
    }

    pub async fn wait_terminal(&self, task_id: &str) -> Value {
        self.wait_until(task_id, |task| {
            matches!(
                task["status"].as_str(),
                Some("completed" | "failed" | "cancelled")
            )
        })
        .await
    }
}

/// The single key of an input_required task's `inputRequests`.
pub fn input_keys(task: &Value) -> Vec<String> {
    task["inputRequests"]
        .as_object()
        .map(|requests| requests.keys().cloned().collect())
        .unwrap_or_default()
}

/// Copies the fields that vary per run (ids, timestamps) from `actual` into `expected`, so
/// the rest can be compared exactly.
pub fn with_runtime_fields(mut expected: Value, actual: &Value) -> Value {
    for field in ["taskId", "createdAt", "lastUpdatedAt"] {
        if let Some(value) = actual.get(field) {
            expected[field] = value.clone();
        }
    }
    expected
}

pub fn is_timestamp(value: &Value) -> bool {
    let Some(text) = value.as_str() else {
        return false;
    };
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).is_ok()
        && text.ends_with('Z')
}
