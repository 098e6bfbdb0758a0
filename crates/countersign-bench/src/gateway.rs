//! `countersign-bench gateway`: what the local MCP gateway adds to an agent's tool call, in one
//! process (the demo server, the console with its engine, the gateway endpoint and the agents
//! as plain HTTP clients on 127.0.0.1):
//! - an allowed call (`echo`, a rule allows it) through the gateway vs. straight to the demo
//!   server, one agent calling in a loop and 100 agents at once: p50/p99 of each and the
//!   difference;
//! - an `ask` call (a tasks-declaring agent): the time until its `working` task is back, which
//!   is after the pending call is committed (synced) — the moment a notification can be posted;
//! - Approve → upstream: from `Console::decide_gated` until the demo server has received the
//!   `tools/call` (decision, claim and call intent are three synced writes).
//!
//! Numbers are printed, never asserted (the machine is shared).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_core::console::view::{
    GatedDecision, RuleAction, RuleSetRequest, ServerAddRequest,
};
use countersign_core::console::{Console, Setup};
use countersign_demo::{DemoConfig, DemoServer};
use countersign_gateway::endpoint::{Gateway, GatewayConfig};
use serde_json::{json, Value};

use crate::error::{Error, Result};

/// How many calls of each kind.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Sequential allowed calls per side.
    pub calls: usize,
    /// Concurrent agents in the second allowed-call run.
    pub agents: usize,
    /// Calls per concurrent agent.
    pub calls_per_agent: usize,
    /// `ask` calls (each then approved, for the Approve → upstream measurement).
    pub asks: usize,
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "countersign-bench", "version": "1"},
    })
}

#[derive(Clone)]
pub(crate) struct Agent {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    pub(crate) token: Option<String>,
}

impl Agent {
    pub(crate) async fn call(&self, tool: &str, arguments: Value) -> Result<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments, "_meta": meta()}});
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(body.to_string());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Error::Unexpected(format!("POST {}: {e}", self.url)))?;
        let text = response
            .text()
            .await
            .map_err(|e| Error::Unexpected(format!("reading {}: {e}", self.url)))?;
        // An SSE body: the response is the data of its last event.
        let body = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("data:"))
            .map_or(text.as_str(), str::trim);
        let value: Value = serde_json::from_str(body)
            .map_err(|e| Error::Unexpected(format!("not JSON from {}: {e}: {text}", self.url)))?;
        value
            .get("result")
            .cloned()
            .ok_or_else(|| Error::Unexpected(format!("no result: {text}")))
    }
}

pub(crate) fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// When each held call's notification was posted, or why posting failed.
#[derive(Default)]
struct PostLog {
    at: std::collections::HashMap<String, Instant>,
    failure: Option<String>,
}

/// Posts `call`'s approval notification as the resident does (its title and body, Approve and
/// Decline), notes when the daemon accepted it, and closes it.
fn post(call: &countersign_core::console::view::GatedCallView, log: &std::sync::Mutex<PostLog>) {
    let shown = notify_rust::Notification::new()
        .appname("Countersign")
        .summary(&format!(
            "{} wants to run {} · {}",
            call.agent, call.server, call.tool
        ))
        .body(&countersign_core::notice::form_body(&format!(
            "Arguments: {}",
            call.arguments
        )))
        .action("approve", "Approve")
        .action("decline", "Decline")
        .show();
    let at = Instant::now();
    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
    match shown {
        Ok(handle) => {
            log.at.insert(call.task_id.clone(), at);
            handle.close();
        }
        Err(e) => {
            log.failure.get_or_insert_with(|| e.to_string());
        }
    }
}

/// Ask calls per agent in the approval measurement: below the gateway's 30 a minute.
const ASKS_PER_AGENT: usize = 25;

fn console_error(e: countersign_core::console::Error) -> Error {
    Error::Unexpected(e.to_string())
}

async fn timed_loop(agent: &Agent, calls: usize) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(calls);
    for i in 0..calls {
        let start = Instant::now();
        let result = agent
            .call("echo", json!({"text": format!("bench {i}")}))
            .await?;
        out.push(start.elapsed());
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(Error::Unexpected(format!("echo failed: {result}")));
        }
    }
    Ok(out)
}

