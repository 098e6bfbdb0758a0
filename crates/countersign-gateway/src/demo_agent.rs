//! The demo agent of the first-launch demo (`countersign-desktop --demo`): a small MCP client,
//! our own `mcp::Client` speaking Streamable HTTP to the gateway with a token of its own, that
//! calls two demo tools through it so a newcomer sees what the gateway does within a minute:
//! - [`ALLOWED_TOOL`] passes at once, by a rule the demo creates for this agent (visible, and
//!   removable, in the Agents view);
//! - [`GATED_TOOL`] matches no rule, so it waits for Approve or Decline in the inbox (and its
//!   notification); the agent holds Countersign's task and polls it to its end, as a tasks-aware
//!   agent does.
//!
//! The token is created by the console like any agent's ([`Console::add_agent`]), handed to the
//! client in memory and never written, printed or sent to a window. It is not kept anywhere, so
//! the agent runs on the launch that enrols it; later launches find the agent enrolled (its
//! calls and their timelines stay in the ledger) and start nothing.

use std::time::Duration;

use serde_json::{json, Map, Value};

use countersign_core::console::view::RuleSetRequest;
use countersign_core::console::{self, Console};
use countersign_core::ledger::rules::RuleAction;
use countersign_core::mcp::{
    self, CallOutcome, Client, ClientOptions, Endpoint, TaskState, ToolCall,
};
use countersign_core::scheduler;
use countersign_core::sensitive::Sensitive;

/// The demo agent's name (as the inbox, the notification and the Agents view show it).
pub const AGENT: &str = "demo-agent";
/// The tool a rule allows for the demo agent.
pub const ALLOWED_TOOL: &str = "get_time";
/// The tool that waits for a person.
pub const GATED_TOOL: &str = "batch_export";
/// Polls of the gated call's task that may fail in a row (the app quitting, the gateway
/// restarting) before the agent gives up; the call itself stays in the ledger either way.
const MAX_POLL_FAILURES: u32 = 5;

/// Why the demo agent could not enrol or finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Enrolling it (the agent, its rule) failed.
    #[error("cannot enrol the demo agent: {0}")]
    Console(#[from] console::Error),
    /// Its MCP client failed against the gateway.
    #[error("the demo agent's call of {tool} failed: {source}")]
    Call {
        /// The tool it called.
        tool: &'static str,
        /// What failed.
        source: mcp::Error,
    },
    /// The gateway answered something a tasks-aware agent cannot use.
    #[error("the gateway answered the demo agent's call of {tool} unexpectedly: {what}")]
    Unexpected {
        /// The tool it called.
        tool: &'static str,
        /// What came instead.
        what: String,
    },
}

/// A freshly enrolled demo agent, ready to run.
#[derive(Debug)]
pub struct Enrolled {
    /// Its token, in memory only.
    pub token: Sensitive<String>,
}

/// What the demo agent's two calls came to.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The allowed call's result (`CallToolResult`).
    pub allowed: Value,
    /// Countersign's task id for the gated call (`csg-…`).
    pub gated_task: String,
    /// How that task ended.
    pub gated: GatedEnd,
}

/// How the gated call's task ended, as the agent saw it.
#[derive(Debug, Clone)]
pub enum GatedEnd {
    /// Completed: the tool's result after approval, or an `isError` result saying it did not run
    /// (declined, expired) with the disposition in `_meta`.
    Completed(Value),
    /// Failed with a JSON-RPC error.
    Failed(String),
    /// Cancelled.
    Cancelled,
}

/// Enrols the demo agent on `server` (the demo server's registered name): the agent, and a rule
/// allowing it [`ALLOWED_TOOL`]. `None` when an agent of that name exists already (an earlier
/// launch enrolled it; its token was never kept, so it does not run again).
pub async fn enrol(console: &Console, server: &str) -> Result<Option<Enrolled>, Error> {
    if console.agents().await?.iter().any(|a| a.name == AGENT) {
        return Ok(None);
    }
    let (_, token) = console.add_agent(AGENT).await?;
    console
        .set_rule(RuleSetRequest {
            server: server.to_owned(),
            tool: ALLOWED_TOOL.to_owned(),
            action: RuleAction::Allow,
            agent: Some(AGENT.to_owned()),
            condition: None,
        })
        .await?;
    Ok(Some(Enrolled { token }))
}

