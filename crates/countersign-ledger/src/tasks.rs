//! Tasks: the latest full state of every task we track, plus what we need to resume polling.
//! Poll bookkeeping (next due time, backoff) stays in memory: an unchanged poll writes nothing.

use rusqlite::{params, Connection, OptionalExtension as _, Row};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::events::TaskOrigin;
use super::{now_ms, Error, Result};
use crate::decision::Decision;
use countersign_mcp::{self as mcp, TaskStatus};

/// A task's status in the ledger: the server's five, plus two only the client can conclude.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum LedgerStatus {
    /// Running.
    Working,
    /// Waiting for answers.
    InputRequired,
    /// Finished with a result.
    Completed,
    /// Finished with an error.
    Failed,
    /// Cancelled.
    Cancelled,
    /// Outlived its `ttlMs` without reaching a terminal state: polling stopped.
    Expired,
    /// The server no longer knows it (-32602): the handle is gone.
    Lost,
}

impl LedgerStatus {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Lost => "lost",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            "expired" => Self::Expired,
            "lost" => Self::Lost,
            _ => return None,
        })
    }

    /// Nothing will change any more.
    pub fn is_finished(self) -> bool {
        !matches!(self, Self::Working | Self::InputRequired)
    }
}

impl From<TaskStatus> for LedgerStatus {
    fn from(s: TaskStatus) -> Self {
        match s {
            TaskStatus::Working => Self::Working,
            TaskStatus::InputRequired => Self::InputRequired,
            TaskStatus::Completed => Self::Completed,
            TaskStatus::Failed => Self::Failed,
            TaskStatus::Cancelled => Self::Cancelled,
        }
    }
}

impl std::fmt::Display for LedgerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tracked task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRecord {
    /// Row id (stable across restarts).
    pub id: i64,
    /// The server row.
    pub server_id: i64,
    /// The server name.
    pub server: String,
    /// The server URL.
    pub server_url: String,
    /// The server's task id.
    pub task_id: String,
    /// The tool, when we made the call.
    pub tool: Option<String>,
    /// The arguments, when we made the call.
    pub arguments: Option<Value>,
    /// How it joined the ledger.
    pub origin: TaskOrigin,
    /// Current status.
    pub status: LedgerStatus,
    /// Last status message.
    pub status_message: Option<String>,
    /// The task as the server last described it.
    pub state: Value,
    /// Last `pollIntervalMs` the server gave.
    pub poll_interval_ms: Option<u64>,
    /// `ttlMs` (None = unlimited).
    pub ttl_ms: Option<u64>,
    /// The server's `createdAt`, verbatim.
    pub created_text: Option<String>,
    /// When we first recorded it (Unix ms).
    pub created_at: i64,
    /// When it last changed (Unix ms).
    pub updated_at: i64,
    /// When it finished (Unix ms).
    pub finished_at: Option<i64>,
    /// The current poll-error streak's message, if polling is failing.
    pub poll_error: Option<String>,
}

impl TaskRecord {
    /// The stored state as a typed task, if it parses.
    pub fn task(&self) -> Option<mcp::Task> {
        mcp::Task::parse_full(&self.state)
            .or_else(|_| mcp::Task::parse_handle(&self.state))
            .ok()
    }
}

const SELECT: &str =
    "SELECT t.id, t.server_id, s.name, s.url, t.task_id, t.tool, t.arguments, t.origin,
        t.status, t.status_message, t.state, t.poll_interval_ms, t.ttl_ms, t.created_text,
        t.created_at, t.updated_at, t.finished_at, t.poll_error
     FROM tasks t JOIN servers s ON s.id = t.server_id";

fn from_row(row: &Row<'_>) -> rusqlite::Result<TaskRecord> {
    let status: String = row.get(8)?;
    let state: String = row.get(10)?;
    Ok(TaskRecord {
        id: row.get(0)?,
        server_id: row.get(1)?,
        server: row.get(2)?,
        server_url: row.get(3)?,
        task_id: row.get(4)?,
        tool: row.get(5)?,
        arguments: row
            .get::<_, Option<String>>(6)?
            .and_then(|s| serde_json::from_str(&s).ok()),
        // A word this version does not know: not a call this ledger knows it made.
        origin: TaskOrigin::parse(&row.get::<_, String>(7)?).unwrap_or(TaskOrigin::Adopted),
        status: LedgerStatus::parse(&status).unwrap_or(LedgerStatus::Working),
        status_message: row.get(9)?,
        state: serde_json::from_str(&state).unwrap_or(Value::Null),
        poll_interval_ms: row.get::<_, Option<i64>>(11)?.map(|v| v.max(0) as u64),
        ttl_ms: row.get::<_, Option<i64>>(12)?.map(|v| v.max(0) as u64),
        created_text: row.get(13)?,
        created_at: row.get(14)?,
        updated_at: row.get(15)?,
        finished_at: row.get(16)?,
        poll_error: row.get(17)?,
    })
}

