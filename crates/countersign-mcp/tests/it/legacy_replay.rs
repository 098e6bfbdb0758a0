//! Replays a recorded legacy session with the real server-everything 2026.8.31
//! (`tests/fixtures/wire/server-everything.json`, recorded through `record_proxy.py` by
//! `legacy_everything.rs`'s `record_server_everything_exchanges`): initialize, a task-augmented
//! `tools/call`, `tasks/get`, `tasks/result` with the elicitation and its answer, `tasks/cancel`
//! of the finished task, DELETE. A local server answers each request with the recorded bytes
//! (SSE priming events included) and the test pins what our client put on the wire: the exact
//! JSON of every message and the session headers. Needs no Node.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_mcp::legacy::{CancelOutcome, TaskStatus};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

struct Seen {
    n: u64,
    headers: HashMap<String, String>,
    body: Option<Value>,
}

fn load() -> Vec<Value> {
    let path = format!(
        "{}/tests/fixtures/wire/server-everything.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture present"))
        .expect("fixture is JSON")
}

/// The recorded exchange a request stands for: the first unused one with the same HTTP method
/// and JSON-RPC method (or response id).
fn key(http_method: &str, body: Option<&Value>) -> String {
    let rpc = match body {
        Some(b) if b.get("method").is_some() => b["method"].to_string(),
        Some(b) => format!("response {}", b["id"]),
        None => String::new(),
    };
    format!("{http_method} {rpc}")
}

async fn read_request(
    socket: &mut tokio::net::TcpStream,
) -> Option<(String, HashMap<String, String>, Vec<u8>)> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_end, length) = loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(pos) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..pos]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            break (pos + 4, length);
        }
    };
    while raw.len() < head_end + length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
    let method = head.split(' ').next().unwrap_or_default().to_owned();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Some((method, headers, raw[head_end..head_end + length].to_vec()))
}

#[tokio::test]
async fn a_recorded_server_everything_session_replays_byte_for_byte() {
    let exchanges = load();
    assert!(exchanges.len() >= 9, "the fixture has the whole session");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let used = Arc::new(Mutex::new(vec![false; exchanges.len()]));
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let exchanges = Arc::new(exchanges);
    {
        let (used, seen, exchanges) = (used.clone(), seen.clone(), exchanges.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (used, seen, exchanges) = (used.clone(), seen.clone(), exchanges.clone());
                tokio::spawn(async move {
                    let Some((method, headers, body)) = read_request(&mut socket).await else {
                        return;
                    };
                    let body: Option<Value> = serde_json::from_slice(&body).ok();
                    let wanted = key(&method, body.as_ref());
                    let found = {
                        let mut used = used.lock().expect("lock");
                        let index = exchanges.iter().enumerate().position(|(i, e)| {
                            !used[i]
                                && key(
                                    e["request"]["method"].as_str().unwrap_or_default(),
                                    Some(&e["request"]["body"]).filter(|b| !b.is_null()),
                                ) == wanted
                        });
                        if let Some(i) = index {
                            used[i] = true;
                        }
                        index
                    };
                    let Some(index) = found else {
                        let _ = socket
                            .write_all(
                                b"HTTP/1.1 500 X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                            )
                            .await;
                        return;
                    };
                    let exchange = &exchanges[index];
                    seen.lock().expect("lock").push(Seen {
                        n: exchange["n"].as_u64().unwrap_or_default(),
                        headers,
                        body,
                    });
                    let response = &exchange["response"];
                    let payload = response["body_raw"].as_str().unwrap_or_default();
                    let mut head = format!(
                        "HTTP/1.1 {} X\r\nconnection: close\r\ncontent-length: {}\r\n",
                        response["status"],
                        payload.len()
                    );
                    for pair in response["headers"].as_array().into_iter().flatten() {
                        let (k, v) = (
                            pair[0].as_str().unwrap_or(""),
                            pair[1].as_str().unwrap_or(""),
                        );
                        if !matches!(k, "content-length" | "transfer-encoding" | "connection") {
                            head.push_str(&format!("{k}: {v}\r\n"));
                        }
                    }
                    head.push_str("\r\n");
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(payload.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
    }

    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        crate::scenario::scripted_session(&url, Duration::ZERO),
    )
    .await
    .expect("the replay does not hang");

    assert_eq!(outcome.status_before_answer, TaskStatus::InputRequired);
    assert!(
        outcome.question["message"]
            .as_str()
            .is_some_and(|m| m.contains("multiple interpretations")),
        "{:?}",
        outcome.question
    );
    assert!(
        outcome
            .report
            .contains("Research Report: python (programming)"),
        "{}",
        outcome.report
    );
    assert_eq!(outcome.status_after, TaskStatus::Completed);
    assert!(
        matches!(&outcome.cancel, CancelOutcome::AlreadyFinished { message } if message.contains("terminal status")),
        "{:?}",
        outcome.cancel
    );

    // Every recorded exchange was asked for, and each message we sent is the recorded one.
    assert!(
        used.lock().expect("lock").iter().all(|u| *u),
        "every exchange replayed"
    );
    let mut seen = std::mem::take(&mut *seen.lock().expect("lock"));
    seen.sort_by_key(|s| s.n);
    let session = exchanges[0]["response"]["headers"]
        .as_array()
        .and_then(|h| h.iter().find(|p| p[0] == "mcp-session-id"))
        .map(|p| p[1].clone())
        .expect("initialize issued a session id");
    for s in &seen {
        let recorded = &exchanges[(s.n - 1) as usize]["request"];
        let mut body = s.body.clone().unwrap_or(Value::Null);
        let mut expected = recorded["body"].clone();
        // The client's own version is not part of the wire contract.
        if let Some(info) = body.pointer_mut("/params/clientInfo/version") {
            *info = json!("*");
        }
        if let Some(info) = expected.pointer_mut("/params/clientInfo/version") {
            *info = json!("*");
        }
        assert_eq!(body, expected, "exchange {} sent as recorded", s.n);
        if s.n == 1 {
            assert!(
                !s.headers.contains_key("mcp-session-id"),
                "initialize has no session"
            );
            assert!(!s.headers.contains_key("mcp-protocol-version"));
        } else {
            assert_eq!(
                s.headers.get("mcp-session-id").map(|v| json!(v)),
                Some(session.clone()),
                "exchange {} carries the session",
                s.n
            );
            assert_eq!(
                s.headers.get("mcp-protocol-version").map(String::as_str),
                Some("2025-11-25"),
                "exchange {} carries the version",
                s.n
            );
        }
    }
    // The answer to the elicitation names its task.
    let answer = seen
        .iter()
        .find_map(|s| s.body.as_ref().filter(|b| b.get("result").is_some()))
        .expect("the elicitation was answered");
    assert_eq!(answer["result"]["action"], "accept");
    assert!(
        answer["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"].is_string()
    );
}
