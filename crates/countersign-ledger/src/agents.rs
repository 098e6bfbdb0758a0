//! `agents`: who may connect to the gateway. A token is never stored, only its digest.

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use super::{now_ms, Error, Result};

/// One registered agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentRecord {
    /// Row id.
    pub id: i64,
    /// Its name (unique among agents not revoked).
    pub name: String,
    /// When it was added (Unix ms).
    pub created_at: i64,
    /// When its token was revoked, if it was.
    pub revoked_at: Option<i64>,
}

const SELECT: &str = "SELECT id, name, created_at, revoked_at FROM agents";

fn from_row(row: &Row<'_>) -> rusqlite::Result<AgentRecord> {
    Ok(AgentRecord {
        id: row.get(0)?,
        name: row.get(1)?,
        created_at: row.get(2)?,
        revoked_at: row.get(3)?,
    })
}

/// Adds an agent with its token's digest; a live agent of that name is a conflict.
pub fn add(conn: &Connection, name: &str, token_digest: &str) -> Result<AgentRecord> {
    if active_by_name(conn, name)?.is_some() {
        return Err(Error::Conflict(format!(
            "an agent named {name:?} already exists"
        )));
    }
    conn.execute(
        "INSERT INTO agents (name, token_digest, created_at) VALUES (?1, ?2, ?3)",
        params![name, token_digest, now_ms()],
    )?;
    get(conn, conn.last_insert_rowid())
}

/// One agent by row.
pub fn get(conn: &Connection, id: i64) -> Result<AgentRecord> {
    conn.prepare_cached(&format!("{SELECT} WHERE id = ?1"))?
        .query_row([id], from_row)
        .optional()?
        .ok_or_else(|| Error::NotFound(format!("agent #{id}")))
}

/// The live (not revoked) agent of that name.
pub fn active_by_name(conn: &Connection, name: &str) -> Result<Option<AgentRecord>> {
    Ok(conn
        .prepare_cached(&format!("{SELECT} WHERE name = ?1 AND revoked_at IS NULL"))?
        .query_row([name], from_row)
        .optional()?)
}

/// The live agent whose token has this digest (the gateway's authentication).
pub fn by_token_digest(conn: &Connection, digest: &str) -> Result<Option<AgentRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "{SELECT} WHERE token_digest = ?1 AND revoked_at IS NULL"
        ))?
        .query_row([digest], from_row)
        .optional()?)
}

/// Every agent, revoked ones too, by name.
pub fn list(conn: &Connection) -> Result<Vec<AgentRecord>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT} ORDER BY name, id"))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Revokes the live agent of that name: its token stops working at once.
pub fn revoke(conn: &Connection, name: &str) -> Result<AgentRecord> {
    let agent =
        active_by_name(conn, name)?.ok_or_else(|| Error::NotFound(format!("agent {name:?}")))?;
    conn.execute(
        "UPDATE agents SET revoked_at = ?2 WHERE id = ?1",
        params![agent.id, now_ms()],
    )?;
    get(conn, agent.id)
}
