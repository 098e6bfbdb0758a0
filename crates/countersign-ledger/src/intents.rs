//! Call intents: written before `tools/call` is sent, resolved when its answer arrives.

use rusqlite::{params, Connection, Row};
use serde::Serialize;
use serde_json::{Map, Value};

use super::events::stored_words;
use super::{now_ms, Result};

stored_words! {
    /// Where a call intent stands, stored by name in `call_intents.state`.
    IntentState {
        /// Recorded; `tools/call` is being sent.
        Sending => "sending",
        /// The server asked questions first (MRTR).
        InputRequired => "input_required",
        /// The server created a task (the intent's `task`).
        Task => "task",
        /// The tool ran and returned a result.
        Completed => "completed",
        /// The call failed.
        Failed => "failed",
        /// Its process died while sending: the tool may have run.
        Unknown => "unknown",
    }
}

/// One call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntentRecord {
    /// Row id.
    pub id: i64,
    /// The server row.
    pub server_id: i64,
    /// The tool.
    pub tool: String,
    /// The arguments.
    pub arguments: Option<Value>,
    /// Where it stands.
    pub state: IntentState,
    /// The task row, once a handle arrived.
    pub task: Option<i64>,
    /// The result, questions or error.
    pub outcome: Option<Value>,
    /// The process that sent it.
    pub owner_pid: Option<u32>,
    /// When it was recorded.
    pub created_at: i64,
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<IntentRecord> {
    let json = |i: usize| -> rusqlite::Result<Option<Value>> {
        Ok(row
            .get::<_, Option<String>>(i)?
            .and_then(|s| serde_json::from_str(&s).ok()))
    };
    let state: String = row.get(4)?;
    Ok(IntentRecord {
        id: row.get(0)?,
        server_id: row.get(1)?,
        tool: row.get(2)?,
        arguments: json(3)?,
        // A word this version does not know reads as the most careful state.
        state: IntentState::parse(&state).unwrap_or(IntentState::Unknown),
        task: row.get(5)?,
        outcome: json(6)?,
        owner_pid: row
            .get::<_, Option<i64>>(8)?
            .and_then(|p| u32::try_from(p).ok()),
        created_at: row.get(7)?,
    })
}

/// Records that a call is about to be sent.
pub fn create(
    conn: &Connection,
    server_id: i64,
    tool: &str,
    arguments: Option<&Map<String, Value>>,
) -> Result<i64> {
    let now = now_ms();
    conn.prepare_cached("INSERT INTO call_intents (server_id, tool, arguments, state, owner_pid, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)")?
        .execute(params![server_id, tool, arguments.map(|a| Value::Object(a.clone()).to_string()), IntentState::Sending.as_str(), std::process::id(), now])?;
    Ok(conn.last_insert_rowid())
}

/// Records how the call ended.
pub fn resolve(
    conn: &Connection,
    id: i64,
    state: IntentState,
    task: Option<i64>,
    outcome: Option<&Value>,
) -> Result<()> {
    conn.prepare_cached("UPDATE call_intents SET state = ?2, task = ?3, outcome = ?4, updated_at = ?5 WHERE id = ?1")?
        .execute(params![id, state.as_str(), task, outcome.map(Value::to_string), now_ms()])?;
    Ok(())
}

/// Marks a still-`sending` intent as `unknown`; false if it was resolved meanwhile.
pub fn conclude_unknown(conn: &Connection, id: i64) -> Result<bool> {
    let n = conn
        .prepare_cached(
            "UPDATE call_intents SET state = ?3, updated_at = ?2 WHERE id = ?1 AND state = ?4",
        )?
        .execute(params![
            id,
            now_ms(),
            IntentState::Unknown.as_str(),
            IntentState::Sending.as_str()
        ])?;
    Ok(n == 1)
}

/// Whether the process that sent an intent still runs (then its call is still in flight).
/// Without a way to tell (no pid, or no `/proc`), the intent counts as orphaned only when it
/// has no owner.
pub fn owner_alive(intent: &IntentRecord) -> bool {
    let Some(pid) = intent.owner_pid else {
        return false;
    };
    if pid == std::process::id() {
        return true;
    }
    let proc_dir = std::path::Path::new("/proc");
    if proc_dir.is_dir() {
        proc_dir.join(pid.to_string()).exists()
    } else {
        true
    }
}

/// Intents still `sending`: those whose owner is gone are calls whose outcome was lost in a crash.
pub fn in_flight(conn: &Connection) -> Result<Vec<IntentRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, server_id, tool, arguments, state, task, outcome, created_at, owner_pid FROM call_intents WHERE state = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([IntentState::Sending.as_str()], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// All intents, newest first.
pub fn list(conn: &Connection, limit: usize) -> Result<Vec<IntentRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, server_id, tool, arguments, state, task, outcome, created_at, owner_pid FROM call_intents ORDER BY id DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit as i64], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