/// The row of the task `task_id` on server `server_id`, if the ledger tracks it.
pub fn row_of(conn: &Connection, server_id: i64, task_id: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT id FROM tasks WHERE server_id = ?1 AND task_id = ?2")?
        .query_row(params![server_id, task_id], |r| r.get(0))
        .optional()?)
}

/// A server's millisecond count as an SQLite integer: clamped, never wrapped (`u64::MAX as i64`
/// is -1, which would make a task with an endless TTL expire at once).
pub fn sql_ms(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Records a task the moment its handle arrives (or when adopted). Fails with `Conflict` if the
/// server already has a task with that id in the ledger.
pub fn insert(
    conn: &Connection,
    server_id: i64,
    task: &mcp::Task,
    tool: Option<&str>,
    arguments: Option<&Map<String, Value>>,
    origin: TaskOrigin,
) -> Result<TaskRecord> {
    let exists: Option<i64> = conn
        .prepare_cached("SELECT id FROM tasks WHERE server_id = ?1 AND task_id = ?2")?
        .query_row(params![server_id, task.task_id], |r| r.get(0))
        .optional()?;
    if let Some(id) = exists {
        return Err(Error::Conflict(format!(
            "task {} is already tracked (#{id})",
            task.task_id
        )));
    }
    let now = now_ms();
    let status = LedgerStatus::from(task.status());
    conn.prepare_cached(
        "INSERT INTO tasks (server_id, task_id, tool, arguments, origin, status, status_message, state,
             poll_interval_ms, ttl_ms, created_text, created_at, updated_at, finished_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13)",
    )?
    .execute(params![
            server_id,
            task.task_id,
            tool,
            arguments.map(|a| Value::Object(a.clone()).to_string()),
            origin.as_str(),
            status.as_str(),
            task.status_message,
            task.to_json().to_string(),
            task.poll_interval_ms.map(sql_ms),
            task.ttl_ms.map(sql_ms),
            task.created_at,
            now,
            status.is_finished().then_some(now),
    ])?;
    get(conn, conn.last_insert_rowid())
}

/// Stores a new observed state (only call when something changed).
pub fn store_state(conn: &Connection, id: i64, task: &mcp::Task) -> Result<()> {
    let now = now_ms();
    let status = LedgerStatus::from(task.status());
    conn.prepare_cached(
        "UPDATE tasks SET status = ?2, status_message = ?3, state = ?4, poll_interval_ms = ?5,
             ttl_ms = COALESCE(?6, ttl_ms), updated_at = ?7, finished_at = ?8, poll_error = NULL
         WHERE id = ?1",
    )?
    .execute(params![
        id,
        status.as_str(),
        task.status_message,
        task.to_json().to_string(),
        task.poll_interval_ms.map(sql_ms),
        task.ttl_ms.map(sql_ms),
        now,
        status.is_finished().then_some(now),
    ])?;
    Ok(())
}

/// Marks a task expired or lost: conclusions only the client draws.
pub fn conclude(conn: &Connection, id: i64, status: LedgerStatus) -> Result<()> {
    let now = now_ms();
    conn.prepare_cached("UPDATE tasks SET status = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1 AND finished_at IS NULL")?
        .execute(params![id, status.as_str(), now])?;
    Ok(())
}

/// Records the start (Some) or end (None) of a poll-error streak.
pub fn set_poll_error(conn: &Connection, id: i64, message: Option<&str>) -> Result<()> {
    conn.prepare_cached("UPDATE tasks SET poll_error = ?2 WHERE id = ?1")?
        .execute(params![id, message])?;
    Ok(())
}

/// One task by row id.
pub fn get(conn: &Connection, id: i64) -> Result<TaskRecord> {
    conn.prepare_cached(&format!("{SELECT} WHERE t.id = ?1"))?
        .query_row([id], from_row)
        .optional()?
        .ok_or_else(|| Error::NotFound(format!("task #{id}")))
}

