//! A gateway under test: our demo server in-process (its stats count what reached the
//! upstream), a fresh ledger, the `countersign` CLI as real processes (`servers add`, `agents
//! add`, `policy`, `inbox`, `answer`, and `gateway` itself, which a test may kill -9 and start
//! again), and agents that are not ours (`tests/peers/gateway_agent.py`: the fastmcp 4.1.4
//! client, or the `mcp` package's 2025-11-25 session client).

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use countersign_core::console::view::ServerAddRequest;
use countersign_core::console::{Console, Setup, Start};
use countersign_core::mcp::headers::{header_params, param_headers};
use countersign_demo::{DemoConfig, DemoServer};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::cli::{self, Run};
use crate::procs::DataDir;

/// Longest wait for anything in these tests.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// What the agent's `_meta` says on every 2026-07-28 request (the tasks extension declared).
pub fn tasks_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test-agent", "version": "1"},
    })
}

/// In this process: our demo server (`config`), a console on a fresh ledger (`label`) running
/// the engine, and the demo registered as `demo` (its tools discovered).
pub async fn console_with_demo(
    label: &str,
    config: DemoConfig,
) -> (DemoServer, DataDir, Arc<Console>) {
    let demo = crate::demo::start(config).await;
    let dir = DataDir::new(label);
    let mut setup = Setup::new(dir.path());
    setup.start = Start::Now;
    let console = Arc::new(Console::open(setup).await.expect("the console opens"));
    console
        .add_server(ServerAddRequest {
            name: "demo".into(),
            url: demo.url(),
            token: None,
            discover: true,
        })
        .await
        .expect("the demo server registers");
    (demo, dir, console)
}

pub struct GatewayRig {
    pub dir: DataDir,
    pub demo: DemoServer,
    /// `http://127.0.0.1:P/mcp/demo`.
    pub url: String,
    pub port: u16,
    /// The agent `bot`'s token.
    pub token: String,
    hold_seconds: u64,
    child: Option<Child>,
    http: reqwest::Client,
}

impl GatewayRig {
    /// The demo server registered as `demo`, agent `bot`, the gateway running with
    /// `--hold-seconds hold_seconds`.
    pub async fn start(hold_seconds: u64) -> GatewayRig {
        Self::start_with(hold_seconds, DemoConfig::default()).await
    }

    /// As [`GatewayRig::start`], with the demo server configured (pacing, poll interval).
    pub async fn start_with(hold_seconds: u64, config: DemoConfig) -> GatewayRig {
        let demo = crate::demo::start(config).await;
        let mut rig = GatewayRig {
            dir: DataDir::new("gateway"),
            url: String::new(),
            port: 0,
            token: String::new(),
            hold_seconds,
            child: None,
            http: reqwest::Client::new(),
            demo,
        };
        let url = rig.demo.url();
        rig.cli(&["servers", "add", "demo", &url])
            .await
            .assert_code(0);
        let added = rig.cli(&["agents", "add", "bot", "--json"]).await;
        added.assert_code(0);
        rig.token = added.json()["token"]
            .as_str()
            .unwrap_or_else(|| panic!("agents add --json prints the token; {added}"))
            .to_owned();
        rig.start_gateway(0).await;
        rig
    }

    /// `countersign --data-dir DIR ARGS…`.
    pub async fn cli(&self, args: &[&str]) -> Run {
        let dir = self.dir.path().display().to_string();
        let mut all = vec!["--data-dir", dir.as_str()];
        all.extend_from_slice(args);
        cli::run(&all).await
    }

