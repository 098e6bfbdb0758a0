//! `gated_calls`: agent tool calls the gateway's policy held for a person (or denied), with the
//! decision and the outcome. A row exists before the agent hears anything about its call; every
//! state change is a conditional UPDATE on the state it expects, so two deciders (the app and
//! the CLI) or a decision racing an expiry or a cancel cannot both win.

use rusqlite::{params, Connection, OptionalExtension, Params, Row};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{now_ms, Error, Result};

/// Where a gated call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum GatedState {
    /// Waiting for a person.
    Pending,
    /// A person approved; not sent upstream yet.
    Approved,
    /// A person declined; the tool did not run.
    Declined,
    /// Nobody decided in time; the tool did not run.
    Expired,
    /// Policy refused it; the tool did not run.
    Denied,
    /// The agent withdrew it before a decision; the tool did not run.
    Cancelled,
    /// Claimed and sent (or being sent) upstream.
    Running,
    /// The upstream answered; the result is stored (or an upstream task carries it).
    Done,
    /// The process died after the claim and before the outcome was recorded: the tool may
    /// have run. Never sent again.
    OutcomeUnknown,
}

impl GatedState {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Declined => "declined",
            Self::Expired => "expired",
            Self::Denied => "denied",
            Self::Cancelled => "cancelled",
            Self::Running => "running",
            Self::Done => "done",
            Self::OutcomeUnknown => "outcome_unknown",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "approved" => Self::Approved,
            "declined" => Self::Declined,
            "expired" => Self::Expired,
            "denied" => Self::Denied,
            "cancelled" => Self::Cancelled,
            "running" => Self::Running,
            "done" => Self::Done,
            "outcome_unknown" => Self::OutcomeUnknown,
            _ => return None,
        })
    }

    /// No decision or execution will change it any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Declined
                | Self::Expired
                | Self::Denied
                | Self::Cancelled
                | Self::Done
                | Self::OutcomeUnknown
        )
    }
}

/// How the agent waits for the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum GatedMode {
    /// The agent declared the tasks extension: it holds a task of Countersign's own.
    Task,
    /// The agent cannot hold a task: its request is held for a bounded time, then it is told
    /// to repeat the identical call after approval.
    Held,
}

impl GatedMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Held => "held",
        }
    }
}

/// One gated call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GatedRecord {
    /// Row id.
    pub id: i64,
    /// The id of Countersign's own task (what the agent and the inbox show).
    pub task_id: String,
    /// The agent row.
    pub agent_id: i64,
    /// The agent's name.
    pub agent: String,
    /// The server row.
    pub server_id: i64,
    /// The server's name.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The arguments exactly as the agent sent them.
    pub arguments: Map<String, Value>,
    /// Hex SHA-256 of the canonical arguments.
    pub args_digest: String,
    /// How the agent waits.
    pub mode: GatedMode,
    /// Where it stands.
    pub state: GatedState,
    /// Why it was declined or denied.
    pub reason: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// The CallToolResult, once known.
    pub result: Option<Value>,
    /// The upstream task carrying the outcome, when the upstream answered with one.
    pub upstream_task: Option<i64>,
    /// When it was recorded (Unix ms).
    pub created_at: i64,
    /// When an undecided call expires (Unix ms).
    pub expires_at: i64,
    /// When it was decided.
    pub decided_at: Option<i64>,
    /// When it last changed.
    pub updated_at: i64,
    /// What the upstream's `tools/list` said about the tool when the call was recorded.
    pub tool_info: Option<ToolInfo>,
    /// The upstream's open questions (MRTR) on this `running` call, not yet answered and sent.
    pub questions: Option<GatedQuestions>,
    /// The person's answers to them (`inputResponses`), not yet sent.
    pub answers: Option<Map<String, Value>>,
}

/// The questions an upstream asked before running an approved call (an MRTR round).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatedQuestions {
    /// `inputRequests`, by key, as the upstream sent them.
    pub input_requests: Map<String, Value>,
    /// `requestState`, to send back verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// `tools/call` requests sent for this call so far, the first included.
    pub rounds: usize,
}

