//! `gateway_rules` and `gateway_servers`: the gateway's policy as stored. Evaluating it is
//! the core's `gateway::policy`.

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{now_ms, Error, Result};

/// What a rule does with a matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    /// The call goes upstream at once.
    Allow,
    /// A person decides first.
    Ask,
    /// Refused; the tool does not run.
    Deny,
}

impl RuleAction {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }

    /// Parses the stored (or typed) spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Self::Allow),
            "ask" => Some(Self::Ask),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }
}

/// One stored rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleRecord {
    /// Row id.
    pub id: i64,
    /// The agent it is for (`None`: every agent).
    pub agent_id: Option<i64>,
    /// That agent's name.
    pub agent: Option<String>,
    /// The server row.
    pub server_id: i64,
    /// The server's name.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// What it does.
    pub action: RuleAction,
    /// Argument fields that must equal these values (`None`: any arguments).
    pub condition: Option<Map<String, Value>>,
    /// When it was set (Unix ms).
    pub created_at: i64,
}

const SELECT: &str = "SELECT r.id, r.agent_id, a.name, r.server_id, s.name, r.tool, r.action, r.condition, r.created_at
     FROM gateway_rules r JOIN servers s ON s.id = r.server_id LEFT JOIN agents a ON a.id = r.agent_id";

fn from_row(row: &Row<'_>) -> rusqlite::Result<RuleRecord> {
    let action: String = row.get(6)?;
    let condition: Option<String> = row.get(7)?;
    Ok(RuleRecord {
        id: row.get(0)?,
        agent_id: row.get(1)?,
        agent: row.get(2)?,
        server_id: row.get(3)?,
        server: row.get(4)?,
        tool: row.get(5)?,
        // The column's CHECK allows only the three spellings.
        action: RuleAction::parse(&action).unwrap_or(RuleAction::Ask),
        condition: condition
            .and_then(|c| serde_json::from_str::<Value>(&c).ok())
            .and_then(|v| match v {
                Value::Object(map) => Some(map),
                _ => None,
            }),
        created_at: row.get(8)?,
    })
}

/// A rule to set.
#[derive(Debug, Clone)]
pub struct NewRule<'a> {
    /// The agent (`None`: every agent).
    pub agent_id: Option<i64>,
    /// The server row.
    pub server_id: i64,
    /// The tool.
    pub tool: &'a str,
    /// What it does.
    pub action: RuleAction,
    /// The condition, already canonical (keys sorted), or `None`.
    pub condition: Option<&'a str>,
}

/// Sets a rule: the one with the same agent, server, tool and condition is replaced.
pub fn set(conn: &Connection, rule: NewRule<'_>) -> Result<RuleRecord> {
    let existing: Option<i64> = conn
        .query_row(
            "SELECT id FROM gateway_rules WHERE COALESCE(agent_id, 0) = COALESCE(?1, 0)
               AND server_id = ?2 AND tool = ?3 AND COALESCE(condition, '') = COALESCE(?4, '')",
            params![rule.agent_id, rule.server_id, rule.tool, rule.condition],
            |r| r.get(0),
        )
        .optional()?;
    let id = match existing {
        Some(id) => {
            conn.execute(
                "UPDATE gateway_rules SET action = ?2, created_at = ?3 WHERE id = ?1",
                params![id, rule.action.as_str(), now_ms()],
            )?;
            id
        }
        None => {
            conn.execute(
                "INSERT INTO gateway_rules (agent_id, server_id, tool, action, condition, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    rule.agent_id,
                    rule.server_id,
                    rule.tool,
                    rule.action.as_str(),
                    rule.condition,
                    now_ms()
                ],
            )?;
            conn.last_insert_rowid()
        }
    };
    get(conn, id)
}

/// One rule by row.
pub fn get(conn: &Connection, id: i64) -> Result<RuleRecord> {
    conn.prepare_cached(&format!("{SELECT} WHERE r.id = ?1"))?
        .query_row([id], from_row)
        .optional()?
        .ok_or_else(|| Error::NotFound(format!("rule #{id}")))
}

/// Every rule, by server, tool, agent.
pub fn list(conn: &Connection) -> Result<Vec<RuleRecord>> {
    let mut stmt =
        conn.prepare_cached(&format!("{SELECT} ORDER BY s.name, r.tool, a.name, r.id"))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The rules that can apply to a call of `tool` on `server_id` by `agent_id`.
pub fn for_call(
    conn: &Connection,
    agent_id: i64,
    server_id: i64,
    tool: &str,
) -> Result<Vec<RuleRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE r.server_id = ?1 AND r.tool = ?2 AND (r.agent_id IS NULL OR r.agent_id = ?3)"
    ))?;
    let rows = stmt.query_map(params![server_id, tool, agent_id], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Removes a rule.
pub fn remove(conn: &Connection, id: i64) -> Result<RuleRecord> {
    let rule = get(conn, id)?;
    conn.execute("DELETE FROM gateway_rules WHERE id = ?1", [id])?;
    Ok(rule)
}

/// Whether the server's read-only tools pass without a rule (off unless switched on).
pub fn allows_read_only(conn: &Connection, server_id: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT allow_read_only FROM gateway_servers WHERE server_id = ?1")?
        .query_row([server_id], |r| r.get::<_, bool>(0))
        .optional()?
        .unwrap_or(false))
}

/// Switches "allow the tools this server marks read-only".
pub fn set_allow_read_only(conn: &Connection, server_id: i64, allow: bool) -> Result<()> {
    conn.execute(
        "INSERT INTO gateway_servers (server_id, allow_read_only) VALUES (?1, ?2)
         ON CONFLICT (server_id) DO UPDATE SET allow_read_only = excluded.allow_read_only",
        params![server_id, allow],
    )?;
    Ok(())
}
