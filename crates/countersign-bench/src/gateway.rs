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
use countersign_core::gateway::endpoint::{Gateway, GatewayConfig};
use countersign_demo::{DemoConfig, DemoServer};
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
struct Agent {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

impl Agent {
    async fn call(&self, tool: &str, arguments: Value) -> Result<Value> {
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
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| Error::Unexpected(format!("not JSON from {}: {e}: {text}", self.url)))?;
        value
            .get("result")
            .cloned()
            .ok_or_else(|| Error::Unexpected(format!("no result: {text}")))
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
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
