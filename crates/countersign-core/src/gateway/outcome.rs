//! What an agent is told about a gated call: MCP results and tasks, with the SEP-2848
//! disposition in `result._meta` so an agent (or its host) can tell "did not run" from "ran and
//! failed" from "may have run". Every text here is Countersign's own words around names the
//! agent itself sent; nothing of the person's decision leaks beyond the reason they typed.

use serde_json::{json, Map, Value};
use time::format_description::well_known::Rfc3339;

use crate::ledger::gated::{GatedRecord, GatedState};
use crate::ledger::tasks::{LedgerStatus, TaskRecord};

/// The tasks extension's id.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// SEP-2848's extension id (the later text's spelling; the SEP calls ids illustrative).
pub const TOOL_APPROVAL_EXTENSION: &str = "io.modelcontextprotocol/tool-approval";
/// Where the disposition goes in `result._meta`.
pub const DISPOSITION_KEY: &str = "io.modelcontextprotocol/tool-approval-disposition";

/// How long an agent's task is kept: a week, as SEP-2848's example (covers the approval
/// deadline plus the result's retention).
pub const TASK_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// How often an agent should poll a task waiting for a person.
pub const POLL_INTERVAL_MS: u64 = 2000;

/// SEP-2848's outcome of an approval-gated call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Approved, run once, and it succeeded (or returned its own result).
    ApprovedExecuted,
    /// Declined, denied, expired or withdrawn: the tool did not run.
    DeniedNotExecuted,
    /// Approved and run; the tool or the upstream reported an error.
    ExecutionError,
    /// Sent upstream, but the outcome was lost: the tool may have run. Do not retry blindly.
    OutcomeUnknown,
}

impl Disposition {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApprovedExecuted => "approved-executed",
            Self::DeniedNotExecuted => "denied-not-executed",
            Self::ExecutionError => "execution-error",
            Self::OutcomeUnknown => "outcome-unknown",
        }
    }
}

/// An `isError` CallToolResult saying why the tool did not run (or may have), with the
/// disposition in `_meta`.
pub fn refusal(text: &str, disposition: Disposition) -> Value {
    json!({
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "isError": true,
        "_meta": {DISPOSITION_KEY: disposition.as_str()},
    })
}

/// An `isError` CallToolResult that is no outcome (the call still waits or still runs): text
/// only, no disposition, so nobody reads it as final.
pub fn notice(text: &str) -> Value {
    json!({
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "isError": true,
    })
}

/// The upstream's CallToolResult with the disposition added to its `_meta` (the rest verbatim).
pub fn with_disposition(mut result: Value, disposition: Disposition) -> Value {
    if let Value::Object(map) = &mut result {
        let meta = map
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(DISPOSITION_KEY.into(), json!(disposition.as_str()));
        }
    }
    result
}

/// The disposition of a result the tool returned.
pub fn executed(result: Value) -> Value {
    let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
    with_disposition(
        result,
        if failed {
            Disposition::ExecutionError
        } else {
            Disposition::ApprovedExecuted
        },
    )
}

/// The text of a call that did not run, by its final state.
pub fn not_run_text(call: &GatedRecord) -> String {
    let why = match call.state {
        GatedState::Declined => "a person declined it in Countersign",
        GatedState::Expired => "nobody approved it in time",
        GatedState::Denied => "Countersign's policy does not allow it",
        GatedState::Cancelled => "the request was withdrawn",
        _ => "it was not approved",
    };
    match call.reason.as_deref().filter(|r| !r.trim().is_empty()) {
        Some(reason) => format!(
            "The tool {} did not run: {why} (reason: {}).",
            call.tool,
            reason.trim()
        ),
        None => format!("The tool {} did not run: {why}.", call.tool),
    }
}

/// What a held (non-task) agent is told while its call still waits for a person.
pub fn awaiting_text(call: &GatedRecord) -> String {
    format!(
        "The call to {} is waiting for approval in Countersign and has NOT run. After a person \
         approves it, repeat the identical call (same tool, same arguments) and it will run once.",
        call.tool
    )
}

/// The text of a call whose outcome was lost after it was sent.
pub fn unknown_text(call: &GatedRecord) -> String {
    format!(
        "The outcome of {} is unknown: Countersign stopped after sending it upstream, so it may \
         have run. It was not sent again.",
        call.tool
    )
}

fn iso(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
}

