//! The IPC surface, in process (no display): the real config and capabilities, our commands over
//! the real console (a ledger in a temp dir, the engine running) against the built-in demo
//! server on 127.0.0.1, and the error shape the UI branches on.

use countersign_core::console::gateway::{AgentCall, Gate, PolicyInput};
use countersign_core::console::view::{AuditAction, ServerAddRequest};
use countersign_core::console::{Console, Setup, Start};
use countersign_core::ledger::gated::{GatedMode, GatedRecord};
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::secrets::Secrets;
use countersign_core::sensitive::Sensitive;
use countersign_demo::{DemoConfig, DemoServer};
use countersign_desktop::{ipc, Launch, Shell};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tauri::async_runtime::block_on;
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{get_ipc_response, mock_builder, MockRuntime, INVOKE_KEY};
use tauri::webview::InvokeRequest;
use tauri::{App, WebviewWindow, WebviewWindowBuilder};

struct Fixture {
    _app: App<MockRuntime>,
    window: WebviewWindow<MockRuntime>,
    dir: PathBuf,
    demo: Option<DemoServer>,
    resident: Resident,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(demo) = self.demo.take() {
            block_on(demo.shutdown());
        }
        self.resident.end();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fixture {
    /// The console behind the window's commands.
    fn console(&self) -> Arc<Console> {
        use tauri::Manager as _;
        Arc::clone(&self._app.state::<Shell>().console)
    }
}

/// A call as the gateway holds it when no rule allows it: the agent `ci-bot` (its token, shown
/// once) calls `tool` with `arguments` in task mode on the server added as `server`, and the
/// call waits for a person.
struct Held {
    token: Sensitive<String>,
    server: ServerRecord,
    record: GatedRecord,
}

fn held_call(
    console: &Console,
    server: ServerAddRequest,
    tool: &str,
    arguments: &Map<String, Value>,
) -> Held {
    let (_agent, token) = block_on(console.add_agent("ci-bot")).expect("an agent");
    let agent = block_on(console.authenticate_agent(token.expose()))
        .expect("the ledger answers")
        .expect("its token authenticates it");
    let server = block_on(console.add_server(server)).expect("a server");
    let held = block_on(console.gate(
        AgentCall {
            agent: &agent,
            server: &server,
            tool,
            arguments,
            mode: GatedMode::Task,
            tool_info: None,
        },
        &PolicyInput {
            rules: Vec::new(),
            allow_read_only: false,
        },
    ))
    .expect("the call is recorded");
    let Gate::Held(record) = held else {
        panic!("with no rule the call waits for a person, got {held:?}")
    };
    Held {
        token,
        server,
        record,
    }
}

/// `gated_decide`'s request: a person's decision on the call `task_id`, without a reason.
fn decide_request(task_id: &str, approve: bool, always_allow: bool) -> Value {
    json!({"request": {"taskId": task_id, "decision": {"approve": approve, "reason": null, "always_allow": always_allow}}})
}

/// `gated_answer`'s request: `response` to the question `key` of the call `task_id`.
fn answer_request(task_id: &str, key: &str, response: Value) -> Value {
    json!({"request": {"taskId": task_id, "answers": [{"key": key, "response": response}]}})
}

/// The real resident (`countersign-resident`, built beside these tests) on the fixture's data
/// directory: it runs the engine and applies do-not-disturb and the settings, as in the app.
/// It opens no window here (`COUNTERSIGN_DESKTOP=/bin/false`).
struct Resident {
    child: std::process::Child,
    pid: u32,
}

impl Resident {
    fn start(dir: &std::path::Path) -> Self {
        Self::start_with(dir, &[("COUNTERSIGN_DESKTOP", "/bin/false".as_ref())])
    }

    /// [`Resident::start`] with `env` (its window executable, say).
    fn start_with(dir: &std::path::Path, env: &[(&str, &std::ffi::OsStr)]) -> Self {
        let exe = std::env::current_exe()
            .ok()
            .and_then(|t| Some(t.parent()?.parent()?.join("countersign-resident")))
            .filter(|p| p.exists())
            .expect(
                "target/debug/countersign-resident: `cargo build -p countersign-resident` first",
            );
        let child = std::process::Command::new(exe)
            .arg("--data-dir")
            .arg(dir)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("the resident starts");
        let pid = child.id();
        until("the resident answers", Duration::from_secs(30), || {
            block_on(countersign_desktop_ipc::running(dir)).then_some(Value::Null)
        });
        Self { child, pid }
    }

    fn end(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "countersign-ipc-{name}-{}-{nanos}",
        std::process::id()
    ))
}

/// A keyring service no real entry uses (these tests never store a token).
fn setup(dir: &std::path::Path) -> Setup {
    let mut setup = Setup::new(dir);
    setup.secrets = Secrets::new(format!("dev.countersign.test.ipc.{}", std::process::id()));
    setup.start = Start::Now;
    setup
}

fn app_on(dir: PathBuf, demo: Option<DemoServer>) -> Fixture {
    app_on_with(dir, demo, |shell| shell)
}

/// [`app_on`], with the shell made by `shell` (e.g. one that restarts its resident).
fn app_on_with(
    dir: PathBuf,
    demo: Option<DemoServer>,
    shell: impl FnOnce(Shell) -> Shell,
) -> Fixture {
    let resident = Resident::start(&dir);
    // As the window opens it: the engine is the resident's.
    let mut window_setup = setup(&dir);
    window_setup.start = Start::WhenNeeded;
    let console = block_on(Console::open(window_setup)).expect("console opens the ledger");
    let shell = shell(Shell::new(Arc::new(console), Launch::now()));
    let app = countersign_desktop::builder(mock_builder(), shell)
        .build(tauri::generate_context!("tauri.conf.json", test = true))
        .expect("app builds with the real config and capabilities");
    let window = WebviewWindowBuilder::new(&app, "main", Default::default())
        .build()
        .expect("main window");
    Fixture {
        _app: app,
        window,
        dir,
        demo,
        resident,
    }
}

fn app(name: &str) -> Fixture {
    app_on(scratch_dir(name), None)
}