    /// Starts `countersign gateway` (port 0: any) and waits for its URL line.
    pub async fn start_gateway(&mut self, port: u16) {
        let mut child = Command::new(cli::binary())
            .arg("--data-dir")
            .arg(self.dir.path())
            .args(["gateway", "--port", &port.to_string()])
            .args(["--hold-seconds", &self.hold_seconds.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run countersign gateway: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("countersign gateway prints its URL within 30 s")
            .expect("reading the gateway's stdout")
            .expect("the gateway prints a line before closing stdout");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let base = first.trim().to_owned();
        assert!(
            base.starts_with("http://127.0.0.1:") && base.ends_with("/mcp/"),
            "the first line of countersign gateway is its base URL, got {base:?}"
        );
        self.port = base
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp/")
            .parse()
            .expect("a port in the URL");
        self.url = format!("{base}demo");
        self.child = Some(child);
    }

    /// SIGKILL of the gateway process (no shutdown of any kind), waited for.
    pub async fn kill9(&mut self) {
        let mut child = self.child.take().expect("the gateway runs");
        let pid = child.id().expect("the gateway has a pid");
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("run kill -KILL");
        assert!(status.success(), "kill -KILL {pid} failed");
        let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    }

    /// `tests/peers/gateway_agent.py` as the agent holding `token`, in `mode` (`fastmcp` or
    /// `session`), calling `tool` with `args` through the gateway.
    fn agent_command(&self, mode: &str, token: &str, tool: &str, args: &Value) -> Command {
        let mut command = Command::new(crate::peer::python());
        command
            .arg(crate::peer::repo_root().join("tests/peers/gateway_agent.py"))
            .args([mode, &self.url, token, tool, &args.to_string()])
            .args(["--timeout", "55"]);
        command
    }

    /// Runs the agent script to its end: `{"isError", "text", "meta"}` or `{"error"}`.
    pub async fn agent(&self, mode: &str, token: &str, tool: &str, args: Value) -> Value {
        let command = self.agent_command(mode, token, tool, &args);
        let cannot_run = format!(
            "cannot run {} (run .ci/setup-peer.sh)",
            crate::peer::python().display()
        );
        agent_result(
            command,
            format!("the {mode} agent calling {tool}"),
            cannot_run,
        )
        .await
    }

    /// The official TypeScript SDK's client (`tests/peers/ts_session_agent.mjs`, the 2025-11-25
    /// session protocol, its own 60 s request time-out) calling `tool` through the gateway: its
    /// result as `{"isError", "text", "meta", "protocolVersion", "sdkVersion"}`, or `{"error"}`.
    pub async fn ts_agent(&self, tool: &str, args: Value) -> Value {
        self.ts_agent_with(tool, args, &[]).await
    }

    /// [`GatewayRig::ts_agent`] with the script's options (`--list`: list the tools first, as
    /// agents do; their names come back as `tools`).
    pub async fn ts_agent_with(&self, tool: &str, args: Value, options: &[&str]) -> Value {
        let tools = crate::peer::ci_tools();
        let node = tools.join("node_modules/.bin/node");
        let mut command = Command::new(&node);
        command
            .arg(crate::peer::repo_root().join("tests/peers/ts_session_agent.mjs"))
            .args([&self.url, &self.token, tool, &args.to_string()])
            .args(options)
            .env("COUNTERSIGN_CI_TOOLS", &tools);
        let cannot_run = format!("cannot run {} (run .ci/setup-tools.sh)", node.display());
        agent_result(
            command,
            format!("the TypeScript agent calling {tool}"),
            cannot_run,
        )
        .await
    }

    /// A stdio-only host (the `mcp` package's stdio client) starting `countersign connect demo`,
    /// which relays to this gateway: the agent script's result.
    pub async fn stdio_agent(&self, tool: &str, args: Value) -> Value {
        let mut command = Command::new(crate::peer::python());
        command
            .arg(crate::peer::repo_root().join("tests/peers/gateway_agent.py"))
            .arg("stdio")
            .arg(cli::binary())
            .args([&self.token, tool, &args.to_string()])
            .args(["--timeout", "55", "--server", "demo", "--data-dir"])
            .arg(self.dir.path());
        agent_result(
            command,
            format!("the stdio agent calling {tool}"),
            "cannot run the stdio agent".to_owned(),
        )
        .await
    }

    /// The agent `bot` in the background.
    pub fn spawn_agent(
        &self,
        mode: &'static str,
        tool: &'static str,
        args: Value,
    ) -> tokio::task::JoinHandle<Value> {
        let command = self.agent_command(mode, &self.token, tool, &args);
        tokio::spawn(agent_result(
            command,
            format!("the {mode} agent calling {tool}"),
            "cannot run the agent".to_owned(),
        ))
    }

    /// Everything `countersign inbox --json` lists.
    async fn inbox(&self) -> Vec<Value> {
        let run = self.cli(&["inbox", "--json"]).await;
        run.assert_code(0);
        run.json().as_array().cloned().unwrap_or_default()
    }

    /// The server questions `countersign inbox --json` lists.
    pub async fn pending_questions(&self) -> Vec<Value> {
        let mut items = self.inbox().await;
        items.retain(|item| item["kind"] != "tool_call");
        items
    }

    /// The gated calls `countersign inbox --json` lists.
    pub async fn pending_calls(&self) -> Vec<Value> {
        let mut items = self.inbox().await;
        items.retain(|item| item["kind"] == "tool_call");
        items
    }

    /// `countersign answer TASK_ID --accept {}`: a person approves the call (or accepts the
    /// question) `task_id`.
    pub async fn approve(&self, task_id: &str) {
        self.cli(&["answer", task_id, "--accept", "{}"])
            .await
            .assert_code(0);
    }

    /// kill -9 of the gateway, then a new one on the same port (as a person restarting it).
    pub async fn restart_after_kill9(&mut self) {
        let port = self.port;
        self.kill9().await;
        self.start_gateway(port).await;
    }

    /// The ledger file, opened as a second process would (waiting up to 10 s for a writer).
    pub fn open_ledger(&self) -> rusqlite::Connection {
        let ledger = rusqlite::Connection::open(self.dir.path().join("ledger.sqlite3"))
            .expect("open the ledger");
        ledger
            .busy_timeout(Duration::from_secs(10))
            .expect("busy timeout");
        ledger
    }

    /// Waits until the inbox lists a call of `tool`; returns its task id.
    pub async fn wait_for_pending(&self, tool: &str) -> String {
        let call = eventually(
            &format!("no call of {tool} appeared in the inbox within {DEADLINE:?}"),
            DEADLINE,
            Duration::from_millis(100),
            || async {
                self.pending_calls()
                    .await
                    .into_iter()
                    .find(|c| c["tool"] == tool)
            },
        )
        .await;
        call["task_id"].as_str().expect("a task id").to_owned()
    }

    /// One JSON-RPC request with `token` (none: no Authorization header): the HTTP status and
    /// the body (SSE bodies: the data of the last event).
    pub async fn rpc(&self, token: Option<&str>, method: &str, params: Value) -> (u16, Value) {
        self.rpc_with(token, method, params, &[]).await
    }

    /// [`GatewayRig::rpc`] with extra headers.
    async fn rpc_with(
        &self,
        token: Option<&str>,
        method: &str,
        params: Value,
        headers: &[(String, String)],
    ) -> (u16, Value) {
        let mut request = crate::raw::post(&self.http, &self.url, method);
        // The name the request routes by, as SEP-2243 has a client send it.
        if let Some(name) = ["name", "uri", "taskId"]
            .iter()
            .find_map(|f| params.get(*f).and_then(Value::as_str))
        {
            request = request.header("mcp-name", name);
        }
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request = request.body(
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(),
        );
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the gateway answers");
        let status = response.status().as_u16();
        let text = response.text().await.expect("a body");
        let body = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .unwrap_or(text.trim());
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    /// `tools/call` as a tasks-declaring 2026-07-28 agent: the JSON-RPC result. Lists the tools
    /// first, as agents do, to send the `Mcp-Param-*` headers the tool's schema declares.
    pub async fn call_as_task_agent(&self, tool: &str, arguments: Value) -> Value {
        let (_, listed) = self
            .rpc(
                Some(&self.token),
                "tools/list",
                json!({"_meta": tasks_meta()}),
            )
            .await;
        let schema = listed["result"]["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == tool))
            .map(|t| t["inputSchema"].clone());
        let declared = header_params(schema.as_ref()).expect("valid x-mcp-header annotations");
        let headers = param_headers(&declared, arguments.as_object());
        let mut params = json!({"name": tool, "arguments": arguments});
        params["_meta"] = tasks_meta();
        let (status, body) = self
            .rpc_with(Some(&self.token), "tools/call", params, &headers)
            .await;
        assert_eq!(status, 200, "tools/call through the gateway: {body}");
        body["result"].clone()
    }

    /// [`GatewayRig::call_as_task_agent`] for a call that becomes a task: its task id.
    pub async fn task_of_call(&self, tool: &str, arguments: Value) -> String {
        let created = self.call_as_task_agent(tool, arguments).await;
        created["taskId"].as_str().expect("a task id").to_owned()
    }

    /// `tasks/get` (or another `tasks/*` method) of one of Countersign's tasks.
    pub async fn task_request(&self, method: &str, task_id: &str) -> Value {
        let (status, body) = self
            .rpc(
                Some(&self.token),
                method,
                json!({"taskId": task_id, "_meta": tasks_meta()}),
            )
            .await;
        assert_eq!(status, 200, "{method} through the gateway: {body}");
        body
    }

    /// Polls `tasks/get` until the task leaves `working`.
    pub async fn task_to_end(&self, task_id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let body = self.task_request("tasks/get", task_id).await;
            let task = body["result"].clone();
            if task["status"] != "working" {
                return task;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {task_id} still working after {DEADLINE:?}: {task}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `tools/call` requests the upstream (the demo server) has received.
    pub fn upstream_calls(&self) -> u64 {
        self.demo.stats().requests_for("tools/call")
    }
}

/// Runs an agent `command` (`who`: what it is, for the messages) to its end, at most
/// [`DEADLINE`]: the JSON of the last line it printed.
async fn agent_result(mut command: Command, who: String, cannot_run: String) -> Value {
    let output = tokio::time::timeout(
        DEADLINE,
        command.stdin(Stdio::null()).kill_on_drop(true).output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{who} ran longer than {DEADLINE:?}"))
    .unwrap_or_else(|e| panic!("{cannot_run}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{who} printed nothing; stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    serde_json::from_str(line).unwrap_or_else(|e| panic!("agent output is not JSON ({e}): {line}"))
}

/// Polls `check` every `every` until it gives a value; fails saying `failure` after `within`.
pub async fn eventually<T, F, Fut>(
    failure: &str,
    within: Duration,
    every: Duration,
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "{failure}");
        tokio::time::sleep(every).await;
    }
}