/// `agents` agents at once, each calling back to back (`pace` zero: a closed loop that
/// saturates the machine, so its latency is mostly queueing) or one call every `pace`, their
/// starts spread over one `pace` (agents that think between calls, as real ones do).
async fn concurrent(
    agent: &Agent,
    agents: usize,
    calls: usize,
    pace: Duration,
) -> Result<Vec<Duration>> {
    let runs = (0..agents).map(|n| {
        let agent = agent.clone();
        tokio::spawn(async move {
            if pace.is_zero() {
                return timed_loop(&agent, calls).await;
            }
            let offset = pace.mul_f64(n as f64 / agents as f64);
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, pace);
            let mut out = Vec::with_capacity(calls);
            for _ in 0..calls {
                tick.tick().await;
                out.extend(timed_loop(&agent, 1).await?);
            }
            Ok(out)
        })
    });
    let mut all = Vec::new();
    for run in futures_util::future::join_all(runs).await {
        all.extend(run.map_err(|e| Error::Unexpected(format!("agent task: {e}")))??);
    }
    Ok(all)
}

/// Runs the measurements and prints the table.
pub async fn run(options: Options) -> Result<()> {
    let dir =
        std::env::temp_dir().join(format!("countersign-bench-gateway-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create the data directory", e))?;
    let outcome = measure(&dir, options).await;
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

async fn measure(dir: &std::path::Path, options: Options) -> Result<()> {
    let demo = DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), DemoConfig::default())
        .await
        .map_err(|e| Error::io("start the demo server", e))?;
    let console = Arc::new(
        Console::open(Setup::new(dir))
            .await
            .map_err(|e| Error::Unexpected(e.to_string()))?,
    );
    console
        .add_server(ServerAddRequest {
            name: "demo".into(),
            url: demo.url(),
            token: None,
            discover: true,
        })
        .await
        .map_err(console_error)?;
    let (_, token) = console.add_agent("bench").await.map_err(console_error)?;
    console
        .set_rule(RuleSetRequest {
            server: "demo".into(),
            tool: "echo".into(),
            action: RuleAction::Allow,
            agent: None,
            condition: None,
        })
        .await
        .map_err(console_error)?;
    let gateway = Gateway::start(console.clone(), GatewayConfig::default())
        .await
        .map_err(|e| Error::Unexpected(e.to_string()))?;
    let http = reqwest::Client::new();
    let direct = Agent {
        http: http.clone(),
        url: demo.url(),
        token: None,
    };
    let through = Agent {
        http,
        url: format!("{}demo", gateway.base_url()),
        token: Some(token.expose().clone()),
    };

    // Warm both paths (connections, the gateway's upstream client and tools/list).
    timed_loop(&direct, 50).await?;
    timed_loop(&through, 50).await?;

    println!("gateway: added latency of an allowed call (echo), in ms");
    println!(
        "| run | direct p50 | direct p99 | gateway p50 | gateway p99 | added p50 | added p99 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (label, agents, calls, pace) in [
        ("1 agent", 1, options.calls, Duration::ZERO),
        (
            "concurrent, back to back",
            options.agents,
            options.calls_per_agent,
            Duration::ZERO,
        ),
        (
            "concurrent, a call every 100 ms each",
            options.agents,
            options.calls_per_agent,
            Duration::from_millis(100),
        ),
    ] {
        let (mut d, mut g) = if agents == 1 {
            (
                timed_loop(&direct, calls).await?,
                timed_loop(&through, calls).await?,
            )
        } else {
            (
                concurrent(&direct, agents, calls, pace).await?,
                concurrent(&through, agents, calls, pace).await?,
            )
        };
        d.sort();
        g.sort();
        let (d50, d99, g50, g99) = (
            quantile(&d, 0.5),
            quantile(&d, 0.99),
            quantile(&g, 0.5),
            quantile(&g, 0.99),
        );
        println!(
            "| {label} ({agents} × {calls}) | {} | {} | {} | {} | {} | {} |",
            ms(d50),
            ms(d99),
            ms(g50),
            ms(g99),
            ms(g50.saturating_sub(d50)),
            ms(g99.saturating_sub(d99)),
        );
    }

    // What the resident does to post an approval's notification, timed per call: follow the
    // ledger's change feed, and on a batch that brought held calls read the pending ones and
    // pick those it brought (`countersign-resident`'s `feed::refresh_gated`). The instant
    // recorded is the one at which the notifier would be handed the call.
    let told: Arc<std::sync::Mutex<std::collections::HashMap<String, Instant>>> = Arc::default();
    // And when the notification daemon has it: posted as the resident posts an approval (title,
    // body, Approve/Decline), then closed at once (the daemon keeps at most a few on screen).
    let posted: Arc<std::sync::Mutex<PostLog>> = Arc::default();
    let follower = {
        let (console, told, posted) = (console.clone(), told.clone(), posted.clone());
        let mut feed = console.feed().await.map_err(console_error)?;
        tokio::spawn(async move {
            loop {
                let changes = feed.next().await;
                if !changes.gated || changes.gated_waiting.is_empty() {
                    continue;
                }
                let Ok(pending) = console.pending_gated_calls().await else {
                    continue;
                };
                let now = Instant::now();
                let brought: Vec<_> = pending
                    .into_iter()
                    .filter(|c| changes.gated_waiting.contains(&c.task_id))
                    .collect();
                {
                    let mut told = told.lock().unwrap_or_else(|e| e.into_inner());
                    for call in &brought {
                        told.entry(call.task_id.clone()).or_insert(now);
                    }
                }
                for call in brought {
                    let posted = posted.clone();
                    let _ = tokio::task::spawn_blocking(move || post(&call, &posted)).await;
                }
            }
        })
    };
    let mut asked = Vec::with_capacity(options.asks);
    let mut recorded = Vec::with_capacity(options.asks);
    let mut approved = Vec::with_capacity(options.asks);
    let mut asking = through.clone();
    for i in 0..options.asks {
        // An agent may ask for at most 30 approvals a minute (the gateway's flood limit): a
        // fresh agent every 25 asks keeps the measurement below it.
        if i % ASKS_PER_AGENT == 0 && i > 0 {
            let (_, token) = console
                .add_agent(&format!("bench-ask-{}", i / ASKS_PER_AGENT))
                .await
                .map_err(console_error)?;
            asking.token = Some(token.expose().clone());
        }
        let start = Instant::now();
        let task = asking.call("get_time", json!({"ask": i})).await?;
        recorded.push(start.elapsed());
        let task_id = task
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Unexpected(format!("no task for an ask call: {task}")))?
            .to_owned();
        asked.push((task_id.clone(), start));
        // A person approves after the notification: wait until the notifier would have it
        // (approving sooner could decide the call before the feed reads it as pending).
        let waited = Instant::now();
        while !told
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&task_id)
        {
            if waited.elapsed() > Duration::from_secs(10) {
                return Err(Error::Timeout {
                    what: format!("the change feed to bring the held call {task_id}"),
                    after: Duration::from_secs(10),
                });
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let before = demo.stats().requests_for("tools/call");
        let start = Instant::now();
        console
            .decide_gated(
                &task_id,
                GatedDecision {
                    approve: true,
                    reason: None,
                    always_allow: false,
                },
            )
            .await
            .map_err(console_error)?;
        loop {
            if demo.stats().requests_for("tools/call") > before {
                break;
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(Error::Timeout {
                    what: "the approved call to reach the upstream".into(),
                    after: Duration::from_secs(10),
                });
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        approved.push(start.elapsed());
        // Let the answer be recorded before the next call, so runs do not overlap.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    follower.abort();
    let mut notified = Vec::with_capacity(asked.len());
    {
        let told = told.lock().unwrap_or_else(|e| e.into_inner());
        for (task_id, start) in &asked {
            let at = told.get(task_id).ok_or_else(|| {
                Error::Unexpected(format!("the feed never brought the held call {task_id}"))
            })?;
            notified.push(at.saturating_duration_since(*start));
        }
    }
    let mut on_screen = Vec::with_capacity(asked.len());
    let post_failure = {
        let posted = posted.lock().unwrap_or_else(|e| e.into_inner());
        for (task_id, start) in &asked {
            if let Some(at) = posted.at.get(task_id) {
                on_screen.push(at.saturating_duration_since(*start));
            }
        }
        posted.failure.clone()
    };
    on_screen.sort();
    notified.sort();
    recorded.sort();
    approved.sort();
    println!();
    println!("gateway: an ask call, in ms ({} calls)", options.asks);
    println!("| step | p50 | p99 |");
    println!("|---|---|---|");
    println!(
        "| agent call → pending call committed (task back; a notification can be posted) | {} | {} |",
        ms(quantile(&recorded, 0.5)),
        ms(quantile(&recorded, 0.99))
    );
    println!(
        "| agent call → the notifier has the call (change feed + pending calls read, as the resident does) | {} | {} |",
        ms(quantile(&notified, 0.5)),
        ms(quantile(&notified, 0.99))
    );
    if on_screen.len() == asked.len() {
        println!(
            "| agent call → notification posted (the session's notification daemon has it) | {} | {} |",
            ms(quantile(&on_screen, 0.5)),
            ms(quantile(&on_screen, 0.99))
        );
    } else {
        println!(
            "| agent call → notification posted | — ({} of {} posted: {}) | — |",
            on_screen.len(),
            asked.len(),
            post_failure.unwrap_or_else(|| "no notification daemon answered".into())
        );
    }
    println!(
        "| Approve → upstream received tools/call | {} | {} |",
        ms(quantile(&approved, 0.5)),
        ms(quantile(&approved, 0.99))
    );

    gateway.shutdown().await;
    if let Ok(console) = Arc::try_unwrap(console) {
        console.close().await;
    }
    demo.shutdown().await;
    Ok(())
}