/// With the demo server running 100x faster than real time.
fn app_with_demo(name: &str) -> (Fixture, String) {
    let demo = block_on(DemoServer::start(
        ([127, 0, 0, 1], 0).into(),
        DemoConfig {
            time_scale: 0.01,
            poll_interval_ms: 50,
            ..DemoConfig::default()
        },
    ))
    .expect("demo server on 127.0.0.1");
    let url = demo.url();
    (app_on(scratch_dir(name), Some(demo)), url)
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

fn until(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<Value>) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_question_from_a_real_server_is_answered_once_and_the_task_completes() {
    let (fx, url) = app_with_demo("answer");
    let w = &fx.window;
    let server = invoke(
        w,
        "server_add",
        json!({"request": {"name": "demo", "url": url, "discover": true}}),
    )
    .expect("server_add");
    assert_eq!(
        server["identity"]
            .as_str()
            .map(|s| s.starts_with("countersign")),
        Some(true)
    );
    assert_eq!(server["supportsTasks"], true);
    assert_eq!(server["health"]["state"], "reachable");
    let id = server["id"].clone();

    let tools = invoke(w, "tool_list", json!({"request": {"serverId": id}})).expect("tool_list");
    assert!(tools
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"] == "deploy_service")));

    let outcome = invoke(
        w,
        "tool_call",
        json!({"request": {"serverId": id, "name": "deploy_service",
            "arguments": {"service": "billing-api", "environment": "staging"}}}),
    )
    .expect("tool_call");
    assert_eq!(outcome["kind"], "task", "deploy_service runs as a task");
    let row = outcome["task"]["row"].clone();

    let inbox = until("the approval question", Duration::from_secs(20), || {
        let list = invoke(w, "input_list", json!({})).ok()?;
        (list.as_array()?.len() == 1).then_some(list)
    });
    let q = &inbox[0];
    assert_eq!(q["taskRow"], row);
    assert_eq!(q["serverName"], "demo");
    assert_eq!(q["toolName"], "deploy_service");
    assert_eq!(q["request"]["mode"], "form");
    assert!(
        q["expiresAtMs"].as_i64().is_some(),
        "the demo's tasks have a TTL"
    );

    let answer = json!({"request": {"taskRow": row, "key": q["key"],
        "response": {"action": "accept", "content": {"approve": true, "reason": "ipc test"}}}});
    assert_eq!(invoke(w, "input_answer", answer.clone()), Ok(Value::Null));
    assert_eq!(
        invoke(w, "input_answer", answer).expect_err("second answer")["code"],
        "already_answered",
        "errors cross as {{code, message}} and a question is answered once"
    );

    let detail = until("the task to complete", Duration::from_secs(30), || {
        let d = invoke(w, "task_get", json!({"request": {"row": row}})).ok()?;
        (d["task"]["status"] == "completed").then_some(d)
    });
    let kinds: Vec<&str> = detail["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["fact"]["kind"].as_str())
        .collect();
    for step in [
        "task_created",
        "task_updated",
        "input_requested",
        "input_answered",
        "update_acknowledged",
        "task_finished",
    ] {
        assert!(kinds.contains(&step), "timeline lacks {step}: {kinds:?}");
    }
    assert_eq!(detail["inputs"][0]["state"], "delivered");
    assert!(
        detail["result"]["content"].is_array(),
        "the result is shown verbatim"
    );
    assert_eq!(detail["arguments"]["service"], "billing-api");

    let audit = invoke(w, "audit_list", json!({})).expect("audit_list");
    let answered = audit
        .as_array()
        .and_then(|a| a.iter().find(|e| e["action"] == "answer_accept"))
        .expect("the answer is audited");
    assert_eq!(answered["answer"]["content"]["reason"], "ipc test");
    assert!(answered["question"]
        .as_str()
        .is_some_and(|q| q.contains("billing-api")));
    assert!(answered["waitedMs"].as_i64().is_some());
}

#[test]
fn errors_cross_as_code_and_message() {
    let fx = app("errors");
    let missing =
        invoke(&fx.window, "task_get", json!({"request": {"row": 999}})).expect_err("no such task");
    assert_eq!(missing["code"], "not_found");
    assert!(missing["message"].is_string());
    let bad = invoke(
        &fx.window,
        "server_add",
        json!({"request": {"name": "x", "url": "file:///etc/passwd", "discover": false}}),
    )
    .expect_err("not an http URL");
    assert_eq!(bad["code"], "invalid_input");
    let down = invoke(
        &fx.window,
        "server_add",
        json!({"request": {"name": "x", "url": "http://127.0.0.1:9/mcp", "discover": true}}),
    )
    .expect_err("nothing listens on port 9");
    assert_eq!(
        down["code"], "unavailable",
        "the UI offers to add it anyway"
    );
}

#[test]
fn app_info_names_the_residents_engine_and_a_second_console_defers_to_it() {
    let fx = app("engine");
    let info = invoke(&fx.window, "app_info", json!({})).expect("app_info");
    assert_eq!(
        info["engine"]["state"], "running",
        "the resident's engine is the app's: {info}"
    );
    assert_eq!(info["shell"]["pending"], 0);
    let dnd = invoke(
        &fx.window,
        "notify_dnd_set",
        json!({"request": {"enabled": true}}),
    )
    .expect("dnd");
    assert_eq!(dnd["dnd"], true);

    let second = block_on(Console::open(setup(&fx.dir))).expect("opens the same ledger");
    assert_eq!(
        second.engine_state(),
        Some(ipc::EngineState::Elsewhere {
            pid: Some(fx.resident.pid)
        }),
        "one engine per ledger, the resident's: another console shows the ledger without polling"
    );
}

#[test]
fn url_open_refuses_non_http_schemes() {
    let fx = app("url");
    let err = invoke(
        &fx.window,
        "url_open",
        json!({"request": {"url": "file:///etc/passwd"}}),
    )
    .expect_err("refused");
    assert_eq!(err["code"], "invalid_input");
}

#[test]
fn every_command_is_registered_granted_and_built() {
    let fx = app("contract");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let caps = std::fs::read_to_string(root.join("src-tauri/capabilities/main.json"))
        .expect("capabilities");
    let build = std::fs::read_to_string(root.join("src-tauri/build.rs")).expect("build.rs");
    for cmd in ipc::COMMANDS {
        let grant = format!("\"allow-{}\"", cmd.replace('_', "-"));
        assert!(
            caps.contains(&grant),
            "capabilities/main.json must grant {grant}"
        );
        assert!(
            build.contains(&format!("\"{cmd}\"")),
            "build.rs must list {cmd}"
        );
        // A malformed request must fail on its arguments, not on an unknown command.
        if let Err(e) = invoke(&fx.window, cmd, json!({"request": "not an object"})) {
            let text = e.to_string();
            assert!(
                !text.contains("not found") && !text.contains("not allowed"),
                "{cmd} is not wired: {text}"
            );
        }
    }
}

#[test]
fn the_webview_cannot_reach_core_apis_outside_its_capability() {
    let fx = app("acl");
    for cmd in [
        "plugin:window|close",
        "plugin:webview|create_webview_window",
        "plugin:path|resolve_directory",
        "plugin:event|emit",
    ] {
        let denied = invoke(&fx.window, cmd, json!({}));
        let message = denied.expect_err("denied").to_string();
        assert!(
            message.contains("not allowed"),
            "{cmd} must be denied by capabilities/main.json, got {message}"
        );
    }
    assert!(
        invoke(
            &fx.window,
            "plugin:event|listen",
            json!({"event": "inbox_changed", "target": {"kind": "Any"}, "handler": 3})
        )
        .is_ok(),
        "listening is granted"
    );
}

#[test]
fn a_server_check_that_waits_is_stopped_by_cancel_and_adds_nothing() {
    let fx = app("cancel-check");
    // Connections are accepted by the kernel (the backlog) and never answered: without a cancel
    // the check would wait for the client's 30 s time-out.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let url = format!("http://{}/mcp", silent.local_addr().expect("address"));
    let window = fx.window.clone();
    let adding = std::thread::spawn(move || {
        invoke(
            &window,
            "server_add",
            json!({"request": {"name": "silent", "url": url, "discover": true}}),
        )
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    // Cancel until the add ends: a cancel sent before the check began waiting stops nothing.
    while !adding.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the check was not stopped by server_check_cancel"
        );
        invoke(&fx.window, "server_check_cancel", json!({})).expect("server_check_cancel");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stopped = adding
        .join()
        .expect("the add's thread")
        .expect_err("a stopped add fails");
    assert_eq!(stopped["code"], "cancelled", "{stopped}");
    let servers = invoke(&fx.window, "server_list", json!({})).expect("server_list");
    assert_eq!(servers, json!([]), "nothing was added");
    drop(silent);
}

#[test]
fn the_demo_server_starts_with_one_click_once_and_its_example_tasks_begin() {
    let fx = app("try-demo");
    let first = invoke(&fx.window, "demo_start", json!({})).expect("demo_start");
    assert_eq!(first["name"], "demo");
    let again = invoke(&fx.window, "demo_start", json!({})).expect("demo_start again");
    assert_eq!(
        again["id"], first["id"],
        "a second click returns the same server"
    );
    let info = invoke(&fx.window, "app_info", json!({})).expect("app_info");
    assert_eq!(
        info["demoUrl"], first["url"],
        "the app knows its demo server"
    );
    let tasks = until(
        "the demo's two example tasks",
        Duration::from_secs(20),
        || {
            let tasks = invoke(&fx.window, "task_list", json!({"request": {}})).ok()?;
            (tasks.as_array()?.len() == 2).then_some(tasks)
        },
    );
    let tools: Vec<&str> = tasks
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["toolName"].as_str())
        .collect();
    assert!(
        tools.contains(&"deploy_service") && tools.contains(&"run_ci_pipeline"),
        "{tasks}"
    );
}

#[test]
fn an_agents_held_call_is_approved_from_the_window_and_the_agents_view_shows_removes_and_revokes() {
    use countersign_core::console::view::RuleAction;

    let fx = app("gated");
    let console = fx.console();
    let arguments = json!({"service": "billing", "environment": "production"});
    let arguments = arguments.as_object().expect("an object").clone();
    // What the gateway does with an agent's tools/call when no rule allows it: hold it.
    let Held { token, record, .. } = held_call(
        &console,
        ServerAddRequest {
            name: "deploys".into(),
            url: "http://127.0.0.1:9/mcp".into(),
            token: None,
            discover: false,
        },
        "deploy_service",
        &arguments,
    );

    let listed = invoke(&fx.window, "gated_list", json!({})).expect("gated_list");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["task_id"], record.task_id);
    assert_eq!(listed[0]["agent"], "ci-bot");
    assert_eq!(
        listed[0]["arguments"]["environment"], "production",
        "the exact arguments reach the window"
    );
    let info = invoke(&fx.window, "app_info", json!({})).expect("app_info");
    assert_eq!(
        info["shell"]["pending"], 1,
        "a held call counts as waiting (the title, as the tray)"
    );
    let decided = invoke(
        &fx.window,
        "gated_decide",
        decide_request(&record.task_id, true, true),
    )
    .expect("gated_decide");
    assert_eq!(decided["state"], "approved", "{decided}");
    let again = invoke(
        &fx.window,
        "gated_decide",
        decide_request(&record.task_id, false, false),
    )
    .expect_err("a call is decided once");
    assert_eq!(again["code"], "already_answered", "{again}");
    let listed = invoke(&fx.window, "gated_list", json!({})).expect("gated_list");
    assert_eq!(listed, json!([]), "nothing waits any more");
    let info = invoke(&fx.window, "app_info", json!({})).expect("app_info");
    assert_eq!(
        info["shell"]["pending"], 0,
        "a decided call no longer counts"
    );
    // The call's timeline, from the ledger: asked, then approved (by this person).
    let timeline = invoke(
        &fx.window,
        "gated_timeline",
        json!({"request": {"taskId": record.task_id}}),
    )
    .expect("gated_timeline");
    assert_eq!(timeline["call"]["state"], "approved", "{timeline}");
    let states: Vec<&str> = timeline["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["fact"]["state"].as_str())
        .collect();
    assert_eq!(states, ["pending", "approved"], "{timeline}");
    let missing = invoke(
        &fx.window,
        "gated_timeline",
        json!({"request": {"taskId": "csg-nope"}}),
    )
    .expect_err("no such call");
    assert_eq!(missing["code"], "not_found", "{missing}");
    let rules = block_on(console.rules()).expect("rules");
    assert!(
        rules.iter().any(|r| r.agent.as_deref() == Some("ci-bot")
            && r.tool == "deploy_service"
            && r.action == RuleAction::Allow),
        "Always allow created a visible rule: {rules:?}"
    );

    // The Agents view: the agent, that rule and the call with its decision; then remove the rule
    // and revoke the agent from the window.
    let page = invoke(&fx.window, "agents_get", json!({})).expect("agents_get");
    assert_eq!(page["agents"][0]["name"], "ci-bot", "{page}");
    assert_eq!(page["agents"][0]["revoked_at"], Value::Null);
    assert_eq!(page["rules"][0]["tool"], "deploy_service");
    assert_eq!(page["calls"][0]["state"], "approved");
    assert!(
        !page.to_string().contains(token.expose().as_str()),
        "no token crosses IPC"
    );
    let rule = page["rules"][0]["id"].clone();
    invoke(&fx.window, "rule_remove", json!({"request": {"id": rule}})).expect("rule_remove");
    let revoked = invoke(
        &fx.window,
        "agent_remove",
        json!({"request": {"name": "ci-bot"}}),
    )
    .expect("agent_remove");
    assert!(revoked["revoked_at"].is_number(), "{revoked}");
    let page = invoke(&fx.window, "agents_get", json!({})).expect("agents_get");
    assert_eq!(page["rules"], json!([]), "the rule is gone");
    assert!(
        block_on(console.authenticate_agent(token.expose()))
            .expect("the ledger answers")
            .is_none(),
        "a revoked token no longer authenticates"
    );
}

#[test]
fn an_approved_calls_upstream_questions_are_listed_and_answered_from_the_window_once() {
    use countersign_core::console::gateway::Claim;

    let (fx, url) = app_with_demo("gated-questions");
    let console = fx.console();
    // What the gateway does: hold the agent's call, and once a person approved it, claim it and
    // send it upstream; the demo's test_tool_with_task answers with an MRTR question first.
    let Held { server, record, .. } = held_call(
        &console,
        ServerAddRequest {
            name: "demo".into(),
            url,
            token: None,
            discover: false,
        },
        "test_tool_with_task",
        &Map::new(),
    );
    invoke(
        &fx.window,
        "gated_decide",
        decide_request(&record.task_id, true, false),
    )
    .expect("gated_decide");
    let Claim::Run(running) = block_on(console.claim_gated(record.id)).expect("claim") else {
        panic!("an approved call is ours to send");
    };
    let client = block_on(console.client(&server)).expect("a client for the demo");
    let asked = block_on(console.run_gated(&running, &client)).expect("sent upstream");
    assert!(
        asked.questions.is_some(),
        "the upstream asked first: {asked:?}"
    );

    let listed = invoke(&fx.window, "gated_questions_list", json!({})).expect("list");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let entry = &listed[0];
    assert_eq!(entry["call"]["task_id"], record.task_id, "{entry}");
    assert_eq!(entry["call"]["agent"], "ci-bot");
    assert_eq!(entry["call"]["server"], "demo");
    assert_eq!(entry["call"]["tool"], "test_tool_with_task");
    assert_eq!(
        entry["call"]["state"], "running",
        "approved, nothing ran yet"
    );
    assert_eq!(entry["round"], 1);
    assert_eq!(entry["questions"][0]["key"], "user_name", "{entry}");
    assert_eq!(entry["questions"][0]["request"]["mode"], "form", "{entry}");
    assert_eq!(
        entry["questions"][0]["request"]["message"],
        "What is your name?"
    );
    assert!(
        entry["questions"][0]["request"]["requestedSchema"]["properties"]["name"].is_object(),
        "the schema the inbox's form is built from: {entry}"
    );

    let wrong = invoke(
        &fx.window,
        "gated_answer",
        answer_request(
            &record.task_id,
            "someone_else",
            json!({"action": "decline"}),
        ),
    )
    .expect_err("only the keys asked are answered");
    assert_eq!(wrong["code"], "invalid_input", "{wrong}");
    let answered = invoke(
        &fx.window,
        "gated_answer",
        answer_request(
            &record.task_id,
            "user_name",
            json!({"action": "accept", "content": {"name": "Ada"}}),
        ),
    )
    .expect("gated_answer");
    assert_eq!(answered["task_id"], record.task_id, "{answered}");
    let again = invoke(
        &fx.window,
        "gated_answer",
        answer_request(&record.task_id, "user_name", json!({"action": "decline"})),
    )
    .expect_err("questions are answered once");
    assert_eq!(again["code"], "already_answered", "{again}");
    let listed = invoke(&fx.window, "gated_questions_list", json!({})).expect("list");
    assert_eq!(listed, json!([]), "nothing asks any more");
    let audit = block_on(console.audit()).expect("audit");
    assert!(
        audit
            .iter()
            .any(|a| a.action == AuditAction::GatedCallAnswer),
        "the answer is audited: {audit:?}"
    );

    // What the gateway's sender does next: the same call, with the window's answer, upstream.
    let call = block_on(console.gated_call(&record.task_id)).expect("the call");
    let sent = block_on(console.resend_gated(&call, &client))
        .expect("sent again")
        .expect("the answered round is ours to send");
    let row = sent
        .upstream_task
        .expect("the answered round started a task");
    let done = until(
        "the greeting task completes",
        Duration::from_secs(20),
        || {
            let task = invoke(&fx.window, "task_get", json!({"request": {"row": row}})).ok()?;
            (task["task"]["status"] == "completed").then_some(task)
        },
    );
    assert!(
        done.to_string().contains("Hello, Ada!"),
        "the answer given in the window reached the upstream: {done}"
    );
}

/// `HH:MM`, `minutes` from now in local time (wrapping past midnight).
fn local_hhmm(minutes: i64) -> String {
    (chrono::Local::now() + chrono::Duration::minutes(minutes))
        .format("%H:%M")
        .to_string()
}

#[test]
fn the_settings_page_saves_applies_and_refuses_a_bad_value_at_its_field() {
    let fx = app("settings");
    let w = &fx.window;
    let page = invoke(w, "settings_get", Value::Null).expect("settings_get");
    assert_eq!(page["settings"]["pollFloorMs"], json!(250), "{page}");
    assert_eq!(
        page["settings"]["startAtLogin"],
        json!(false),
        "off by default"
    );
    assert_eq!(page["dataDir"], json!(fx.dir.display().to_string()));
    assert_eq!(page["dndActive"], json!(false));
    assert!(page.get("gatewayUrl").is_none(), "no gateway by default");

    // A mistake: typed, at its field, and nothing is saved.
    let mut bad = page["settings"].clone();
    bad["pollFloorMs"] = json!(100);
    let refused = invoke(w, "settings_set", json!({ "request": bad })).expect_err("refused");
    assert_eq!(refused["code"], json!("invalid_input"), "{refused}");
    assert_eq!(refused["field"], json!("poll_floor_ms"), "{refused}");

    // A schedule around now holds notifications; the gateway starts on a free port.
    let mut wanted = page["settings"].clone();
    wanted["dnd"] = json!({
        "enabled": true, "from": local_hhmm(-60), "to": local_hhmm(60),
        "days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
    });
    wanted["pollFloorMs"] = json!(1000);
    wanted["gateway"] = json!({ "enabled": true, "port": 0 });
    let page = invoke(w, "settings_set", json!({ "request": wanted })).expect("settings_set");
    assert_eq!(
        page["dndActive"],
        json!(true),
        "the schedule holds now: {page}"
    );
    assert_eq!(page["settings"]["pollFloorMs"], json!(1000));
    let url = page["gatewayUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("the gateway runs once enabled: {page}"))
        .to_owned();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp/")
        .to_owned();
    assert!(
        std::net::TcpStream::connect(&addr).is_ok(),
        "the gateway listens on {addr}"
    );
    let info = invoke(w, "app_info", Value::Null).expect("app_info");
    assert_eq!(info["shell"]["dndScheduled"], json!(true), "{info}");

    // Turned off again, live.
    let mut off = page["settings"].clone();
    off["gateway"] = json!({ "enabled": false, "port": 0 });
    off["dnd"]["enabled"] = json!(false);
    let page = invoke(w, "settings_set", json!({ "request": off })).expect("settings_set");
    assert!(page.get("gatewayUrl").is_none(), "{page}");
    assert_eq!(page["dndActive"], json!(false));
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "the gateway stopped listening on {addr}"
    );
    let again = invoke(w, "settings_get", Value::Null).expect("settings_get");
    assert_eq!(
        again["settings"]["pollFloorMs"],
        json!(1000),
        "saved in the ledger"
    );
}

/// The fastmcp peer behind fastmcp's own OAuth provider, as a process (the interop peer of
/// `tests/peers`; `COUNTERSIGN_PEER_PYTHON` is its venv's python, `.ci/setup-peer.sh`).
struct OAuthPeer {
    child: std::process::Child,
    url: String,
}

impl Drop for OAuthPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn oauth_peer() -> OAuthPeer {
    use std::io::BufRead;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("COUNTERSIGN_PEER_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".ci/venv/bin/python"));
    let script = root.join("tests/peers/fastmcp_server.py");
    let mut child = std::process::Command::new(python)
        .arg(script)
        .args(["--port", "0"])
        .env("PEER_OAUTH", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the fastmcp peer starts");
    let stdout = child.stdout.take().expect("its stdout");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the peer announces its URL");
    let url = line.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "peer said {url:?}");
    OAuthPeer { child, url }
}

/// An OAuth-protected server through the window's commands: adding it leaves it "sign-in
/// needed" without opening anything; `server_sign_in_plan` says where the sign-in leads (the
/// authorization server's host), for which scopes, as which client; once signed in (the
/// browser step played by a client that follows the authorization URL), `server_list` shows
/// until when the token lives and that it renews; sign-out keeps the client. And no payload
/// that crosses IPC (add, plan, list, sign-out) carries the access token, the refresh token or
/// the client secret kept in the keyring.
#[test]
#[ignore = "needs an unlocked Secret Service and the fastmcp peer: run inside .ci/with-session.sh with --ignored"]
fn oauth_sign_in_shows_where_and_until_when_and_no_ipc_payload_carries_a_token() {
    use countersign_core::auth::{follow_without_browser, Credentials};
    use countersign_core::console::SignInClient;

    let peer = oauth_peer();
    let dir = scratch_dir("oauth");
    let f = app_on(dir.clone(), None);
    let mut payloads = Vec::new();

    let added = invoke(
        &f.window,
        "server_add",
        json!({"request": {"name": "p", "url": peer.url, "discover": true}}),
    )
    .expect("added");
    assert_eq!(added["health"]["state"], "sign_in_needed", "{added}");
    assert_eq!(added["signedIn"], false);
    let id = added["id"].as_i64().expect("id");
    payloads.push(added);

    let plan = invoke(
        &f.window,
        "server_sign_in_plan",
        json!({"request": {"serverId": id}}),
    )
    .expect("a plan");
    let origin = peer
        .url
        .trim_end_matches("/mcp")
        .trim_start_matches("http://");
    assert_eq!(
        plan["host"], origin,
        "the authorization server is the peer's origin: {plan}"
    );
    assert_eq!(plan["registration"], "dynamic", "{plan}");
    assert!(plan["scopes"].is_array(), "{plan}");
    let host = plan["host"].as_str().expect("host").to_owned();
    payloads.push(plan);
    // A client the person registered themselves (the add form's sign-in options) is used first.
    let own = invoke(
        &f.window,
        "server_sign_in_plan",
        json!({"request": {"serverId": id, "clientId": "by-hand", "redirectPort": 8765}}),
    )
    .expect("a plan for a pre-registered client");
    assert_eq!(own["registration"], "pre_registered", "{own}");

    let console = f.console();
    // A sign-in bound to another host than the authorization server's opens nothing.
    let opened = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = {
        let opened = Arc::clone(&opened);
        move |url: String| {
            let opened = Arc::clone(&opened);
            async move {
                opened.lock().expect("lock").push(url);
                Ok(())
            }
        }
    };
    let elsewhere = block_on(console.sign_in_confirmed(
        id,
        SignInClient::default(),
        "auth.example.com",
        record,
        Duration::from_secs(5),
    ));
    assert!(
        matches!(
            &elsewhere,
            Err(countersign_core::console::Error::SignIn(
                countersign_core::auth::SessionError::Auth(
                    countersign_core::auth::Error::HostNotConfirmed { .. }
                )
            ))
        ),
        "another host than the confirmed one is refused: {elsewhere:?}"
    );
    assert!(
        opened.lock().expect("lock").is_empty(),
        "nothing was opened for an unconfirmed host"
    );
    block_on(console.sign_in_confirmed(
        id,
        SignInClient::default(),
        &host,
        follow_without_browser,
        Duration::from_secs(20),
    ))
    .unwrap_or_else(|e| panic!("sign-in: {e}"));

    let list = invoke(&f.window, "server_list", json!({})).expect("servers");
    let server = list
        .as_array()
        .and_then(|l| l.iter().find(|s| s["id"] == id))
        .cloned()
        .expect("the server");
    assert_eq!(server["signedIn"], true, "{server}");
    let expires = server["signIn"]["expiresAtMs"].as_i64().expect("an expiry");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    assert!(
        expires > now_ms,
        "the token expires in the future: {server}"
    );
    assert_eq!(
        server["signIn"]["renews"], true,
        "fastmcp issues refresh tokens"
    );
    payloads.push(list);

    let entry = format!("oauth:{id}@{}", dir.display());
    let blob = setup(&dir)
        .secrets
        .load(&entry)
        .expect("the keyring answers")
        .expect("the sign-in is in the keyring");
    let credentials = Credentials::from_keyring_blob(&blob).expect("readable");
    let mut secrets = vec![credentials.tokens.access_token.expose().clone()];
    secrets.extend(
        credentials
            .tokens
            .refresh_token
            .iter()
            .map(|t| t.expose().clone()),
    );
    secrets.extend(
        credentials
            .registration
            .client_secret
            .iter()
            .map(|s| s.expose().clone()),
    );

    let signed_out = invoke(
        &f.window,
        "server_sign_out",
        json!({"request": {"serverId": id}}),
    )
    .expect("signed out");
    assert_eq!(signed_out["signedIn"], false);
    assert!(signed_out.get("signIn").is_none(), "{signed_out}");
    payloads.push(signed_out);

    for payload in &payloads {
        let text = payload.to_string();
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a token or secret crossed IPC: {text}"
            );
        }
    }
    invoke(
        &f.window,
        "server_remove",
        json!({"request": {"serverId": id}}),
    )
    .expect("removed");
    drop(peer);
}

#[test]
fn an_agent_created_in_the_window_gets_its_token_once_and_nothing_else_carries_it() {
    let fx = app("agent-add");
    let console = fx.console();
    let created = invoke(
        &fx.window,
        "agent_add",
        json!({"request": {"name": "claude-code"}}),
    )
    .expect("agent_add");
    assert_eq!(created["agent"]["name"], "claude-code", "{created}");
    let token = created["token"]
        .as_str()
        .unwrap_or_else(|| panic!("the reply carries the token: {created}"))
        .to_owned();
    assert!(
        block_on(console.authenticate_agent(&token))
            .expect("the ledger answers")
            .is_some_and(|a| a.name == "claude-code"),
        "the token shown is the agent's"
    );

    let page = invoke(&fx.window, "agents_get", json!({})).expect("agents_get");
    assert_eq!(page["agents"][0]["name"], "claude-code", "{page}");
    assert!(
        !page.to_string().contains(&token),
        "the token is in the create reply only, never in a later one"
    );
    let audit = invoke(&fx.window, "audit_list", json!({})).expect("audit_list");
    assert!(
        audit.to_string().contains("agent_add") && !audit.to_string().contains(&token),
        "the creation is audited, without the token: {audit}"
    );
    for file in ["ledger.sqlite3", "ledger.sqlite3-wal"] {
        let bytes = std::fs::read(fx.dir.join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
            "the token is not in {file}"
        );
    }

    // The snippets to paste, one set per server, made with the token for every host.
    let sets = created["snippets"].as_array().expect("snippets");
    let hosts: Vec<&str> = sets[0]["snippets"]
        .as_array()
        .expect("one per host")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(
        hosts,
        [
            "claude-code",
            "cursor",
            "vscode",
            "codex",
            "goose",
            "zed",
            "stdio"
        ]
    );
    assert!(
        sets[0]["snippets"].as_array().is_some_and(|s| s
            .iter()
            .all(|s| s["text"].as_str().is_some_and(|t| t.contains(&token)))),
        "every snippet carries the new token: {created}"
    );

    let twice = invoke(
        &fx.window,
        "agent_add",
        json!({"request": {"name": "claude-code"}}),
    )
    .expect_err("one agent per name");
    assert_eq!(twice["code"], "invalid_input", "{twice}");
    let bad = invoke(&fx.window, "agent_add", json!({"request": {"name": "a b"}}))
        .expect_err("a name with a space");
    assert_eq!(bad["code"], "invalid_input", "{bad}");
}

#[test]
fn a_hosts_file_is_put_behind_the_gateway_from_the_window_and_undone() {
    let (fx, url) = app_with_demo("host-import");
    let project = fx.dir.join("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    let file = project.join(".mcp.json");
    let original = format!(
        "{{\n  \"mcpServers\": {{\n    \"upstream\": {{ \"type\": \"http\", \"url\": \"{url}\" }},\n    \"fs\": {{ \"command\": \"/nonexistent/countersign-mcp-server\", \"args\": [\"--root\"], \"env\": {{ \"API_KEY\": \"sk-never-crosses-ipc\" }} }}\n  }}\n}}\n"
    );
    std::fs::write(&file, &original).expect("write");
    let request = json!({"request": {"path": file.display().to_string()}});

    let preview = invoke(&fx.window, "host_import_preview", request.clone()).expect("preview");
    assert_eq!(preview["host"], "claude-code", "{preview}");
    assert_eq!(preview["items"][0]["action"], "register", "{preview}");
    assert_eq!(preview["items"][1]["action"], "register", "{preview}");
    assert_eq!(
        preview["items"][1]["server"]["env_keys"],
        json!(["API_KEY"])
    );
    assert!(
        preview["diff"]
            .as_str()
            .is_some_and(|d| d.contains("http://127.0.0.1:8788/mcp/upstream")),
        "without a gateway here, the README's port: {preview}"
    );
    assert!(
        !preview.to_string().contains("sk-never-crosses-ipc"),
        "no environment value crosses IPC"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("file"),
        original,
        "a preview writes nothing"
    );

    let applied = invoke(&fx.window, "host_import_apply", request.clone()).expect("apply");
    assert_eq!(applied["applied"], true, "{applied}");
    assert_eq!(applied["items"][0]["action"], "registered", "{applied}");
    // A stdio server whose command cannot start is left as it was, with the reason.
    assert_eq!(applied["items"][1]["action"], "failed", "{applied}");
    assert!(
        applied["items"][1]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("could not start")),
        "{applied}"
    );
    assert!(!applied.to_string().contains("sk-never-crosses-ipc"));
    let rewritten = std::fs::read_to_string(&file).expect("file");
    let after: Value = serde_json::from_str(&rewritten).expect("JSON");
    let token = after["mcpServers"]["upstream"]["headers"]["Authorization"]
        .as_str()
        .and_then(|a| a.strip_prefix("Bearer "))
        .expect("the agent's token in the file")
        .to_owned();
    assert!(
        !applied.to_string().contains(&token),
        "the token is in the file, not in the reply"
    );
    assert!(file.with_file_name(".mcp.json.countersign-backup").exists());
    let servers = invoke(&fx.window, "server_list", json!({})).expect("server_list");
    assert!(servers.to_string().contains("\"upstream\""), "{servers}");

    let undone = invoke(&fx.window, "host_import_undo", request).expect("undo");
    assert_eq!(undone["agent_revoked"], "claude-code", "{undone}");
    assert_eq!(std::fs::read_to_string(&file).expect("file"), original);

    let relative = invoke(
        &fx.window,
        "host_import_preview",
        json!({"request": {"path": "project/.mcp.json"}}),
    )
    .expect_err("a relative path means nothing to a person");
    assert_eq!(relative["code"], "invalid_input", "{relative}");
    std::fs::write(&file, "{ \"mcpServers\": ").expect("write");
    let broken = invoke(
        &fx.window,
        "host_import_preview",
        json!({"request": {"path": file.display().to_string()}}),
    )
    .expect_err("does not parse");
    assert_eq!(broken["code"], "invalid_input", "{broken}");
    assert!(
        broken["message"]
            .as_str()
            .is_some_and(|m| m.contains("line 1")),
        "{broken}"
    );
}

/// The resident's pid, as it answers on `dir`.
/// A pid as `until` hands it back.
fn pid_in(value: &Value) -> u32 {
    value
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .expect("a pid")
}

fn resident_pid(dir: &std::path::Path) -> Option<u32> {
    block_on(countersign_desktop_ipc::ask_state(
        dir,
        &countersign_desktop_ipc::Request::State,
    ))
    .ok()
    .map(|s| s.pid)
}

fn kill_9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -9 {pid}");
}

/// The window's link to the resident, as `app_info` shows it to the UI (the banner's state).
fn link(window: &WebviewWindow<MockRuntime>) -> Value {
    invoke(window, "app_info", json!({})).expect("app_info")["shell"]["resident"].clone()
}

#[test]
fn a_killed_resident_is_started_again_and_a_failed_restart_waits_for_retry() {
    let dir = scratch_dir("crash");
    let exe = std::env::current_exe()
        .ok()
        .and_then(|t| Some(t.parent()?.parent()?.join("countersign-resident")))
        .expect("the resident beside the tests");
    // How the window starts it again (`Options::resident`): the real resident, unless the file
    // `refuse` exists, when it fails at start as a broken install would. Only this test's shell
    // restarts, and nothing here sets the environment of a process whose threads run.
    let refuse = dir.join("refuse");
    let wrapper = dir.join("resident.sh");
    std::fs::create_dir_all(&dir).expect("the data directory");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ -e '{}' ] && exit 1\nexec '{}' \"$@\"\n",
            refuse.display(),
            exe.display()
        ),
    )
    .expect("the wrapper");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("executable");
    }
    let mut options =
        countersign_desktop::Options::parse(["--data-dir".to_owned(), dir.display().to_string()])
            .expect("options");
    options.resident = wrapper;
    let mut fx = app_on_with(dir.clone(), None, |shell| shell.restarting_with(options));
    let window = fx.window.clone();
    // What the app's setup starts once its event loop runs (the mock runtime has none).
    tauri::async_runtime::spawn(countersign_desktop::resident::follow(
        fx._app.handle().clone(),
    ));
    until(
        "the window follows the resident",
        Duration::from_secs(10),
        || (link(&window)["state"] == "connected").then_some(Value::Null),
    );
    let first = &mut fx.resident;

    // kill -9: no Quit on the watch. The window starts a new one, and follows it.
    kill_9(first.pid);
    let _ = first.child.wait();
    let second = until("a new resident answers", Duration::from_secs(30), || {
        resident_pid(&dir)
            .filter(|pid| *pid != first.pid)
            .map(Value::from)
    });
    until("the link back", Duration::from_secs(10), || {
        (link(&window)["state"] == "connected").then_some(Value::Null)
    });
    let lock = std::fs::File::open(dir.join(countersign_desktop_ipc::LOCK)).expect("lock file");
    assert!(
        matches!(lock.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
        "the new resident holds the lock: one resident per data directory"
    );
    // The new watch carries the resident's state into the window (the title's toggle).
    let dnd = invoke(
        &window,
        "notify_dnd_set",
        json!({"request": {"enabled": true}}),
    )
    .expect("do-not-disturb reaches the new resident");
    assert_eq!(dnd["dnd"], true);
    assert_eq!(dnd["resident"]["state"], "connected");

    // A restart that fails says why and waits for Retry.
    std::fs::write(&refuse, "").expect("refuse");
    kill_9(pid_in(&second));
    let failed = until("the failure shown", Duration::from_secs(30), || {
        let l = link(&window);
        (l["state"] == "failed").then_some(l)
    });
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("ended at start")),
        "the banner says why: {failed}"
    );
    assert_eq!(resident_pid(&dir), None, "nothing runs meanwhile");
    std::fs::remove_file(&refuse).expect("refuse no more");
    let retried = invoke(&window, "resident_restart", json!({})).expect("resident_restart");
    assert_ne!(
        retried["resident"]["state"], "connected",
        "not back yet at the click: {retried}"
    );
    let third = until("Retry starts it", Duration::from_secs(30), || {
        resident_pid(&dir).map(Value::from)
    });
    until("the banner gone", Duration::from_secs(10), || {
        (link(&window)["state"] == "connected").then_some(Value::Null)
    });

    // The end: a resident killed while restarts fail leaves nothing running behind the test.
    std::fs::write(&refuse, "").expect("refuse");
    kill_9(pid_in(&third));
    until("the last failure", Duration::from_secs(30), || {
        (link(&window)["state"] == "failed").then_some(Value::Null)
    });
}

