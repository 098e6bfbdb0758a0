//! Answers and cancels that the server has not acknowledged yet. Written in the same transaction
//! as the decision itself; re-sent after a crash (safe: servers ignore answered keys and
//! repeated cancels).

use rusqlite::{params, Connection, Row};
use serde::Serialize;
use serde_json::{Map, Value};

use super::{now_ms, Result};

/// What to deliver.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Delivery {
    /// `tasks/update` with these responses, keyed by input key.
    Update {
        /// The exact `inputResponses`.
        responses: Map<String, Value>,
    },
    /// `tasks/cancel`.
    Cancel,
}

/// One undelivered item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutboxItem {
    /// Row id (increasing: the engine follows it as a cursor).
    pub id: i64,
    /// The task row.
    pub task: i64,
    /// What to send.
    pub delivery: Delivery,
    /// Attempts so far.
    pub attempts: u32,
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<OutboxItem> {
    let kind: String = row.get(2)?;
    let payload: Option<String> = row.get(3)?;
    let delivery = if kind == "cancel" {
        Delivery::Cancel
    } else {
        Delivery::Update {
            responses: payload
                .and_then(|p| serde_json::from_str::<Map<String, Value>>(&p).ok())
                .unwrap_or_default(),
        }
    };
    Ok(OutboxItem {
        id: row.get(0)?,
        task: row.get(1)?,
        delivery,
        attempts: row.get::<_, i64>(4)?.max(0) as u32,
    })
}

/// Queues a delivery.
pub fn enqueue(conn: &Connection, task: i64, delivery: &Delivery) -> Result<i64> {
    let (kind, payload) = match delivery {
        Delivery::Update { responses } => {
            ("update", Some(Value::Object(responses.clone()).to_string()))
        }
        Delivery::Cancel => ("cancel", None),
    };
    conn.execute(
        "INSERT INTO outbox (task, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![task, kind, payload, now_ms()],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Undelivered items with an id above `after`, oldest first.
pub fn open_after(conn: &Connection, after: i64) -> Result<Vec<OutboxItem>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, task, kind, payload, attempts FROM outbox
         WHERE acknowledged_at IS NULL AND abandoned_at IS NULL AND id > ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([after], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The server acknowledged it.
pub fn acknowledge(conn: &Connection, id: i64) -> Result<()> {
    conn.execute(
        "UPDATE outbox SET acknowledged_at = ?2, attempts = attempts + 1 WHERE id = ?1",
        params![id, now_ms()],
    )?;
    Ok(())
}

/// An attempt failed; it stays queued.
pub fn failed_attempt(conn: &Connection, id: i64, error: &str) -> Result<()> {
    conn.execute(
        "UPDATE outbox SET attempts = attempts + 1, last_error = ?2 WHERE id = ?1",
        params![id, error],
    )?;
    Ok(())
}

/// It can never be delivered (the server refused it, or the task is gone).
pub fn abandon(conn: &Connection, id: i64, error: &str) -> Result<()> {
    conn.execute(
        "UPDATE outbox SET attempts = attempts + 1, last_error = ?2, abandoned_at = ?3 WHERE id = ?1",
        params![id, error, now_ms()],
    )?;
    Ok(())
}
