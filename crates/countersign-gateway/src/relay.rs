//! `countersign connect SERVER`: a stdio MCP server for hosts that only start stdio servers
//! (Claude Desktop's config, some IDEs), relaying every message to the running gateway under the
//! same policies. Newline-delimited JSON-RPC in on stdin, out on stdout (nothing else is ever
//! written there); each message is one POST to `/mcp/<server>` with the agent's token and the
//! session the gateway handed out at `initialize`. Requests are relayed concurrently, so a call
//! held for approval does not stall `ping` or other calls.

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

use countersign_core::sensitive::Sensitive;

/// Why the relay stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// stdin or stdout failed.
    #[error("stdio: {0}")]
    Io(#[from] std::io::Error),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Where the running gateway writes its base URL, in the data directory.
pub const URL_FILE: &str = "gateway.url";

struct Link {
    http: reqwest::Client,
    url: String,
    token: Sensitive<String>,
    session: std::sync::Mutex<Option<String>>,
    version: std::sync::Mutex<Option<String>>,
}

/// Relays `input` to the gateway endpoint `url` until `input` ends.
pub async fn relay<R, W>(
    url: String,
    token: Sensitive<String>,
    input: R,
    output: W,
) -> Result<(), Error>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let http = reqwest::Client::builder()
        .build()
        .map_err(|e| Error::Client(e.to_string()))?;
    let link = Arc::new(Link {
        http,
        url,
        token,
        session: std::sync::Mutex::new(None),
        version: std::sync::Mutex::new(None),
    });
    let output = Arc::new(Mutex::new(output));
    let mut lines = input.lines();
    let mut running = Vec::new();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(e) => {
                write(
                    &output,
                    &json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": format!("Parse error: {e}")}}),
                )
                .await?;
                continue;
            }
        };
        // `initialize` first and alone: the session id it returns goes on everything after.
        if message.get("method").and_then(Value::as_str) == Some("initialize") {
            send(&link, &output, message).await?;
            continue;
        }
        let (link, output) = (link.clone(), output.clone());
        running.push(tokio::spawn(
            async move { send(&link, &output, message).await },
        ));
        running.retain(|task: &tokio::task::JoinHandle<Result<(), Error>>| !task.is_finished());
    }
    for task in running {
        if let Ok(Err(e)) = task.await {
            return Err(e);
        }
    }
    Ok(())
}

async fn write<W: AsyncWrite + Unpin>(output: &Mutex<W>, message: &Value) -> Result<(), Error> {
    let mut out = output.lock().await;
    out.write_all(message.to_string().as_bytes()).await?;
    out.write_all(b"\n").await?;
    out.flush().await?;
    Ok(())
}

async fn send<W: AsyncWrite + Unpin>(
    link: &Link,
    output: &Mutex<W>,
    message: Value,
) -> Result<(), Error> {
    let id = message.get("id").cloned();
    let is_initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
    let mut request = link
        .http
        .post(&link.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(link.token.expose())
        .body(message.to_string());
    if let Some(session) = link.session.lock().ok().and_then(|s| s.clone()) {
        request = request.header("mcp-session-id", session);
    }
    if let Some(version) = link.version.lock().ok().and_then(|v| v.clone()) {
        request = request.header("mcp-protocol-version", version);
    }
    // The routing headers an HTTP client sends (SEP-2243), which a stdio host cannot: the
    // method, and the name the request routes by.
    if let Some(method) = message.get("method").and_then(Value::as_str) {
        request = request.header("mcp-method", method);
        let field = match method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
            _ => None,
        };
        if let Some(name) = field
            .and_then(|f| message.get("params")?.get(f))
            .and_then(Value::as_str)
        {
            request = request.header(
                "mcp-name",
                countersign_core::mcp::headers::encode_header_value(name),
            );
        }
    }
    let failed = |message: String| {
        id.clone().map(
            |id| json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}}),
        )
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) => {
            if let Some(error) = failed(format!(
                "the Countersign gateway cannot be reached ({}); is `countersign gateway` running?",
                e.without_url()
            )) {
                write(output, &error).await?;
            }
            return Ok(());
        }
    };
    if let Some(session) = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        if let Ok(mut s) = link.session.lock() {
            *s = Some(session.to_owned());
        }
    }
    let status = response.status();
    let text = match response.text().await {
        Ok(text) => text,
        Err(e) => {
            if let Some(error) = failed(format!(
                "the gateway's answer broke off ({})",
                e.without_url()
            )) {
                write(output, &error).await?;
            }
            return Ok(());
        }
    };
    // JSON, or SSE: every `data:` line is one message (keep-alive comments are skipped).
    let bodies: Vec<&str> = if text.trim_start().starts_with('{') {
        vec![text.trim()]
    } else {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect()
    };
    let mut answered = false;
    for body in bodies {
        match serde_json::from_str::<Value>(body) {
            Ok(reply) => {
                if is_initialize {
                    if let Some(version) = reply["result"]["protocolVersion"].as_str() {
                        if let Ok(mut v) = link.version.lock() {
                            *v = Some(version.to_owned());
                        }
                    }
                }
                answered |= reply.get("id").is_some();
                write(output, &reply).await?;
            }
            Err(_) => continue,
        }
    }
    if !answered && !status.is_success() {
        if let Some(error) = failed(format!("the gateway answered HTTP {status}")) {
            write(output, &error).await?;
        }
    }
    Ok(())
}