#[test]
fn a_launch_while_the_resident_runs_asks_it_for_the_window_at_the_page_or_link() {
    let dir = scratch_dir("hand-to-resident");
    std::fs::create_dir_all(&dir).expect("the data directory");
    let link = "countersign://task/demo/t%2F1";
    let options = |more: &[&str]| {
        let mut args = vec!["--data-dir".to_owned(), dir.display().to_string()];
        args.extend(more.iter().map(|a| (*a).to_owned()));
        countersign_desktop::Options::parse(args).expect("options")
    };
    // No resident: this launch is the window itself (and starts one).
    assert!(!countersign_desktop::resident::open_in_running(&options(
        &[link]
    )));

    // The real resident, its window executable a stand-in that writes down its arguments (the
    // Open starts it).
    let seen = dir.join("window-args");
    let stand_in = dir.join("window.sh");
    std::fs::write(
        &stand_in,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}.part' && mv '{0}.part' '{0}'\n",
            seen.display()
        ),
    )
    .expect("the stand-in");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755))
            .expect("executable");
    }
    // Ended however the test ends.
    struct Ends(Resident);
    impl Drop for Ends {
        fn drop(&mut self) {
            self.0.end();
        }
    }
    let _resident = Ends(Resident::start_with(
        &dir,
        &[("COUNTERSIGN_DESKTOP", stand_in.as_os_str())],
    ));
    // A window process the resident started never hands the request back (no loop), and
    // `--background` only makes sure the resident runs: neither asks it for a window.
    assert!(!countersign_desktop::resident::open_in_running(&options(
        &["--asked-at=1", link]
    )));
    assert!(!countersign_desktop::resident::open_in_running(&options(
        &["--background"]
    )));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!seen.exists(), "no window was started for them");
    let page = r#"{"page":"task","row":7}"#;
    assert!(
        countersign_desktop::resident::open_in_running(&options(&["--page", page, link])),
        "the running resident takes the request"
    );
    let args = until(
        "the resident starts the window",
        Duration::from_secs(10),
        || std::fs::read_to_string(&seen).ok().map(Value::from),
    );
    let args: Vec<&str> = args.as_str().expect("text").lines().collect();
    assert_eq!(args[..2], ["--data-dir", &dir.display().to_string()]);
    assert!(
        args[2].starts_with("--asked-at="),
        "the window it starts is marked as the resident's, so it never hands the request back: {args:?}"
    );
    assert_eq!(args[3..], ["--page", page, link]);
    // A resident that cannot start a window says so, and the launch shows the window itself.
    std::fs::remove_file(&stand_in).expect("the stand-in removed");
    assert!(!countersign_desktop::resident::open_in_running(&options(
        &[link]
    )));
    let _ = std::fs::remove_dir_all(&dir);
}