/// The agent's task for a gated call, as `tasks/get` returns it (and, with `resultType:
/// "task"`, as the answer to `tools/call`). `upstream` is the ledger's record of the upstream
/// task, when the upstream answered with one: its status, message and outcome are mirrored.
pub fn agent_task(call: &GatedRecord, upstream: Option<&TaskRecord>) -> Value {
    let mut task = Map::new();
    task.insert("taskId".into(), json!(call.task_id));
    task.insert("createdAt".into(), json!(iso(call.created_at)));
    let mut updated = call.updated_at;
    let (status, message, payload): (&str, Option<String>, Option<(&str, Value)>) =
        match (call.state, upstream) {
            (GatedState::Pending, _) => (
                "working",
                Some(format!(
                    "Waiting for a person to approve {} on {} for agent {} in Countersign.",
                    call.tool, call.server, call.agent
                )),
                None,
            ),
            // The upstream's questions (MRTR) go to the person's inbox, never to the agent.
            (GatedState::Running, None) if call.questions.is_some() => (
                "working",
                Some(format!(
                    "{} on {} asked questions before running; waiting for a person to answer them in Countersign.",
                    call.tool, call.server
                )),
                None,
            ),
            (GatedState::Approved, _) | (GatedState::Running, None) => (
                "working",
                Some(format!(
                    "Approved; {} is running on {}.",
                    call.tool, call.server
                )),
                None,
            ),
            (GatedState::Running | GatedState::Done, Some(up)) => {
                updated = updated.max(up.updated_at);
                match up.status {
                    LedgerStatus::Working => ("working", up.status_message.clone(), None),
                    // The upstream's questions go to the person's inbox, never to the agent.
                    LedgerStatus::InputRequired => (
                        "working",
                        Some(format!(
                            "{} on {} waits for an answer from a person in Countersign.",
                            call.tool, call.server
                        )),
                        None,
                    ),
                    LedgerStatus::Completed => (
                        "completed",
                        None,
                        Some((
                            "result",
                            executed(up.state.get("result").cloned().unwrap_or(json!({}))),
                        )),
                    ),
                    LedgerStatus::Failed => (
                        "failed",
                        None,
                        Some((
                            "error",
                            up.state.get("error").cloned().unwrap_or(
                                json!({"code": -32603, "message": "the upstream task failed"}),
                            ),
                        )),
                    ),
                    LedgerStatus::Cancelled => ("cancelled", None, None),
                    LedgerStatus::Expired | LedgerStatus::Lost => (
                        "completed",
                        None,
                        Some((
                            "result",
                            refusal(&unknown_text(call), Disposition::OutcomeUnknown),
                        )),
                    ),
                }
            }
            (GatedState::Done, None) => (
                "completed",
                None,
                Some((
                    "result",
                    executed(call.result.clone().unwrap_or(json!({"content": []}))),
                )),
            ),
            (GatedState::Cancelled, _) => ("cancelled", None, None),
            (GatedState::OutcomeUnknown, _) => (
                "completed",
                None,
                Some((
                    "result",
                    refusal(&unknown_text(call), Disposition::OutcomeUnknown),
                )),
            ),
            (GatedState::Declined | GatedState::Expired | GatedState::Denied, _) => (
                "completed",
                None,
                Some((
                    "result",
                    refusal(&not_run_text(call), Disposition::DeniedNotExecuted),
                )),
            ),
        };
    task.insert("status".into(), json!(status));
    if let Some(message) = message {
        task.insert("statusMessage".into(), json!(message));
    }
    task.insert("lastUpdatedAt".into(), json!(iso(updated)));
    task.insert("ttlMs".into(), json!(TASK_TTL_MS));
    task.insert("pollIntervalMs".into(), json!(POLL_INTERVAL_MS));
    if let Some((key, value)) = payload {
        task.insert(key.into(), value);
    }
    Value::Object(task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::gated::GatedMode;

    fn call(state: GatedState, reason: Option<&str>) -> GatedRecord {
        GatedRecord {
            id: 1,
            task_id: "csg-1".into(),
            agent_id: 1,
            agent: "bot".into(),
            server_id: 1,
            server: "demo".into(),
            tool: "deploy_service".into(),
            arguments: Map::new(),
            args_digest: String::new(),
            mode: GatedMode::Task,
            state,
            reason: reason.map(str::to_owned),
            decided_by: None,
            result: Some(json!({"content": [{"type": "text", "text": "ok"}]})),
            upstream_task: None,
            created_at: 1_700_000_000_000,
            expires_at: 0,
            decided_at: None,
            updated_at: 1_700_000_000_000,
            tool_info: None,
            questions: None,
            answers: None,
        }
    }

    #[test]
    fn a_pending_call_is_a_working_task_naming_who_must_approve() {
        let task = agent_task(&call(GatedState::Pending, None), None);
        assert_eq!(task["status"], "working");
        assert!(task["statusMessage"]
            .as_str()
            .unwrap_or("")
            .contains("approve deploy_service"));
        assert!(task.get("result").is_none());
    }

    #[test]
    fn an_approved_call_whose_upstream_asks_first_is_working_and_hands_the_agent_no_question() {
        let mut asking = call(GatedState::Running, None);
        asking.result = None;
        asking.questions = Some(crate::ledger::gated::GatedQuestions {
            input_requests: json!({"user_name": {"method": "elicitation/create"}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            request_state: Some("s".into()),
            rounds: 1,
        });
        let task = agent_task(&asking, None);
        assert_eq!(task["status"], "working", "{task}");
        assert!(
            task["statusMessage"]
                .as_str()
                .unwrap_or("")
                .contains("a person to answer"),
            "{task}"
        );
        assert!(
            task.get("inputRequests").is_none() && !task.to_string().contains("user_name"),
            "the upstream's question is the person's, not the agent's: {task}"
        );
    }

    #[test]
    fn a_declined_call_completes_with_is_error_and_the_disposition() {
        let task = agent_task(&call(GatedState::Declined, Some("not today")), None);
        assert_eq!(task["status"], "completed");
        assert_eq!(task["result"]["isError"], true);
        assert_eq!(
            task["result"]["_meta"][DISPOSITION_KEY],
            "denied-not-executed"
        );
        let text = task["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(
            text.contains("did not run") && text.contains("not today"),
            "{text}"
        );
    }

    #[test]
    fn a_done_call_carries_the_upstream_result_verbatim_with_the_disposition() {
        let task = agent_task(&call(GatedState::Done, None), None);
        assert_eq!(task["status"], "completed");
        assert_eq!(task["result"]["content"][0]["text"], "ok");
        assert_eq!(
            task["result"]["_meta"][DISPOSITION_KEY],
            "approved-executed"
        );
    }

    #[test]
    fn a_lost_outcome_says_it_may_have_run() {
        let task = agent_task(&call(GatedState::OutcomeUnknown, None), None);
        assert_eq!(task["result"]["_meta"][DISPOSITION_KEY], "outcome-unknown");
    }
}