/// Runs the demo agent against `url` (the gateway's path for the demo server): lists the tools as
/// an agent does, calls [`ALLOWED_TOOL`], then [`GATED_TOOL`] and polls Countersign's task until
/// a person decides and the call ends.
pub async fn run(url: &str, enrolled: Enrolled) -> Result<Outcome, Error> {
    let options = ClientOptions {
        client_name: "countersign-demo-agent".into(),
        ..ClientOptions::default()
    };
    let endpoint = Endpoint::new(url).with_token(Some(enrolled.token));
    let client = Client::with_options(endpoint, options, None).map_err(|source| Error::Call {
        tool: ALLOWED_TOOL,
        source,
    })?;
    // As an agent starts: what tools are there (this also teaches the client their headers).
    client.list_tools().await.map_err(|source| Error::Call {
        tool: ALLOWED_TOOL,
        source,
    })?;
    let allowed = match call(&client, ALLOWED_TOOL, json!({"format": "rfc3339"})).await? {
        CallOutcome::Complete(result) => Value::Object(result.0),
        other => {
            return Err(Error::Unexpected {
                tool: ALLOWED_TOOL,
                what: describe(&other),
            })
        }
    };
    let task = match call(
        &client,
        GATED_TOOL,
        json!({"rows": 20000, "format": "parquet"}),
    )
    .await?
    {
        CallOutcome::Task(task) => task,
        other => {
            return Err(Error::Unexpected {
                tool: GATED_TOOL,
                what: describe(&other),
            })
        }
    };
    tracing::info!(task = %task.task_id, "the demo agent's {GATED_TOOL} call waits for approval");
    let gated = follow(&client, &task.task_id, task.poll_interval_ms).await?;
    Ok(Outcome {
        allowed,
        gated_task: task.task_id,
        gated,
    })
}

async fn call(client: &Client, tool: &'static str, args: Value) -> Result<CallOutcome, Error> {
    let arguments: Map<String, Value> = match args {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    client
        .call_tool(&ToolCall::new(tool, Some(arguments)))
        .await
        .map_err(|source| Error::Call { tool, source })
}

/// Polls Countersign's task at the interval it asks for (through the scheduler's clamp) until it
/// ends. A person may take hours; the agent waits as long as the app runs.
async fn follow(
    client: &Client,
    task_id: &str,
    mut interval_ms: Option<u64>,
) -> Result<GatedEnd, Error> {
    let mut failures = 0;
    loop {
        tokio::time::sleep(scheduler::interval(interval_ms, Duration::ZERO)).await;
        let task = match client.get_task(task_id).await {
            Ok(task) => {
                failures = 0;
                task
            }
            Err(source)
                if failures + 1 < MAX_POLL_FAILURES
                    && source.class() == mcp::ErrorClass::Transient =>
            {
                failures += 1;
                continue;
            }
            Err(source) => {
                return Err(Error::Call {
                    tool: GATED_TOOL,
                    source,
                })
            }
        };
        interval_ms = task.poll_interval_ms.or(interval_ms);
        match task.state {
            TaskState::Working | TaskState::InputRequired { .. } => {}
            TaskState::Completed { result } => {
                return Ok(GatedEnd::Completed(Value::Object(result.0)))
            }
            TaskState::Failed { error } => return Ok(GatedEnd::Failed(error.message)),
            TaskState::Cancelled => return Ok(GatedEnd::Cancelled),
        }
    }
}

fn describe(outcome: &CallOutcome) -> String {
    match outcome {
        CallOutcome::Complete(_) => "a result where a task was expected".into(),
        CallOutcome::Task(task) => format!("a task ({}) where a result was expected", task.task_id),
        CallOutcome::InputRequired(_) => "questions before running".into(),
    }
}