/// server-everything's stdio command (`node …/dist/index.js stdio`) from the Node tools
/// `.ci/setup-tools.sh` installs: `$COUNTERSIGN_CI_TOOLS`, else `<repo>/.ci/tools`.
fn everything_stdio() -> (String, Vec<String>) {
    let tools = std::env::var_os("COUNTERSIGN_CI_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/tools"));
    let modules = tools.join("node_modules");
    let script = modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        script.is_file(),
        "server-everything is not installed at {}: run .ci/setup-tools.sh (or set COUNTERSIGN_CI_TOOLS)",
        script.display()
    );
    let pinned = modules.join(".bin/node");
    let node = if pinned.exists() {
        pinned.display().to_string()
    } else {
        "node".to_owned()
    };
    (node, vec![script.display().to_string(), "stdio".into()])
}

#[test]
fn a_stdio_server_added_from_the_window_shows_its_command_and_the_residents_process() {
    let fx = app("stdio-add");
    let (node, args) = everything_stdio();
    let cwd = fx.dir.display().to_string();
    let added = invoke(
        &fx.window,
        "server_add_stdio",
        json!({"request": {
            "name": "everything",
            "program": node,
            "args": args,
            "env": [["EVERYTHING_MODE", "plain value"]],
            "secretEnv": [],
            "cwd": cwd,
            "discover": true,
        }}),
    )
    .unwrap_or_else(|e| panic!("server-everything on stdio is added after answering: {e}"));
    assert_eq!(added["name"], "everything", "{added}");
    assert_eq!(
        added["era"], "legacy",
        "a stdio server speaks 2025-11-25: {added}"
    );
    assert!(
        added["identity"]
            .as_str()
            .is_some_and(|i| i.contains("Everything")),
        "the probe asked it what it is: {added}"
    );
    let stdio = &added["stdio"];
    assert_eq!(
        stdio["command"],
        format!("{node} {} stdio", args[0]),
        "the command line as run: {added}"
    );
    assert_eq!(stdio["cwd"], cwd.as_str());
    assert_eq!(
        stdio["env"],
        json!(["EVERYTHING_MODE"]),
        "names only: {added}"
    );
    assert!(
        !added.to_string().contains("plain value"),
        "the view names variables, never their values: {added}"
    );

    // The process is the resident's (this window's console runs no engine): the view has it
    // only because the resident answered.
    let console = fx.console();
    let record = block_on(console.server_named("everything"))
        .expect("the ledger answers")
        .expect("registered");
    assert_eq!(
        console.stdio_process(&record),
        None,
        "the window process runs no engine"
    );
    let process = &added["stdio"]["process"];
    assert_eq!(
        (
            &process["starts"],
            &process["crashLoop"],
            process.get("pid")
        ),
        (&json!(0), &json!(false), None),
        "the resident's engine starts it when it needs it, not before: {added}"
    );
    let listed = invoke(&fx.window, "server_list", json!({})).expect("server_list");
    assert_eq!(
        listed[0]["stdio"]["process"], *process,
        "server_list has it from the resident too: {listed}"
    );
    let asked =
        block_on(countersign_desktop_ipc::stdio_processes(&fx.dir)).expect("the resident answers");
    assert_eq!(
        asked.keys().copied().collect::<Vec<_>>(),
        vec![record.id],
        "the control socket lists each stdio server's process by its id"
    );

    let twice = invoke(
        &fx.window,
        "server_add_stdio",
        json!({"request": {"name": "everything", "program": "true", "discover": false}}),
    )
    .expect_err("one server per name");
    assert_eq!(twice["code"], "invalid_input", "{twice}");
    let failing = invoke(
        &fx.window,
        "server_add_stdio",
        json!({"request": {"name": "nothing", "program": "false", "discover": true}}),
    )
    .expect_err("a command that ends at once does not answer");
    assert!(
        failing["message"]
            .as_str()
            .is_some_and(|m| m.contains("exit status 1")),
        "the refusal says how it ended: {failing}"
    );
    let listed = invoke(&fx.window, "server_list", json!({})).expect("server_list");
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(1),
        "what does not answer is not added: {listed}"
    );
}

