//! The legacy client and the era detection against a scripted local server: what the real
//! server-everything does not do on demand (dropped streams, `retry:`, requests we do not
//! serve, floods, versions we do not speak, modern answers, outages).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_mcp::era::{self, Connection};
use countersign_mcp::legacy::{
    ElicitAction, LegacyClient, TaskResultEvent, MAX_SERVER_REQUESTS_PER_STREAM,
};
use countersign_mcp::{ClientOptions, Endpoint, Era, Error};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the fake server saw it.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    headers: HashMap<String, String>,
    body: Value,
}

/// One answer: status, content type, extra headers, body (the connection closes after it, so
/// an event stream without our answer is a dropped stream).
struct Answer {
    status: u16,
    content_type: Option<&'static str>,
    headers: Vec<(&'static str, String)>,
    body: String,
}

impl Answer {
    fn json(value: Value) -> Self {
        Self {
            status: 200,
            content_type: Some("application/json"),
            headers: Vec::new(),
            body: value.to_string(),
        }
    }
    fn sse(body: impl Into<String>) -> Self {
        Self {
            status: 200,
            content_type: Some("text/event-stream"),
            headers: Vec::new(),
            body: body.into(),
        }
    }
    fn status(status: u16, body: Value) -> Self {
        Self {
            status,
            content_type: Some("application/json"),
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
    fn accepted() -> Self {
        Self {
            status: 202,
            content_type: None,
            headers: Vec::new(),
            body: String::new(),
        }
    }
}

type Script = Arc<dyn Fn(&Request, &[Request]) -> Answer + Send + Sync>;

/// Serves `script` on a loopback port; returns the URL and the log of requests.
async fn serve(script: Script) -> (String, Arc<Mutex<Vec<Request>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let log = Arc::new(Mutex::new(Vec::<Request>::new()));
    let seen = log.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (script, seen) = (script.clone(), seen.clone());
            tokio::spawn(async move {
                let Some(request) = read(&mut socket).await else {
                    return;
                };
                let answer = {
                    let mut log = seen.lock().expect("log");
                    let answer = script(&request, &log);
                    log.push(request);
                    answer
                };
                let mut head = format!(
                    "HTTP/1.1 {} X\r\nconnection: close\r\ncontent-length: {}\r\n",
                    answer.status,
                    answer.body.len()
                );
                if let Some(ct) = answer.content_type {
                    head.push_str(&format!("content-type: {ct}\r\n"));
                }
                for (k, v) in &answer.headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(answer.body.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, log)
}

async fn read(socket: &mut tokio::net::TcpStream) -> Option<Request> {
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
    Some(Request {
        method: head.split(' ').next().unwrap_or_default().to_owned(),
        headers: head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect(),
        body: serde_json::from_slice(&raw[head_end..head_end + length]).unwrap_or(Value::Null),
    })
}

fn rpc_method(request: &Request) -> &str {
    request.body["method"].as_str().unwrap_or_default()
}

/// A legacy server's handshake: `initialize` with a session id, `initialized` taken.
fn handshake(request: &Request, version: &str) -> Option<Answer> {
    match rpc_method(request) {
        "initialize" => {
            let mut answer = Answer::json(
                json!({"jsonrpc": "2.0", "id": request.body["id"], "result": {
                    "protocolVersion": version,
                    "capabilities": {"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}},
                    "serverInfo": {"name": "fake", "version": "1"}
                }}),
            );
            answer.headers.push(("mcp-session-id", "s-1".into()));
            Some(answer)
        }
        "notifications/initialized" => Some(Answer::accepted()),
        _ if request.method == "DELETE" => Some(Answer::status(200, json!({}))),
        _ => None,
    }
}

fn event(id: &str, message: Value) -> String {
    format!("event: message\nid: {id}\ndata: {message}\n\n")
}

async fn legacy(url: &str) -> LegacyClient {
    LegacyClient::connect(Endpoint::new(url), ClientOptions::default())
        .await
        .expect("initialize")
}

#[tokio::test]
async fn a_dropped_result_stream_resumes_from_its_last_event_and_unserved_requests_are_refused() {
    let script: Script = Arc::new(|request, log| {
        if let Some(answer) = handshake(request, "2025-11-25") {
            return answer;
        }
        let result_id = log
            .iter()
            .chain(std::iter::once(request))
            .find(|r| rpc_method(r) == "tasks/result")
            .map(|r| r.body["id"].clone())
            .unwrap_or(Value::Null);
        match (request.method.as_str(), rpc_method(request)) {
            ("POST", "tasks/result") => Answer::sse(format!(
                // A priming event with a retry, a request we do not serve, a question, then the
                // connection drops before the result.
                "id: e0\nretry: 50\ndata: \n\n{}{}",
                event(
                    "e1",
                    json!({"jsonrpc": "2.0", "id": "x-1", "method": "sampling/createMessage", "params": {}})
                ),
                event(
                    "e2",
                    json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {
                    "message": "Which?", "requestedSchema": {"type": "object"},
                    "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t-1"}}}})
                ),
            )),
            ("GET", _) => Answer::sse(event(
                "e3",
                json!({"jsonrpc": "2.0", "id": result_id, "result": {"content": [{"type": "text", "text": "done"}]}}),
            )),
            ("POST", "") => Answer::accepted(),
            _ => Answer::status(500, json!({})),
        }
    });
    let (url, log) = serve(script).await;
    let client = legacy(&url).await;
    let mut stream = client
        .task_result("t-1", Duration::from_secs(5))
        .await
        .expect("tasks/result");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.expect("no error");
        if let TaskResultEvent::Request(request) = &event {
            assert_eq!(request.related_task(), Some("t-1"));
            stream
                .answer_elicitation(request, &ElicitAction::Decline)
                .await
                .expect("answered");
        }
        events.push(event);
    }
    assert!(
        matches!(&events[0], TaskResultEvent::Refused(r) if r.method == "sampling/createMessage")
    );
    assert!(matches!(&events[1], TaskResultEvent::Request(r) if r.id == json!(7)));
    assert!(
        matches!(&events[2], TaskResultEvent::Completed(r) if r.content()[0]["text"] == "done")
    );

