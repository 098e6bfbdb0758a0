//! Registered servers: URL (or, for a stdio server, its command), display name, discovered
//! capabilities. Never secrets: a token or a secret environment value lives only in the OS
//! keyring and this table only records that one exists.

use countersign_mcp::{Era, LegacySession};
use rusqlite::{params, Connection, OptionalExtension as _, Row};
use serde::{Deserialize, Serialize};
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
    /// The generation of MCP it speaks, once checked.
    pub era: Option<Era>,
    /// The protocol version in use with it, once checked.
    pub protocol_version: Option<String>,
    /// A legacy server's session, taken up again after a restart. Never serialised: the
    /// session id is the server's key to this client's tasks, not something to show or send.
    #[serde(skip)]
    pub legacy_session: Option<LegacySession>,
    /// A stdio server's command; `None` for an HTTP server.
    pub command: Option<StdioSpec>,
}

impl ServerRecord {
    /// Whether Countersign starts this server as a process.
    pub fn is_stdio(&self) -> bool {
        self.command.is_some()
    }
}

/// A stdio server's command as stored: everything but the secret values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StdioSpec {
    /// The program (looked up on `PATH`).
    pub program: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Plain environment variables added to the inherited ones.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Names of the variables whose values are in the OS keyring.
    #[serde(default)]
    pub secret_env: Vec<String>,
    /// The working directory, else the engine's.
    #[serde(default)]
    pub cwd: Option<String>,
}

impl StdioSpec {
    /// What to run, without the secret values (added as each process starts).
    pub fn command(&self) -> countersign_mcp::stdio::StdioCommand {
        countersign_mcp::stdio::StdioCommand {
            program: self.program.clone(),
            args: self.args.clone(),
            env: self
                .env
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        countersign_mcp::sensitive::Sensitive::new(v.clone()),
                    )
                })
                .collect(),
            cwd: self.cwd.as_ref().map(std::path::PathBuf::from),
        }
    }
}

/// The `url` a stdio server is known by.
pub fn stdio_url(name: &str) -> String {
    format!("stdio:{name}")
}

const COLUMNS: &str = "id, name, url, capabilities, server_info, discovered_at, poll_floor_ms, \
                       has_token, created_at, era, protocol_version, legacy_session, command";

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
        // A value this build does not know reads as "not checked": the next check writes it.
        era: row
            .get::<_, Option<String>>(9)?
            .and_then(|e| serde_json::from_value(Value::String(e)).ok()),
        protocol_version: row.get(10)?,
        legacy_session: row
            .get::<_, Option<String>>(11)?
            .and_then(|s| serde_json::from_str(&s).ok()),
        command: row
            .get::<_, Option<String>>(12)?
            .and_then(|s| serde_json::from_str(&s).ok()),
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

/// Adds a stdio server: names are unique, the program is not empty, names of variables are
/// plain (no `=`, no NUL).
pub fn add_stdio(conn: &Connection, name: &str, spec: &StdioSpec) -> Result<ServerRecord> {
    if name.trim().is_empty() {
        return Err(Error::Conflict("a server name must not be empty".into()));
    }
    check_spec(spec)?;
    if by_name(conn, name)?.is_some() {
        return Err(Error::Conflict(format!(
            "a server named {name:?} already exists"
        )));
    }
    let command = serde_json::to_string(spec).map_err(|e| Error::Invalid(e.to_string()))?;
    conn.execute(
        "INSERT INTO servers (name, url, has_token, created_at, command) VALUES (?1, ?2, 0, ?3, ?4)",
        params![name, stdio_url(name), now_ms(), command],
    )?;
    get(conn, conn.last_insert_rowid())
}