/// What an upstream's `tools/list` says about one tool, as the person deciding on a call sees
/// it: the server's own claims (untrusted hints, shown as text), bounded by
/// the gateway's `tool_info`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    /// `title` (or `annotations.title`).
    #[serde(default)]
    pub title: Option<String>,
    /// `description`.
    #[serde(default)]
    pub description: Option<String>,
    /// `annotations.readOnlyHint` (absent: false, per the schema).
    #[serde(default)]
    pub read_only_hint: Option<bool>,
    /// `annotations.destructiveHint` (absent: true).
    #[serde(default)]
    pub destructive_hint: Option<bool>,
    /// `annotations.idempotentHint` (absent: false).
    #[serde(default)]
    pub idempotent_hint: Option<bool>,
    /// `annotations.openWorldHint` (absent: true).
    #[serde(default)]
    pub open_world_hint: Option<bool>,
}

const SELECT: &str =
    "SELECT g.id, g.task_id, g.agent_id, a.name, g.server_id, s.name, g.tool, g.arguments,
        g.args_digest, g.mode, g.state, g.reason, g.decided_by, g.result, g.upstream_task,
        g.created_at, g.expires_at, g.decided_at, g.updated_at, g.tool_info, g.questions,
        g.answers
     FROM gated_calls g JOIN agents a ON a.id = g.agent_id JOIN servers s ON s.id = g.server_id";

/// The call `clause` (what follows [`SELECT`]: `WHERE …`, `ORDER BY …`) picks, if any.
fn select_one(conn: &Connection, clause: &str, params: impl Params) -> Result<Option<GatedRecord>> {
    Ok(conn
        .prepare_cached(&format!("{SELECT} {clause}"))?
        .query_row(params, from_row)
        .optional()?)
}

/// The calls `clause` picks, in its order.
fn select_all(conn: &Connection, clause: &str, params: impl Params) -> Result<Vec<GatedRecord>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT} {clause}"))?;
    let rows = stmt.query_map(params, from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<GatedRecord> {
    let arguments: String = row.get(7)?;
    let mode: String = row.get(9)?;
    let state: String = row.get(10)?;
    let result: Option<String> = row.get(13)?;
    let tool_info: Option<String> = row.get(19)?;
    let questions: Option<String> = row.get(20)?;
    let answers: Option<String> = row.get(21)?;
    Ok(GatedRecord {
        id: row.get(0)?,
        task_id: row.get(1)?,
        agent_id: row.get(2)?,
        agent: row.get(3)?,
        server_id: row.get(4)?,
        server: row.get(5)?,
        tool: row.get(6)?,
        arguments: match serde_json::from_str(&arguments) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        },
        args_digest: row.get(8)?,
        mode: if mode == "task" {
            GatedMode::Task
        } else {
            GatedMode::Held
        },
        // The column's CHECK allows only the known spellings; an unreadable one is treated
        // as the most careful state.
        state: GatedState::parse(&state).unwrap_or(GatedState::OutcomeUnknown),
        reason: row.get(11)?,
        decided_by: row.get(12)?,
        result: result.and_then(|r| serde_json::from_str(&r).ok()),
        upstream_task: row.get(14)?,
        created_at: row.get(15)?,
        expires_at: row.get(16)?,
        decided_at: row.get(17)?,
        updated_at: row.get(18)?,
        // Written by us from a bounded ToolInfo; an unreadable one is shown as no listing.
        tool_info: tool_info.and_then(|t| serde_json::from_str(&t).ok()),
        // Written by us; an unreadable round reads as none (the call then waits until the
        // restart concludes it outcome_unknown: never sent without its answers).
        questions: questions.and_then(|q| serde_json::from_str(&q).ok()),
        answers: answers.and_then(|a| match serde_json::from_str(&a) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        }),
    })
}