    let log = log.lock().expect("log");
    let resume = log
        .iter()
        .find(|r| r.method == "GET")
        .expect("resumed with a GET");
    assert_eq!(
        resume.headers.get("last-event-id").map(String::as_str),
        Some("e2")
    );
    assert_eq!(
        resume.headers.get("mcp-session-id").map(String::as_str),
        Some("s-1")
    );
    let refusal = log
        .iter()
        .find(|r| r.body["id"] == "x-1")
        .expect("the sampling request was answered");
    assert_eq!(refusal.body["error"]["code"], -32601);
    let answer = log
        .iter()
        .find(|r| r.body["id"] == 7)
        .expect("the question was answered");
    assert_eq!(
        answer.body["result"],
        json!({"action": "decline", "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t-1"}}})
    );
}

#[tokio::test]
async fn a_server_flooding_requests_is_cut_off_with_a_typed_error() {
    let script: Script = Arc::new(|request, _| {
        if let Some(answer) = handshake(request, "2025-11-25") {
            return answer;
        }
        match rpc_method(request) {
            "tasks/result" => Answer::sse(
                (0..=MAX_SERVER_REQUESTS_PER_STREAM)
                    .map(|i| {
                        event(
                            &format!("e{i}"),
                            json!({"jsonrpc": "2.0", "id": i, "method": "roots/list"}),
                        )
                    })
                    .collect::<String>(),
            ),
            _ => Answer::accepted(),
        }
    });
    let (url, _log) = serve(script).await;
    let client = legacy(&url).await;
    let mut stream = client
        .task_result("t-1", Duration::from_secs(5))
        .await
        .expect("tasks/result");
    let mut refused = 0;
    let error = loop {
        match stream.next().await.expect("the stream does not just end") {
            Ok(TaskResultEvent::Refused(_)) => refused += 1,
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) => break e,
        }
    };
    assert_eq!(refused, MAX_SERVER_REQUESTS_PER_STREAM);
    assert!(
        matches!(&error, Error::InvalidResponse { reason, .. } if reason.contains("more than")),
        "{error:?}"
    );
    assert!(stream.next().await.is_none(), "nothing after the error");
}