#[test]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
fn a_stdio_servers_secret_variable_goes_to_the_keyring_and_no_ipc_payload_carries_it() {
    let fx = app("stdio-secret");
    let (node, args) = everything_stdio();
    let secret = format!("sk-test-{}-never-shown", std::process::id());
    let added = invoke(
        &fx.window,
        "server_add_stdio",
        json!({"request": {
            "name": "everything",
            "program": node,
            "args": args,
            "secretEnv": [["EVERYTHING_API_KEY", secret]],
            "discover": true,
        }}),
    )
    .unwrap_or_else(|e| panic!("added with its secret in the keyring: {e}"));
    assert_eq!(
        added["stdio"]["secretEnv"],
        json!(["EVERYTHING_API_KEY"]),
        "{added}"
    );
    let listed = invoke(&fx.window, "server_list", json!({})).expect("server_list");
    let checked = invoke(
        &fx.window,
        "server_check",
        json!({"request": {"serverId": added["id"]}}),
    )
    .expect("server_check starts it with its secret");
    for (what, payload) in [("add", &added), ("list", &listed), ("check", &checked)] {
        assert!(
            !payload.to_string().contains(&secret),
            "the {what} reply does not carry the secret value: {payload}"
        );
    }
    for file in ["ledger.sqlite3", "ledger.sqlite3-wal"] {
        let bytes = std::fs::read(fx.dir.join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "the secret is not in {file}"
        );
    }
}
