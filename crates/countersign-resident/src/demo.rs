//! `--demo`: the built-in demo MCP server in the resident, registered as server `demo`, and on
//! its first launch two calls so something is happening within seconds: a CI pipeline that
//! progresses through its stages, and a deployment that stops to ask for approval. The app also
//! runs the local MCP gateway, and the demo agent (`countersign_gateway::demo_agent`) calls
//! two demo tools through it: one a rule allows, one that waits in the inbox for approval.

use std::net::SocketAddr;
use std::sync::Arc;

use countersign_demo::{DemoConfig, DemoServer};
use serde_json::{json, Map, Value};

use countersign_core::console::view::{ServerAddRequest, ServerUpdateRequest, TokenChange};
use countersign_core::console::Console;
use countersign_core::mcp::ToolCall;

use crate::Resident;

/// The server name the demo registers.
pub const NAME: &str = "demo";
/// Preferred port (the README's CLI session uses it too); any free port if taken.
const PORT: u16 = 8765;
/// The gateway's preferred port with `--demo` (the README's); any free port if taken.
pub const GATEWAY_PORT: u16 = 8788;

/// The running demo server (stopped when dropped with the app).
pub struct Demo {
    server: DemoServer,
    /// Whether this launch registered the server (then it also made the first calls).
    pub first_launch: bool,
}

impl Demo {
    /// Its endpoint.
    pub fn url(&self) -> String {
        self.server.url()
    }
}

/// Starts the demo server (`speed` > 1 runs faster) and registers or re-points server `demo`.
pub async fn start(console: &Console, speed: f64) -> Result<Demo, String> {
    let config = DemoConfig {
        time_scale: 1.0 / speed.max(0.01),
        ..DemoConfig::default()
    };
    let server =
        match DemoServer::start(SocketAddr::from(([127, 0, 0, 1], PORT)), config.clone()).await {
            Ok(server) => server,
            Err(_) => DemoServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), config)
                .await
                .map_err(|e| format!("cannot start the demo server: {e}"))?,
        };
    let url = server.url();
    let existing = console
        .server_named(NAME)
        .await
        .map_err(|e| e.to_string())?;
    let first_launch = match existing {
        None => {
            console
                .add_server(ServerAddRequest {
                    name: NAME.into(),
                    url: url.clone(),
                    token: None,
                    discover: true,
                })
                .await
                .map_err(|e| e.to_string())?;
            true
        }
        Some(record) => {
            // The demo server keeps its tasks in memory: a new launch is a new server.
            if record.url != url {
                console
                    .update_server(ServerUpdateRequest {
                        id: record.id,
                        url: url.clone(),
                        poll_floor_ms: record.poll_floor_ms,
                        token: TokenChange::Keep,
                    })
                    .await
                    .map_err(|e| e.to_string())?;
            }
            false
        }
    };
    Ok(Demo {
        server,
        first_launch,
    })
}

/// `--demo`: the demo server, the gateway (on `gateway`, else the README's port when free, else
/// any), the demo agent against it, and on the first launch the two calls.
pub async fn launch(
    resident: &Arc<Resident>,
    speed: f64,
    gateway: Option<u16>,
) -> Result<(), String> {
    let demo = start(&resident.console, speed).await?;
    let first = demo.first_launch;
    resident.applied.set_demo_url(demo.url());
    *resident.demo.lock().await = Some(demo);
    let ports = match gateway {
        Some(port) => vec![port],
        None => vec![GATEWAY_PORT, 0],
    };
    if let Some(url) = crate::settings::start_flag_gateway(resident, &ports).await {
        let console = Arc::clone(&resident.console);
        tokio::spawn(async move { agent(&console, &url).await });
    }
    if first {
        let console = Arc::clone(&resident.console);
        tokio::spawn(async move { first_calls(&console).await });
    }
    Ok(())
}

/// The demo server of "Try the demo server" (the window's empty views): started once, then it
/// serves for as long as the resident runs.
pub async fn ensure(resident: &Arc<Resident>) -> Result<(), String> {
    let mut slot = resident.demo.lock().await;
    if slot.is_none() {
        let demo = start(&resident.console, 1.0).await?;
        if demo.first_launch {
            let console = Arc::clone(&resident.console);
            tokio::spawn(async move { first_calls(&console).await });
        }
        resident.applied.set_demo_url(demo.url());
        *slot = Some(demo);
    }
    Ok(())
}

/// The first launch's calls: a pipeline and a deployment that asks for approval.
pub async fn first_calls(console: &Console) {
    let Ok(Some(server)) = console.server_named(NAME).await else {
        return;
    };
    let calls: [(&str, Value); 2] = [
        (
            "run_ci_pipeline",
            json!({"repo": "acme/web", "branch": "main"}),
        ),
        (
            "deploy_service",
            json!({"service": "billing-api", "environment": "staging"}),
        ),
    ];
    for (tool, args) in calls {
        let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
        if let Err(e) = console
            .call(server.id, ToolCall::new(tool, Some(args)))
            .await
        {
            tracing::warn!("demo call {tool} failed: {e}");
        }
    }
}

/// The demo agent: enrolled through the console (its token stays in this process's memory) and
/// run against the gateway at `gateway_url` (`http://127.0.0.1:P/mcp/`). Only the launch that
/// enrols it runs it; what it did stays in the ledger.
pub async fn agent(console: &Console, gateway_url: &str) {
    use countersign_gateway::demo_agent;
    let enrolled = match demo_agent::enrol(console, NAME).await {
        Ok(Some(enrolled)) => enrolled,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!("{e}");
            return;
        }
    };
    match demo_agent::run(&format!("{gateway_url}{NAME}"), enrolled).await {
        Ok(outcome) => tracing::info!(task = %outcome.gated_task, "the demo agent's calls ended"),
        Err(e) => tracing::warn!("{e}"),
    }
}