#[tokio::test]
async fn an_answer_in_a_version_we_do_not_speak_ends_the_session() {
    let script: Script =
        Arc::new(|request, _| handshake(request, "2024-11-05").unwrap_or_else(Answer::accepted));
    let (url, log) = serve(script).await;
    let refused = LegacyClient::connect(Endpoint::new(&url), ClientOptions::default())
        .await
        .expect_err("2024-11-05 is not spoken");
    assert!(
        matches!(&refused, Error::UnsupportedVersion { supported, .. } if supported == &["2024-11-05"]),
        "{refused:?}"
    );
    assert!(
        log.lock()
            .expect("log")
            .iter()
            .any(|r| r.method == "DELETE"),
        "the session it opened is closed"
    );
}

#[tokio::test]
async fn an_older_version_the_server_prefers_is_accepted() {
    let script: Script =
        Arc::new(|request, _| handshake(request, "2025-06-18").unwrap_or_else(Answer::accepted));
    let (url, log) = serve(script).await;
    let client = legacy(&url).await;
    assert_eq!(client.session().protocol_version, "2025-06-18");
    assert_eq!(client.session().session_id.as_deref(), Some("s-1"));
    let log = log.lock().expect("log");
    let initialized = log
        .iter()
        .find(|r| rpc_method(r) == "notifications/initialized")
        .expect("initialized sent");
    assert_eq!(
        initialized
            .headers
            .get("mcp-protocol-version")
            .map(String::as_str),
        Some("2025-06-18")
    );
}

#[tokio::test]
async fn a_404_for_our_session_is_session_expired() {
    let script: Script = Arc::new(|request, _| {
        handshake(request, "2025-11-25").unwrap_or_else(|| {
            Answer::status(
                404,
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "Session not found"}}),
            )
        })
    });
    let (url, _log) = serve(script).await;
    let client = legacy(&url).await;
    let expired = client.get_task("t-1").await.expect_err("404");
    assert!(
        matches!(expired, Error::SessionExpired { status: 404, .. }),
        "{expired:?}"
    );
}

/// A modern `server/discover` result (rmcp 3.11's, from the wire captures).
fn discover_result(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete",
        "supportedVersions": ["2025-11-25", "2026-07-28"],
        "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}, "tools": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "peer-rmcp-tasks", "version": "3.11.0"}}}})
}

#[tokio::test]
async fn a_modern_server_is_detected_as_modern_without_initialize() {
    let script: Script = Arc::new(|request, _| Answer::json(discover_result(&request.body["id"])));
    let (url, log) = serve(script).await;
    let connection = era::connect(Endpoint::new(&url), ClientOptions::default())
        .await
        .expect("connects");
    assert_eq!(connection.era(), Era::Modern);
    let profile = connection.profile();
    assert_eq!(profile.protocol_version, "2026-07-28");
    assert_eq!(
        profile.server_info,
        Some(json!({"name": "peer-rmcp-tasks", "version": "3.11.0"}))
    );
    assert!(matches!(connection, Connection::Modern { .. }));
    assert!(log
        .lock()
        .expect("log")
        .iter()
        .all(|r| rpc_method(r) == "server/discover"));
}

#[tokio::test]
async fn a_non_modern_refusal_falls_back_to_initialize() {
    let script: Script = Arc::new(|request, _| {
        handshake(request, "2025-11-25").unwrap_or_else(|| {
            Answer::status(
                400,
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}}),
            )
        })
    });
    let (url, _log) = serve(script).await;
    let connection = era::connect(Endpoint::new(&url), ClientOptions::default())
        .await
        .expect("connects");
    assert_eq!(connection.era(), Era::Legacy);
    assert_eq!(connection.profile().protocol_version, "2025-11-25");
}

