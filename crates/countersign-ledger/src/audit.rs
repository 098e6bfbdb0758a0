//! The audit log: every human decision, who made it and exactly what was sent.

use rusqlite::{params, Connection, Row};
use serde::Serialize;
use serde_json::Value;

use super::events::{stored_words, AnswerAction};
use super::{now_ms, Result};

stored_words! {
    /// What a person did, as the audit log records it.
    AuditAction {
        /// Called a tool.
        Call => "call",
        /// Added a task by id.
        Adopt => "adopt",
        /// Answered a question: the form sent.
        AnswerAccept => "answer_accept",
        /// Answered a question: said no.
        AnswerDecline => "answer_decline",
        /// Answered a question: dismissed it.
        AnswerCancel => "answer_cancel",
        /// Cancelled a task.
        Cancel => "cancel",
        /// Registered a server.
        ServerAdd => "server_add",
        /// Changed a server (name, URL, token).
        ServerUpdate => "server_update",
        /// Removed a server.
        ServerRemove => "server_remove",
        /// Added a gateway agent.
        AgentAdd => "agent_add",
        /// Revoked a gateway agent.
        AgentRemove => "agent_remove",
        /// Set a gateway rule.
        RuleSet => "rule_set",
        /// Removed a gateway rule.
        RuleRemove => "rule_remove",
        /// Switched the gateway's read-only mode.
        GatewayReadOnly => "gateway_read_only",
        /// Approved an agent's held call.
        GatedCallApprove => "gated_call_approve",
        /// Declined an agent's held call.
        GatedCallDecline => "gated_call_decline",
        /// Answered the questions an upstream asked about an agent's call.
        GatedCallAnswer => "gated_call_answer",
        /// Changed a setting.
        SettingsChange => "settings_change",
    }
}

impl AuditAction {
    /// The action of answering a question with `action`.
    pub fn answer(action: AnswerAction) -> Self {
        match action {
            AnswerAction::Accept => Self::AnswerAccept,
            AnswerAction::Decline => Self::AnswerDecline,
            AnswerAction::Cancel => Self::AnswerCancel,
        }
    }
}

