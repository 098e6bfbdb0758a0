//! The audit log: every human decision, who made it and exactly what was sent.

use rusqlite::{params, Connection, Row};
use serde::Serialize;
use serde_json::Value;

use super::{now_ms, Result};

/// One decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// Row id.
    pub id: i64,
    /// Unix ms.
    pub at: i64,
    /// The OS user.
    pub actor: String,
    /// answer, cancel, adopt, call, server_add, server_remove, ...
    pub action: String,
    /// The server name.
    pub server: Option<String>,
    /// The server's task id.
    pub task_id: Option<String>,
    /// The question's key.
    pub input_key: Option<String>,
    /// Question, exact answer, waited_ms, ...
    pub detail: Value,
}

/// A decision to record.
#[derive(Debug, Clone)]
pub struct NewAudit<'a> {
    /// The OS user.
    pub actor: &'a str,
    /// What they did.
    pub action: &'a str,
    /// On which server.
    pub server: Option<&'a str>,
    /// On which task.
    pub task_id: Option<&'a str>,
    /// On which question.
    pub input_key: Option<&'a str>,
    /// The details.
    pub detail: Value,
}

/// Appends a decision.
pub fn record(conn: &Connection, entry: NewAudit<'_>) -> Result<i64> {
    conn.execute(
        "INSERT INTO audit (at, actor, action, server, task_id, input_key, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![now_ms(), entry.actor, entry.action, entry.server, entry.task_id, entry.input_key, entry.detail.to_string()],
    )?;
    Ok(conn.last_insert_rowid())
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<AuditRecord> {
    let detail: String = row.get(7)?;
    Ok(AuditRecord {
        id: row.get(0)?,
        at: row.get(1)?,
        actor: row.get(2)?,
        action: row.get(3)?,
        server: row.get(4)?,
        task_id: row.get(5)?,
        input_key: row.get(6)?,
        detail: serde_json::from_str(&detail).unwrap_or(Value::Null),
    })
}

/// Every decision, oldest first.
pub fn list(conn: &Connection) -> Result<Vec<AuditRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, at, actor, action, server, task_id, input_key, detail FROM audit ORDER BY id",
    )?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The log as CSV (RFC 4180 quoting), with a header row.
pub fn to_csv(records: &[AuditRecord]) -> String {
    fn field(s: &str) -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    }
    let mut out = String::from("id,at,actor,action,server,task_id,input_key,detail\r\n");
    for r in records {
        let row = [
            r.id.to_string(),
            r.at.to_string(),
            r.actor.clone(),
            r.action.clone(),
            r.server.clone().unwrap_or_default(),
            r.task_id.clone().unwrap_or_default(),
            r.input_key.clone().unwrap_or_default(),
            r.detail.to_string(),
        ];
        out.push_str(&row.iter().map(|f| field(f)).collect::<Vec<_>>().join(","));
        out.push_str("\r\n");
    }
    out
}

/// The OS user making decisions in this process: `$USER` (or `USERNAME`/`LOGNAME`), else the
/// account name of the process's uid from `/etc/passwd`, else `uid:N`.
pub fn os_user() -> String {
    for var in ["USER", "USERNAME", "LOGNAME"] {
        if let Ok(name) = std::env::var(var) {
            if !name.is_empty() {
                return name;
            }
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if let Ok(meta) = std::fs::metadata("/proc/self") {
            let uid = meta.uid();
            let name = std::fs::read_to_string("/etc/passwd")
                .ok()
                .and_then(|passwd| {
                    passwd.lines().find_map(|line| {
                        let mut fields = line.split(':');
                        let name = fields.next()?;
                        let id: u32 = fields.nth(1)?.parse().ok()?;
                        (id == uid).then(|| name.to_owned())
                    })
                });
            return name.unwrap_or_else(|| format!("uid:{uid}"));
        }
    }
    "unknown".into()
}
