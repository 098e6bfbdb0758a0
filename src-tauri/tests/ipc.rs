//! The IPC surface, in process (no display): the real config and capabilities, our commands,
//! and the error shape the UI branches on.

use countersign_desktop::console::{Console, Seed, Standalone};
use countersign_desktop::ipc::{InputKind, InputRequestView};
use serde_json::{json, Value};
use std::sync::Arc;
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{get_ipc_response, mock_builder, MockRuntime, INVOKE_KEY};
use tauri::webview::InvokeRequest;
use tauri::{App, WebviewWindow, WebviewWindowBuilder};

fn input(key: &str) -> InputRequestView {
    InputRequestView {
        key: key.into(),
        task_id: Some("t1".into()),
        server_id: "fastmcp".into(),
        server_name: "peer-fastmcp-tasks".into(),
        tool_name: "deploy".into(),
        received_at: "2026-12-02T09:36:04Z".into(),
        request: InputKind::Form {
            message: "Approve deployment of 'billing-api'?".into(),
            requested_schema: json!({"type":"object","properties":{"approve":{"type":"boolean"}},"required":["approve"]}),
        },
    }
}

fn app(console: Arc<Standalone>) -> (App<MockRuntime>, WebviewWindow<MockRuntime>) {
    let app = countersign_desktop::builder(mock_builder(), console)
        .build(tauri::generate_context!("../tauri.conf.json", test = true))
        .expect("app builds with the real config and capabilities");
    let window = WebviewWindowBuilder::new(&app, "main", Default::default())
        .build()
        .expect("main window");
    (app, window)
}

fn invoke(window: &WebviewWindow<MockRuntime>, cmd: &str, body: Value) -> Result<Value, Value> {
    get_ipc_response(
        window,
        InvokeRequest {
            cmd: cmd.into(),
            callback: CallbackFn(0),
            error: CallbackFn(1),
            url: "tauri://localhost".parse().expect("url"),
            body: InvokeBody::Json(body),
            headers: Default::default(),
            invoke_key: INVOKE_KEY.to_string(),
        },
    )
    .map(|b| b.deserialize::<Value>().expect("json response"))
}

fn seeded() -> Arc<Standalone> {
    let console = Arc::new(Standalone::new(|| "2026-12-02T10:00:00Z".to_owned()));
    console
        .seed(Seed {
            inputs: vec![input("k1"), input("k2")],
            ..Seed::default()
        })
        .expect("seed");
    console
}

#[test]
fn lists_and_answers_inputs_over_ipc() {
    let (_app, w) = app(seeded());
    let list = invoke(&w, "input_list", json!({})).expect("input_list");
    assert_eq!(list.as_array().map(Vec::len), Some(2));
    assert_eq!(
        list[0]["request"]["mode"], "form",
        "camelCase wire shape with a mode tag"
    );
    assert_eq!(list[0]["serverName"], "peer-fastmcp-tasks");

    let ok = invoke(
        &w,
        "input_answer",
        json!({"request": {"key": "k1", "response": {"action": "accept", "content": {"approve": true}}}}),
    );
    assert_eq!(ok, Ok(Value::Null));
    let again = invoke(
        &w,
        "input_answer",
        json!({"request": {"key": "k1", "response": {"action": "decline"}}}),
    );
    assert_eq!(
        again.expect_err("second answer")["code"],
        "already_answered",
        "errors cross as {{code, message}}"
    );
    assert_eq!(
        invoke(&w, "input_list", json!({})).expect("list")[0]["key"],
        "k2"
    );
}

#[test]
fn app_info_reports_engine_and_pending_count() {
    let (_app, w) = app(seeded());
    let info = invoke(&w, "app_info", json!({})).expect("app_info");
    assert_eq!(info["engine"], "standalone");
    assert_eq!(info["shell"]["pending"], 2);
    let dnd = invoke(&w, "notify_dnd_set", json!({"request": {"enabled": true}})).expect("dnd");
    assert_eq!(dnd["dnd"], true);
}

#[test]
fn calls_that_need_a_server_say_unavailable_until_the_engine_is_wired() {
    let (_app, w) = app(seeded());
    let err = invoke(&w, "tool_list", json!({"request": {"serverId": "fastmcp"}}))
        .expect_err("no engine");
    assert_eq!(err["code"], "unavailable");
}

#[test]
fn url_open_refuses_non_http_schemes() {
    let (_app, w) = app(seeded());
    let err = invoke(
        &w,
        "url_open",
        json!({"request": {"url": "file:///etc/passwd"}}),
    )
    .expect_err("refused");
    assert_eq!(err["code"], "invalid_input");
}

#[test]
fn the_webview_cannot_reach_core_apis_outside_its_capability() {
    let (_app, w) = app(seeded());
    for cmd in [
        "plugin:window|close",
        "plugin:webview|create_webview_window",
        "plugin:path|resolve_directory",
        "plugin:event|emit",
    ] {
        let denied = invoke(&w, cmd, json!({}));
        let message = denied.expect_err("denied").to_string();
        assert!(
            message.contains("not allowed"),
            "{cmd} must be denied by capabilities/main.json, got {message}"
        );
    }
    assert!(
        invoke(
            &w,
            "plugin:event|listen",
            json!({"event": "input_requested", "target": {"kind": "Any"}, "handler": 3})
        )
        .is_ok(),
        "listening is granted"
    );
}

#[test]
fn seed_files_use_the_ipc_shapes() {
    let seed = Standalone::read_seed(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/e2e/seed.json"),
    )
    .expect("seed parses");
    assert!(seed.inputs.len() >= 3 && !seed.tasks.is_empty() && !seed.servers.is_empty());
    let console = Standalone::new(String::new);
    console.seed(seed).expect("seeded");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("rt");
    assert!(rt.block_on(console.input_list()).expect("list").len() >= 3);
}