fn check_spec(spec: &StdioSpec) -> Result<()> {
    if spec.program.trim().is_empty() {
        return Err(Error::Invalid(
            "a stdio server needs a command to run".into(),
        ));
    }
    let bad_word = |w: &str| w.contains('\0');
    if bad_word(&spec.program) || spec.args.iter().any(|a| bad_word(a)) {
        return Err(Error::Invalid(
            "a command or argument contains a NUL byte".into(),
        ));
    }
    for key in spec.env.keys().chain(spec.secret_env.iter()) {
        if key.is_empty() || key.contains('=') || bad_word(key) {
            return Err(Error::Invalid(format!(
                "{key:?} is not an environment variable name"
            )));
        }
    }
    if let Some(key) = spec.secret_env.iter().find(|k| spec.env.contains_key(*k)) {
        return Err(Error::Invalid(format!(
            "{key} is given both as plain and as a secret"
        )));
    }
    Ok(())
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

/// Records the server's era and protocol version and, for a legacy server, its session (`None`
/// forgets a stored one: a modern server has none, and a legacy server's ended session is
/// replaced by the next).
pub fn set_profile(
    conn: &Connection,
    id: i64,
    era: Era,
    protocol_version: &str,
    session: Option<&LegacySession>,
) -> Result<()> {
    let era = match era {
        Era::Modern => "modern",
        Era::Legacy => "legacy",
    };
    let session = session
        .map(serde_json::to_string)
        .transpose()
        .map_err(|source| Error::Json {
            what: "servers.legacy_session",
            source,
        })?;
    conn.execute(
        "UPDATE servers SET era = ?2, protocol_version = ?3, legacy_session = ?4 WHERE id = ?1",
        params![id, era, protocol_version, session],
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
    // A stdio server keeps its `stdio:NAME`; only HTTP URLs are checked and changed.
    let stdio: Option<String> = conn
        .query_row("SELECT command FROM servers WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?
        .flatten();
    if stdio.is_none() {
        check_url(url)?;
    }
    let n = conn.execute(
        "UPDATE servers SET url = CASE WHEN command IS NULL THEN ?2 ELSE url END, has_token = ?3, \
         poll_floor_ms = ?4 WHERE id = ?1",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ledger;
    use serde_json::json;

    #[test]
    fn a_legacy_servers_session_survives_a_reopen_and_a_modern_check_forgets_it() {
        let dir = crate::scratch_dir("servers-era");
        let session = LegacySession {
            session_id: Some("5f2c".into()),
            protocol_version: "2025-11-25".into(),
            server_capabilities: json!({"tasks": {"requests": {"tools": {"call": {}}}}}),
            server_info: json!({"name": "mcp-servers/everything", "version": "2.0.0"}),
        };
        let id = {
            let ledger = Ledger::open(&dir).expect("ledger");
            let session = session.clone();
            ledger
                .write_blocking(move |ctx| {
                    let s = add(ctx.conn, "everything", "http://127.0.0.1:1/mcp", false)?;
                    assert_eq!(s.era, None, "not checked yet");
                    set_profile(ctx.conn, s.id, Era::Legacy, "2025-11-25", Some(&session))?;
                    Ok(s.id)
                })
                .expect("write")
        };
        let ledger = Ledger::open(&dir).expect("reopens");
        let record = ledger.read(|c| get(c, id)).expect("read");
        assert_eq!(record.era, Some(Era::Legacy));
        assert_eq!(record.protocol_version.as_deref(), Some("2025-11-25"));
        assert_eq!(
            record.legacy_session.as_ref(),
            Some(&session),
            "kept across a restart"
        );
        let shown = serde_json::to_value(&record).expect("serialises");
        assert!(
            !shown.to_string().contains("5f2c"),
            "the session id never leaves the ledger: {shown}"
        );
        ledger
            .write_blocking(move |ctx| set_profile(ctx.conn, id, Era::Modern, "2026-07-28", None))
            .expect("write");
        let record = ledger.read(|c| get(c, id)).expect("read");
        assert_eq!(record.era, Some(Era::Modern));
        assert_eq!(record.legacy_session, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