#[tokio::test]
async fn modern_errors_auth_and_outages_never_fall_back_to_initialize() {
    let cases: Vec<(&str, Script)> = vec![
        (
            "-32022 without a mutual version",
            Arc::new(|request: &Request, _: &[Request]| {
                Answer::status(
                    400,
                    json!({"jsonrpc": "2.0", "id": request.body["id"], "error": {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2099-01-01"], "requested": "2026-07-28"}}}),
                )
            }),
        ),
        (
            "401",
            Arc::new(|_: &Request, _: &[Request]| {
                let mut answer = Answer::status(401, json!({}));
                answer.headers.push(("www-authenticate", "Bearer".into()));
                answer
            }),
        ),
        (
            "503",
            Arc::new(|_: &Request, _: &[Request]| Answer::status(503, json!({}))),
        ),
    ];
    for (what, script) in cases {
        let (url, log) = serve(script).await;
        let error = era::connect(Endpoint::new(&url), ClientOptions::default())
            .await
            .expect_err(what);
        match what {
            "401" => assert!(
                matches!(error, Error::Unauthorized { status: 401, .. }),
                "{error:?}"
            ),
            "503" => assert!(
                matches!(error, Error::Http { status: 503, .. }),
                "{error:?}"
            ),
            _ => assert!(
                matches!(error, Error::UnsupportedVersion { .. }),
                "{error:?}"
            ),
        }
        assert!(
            log.lock()
                .expect("log")
                .iter()
                .all(|r| rpc_method(r) != "initialize"),
            "{what}: no fallback to initialize"
        );
    }
}

#[tokio::test]
async fn a_server_that_changes_the_session_id_is_refused() {
    let script: Script = Arc::new(|request, _| {
        handshake(request, "2025-11-25").unwrap_or_else(|| {
            let mut answer = Answer::json(
                json!({"jsonrpc": "2.0", "id": request.body["id"], "result": {"tasks": []}}),
            );
            answer.headers.push(("mcp-session-id", "s-2".into()));
            answer
        })
    });
    let (url, _log) = serve(script).await;
    let client = legacy(&url).await;
    let refused = client
        .list_tasks(None)
        .await
        .expect_err("another session id");
    assert!(
        matches!(&refused, Error::InvalidResponse { reason, .. } if reason.contains("Mcp-Session-Id")),
        "{refused:?}"
    );
    assert_eq!(
        client.session().session_id.as_deref(),
        Some("s-1"),
        "ours is kept"
    );
}

#[tokio::test]
async fn an_unconnected_client_repeats_the_handshake_with_the_token_a_sign_in_gave_it() {
    let script: Script = Arc::new(|request, _| {
        if request.headers.get("authorization").map(String::as_str) != Some("Bearer t-1") {
            let mut refused = Answer::status(401, json!({"error": "invalid_token"}));
            refused.headers.push((
                "www-authenticate",
                r#"Bearer resource_metadata="http://127.0.0.1/prm""#.into(),
            ));
            return refused;
        }
        handshake(request, "2025-11-25")
            .unwrap_or_else(|| Answer::status(500, json!({"unexpected": rpc_method(request)})))
    });
    let (url, log) = serve(script).await;
    let client =
        LegacyClient::unconnected(Endpoint::new(&url), ClientOptions::default()).expect("client");
    assert!(log.lock().expect("log").is_empty(), "made without sending");

    let refused = client.initialize().await.expect_err("401 without a token");
    let Error::Unauthorized {
        status: 401,
        www_authenticate: Some(challenge),
        ..
    } = refused
    else {
        panic!("expected a typed 401 with its challenge, got {refused:?}");
    };
    assert!(challenge.contains("resource_metadata"));
    assert_eq!(
        client.session().session_id,
        None,
        "no session from a refusal"
    );

    client.set_bearer_token(Some(countersign_mcp::sensitive::Sensitive::new(
        "t-1".to_owned(),
    )));
    client
        .initialize()
        .await
        .expect("initialize with the token");
    let session = client.session();
    assert_eq!(session.session_id.as_deref(), Some("s-1"));
    assert_eq!(session.protocol_version, "2025-11-25");
    let methods: Vec<String> = log
        .lock()
        .expect("log")
        .iter()
        .map(|r| rpc_method(r).to_owned())
        .collect();
    assert_eq!(
        methods,
        ["initialize", "initialize", "notifications/initialized"]
    );
}
