//! Registered servers: URL, display name, discovered capabilities. Never secrets: a token lives
//! only in the OS keyring and this table only records that one exists.

use rusqlite::{params, Connection, OptionalExtension as _, Row};
use serde::Serialize;
use serde_json::Value;

use super::{now_ms, Error, Result};

/// One server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerRecord {
    /// Row id.
    pub id: i64,
    /// Unique display name (what the CLI takes).
    pub name: String,
    /// The MCP endpoint.
    pub url: String,
    /// Capabilities from `server/discover`, verbatim.
    pub capabilities: Option<Value>,
    /// `serverInfo` from `server/discover`, verbatim.
    pub server_info: Option<Value>,
    /// When discovery last succeeded (Unix ms).
    pub discovered_at: Option<i64>,
    /// The user's minimum poll interval for this server (0 = none).
    pub poll_floor_ms: u64,
    /// Whether a token is stored for it in the keyring.
    pub has_token: bool,
    /// When it was added.
    pub created_at: i64,
}

const COLUMNS: &str =
    "id, name, url, capabilities, server_info, discovered_at, poll_floor_ms, has_token, created_at";

fn from_row(row: &Row<'_>) -> rusqlite::Result<ServerRecord> {
    let json = |i: usize| -> rusqlite::Result<Option<Value>> {
        Ok(row
            .get::<_, Option<String>>(i)?
            .and_then(|s| serde_json::from_str(&s).ok()))
    };
    Ok(ServerRecord {
        id: row.get(0)?,
        name: row.get(1)?,
        url: row.get(2)?,
        capabilities: json(3)?,
        server_info: json(4)?,
        discovered_at: row.get(5)?,
        poll_floor_ms: row.get::<_, i64>(6)?.max(0) as u64,
        has_token: row.get(7)?,
        created_at: row.get(8)?,
    })
}

/// Adds a server; names are unique.
pub fn add(conn: &Connection, name: &str, url: &str, has_token: bool) -> Result<ServerRecord> {
    if name.trim().is_empty() {
        return Err(Error::Conflict("a server name must not be empty".into()));
    }
    check_url(url)?;
    if by_name(conn, name)?.is_some() {
        return Err(Error::Conflict(format!(
            "a server named {name:?} already exists"
        )));
    }
    conn.execute(
        "INSERT INTO servers (name, url, has_token, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![name, url, has_token, now_ms()],
    )?;
    get(conn, conn.last_insert_rowid())
}

/// One server by row id.
pub fn get(conn: &Connection, id: i64) -> Result<ServerRecord> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM servers WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()?
    .ok_or_else(|| Error::NotFound(format!("server #{id}")))
}

/// One server by name, if it exists.
pub fn by_name(conn: &Connection, name: &str) -> Result<Option<ServerRecord>> {
    Ok(conn
        .query_row(
            &format!("SELECT {COLUMNS} FROM servers WHERE name = ?1"),
            [name],
            from_row,
        )
        .optional()?)
}

/// All servers, by name.
pub fn list(conn: &Connection) -> Result<Vec<ServerRecord>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM servers ORDER BY name"))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Records what `server/discover` said.
pub fn set_discovery(
    conn: &Connection,
    id: i64,
    capabilities: &Value,
    server_info: Option<&Value>,
) -> Result<()> {
    conn.execute(
        "UPDATE servers SET capabilities = ?2, server_info = ?3, discovered_at = ?4 WHERE id = ?1",
        params![
            id,
            capabilities.to_string(),
            server_info.map(Value::to_string),
            now_ms()
        ],
    )?;
    Ok(())
}

/// Changes URL, token flag and poll floor.
pub fn update(
    conn: &Connection,
    id: i64,
    url: &str,
    has_token: bool,
    poll_floor_ms: u64,
) -> Result<()> {
    check_url(url)?;
    let n = conn.execute(
        "UPDATE servers SET url = ?2, has_token = ?3, poll_floor_ms = ?4 WHERE id = ?1",
        params![id, url, has_token, super::tasks::sql_ms(poll_floor_ms)],
    )?;
    if n == 0 {
        return Err(Error::NotFound(format!("server #{id}")));
    }
    Ok(())
}

/// Removes a server and everything recorded under it.
pub fn remove(conn: &Connection, id: i64) -> Result<()> {
    conn.execute("DELETE FROM servers WHERE id = ?1", [id])?;
    Ok(())
}

/// The last line of defence for what the servers table keeps: no URL with credentials in it,
/// whichever face adds the server.
fn check_url(url: &str) -> Result<()> {
    countersign_mcp::check_server_url(url)
        .map(drop)
        .map_err(|e| Error::Invalid(e.to_string()))
}
