//! Questions by key. A key is recorded once, ever (UNIQUE(task, key)): that is what keeps a
//! question from being shown or notified twice, across polls and across restarts.

use rusqlite::{params, Connection, OptionalExtension as _, Row};
use serde::Serialize;
use serde_json::Value;

use super::{now_ms, Error, Result};

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputState {
    /// Waiting for a person.
    Pending,
    /// Answered; the answer is in the outbox.
    Answered,
    /// The server acknowledged the answer.
    Delivered,
    /// The server dropped it before anyone answered.
    Superseded,
}

impl InputState {
    fn parse(s: &str) -> Self {
        match s {
            "answered" => Self::Answered,
            "delivered" => Self::Delivered,
            "superseded" => Self::Superseded,
            _ => Self::Pending,
        }
    }
}

/// One question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputRecord {
    /// Row id.
    pub id: i64,
    /// The task row.
    pub task: i64,
    /// The server's key.
    pub key: String,
    /// `{method, params}`, verbatim.
    pub request: Value,
    /// Where it stands.
    pub state: InputState,
    /// When it first appeared (Unix ms).
    pub requested_at: i64,
    /// The exact response recorded, if answered.
    pub answer: Option<Value>,
    /// When it was answered.
    pub answered_at: Option<i64>,
    /// Who answered.
    pub answered_by: Option<String>,
    /// When the server acknowledged the answer.
    pub delivered_at: Option<i64>,
    /// When a desktop notification was shown for it.
    pub notified_at: Option<i64>,
}

/// A pending question with what the inbox shows next to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboxItem {
    /// The question.
    #[serde(flatten)]
    pub input: InputRecord,
    /// The server's task id.
    pub task_id: String,
    /// The server name.
    pub server: String,
    /// The tool, when known.
    pub tool: Option<String>,
    /// The task's `ttlMs`.
    pub ttl_ms: Option<u64>,
    /// When the task was first recorded (Unix ms).
    pub task_created_at: i64,
}

const COLUMNS: &str =
    "i.id, i.task, i.key, i.request, i.state, i.requested_at, i.answer, i.answered_at,
    i.answered_by, i.delivered_at, i.notified_at";

fn from_row(row: &Row<'_>) -> rusqlite::Result<InputRecord> {
    let request: String = row.get(3)?;
    let state: String = row.get(4)?;
    Ok(InputRecord {
        id: row.get(0)?,
        task: row.get(1)?,
        key: row.get(2)?,
        request: serde_json::from_str(&request).unwrap_or(Value::Null),
        state: InputState::parse(&state),
        requested_at: row.get(5)?,
        answer: row
            .get::<_, Option<String>>(6)?
            .and_then(|s| serde_json::from_str(&s).ok()),
        answered_at: row.get(7)?,
        answered_by: row.get(8)?,
        delivered_at: row.get(9)?,
        notified_at: row.get(10)?,
    })
}

/// Records a question if its key is new; `None` if it was seen before (whatever its state).
pub fn record(
    conn: &Connection,
    task: i64,
    key: &str,
    request: &Value,
) -> Result<Option<InputRecord>> {
    let inserted = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO inputs (task, key, request, state, requested_at) VALUES (?1, ?2, ?3, 'pending', ?4)",
        )?
        .execute(params![task, key, request.to_string(), now_ms()])?;
    if inserted == 0 {
        return Ok(None);
    }
    Ok(Some(get(conn, task, key)?))
}

/// One question.
pub fn get(conn: &Connection, task: i64, key: &str) -> Result<InputRecord> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM inputs i WHERE i.task = ?1 AND i.key = ?2"
    ))?
    .query_row(params![task, key], from_row)
    .optional()?
    .ok_or_else(|| Error::NotFound(format!("question {key:?} of task #{task}")))
}

/// All questions of a task, in order of appearance.
pub fn for_task(conn: &Connection, task: i64) -> Result<Vec<InputRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM inputs i WHERE i.task = ?1 ORDER BY i.id"
    ))?;
    let rows = stmt.query_map([task], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Records a person's answer; only a pending question can be answered, once.
pub fn answer(
    conn: &Connection,
    task: i64,
    key: &str,
    response: &Value,
    by: &str,
) -> Result<InputRecord> {
    let current = get(conn, task, key)?;
    if current.state != InputState::Pending {
        return Err(Error::Conflict(format!(
            "question {key:?} is already {}",
            match current.state {
                InputState::Answered | InputState::Delivered => "answered",
                InputState::Superseded => "withdrawn by the server",
                InputState::Pending => "pending",
            }
        )));
    }
    conn.execute(
        "UPDATE inputs SET state = 'answered', answer = ?3, answered_at = ?4, answered_by = ?5 WHERE task = ?1 AND key = ?2",
        params![task, key, response.to_string(), now_ms(), by],
    )?;
    get(conn, task, key)
}

/// Marks answers acknowledged by the server.
pub fn mark_delivered(conn: &Connection, task: i64, keys: &[String]) -> Result<()> {
    let now = now_ms();
    for key in keys {
        conn.execute(
            "UPDATE inputs SET state = 'delivered', delivered_at = ?3 WHERE task = ?1 AND key = ?2 AND state = 'answered'",
            params![task, key, now],
        )?;
    }
    Ok(())
}

/// Withdraws pending questions whose keys the server no longer lists; returns their keys.
pub fn supersede_missing(conn: &Connection, task: i64, present: &[&str]) -> Result<Vec<String>> {
    let pending: Vec<String> = {
        let mut stmt =
            conn.prepare_cached("SELECT key FROM inputs WHERE task = ?1 AND state = 'pending'")?;
        let rows = stmt.query_map([task], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    // A set, not a scan of `present` per key: a server listing many keys must not make this
    // quadratic (it runs inside the writer's transaction, where everything else waits).
    let present: std::collections::HashSet<&str> = present.iter().copied().collect();
    let gone: Vec<String> = pending
        .into_iter()
        .filter(|k| !present.contains(k.as_str()))
        .collect();
    let mut supersede = conn.prepare_cached(
        "UPDATE inputs SET state = 'superseded' WHERE task = ?1 AND key = ?2 AND state = 'pending'",
    )?;
    for key in &gone {
        supersede.execute(params![task, key])?;
    }
    Ok(gone)
}

/// Records that a notification was shown (so a restart does not show it again).
pub fn mark_notified(conn: &Connection, id: i64) -> Result<()> {
    conn.execute(
        "UPDATE inputs SET notified_at = ?2 WHERE id = ?1 AND notified_at IS NULL",
        params![id, now_ms()],
    )?;
    Ok(())
}

/// Every pending question across all servers, oldest first.
pub fn inbox(conn: &Connection) -> Result<Vec<InboxItem>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS}, t.task_id, s.name, t.tool, t.ttl_ms, t.created_at
         FROM inputs i JOIN tasks t ON t.id = i.task JOIN servers s ON s.id = t.server_id
         WHERE i.state = 'pending' AND t.finished_at IS NULL
         ORDER BY i.requested_at, i.id"
    ))?;
    let rows = stmt.query_map([], |row| {
        Ok(InboxItem {
            input: from_row(row)?,
            task_id: row.get(11)?,
            server: row.get(12)?,
            tool: row.get(13)?,
            ttl_ms: row.get::<_, Option<i64>>(14)?.map(|v| v.max(0) as u64),
            task_created_at: row.get(15)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