/// Tasks by the server's task id (several servers may reuse an id), or by `#ROW`.
pub fn find(conn: &Connection, id_or_row: &str) -> Result<Vec<TaskRecord>> {
    if let Some(row) = id_or_row
        .strip_prefix('#')
        .and_then(|r| r.parse::<i64>().ok())
    {
        return Ok(vec![get(conn, row)?]);
    }
    let mut stmt = conn.prepare_cached(&format!("{SELECT} WHERE t.task_id = ?1 ORDER BY t.id"))?;
    let rows = stmt.query_map([id_or_row], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Exactly one task for `id_or_row`, or a clear error.
pub fn find_one(conn: &Connection, id_or_row: &str) -> Result<TaskRecord> {
    let mut found = find(conn, id_or_row)?;
    match found.len() {
        0 => Err(Error::NotFound(format!("task {id_or_row}"))),
        1 => Ok(found.remove(0)),
        n => Err(Error::Conflict(format!(
            "{n} tasks have id {id_or_row}; name one by row: {}",
            found
                .iter()
                .map(|t| format!("#{}", t.id))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Every unfinished task, oldest first: what the engine resumes.
pub fn unfinished(conn: &Connection) -> Result<Vec<TaskRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE t.finished_at IS NULL ORDER BY t.id"
    ))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Up to `limit` unfinished tasks with a row id above `after`, oldest first: resume reads the
/// ledger page by page, so its memory peak does not grow with the number of tasks.
pub fn unfinished_page(conn: &Connection, after: i64, limit: usize) -> Result<Vec<TaskRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE t.finished_at IS NULL AND t.id > ?1 ORDER BY t.id LIMIT ?2"
    ))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![after, limit], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Unfinished tasks with a row id above `after` (new rows written by another process).
pub fn unfinished_after(conn: &Connection, after: i64) -> Result<Vec<TaskRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE t.finished_at IS NULL AND t.id > ?1 ORDER BY t.id"
    ))?;
    let rows = stmt.query_map([after], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A filter for [`list`].
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this status.
    pub status: Option<LedgerStatus>,
    /// Only this server (by name).
    pub server: Option<String>,
    /// Only this tool.
    pub tool: Option<String>,
    /// At most this many, newest first (None = all).
    pub limit: Option<usize>,
}

/// Tasks, newest first.
pub fn list(conn: &Connection, filter: &Filter) -> Result<Vec<TaskRecord>> {
    filtered(conn, SELECT, filter, from_row)
}

/// `select` (aliasing tasks `t` and servers `s`) narrowed by `filter`, newest first.
fn filtered<T>(
    conn: &Connection,
    select: &str,
    filter: &Filter,
    row: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{select} WHERE (?1 IS NULL OR t.status = ?1) AND (?2 IS NULL OR s.name = ?2)
             AND (?3 IS NULL OR t.tool = ?3)
         ORDER BY t.id DESC LIMIT ?4"
    ))?;
    let rows = stmt.query_map(
        params![
            filter.status.map(LedgerStatus::as_str),
            filter.server,
            filter.tool,
            filter.limit.map(|l| l as i64).unwrap_or(-1),
        ],
        row,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The highest task row id (0 when empty).
pub fn last_id(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("SELECT COALESCE(MAX(id), 0) FROM tasks", [], |r| r.get(0))?)
}

/// A task as a list shows it: no stored state, arguments or result (which can be large), and the
/// number of its questions still waiting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSummary {
    /// Row id.
    pub id: i64,
    /// The server row.
    pub server_id: i64,
    /// The server name.
    pub server: String,
    /// The server's task id.
    pub task_id: String,
    /// The tool, when we made the call.
    pub tool: Option<String>,
    /// How it joined the ledger.
    pub origin: TaskOrigin,
    /// Current status.
    pub status: LedgerStatus,
    /// Last status message.
    pub status_message: Option<String>,
    /// `ttlMs` (None = unlimited).
    pub ttl_ms: Option<u64>,
    /// When we first recorded it (Unix ms).
    pub created_at: i64,
    /// When it last changed (Unix ms).
    pub updated_at: i64,
    /// When it finished (Unix ms).
    pub finished_at: Option<i64>,
    /// The current poll-error streak's message, if polling is failing.
    pub poll_error: Option<String>,
    /// Questions of this task waiting for a person.
    pub pending_inputs: u32,
    /// The person's last decision on its questions (from the `input_answered` events).
    pub last_decision: Option<Decision>,
    /// A person asked for it to be cancelled.
    pub cancel_requested: bool,
    /// It completed with a tool result marked `isError: true` (the tool failed, the task did
    /// not).
    pub result_is_error: bool,
}

const SUMMARY: &str = "SELECT t.id, t.server_id, s.name, t.task_id, t.tool, t.origin, t.status,
        t.status_message, t.ttl_ms, t.created_at, t.updated_at, t.finished_at, t.poll_error,
        (SELECT COUNT(*) FROM inputs i WHERE i.task = t.id AND i.state = 'pending'),
        (SELECT json_extract(e.data, '$.decision') FROM events e
            WHERE e.task = t.id AND e.kind = 'input_answered' ORDER BY e.id DESC LIMIT 1),
        EXISTS (SELECT 1 FROM events e WHERE e.task = t.id AND e.kind = 'cancel_requested'),
        -- Only completed rows are parsed: a result can be large, and only they have one.
        CASE WHEN t.status = 'completed'
            THEN json_extract(t.state, '$.result.isError') IS 1 ELSE 0 END
     FROM tasks t JOIN servers s ON s.id = t.server_id";

