//! What a newly observed task state means for the ledger: the difference from what we knew,
//! written as one transaction of state, timeline events and question records.
//!
//! Used by the engine for every observation (whichever source it came from) and by `adopt`, so a
//! state is turned into events the same way everywhere.

use serde_json::Value;

use crate::ledger::events::NewEvent;
use crate::ledger::tasks::LedgerStatus;
use crate::ledger::{inputs, tasks, EventKind, Result, Via, WriteCtx};
use crate::mcp::{self, TaskState};

/// What the engine remembers of a task between observations (in memory only).
#[derive(Debug, Clone, PartialEq)]
pub struct Known {
    /// Last status.
    pub status: LedgerStatus,
    /// Last status message.
    pub message: Option<String>,
    /// Input keys seen while `input_required` (the ledger's `inputs` table is the real dedup).
    pub keys: Vec<String>,
}

impl Known {
    /// What a task state shows.
    pub fn of(task: &mcp::Task) -> Self {
        Self {
            status: task.status().into(),
            message: task.status_message.clone(),
            keys: match &task.state {
                TaskState::InputRequired { input_requests } => {
                    input_requests.keys().cloned().collect()
                }
                _ => Vec::new(),
            },
        }
    }

    /// Whether `task` says anything new (an unchanged poll writes nothing).
    pub fn differs(&self, task: &mcp::Task) -> bool {
        // Runs on every poll: compares in place rather than building a `Known` to compare.
        let same_keys = match &task.state {
            TaskState::InputRequired { input_requests } => {
                self.keys.len() == input_requests.len()
                    && self
                        .keys
                        .iter()
                        .zip(input_requests.keys())
                        .all(|(a, b)| a == b)
            }
            _ => self.keys.is_empty(),
        };
        !(same_keys
            && self.status == LedgerStatus::from(task.status())
            && self.message.as_deref() == task.status_message.as_deref())
    }
}

/// Records `task` as the new state of row `row`, whose previous state was `before` (None for a
/// task just inserted, whose creation event is written by the caller).
pub fn record(
    ctx: &mut WriteCtx<'_>,
    row: i64,
    before: Option<&Known>,
    task: &mcp::Task,
    via: Via,
) -> Result<()> {
    let now = Known::of(task);
    if before.is_none() {
        // A new handle: a bad hint in it was ignored or clamped, and the person should see that
        // the server said something odd (polls repeat it; the handle says it once).
        for ignored in &task.ignored {
            ctx.append(NewEvent {
                task: Some(row),
                server_id: None,
                via,
                kind: EventKind::ServerDataIgnored {
                    code: "advisory_field".into(),
                    message: ignored.to_string(),
                },
            })?;
        }
    }
    if let Some(before) = before {
        tasks::store_state(ctx.conn, row, task)?;
        if before.status != now.status || before.message != now.message {
            ctx.append(NewEvent {
                task: Some(row),
                server_id: None,
                via,
                kind: EventKind::TaskUpdated {
                    status: now.status,
                    previous_status: before.status,
                    status_message: now.message.clone(),
                },
            })?;
        }
    }
    if let TaskState::InputRequired { input_requests } = &task.state {
        for (key, request) in input_requests {
            let request = serde_json::to_value(request).unwrap_or(Value::Null);
            if inputs::record(ctx.conn, row, key, &request)?.is_some() {
                ctx.append(NewEvent {
                    task: Some(row),
                    server_id: None,
                    via,
                    kind: EventKind::InputRequested {
                        key: key.clone(),
                        request,
                    },
                })?;
            }
        }
    }
    let present: Vec<&str> = now.keys.iter().map(String::as_str).collect();
    for key in inputs::supersede_missing(ctx.conn, row, &present)? {
        ctx.append(NewEvent {
            task: Some(row),
            server_id: None,
            via,
            kind: EventKind::InputSuperseded { key },
        })?;
    }
    let (result, error) = match &task.state {
        TaskState::Completed { result } => (Some(Value::Object(result.0.clone())), None),
        TaskState::Failed { error } => (None, serde_json::to_value(error).ok()),
        _ => (None, None),
    };
    if task.status().is_terminal() && before.is_none_or(|b| !b.status.is_finished()) {
        ctx.append(NewEvent {
            task: Some(row),
            server_id: None,
            via,
            kind: EventKind::TaskFinished {
                status: now.status,
                result,
                error,
            },
        })?;
    }
    Ok(())
}

/// Concludes a task the server can no longer tell us about: `expired` when its TTL has run out,
/// `lost` otherwise. Pending questions are withdrawn.
pub fn conclude(
    ctx: &mut WriteCtx<'_>,
    row: i64,
    status: LedgerStatus,
    ttl_ms: Option<u64>,
    message: &str,
) -> Result<()> {
    tasks::conclude(ctx.conn, row, status)?;
    for key in inputs::supersede_missing(ctx.conn, row, &[])? {
        ctx.append(NewEvent {
            task: Some(row),
            server_id: None,
            via: Via::Engine,
            kind: EventKind::InputSuperseded { key },
        })?;
    }
    let kind = match status {
        LedgerStatus::Expired => EventKind::TaskExpired {
            ttl_ms: ttl_ms.unwrap_or(0),
        },
        _ => EventKind::TaskLost {
            message: message.into(),
        },
    };
    ctx.append(NewEvent {
        task: Some(row),
        server_id: None,
        via: Via::Engine,
        kind,
    })?;
    Ok(())
}
