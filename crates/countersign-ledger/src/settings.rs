//! `settings`: the person's settings as stored, one JSON value per key. What the keys mean and
//! which values are acceptable is the core's `console::settings`; this module only reads and
//! writes rows.

use rusqlite::{params, Connection};
use serde_json::Value;

use super::{now_ms, Error, Result};

/// Every stored setting, by key (keys this build does not know are returned too: the console
/// ignores them, so an older build can open a newer build's ledger).
pub fn all(conn: &Connection) -> Result<Vec<(String, Value)>> {
    let mut stmt = conn.prepare_cached("SELECT key, value FROM settings ORDER BY key")?;
    let rows = stmt.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (key, text) = row?;
        let value = serde_json::from_str(&text).map_err(|source| Error::Json {
            what: "settings.value",
            source,
        })?;
        out.push((key, value));
    }
    Ok(out)
}

/// Stores `value` under `key`, replacing what was there.
pub fn put(conn: &Connection, key: &str, value: &Value) -> Result<()> {
    conn.execute(
        "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        params![key, value.to_string(), now_ms()],
    )?;
    Ok(())
}