/// A gated call to record.
#[derive(Debug, Clone)]
pub struct NewGated<'a> {
    /// Countersign's task id for it.
    pub task_id: &'a str,
    /// The agent row.
    pub agent_id: i64,
    /// The server row.
    pub server_id: i64,
    /// The tool.
    pub tool: &'a str,
    /// The arguments as sent.
    pub arguments: &'a Map<String, Value>,
    /// Their digest.
    pub args_digest: &'a str,
    /// How the agent waits.
    pub mode: GatedMode,
    /// `Pending`, or `Denied` for a call policy refused.
    pub state: GatedState,
    /// Why (a denial's rule).
    pub reason: Option<&'a str>,
    /// When an undecided call expires (Unix ms).
    pub expires_at: i64,
    /// What the upstream listed about the tool, if the gateway has its listing.
    pub tool_info: Option<&'a ToolInfo>,
}

/// Records a gated call.
pub fn insert(conn: &Connection, call: NewGated<'_>) -> Result<GatedRecord> {
    let now = now_ms();
    conn.execute(
        "INSERT INTO gated_calls (task_id, agent_id, server_id, tool, arguments, args_digest, mode,
                                  state, reason, created_at, expires_at, updated_at, tool_info)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?10, ?12)",
        params![
            call.task_id,
            call.agent_id,
            call.server_id,
            call.tool,
            Value::Object(call.arguments.clone()).to_string(),
            call.args_digest,
            call.mode.as_str(),
            call.state.as_str(),
            call.reason,
            now,
            call.expires_at,
            call.tool_info
                .and_then(|info| serde_json::to_string(info).ok()),
        ],
    )?;
    get(conn, conn.last_insert_rowid())
}

/// One gated call by row.
pub fn get(conn: &Connection, id: i64) -> Result<GatedRecord> {
    select_one(conn, "WHERE g.id = ?1", [id])?
        .ok_or_else(|| Error::NotFound(format!("gated call #{id}")))
}

/// One gated call by Countersign's task id.
pub fn by_task_id(conn: &Connection, task_id: &str) -> Result<Option<GatedRecord>> {
    select_one(conn, "WHERE g.task_id = ?1", [task_id])
}

/// The newest call with this binding (agent, server, tool, argument digest) in `state`.
pub fn with_binding(
    conn: &Connection,
    agent_id: i64,
    server_id: i64,
    tool: &str,
    digest: &str,
    state: GatedState,
) -> Result<Option<GatedRecord>> {
    select_one(
        conn,
        "WHERE g.agent_id = ?1 AND g.server_id = ?2 AND g.tool = ?3
               AND g.args_digest = ?4 AND g.state = ?5 ORDER BY g.id DESC LIMIT 1",
        params![agent_id, server_id, tool, digest, state.as_str()],
    )
}

/// Calls in `state`, oldest first.
pub fn in_state(conn: &Connection, state: GatedState) -> Result<Vec<GatedRecord>> {
    select_all(conn, "WHERE g.state = ?1 ORDER BY g.id", [state.as_str()])
}

/// An agent's calls on a server that it follows as tasks, newest first (its `tasks/list`).
pub fn agent_tasks(
    conn: &Connection,
    agent_id: i64,
    server_id: i64,
    limit: usize,
) -> Result<Vec<GatedRecord>> {
    select_all(
        conn,
        "WHERE g.agent_id = ?1 AND g.server_id = ?2 AND g.mode = 'task' ORDER BY g.id DESC LIMIT ?3",
        params![agent_id, server_id, limit.min(i64::MAX as usize) as i64],
    )
}

/// The newest calls first.
pub fn recent(conn: &Connection, limit: usize) -> Result<Vec<GatedRecord>> {
    select_all(
        conn,
        "ORDER BY g.id DESC LIMIT ?1",
        [limit.min(i64::MAX as usize) as i64],
    )
}