/// One decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// Row id.
    pub id: i64,
    /// Unix ms.
    pub at: i64,
    /// The OS user.
    pub actor: String,
    /// What they did.
    pub action: AuditAction,
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
    pub action: AuditAction,
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
        params![now_ms(), entry.actor, entry.action.as_str(), entry.server, entry.task_id, entry.input_key, entry.detail.to_string()],
    )?;
    Ok(conn.last_insert_rowid())
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<AuditRecord> {
    let detail: String = row.get(7)?;
    let action: String = row.get(3)?;
    // Every row is written from an `AuditAction`: another word was written by a newer
    // Countersign, and is refused rather than shown as something it is not.
    let action = AuditAction::parse(&action).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            3,
            rusqlite::types::Type::Text,
            format!("unknown audit action {action:?}").into(),
        )
    })?;
    Ok(AuditRecord {
        id: row.get(0)?,
        at: row.get(1)?,
        actor: row.get(2)?,
        action,
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

/// The log as CSV (RFC 4180 quoting), with a header row. Every cell goes through
/// [`csv_cell`], so server-chosen text (task ids, question keys) cannot become a spreadsheet
/// formula.
pub fn to_csv(records: &[AuditRecord]) -> String {
    let mut out = String::from("id,at,actor,action,server,task_id,input_key,detail\r\n");
    for r in records {
        let row = [
            r.id.to_string(),
            r.at.to_string(),
            r.actor.clone(),
            r.action.as_str().to_owned(),
            r.server.clone().unwrap_or_default(),
            r.task_id.clone().unwrap_or_default(),
            r.input_key.clone().unwrap_or_default(),
            r.detail.to_string(),
        ];
        out.push_str(
            &row.iter()
                .map(|f| csv_cell(f))
                .collect::<Vec<_>>()
                .join(","),
        );
        out.push_str("\r\n");
    }
    out
}

/// One CSV cell, safe to open in a spreadsheet: a cell that starts with `=`, `+`, `-`, `@`, tab
/// or carriage return is read as a formula by Excel, LibreOffice and Google Sheets (CSV
/// injection, e.g. `=HYPERLINK(…)` as a question key), so it gets a leading `'`, which they show
/// as text; then RFC 4180 quoting. The `'` is visible to a program reading the file: the JSON
/// export is the exact one.
pub fn csv_cell(text: &str) -> String {
    let guarded = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if guarded.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn audit_actions_are_stored_and_sent_by_their_snake_case_name() {
        for (action, word) in [
            (AuditAction::Call, "call"),
            (AuditAction::AnswerDecline, "answer_decline"),
            (AuditAction::GatewayReadOnly, "gateway_read_only"),
            (AuditAction::GatedCallApprove, "gated_call_approve"),
            (AuditAction::SettingsChange, "settings_change"),
        ] {
            assert_eq!(action.as_str(), word, "the stored spelling of {action:?}");
            assert_eq!(AuditAction::parse(word), Some(action), "{word} reads back");
            assert_eq!(json!(action), json!(word), "the UI gets the same word");
        }
        assert_eq!(
            AuditAction::answer(AnswerAction::Cancel),
            AuditAction::AnswerCancel
        );
        assert_eq!(AuditAction::parse("answer"), None, "no such action");
    }

    #[test]
    fn a_row_with_an_action_this_version_does_not_know_is_refused_not_mislabelled() {
        let conn = Connection::open_in_memory().expect("sqlite");
        conn.execute_batch(
            "CREATE TABLE audit (id INTEGER PRIMARY KEY, at INTEGER, actor TEXT, action TEXT,
                 server TEXT, task_id TEXT, input_key TEXT, detail TEXT);
             INSERT INTO audit (at, actor, action, detail) VALUES (1, 'ada', 'server_add', '{}');",
        )
        .expect("schema");
        let listed = list(&conn).expect("a known action reads");
        assert_eq!(listed[0].action, AuditAction::ServerAdd);
        conn.execute(
            "INSERT INTO audit (at, actor, action, detail) VALUES (2, 'ada', 'teleport', '{}')",
            [],
        )
        .expect("insert");
        assert!(list(&conn).is_err(), "an unknown action is an error");
    }

    #[test]
    fn csv_cells_that_a_spreadsheet_would_run_as_formulas_start_with_a_quote() {
        for (cell, expected) in [
            (
                "=HYPERLINK(\"http://evil\",\"x\")",
                "\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\"",
            ),
            ("+1+1", "'+1+1"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "\"'\r=1\""),
        ] {
            assert_eq!(csv_cell(cell), expected, "cell {cell:?}");
        }
    }

    #[test]
    fn csv_cells_of_plain_text_are_unchanged_or_only_quoted() {
        assert_eq!(csv_cell("approval-1"), "approval-1");
        assert_eq!(
            csv_cell("a=b"),
            "a=b",
            "only a leading sign makes a formula"
        );
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell(""), "");
    }

    #[test]
    fn the_csv_export_guards_a_server_chosen_question_key() {
        let record = AuditRecord {
            id: 1,
            at: 1_700_000_000_000,
            actor: "alice".into(),
            action: AuditAction::AnswerAccept,
            server: Some("demo".into()),
            task_id: Some("-t1".into()),
            input_key: Some("=1+2".into()),
            detail: json!({"action": "accept"}),
        };
        let csv = to_csv(&[record]);
        let row = csv.lines().nth(1).unwrap_or_default();
        assert_eq!(
            row, "1,1700000000000,alice,answer_accept,demo,'-t1,'=1+2,\"{\"\"action\"\":\"\"accept\"\"}\"",
            "task id and key must not start a formula: {csv}"
        );
    }
}