fn summary_from_row(row: &Row<'_>) -> rusqlite::Result<TaskSummary> {
    let status: String = row.get(6)?;
    Ok(TaskSummary {
        id: row.get(0)?,
        server_id: row.get(1)?,
        server: row.get(2)?,
        task_id: row.get(3)?,
        tool: row.get(4)?,
        origin: TaskOrigin::parse(&row.get::<_, String>(5)?).unwrap_or(TaskOrigin::Adopted),
        status: LedgerStatus::parse(&status).unwrap_or(LedgerStatus::Working),
        status_message: row.get(7)?,
        ttl_ms: row.get::<_, Option<i64>>(8)?.map(|v| v.max(0) as u64),
        created_at: row.get(9)?,
        updated_at: row.get(10)?,
        finished_at: row.get(11)?,
        poll_error: row.get(12)?,
        pending_inputs: row.get::<_, i64>(13)?.clamp(0, u32::MAX as i64) as u32,
        // An unknown spelling (a newer version's word) shows as no decision rather than failing
        // the whole list.
        last_decision: row
            .get::<_, Option<String>>(14)?
            .as_deref()
            .and_then(Decision::parse),
        cancel_requested: row.get(15)?,
        result_is_error: row.get(16)?,
    })
}

/// Task summaries matching `filter`, newest first. One query, so 10,000 rows stay cheap.
pub fn summaries(conn: &Connection, filter: &Filter) -> Result<Vec<TaskSummary>> {
    filtered(conn, SUMMARY, filter, summary_from_row)
}

/// One task's summary by row id.
pub fn summary(conn: &Connection, id: i64) -> Result<TaskSummary> {
    conn.query_row(
        &format!("{SUMMARY} WHERE t.id = ?1"),
        [id],
        summary_from_row,
    )
    .optional()?
    .ok_or_else(|| Error::NotFound(format!("task #{id}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{self, EventKind, NewEvent, Via};
    use crate::{inputs, servers, Ledger};
    use serde_json::json;

    fn scratch() -> std::path::PathBuf {
        crate::scratch_dir("tasks")
    }

    #[test]
    fn summaries_count_pending_questions_and_reachability_takes_the_latest_verdict() {
        let dir = scratch();
        let ledger = Ledger::open(&dir).expect("ledger");
        let (a, b) = ledger
            .write_blocking(|ctx| {
                let s = servers::add(ctx.conn, "demo", "http://127.0.0.1:1/mcp", false)?;
                let task = |id: &str| {
                    mcp::Task::parse_handle(&json!({"taskId": id, "status": "working"}))
                        .expect("handle")
                };
                let a = insert(
                    ctx.conn,
                    s.id,
                    &task("a"),
                    Some("deploy"),
                    None,
                    TaskOrigin::Call,
                )?;
                let b = insert(ctx.conn, s.id, &task("b"), None, None, TaskOrigin::Adopted)?;
                let ask = json!({"method": "elicitation/create", "params": {"message": "Go?"}});
                inputs::record(ctx.conn, a.id, "k1", &ask)?;
                inputs::record(ctx.conn, a.id, "k2", &ask)?;
                inputs::answer(ctx.conn, a.id, "k2", &json!({"action": "decline"}), "ada")?;
                for kind in [
                    EventKind::ServerUnreachable {
                        message: "refused".into(),
                    },
                    EventKind::ServerRecovered,
                ] {
                    ctx.append(NewEvent {
                        task: None,
                        server_id: Some(s.id),
                        via: Via::Engine,
                        kind,
                    })?;
                }
                Ok((a.id, b.id))
            })
            .expect("write");
        let (list, one, seen) = ledger
            .read(|c| {
                Ok((
                    summaries(c, &Filter::default())?,
                    summary(c, a)?,
                    events::reachability(c)?,
                ))
            })
            .expect("read");
        assert_eq!(
            list.iter().map(|t| t.id).collect::<Vec<_>>(),
            vec![b, a],
            "newest first"
        );
        assert_eq!(one.pending_inputs, 1, "only the unanswered question waits");
        assert_eq!(one.tool.as_deref(), Some("deploy"));
        assert_eq!(list[0].pending_inputs, 0);
        assert_eq!(seen.len(), 1);
        assert!(seen[0].reachable, "recovered after being unreachable");
        assert!(matches!(
            ledger.read(|c| summary(c, 999)),
            Err(Error::NotFound(_))
        ));
        ledger.close();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