/// How many of an agent's calls wait for a person (the rate limit's measure).
pub fn pending_count(conn: &Connection, agent_id: i64) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM gated_calls WHERE agent_id = ?1 AND state = 'pending'",
        )?
        .query_row([agent_id], |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

/// How many calls of this agent asked a person since `since` (Unix ms): every recorded call but
/// those refused outright, so refusals at the limit do not keep extending it.
pub fn asked_since(conn: &Connection, agent_id: i64, since: i64) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM gated_calls
             WHERE agent_id = ?1 AND created_at >= ?2 AND state != 'denied'",
        )?
        .query_row(params![agent_id, since], |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

/// Moves a call from `from` to `to`, recording who decided and why when given. Returns whether
/// it moved: `false` means another decider, an expiry or a cancel came first.
pub fn transition(
    conn: &Connection,
    id: i64,
    from: GatedState,
    to: GatedState,
    decided_by: Option<&str>,
    reason: Option<&str>,
) -> Result<bool> {
    let now = now_ms();
    let decided_at = decided_by.map(|_| now);
    let changed = conn.execute(
        "UPDATE gated_calls SET state = ?3, updated_at = ?4,
            decided_by = COALESCE(?5, decided_by), reason = COALESCE(?6, reason),
            decided_at = COALESCE(?7, decided_at)
         WHERE id = ?1 AND state = ?2",
        params![
            id,
            from.as_str(),
            to.as_str(),
            now,
            decided_by,
            reason,
            decided_at
        ],
    )?;
    Ok(changed == 1)
}

/// Records the upstream's answer to a running call: its result, or the task carrying it.
pub fn finish(
    conn: &Connection,
    id: i64,
    result: Option<&Value>,
    upstream_task: Option<i64>,
) -> Result<()> {
    let changed = conn.execute(
        "UPDATE gated_calls SET state = 'done', result = ?2, upstream_task = ?3, updated_at = ?4
         WHERE id = ?1 AND state = 'running'",
        params![id, result.map(Value::to_string), upstream_task, now_ms()],
    )?;
    if changed == 1 {
        Ok(())
    } else {
        Err(Error::Conflict(format!("gated call #{id} is not running")))
    }
}

/// A running call's upstream asked questions: they wait for the person. `false` when the call is
/// not running.
pub fn ask(conn: &Connection, id: i64, questions: &GatedQuestions) -> Result<bool> {
    let questions = serde_json::to_string(questions)
        .map_err(|e| Error::Conflict(format!("the questions cannot be stored: {e}")))?;
    let changed = conn.execute(
        "UPDATE gated_calls SET questions = ?2, answers = NULL, updated_at = ?3
         WHERE id = ?1 AND state = 'running'",
        params![id, questions, now_ms()],
    )?;
    Ok(changed == 1)
}

/// The person answers the open questions, once. `false` when there are none, or they were
/// answered already.
pub fn answer(conn: &Connection, id: i64, answers: &Map<String, Value>) -> Result<bool> {
    let changed = conn.execute(
        "UPDATE gated_calls SET answers = ?2, updated_at = ?3
         WHERE id = ?1 AND state = 'running' AND questions IS NOT NULL AND answers IS NULL",
        params![id, Value::Object(answers.clone()).to_string(), now_ms()],
    )?;
    Ok(changed == 1)
}

/// Takes an answered round for sending: clears questions and answers, and returns them, to
/// exactly one caller (the others get `None`).
pub fn take_answered(
    conn: &Connection,
    id: i64,
) -> Result<Option<(GatedQuestions, Map<String, Value>)>> {
    let call = get(conn, id)?;
    let (Some(questions), Some(answers)) = (call.questions, call.answers) else {
        return Ok(None);
    };
    let changed = conn.execute(
        "UPDATE gated_calls SET questions = NULL, answers = NULL, updated_at = ?2
         WHERE id = ?1 AND state = 'running' AND answers IS NOT NULL",
        params![id, now_ms()],
    )?;
    Ok((changed == 1).then_some((questions, answers)))
}

/// The agent withdraws a call whose upstream's questions are open or answered but not yet taken
/// for sending: nothing ran, so it is `cancelled` and never sent. `false` when a sender took
/// the round first (it goes out; the agent may cancel the task it makes), or there are none.
pub fn withdraw_asking(conn: &Connection, id: i64) -> Result<bool> {
    let changed = conn.execute(
        "UPDATE gated_calls SET state = 'cancelled', questions = NULL, answers = NULL,
            updated_at = ?2
         WHERE id = ?1 AND state = 'running' AND questions IS NOT NULL",
        params![id, now_ms()],
    )?;
    Ok(changed == 1)
}

/// Running calls whose questions were answered and not yet sent, oldest first.
pub fn answered_calls(conn: &Connection) -> Result<Vec<GatedRecord>> {
    select_all(
        conn,
        "WHERE g.state = 'running' AND g.answers IS NOT NULL ORDER BY g.id",
        [],
    )
}

/// Running calls with questions waiting for the person, oldest first.
pub fn asking(conn: &Connection) -> Result<Vec<GatedRecord>> {
    select_all(
        conn,
        "WHERE g.state = 'running' AND g.questions IS NOT NULL AND g.answers IS NULL
         ORDER BY g.id",
        [],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{self, NewRule, RuleAction};
    use crate::{agents, servers, Ledger};

    /// A ledger of its own in a scratch directory; [`remove`] closes and removes it.
    fn scratch() -> (std::path::PathBuf, Ledger) {
        let dir = crate::scratch_dir("gated");
        let ledger = Ledger::open(&dir).expect("ledger");
        (dir, ledger)
    }

    fn remove(dir: std::path::PathBuf, ledger: Ledger) {
        ledger.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Adds the server `demo` and the agent `bot` (token digest `digest`), and records their
    /// task-mode call of `tool` with no arguments, in `state`, that never expires.
    fn record_call(
        conn: &Connection,
        task_id: &str,
        tool: &str,
        state: GatedState,
        tool_info: Option<&ToolInfo>,
    ) -> Result<GatedRecord> {
        let server = servers::add(conn, "demo", "http://127.0.0.1:1/mcp", false)?;
        let agent = agents::add(conn, "bot", "digest")?;
        insert(
            conn,
            NewGated {
                task_id,
                agent_id: agent.id,
                server_id: server.id,
                tool,
                arguments: &Map::new(),
                args_digest: "d",
                mode: GatedMode::Task,
                state,
                reason: None,
                expires_at: i64::MAX,
                tool_info,
            },
        )
    }

    #[test]
    fn a_decision_wins_once_and_only_an_approved_call_can_be_claimed() {
        let (dir, ledger) = scratch();
        let (moved, claims, state, revoked_is_gone) = ledger
            .write_blocking(|ctx| {
                let listed = ToolInfo {
                    description: Some("Deploys.".into()),
                    destructive_hint: Some(true),
                    ..ToolInfo::default()
                };
                let call = record_call(
                    ctx.conn,
                    "csg-1",
                    "deploy",
                    GatedState::Pending,
                    Some(&listed),
                )?;
                assert_eq!(
                    call.tool_info,
                    Some(listed),
                    "the listing is kept with the call"
                );
                // Two deciders: the first moves it, the second finds it moved.
                let moved = [
                    transition(
                        ctx.conn,
                        call.id,
                        GatedState::Pending,
                        GatedState::Approved,
                        Some("ada"),
                        None,
                    )?,
                    transition(
                        ctx.conn,
                        call.id,
                        GatedState::Pending,
                        GatedState::Declined,
                        Some("bob"),
                        Some("no"),
                    )?,
                ];
                // Two claimants: one wins.
                let claim = || {
                    transition(
                        ctx.conn,
                        call.id,
                        GatedState::Approved,
                        GatedState::Running,
                        None,
                        None,
                    )
                };
                let claims = [claim()?, claim()?];
                let state = get(ctx.conn, call.id)?;
                agents::revoke(ctx.conn, "bot")?;
                let revoked_is_gone = agents::by_token_digest(ctx.conn, "digest")?.is_none();
                Ok((moved, claims, state, revoked_is_gone))
            })
            .expect("write");
        assert_eq!(moved, [true, false], "the second decider must lose");
        assert_eq!(claims, [true, false], "only one claimant may send the call");
        assert_eq!(state.state, GatedState::Running);
        assert_eq!(
            state.decided_by.as_deref(),
            Some("ada"),
            "the winner's decision is kept"
        );
        assert_eq!(state.reason, None, "the loser's reason is not recorded");
        assert!(revoked_is_gone, "a revoked token no longer finds its agent");
        remove(dir, ledger);
    }

    #[test]
    fn questions_are_answered_once_and_an_answered_round_is_taken_by_one_sender() {
        let (dir, ledger) = scratch();
        let seen = ledger
            .write_blocking(|ctx| {
                let call = record_call(
                    ctx.conn,
                    "csg-q",
                    "test_tool_with_task",
                    GatedState::Approved,
                    None,
                )?;
                let questions = GatedQuestions {
                    input_requests:
                        serde_json::json!({"user_name": {"method": "elicitation/create"}})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    request_state: Some("opaque".into()),
                    rounds: 1,
                };
                let asked_before_running = ask(ctx.conn, call.id, &questions)?;
                transition(
                    ctx.conn,
                    call.id,
                    GatedState::Approved,
                    GatedState::Running,
                    None,
                    None,
                )?;
                let taken_unanswered = take_answered(ctx.conn, call.id)?;
                let asked = ask(ctx.conn, call.id, &questions)?;
                let listed = asking(ctx.conn)?.len();
                let mut answers = Map::new();
                answers.insert("user_name".into(), serde_json::json!({"action": "decline"}));
                let answered = [
                    answer(ctx.conn, call.id, &answers)?,
                    answer(ctx.conn, call.id, &answers)?,
                ];
                let to_send = answered_calls(ctx.conn)?;
                let taken = [
                    take_answered(ctx.conn, call.id)?,
                    take_answered(ctx.conn, call.id)?,
                ];
                let after = get(ctx.conn, call.id)?;
                let withdrawn_after_take = withdraw_asking(ctx.conn, call.id)?;
                ask(ctx.conn, call.id, &questions)?;
                let withdrawn_while_asking = withdraw_asking(ctx.conn, call.id)?;
                let cancelled = get(ctx.conn, call.id)?;
                assert!(
                    !withdrawn_after_take,
                    "a taken round is on its way: the withdrawal must lose"
                );
                assert!(withdrawn_while_asking, "nothing ran: it can be withdrawn");
                assert_eq!(cancelled.state, GatedState::Cancelled);
                assert!(
                    !answer(ctx.conn, call.id, &answers)?,
                    "a withdrawn call takes no answers"
                );
                Ok((
                    asked_before_running,
                    taken_unanswered,
                    asked,
                    listed,
                    answered,
                    to_send.len(),
                    taken,
                    after,
                    questions,
                    answers,
                ))
            })
            .expect("write");
        let (before, unanswered, asked, listed, answered, to_send, taken, after, q, a) = seen;
        assert!(!before, "only a running call can be asking");
        assert!(unanswered.is_none(), "nothing to send before the answers");
        assert!(asked, "a running call records its upstream's questions");
        assert_eq!(listed, 1, "the person sees them");
        assert_eq!(answered, [true, false], "answered once");
        assert_eq!(to_send, 1, "the answered round waits for its sender");
        assert_eq!(
            taken,
            [Some((q, a)), None],
            "one sender takes the round with the state to echo"
        );
        assert_eq!((after.questions, after.answers), (None, None));
        assert_eq!(after.state, GatedState::Running, "still in flight");
        remove(dir, ledger);
    }

    #[test]
    fn setting_a_rule_again_replaces_it_and_a_condition_makes_another_rule() {
        let (dir, ledger) = scratch();
        let rules_now = ledger
            .write_blocking(|ctx| {
                let server = servers::add(ctx.conn, "demo", "http://127.0.0.1:1/mcp", false)?;
                let rule = |action, condition| NewRule {
                    agent_id: None,
                    server_id: server.id,
                    tool: "echo",
                    action,
                    condition,
                };
                rules::set(ctx.conn, rule(RuleAction::Ask, None))?;
                rules::set(ctx.conn, rule(RuleAction::Allow, None))?;
                rules::set(ctx.conn, rule(RuleAction::Deny, Some(r#"{"region":"us"}"#)))?;
                rules::list(ctx.conn)
            })
            .expect("write");
        let mut actions: Vec<(RuleAction, bool)> = rules_now
            .iter()
            .map(|r| (r.action, r.condition.is_some()))
            .collect();
        actions.sort_by_key(|(_, c)| *c);
        assert_eq!(
            actions,
            vec![(RuleAction::Allow, false), (RuleAction::Deny, true)]
        );
        remove(dir, ledger);
    }
}
