//! Ledger records as every face shows them (the app's IPC, the CLI's `--json`): pure
//! conversions, no I/O, and the domain rules of presentation (a server's health, whether it
//! supports tasks, the fields of an audited answer) in one place.

use crate::decision::Decision;
use crate::ledger::audit::AuditRecord;
use crate::ledger::events::{ServerReachability, SignInState, StoredEvent, Via};
use crate::ledger::inputs::{InboxItem, InputRecord, InputState as LedgerInputState};
use crate::ledger::servers::ServerRecord;
use crate::ledger::tasks::{LedgerStatus, TaskSummary};
use crate::mcp::{self, Elicitation};
use serde_json::Value;

use super::view::{
    AuditEntry, EventVia, EventView, InputKind, InputRequestView, InputState, InputView,
    Reachability, ServerHealth, ServerView, SignInInfo, StdioView, TaskView, ToolView,
};

/// A list row.
pub fn task(t: &TaskSummary) -> TaskView {
    TaskView {
        row: t.id,
        task_id: t.task_id.clone(),
        server_name: t.server.clone(),
        tool_name: t.tool.clone(),
        origin: t.origin,
        status: t.status,
        status_message: t.status_message.clone(),
        created_at_ms: t.created_at,
        updated_at_ms: t.updated_at,
        finished_at_ms: t.finished_at,
        ttl_ms: t.ttl_ms,
        pending_inputs: t.pending_inputs,
        poll_error: t.poll_error.clone(),
        last_decision: t.last_decision,
        cancelled_by_you: t.cancel_requested,
        result_is_error: t.result_is_error,
        outcome: outcome(t),
    }
}

/// What a person should know of how a task ended beyond its status: their part in it ("denied by
/// you"; "by you" for a cancel they asked for) and a tool that reported an error (the task
/// completed, the tool did not do its job; not said after a denial, which it follows from). None
/// while it runs: then the status is what matters.
pub fn outcome(t: &TaskSummary) -> Option<String> {
    match t.status {
        LedgerStatus::Working | LedgerStatus::InputRequired => return None,
        LedgerStatus::Cancelled if t.cancel_requested => return Some("by you".into()),
        _ => {}
    }
    // A tool that fails because the person said no did what it was told: the decision says it.
    let against = matches!(
        t.last_decision,
        Some(Decision::Denied | Decision::Declined | Decision::Dismissed)
    );
    let mut parts = Vec::new();
    if t.status == LedgerStatus::Completed && t.result_is_error && !against {
        parts.push("tool reported an error".to_owned());
    }
    if let Some(decision) = t.last_decision {
        parts.push(format!("{} by you", decision.as_str()));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// A stored `{method, params}` request as what the UI renders.
pub fn input_kind(request: &Value) -> InputKind {
    let parsed: Option<mcp::InputRequest> = serde_json::from_value(request.clone()).ok();
    match parsed.as_ref().map(|r| (r, r.elicitation())) {
        Some((
            _,
            Some(Elicitation::Form {
                message,
                requested_schema,
            }),
        )) => InputKind::Form {
            message,
            requested_schema,
        },
        Some((
            _,
            Some(Elicitation::Url {
                message,
                url,
                elicitation_id,
            }),
        )) => InputKind::Url {
            message,
            url,
            elicitation_id,
        },
        Some((r, None)) => InputKind::Unsupported {
            method: match r.params.get("mode").and_then(Value::as_str) {
                Some(mode) if r.method == "elicitation/create" => {
                    format!("{} (mode {mode})", r.method)
                }
                _ => r.method.clone(),
            },
        },
        None => InputKind::Unsupported {
            method: "(malformed request)".into(),
        },
    }
}

/// The question's text, for audit rows and notifications.
pub fn question_text(request: &Value) -> Option<String> {
    request
        .get("params")
        .and_then(|p| p.get("message"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// An inbox row. `expires_at_ms` counts the TTL from when we first recorded the task.
pub fn inbox_item(item: &InboxItem) -> InputRequestView {
    InputRequestView {
        task_row: item.input.task,
        key: item.input.key.clone(),
        task_id: item.task_id.clone(),
        server_name: item.server.clone(),
        tool_name: item.tool.clone(),
        requested_at_ms: item.input.requested_at,
        expires_at_ms: item
            .ttl_ms
            .map(|ttl| item.task_created_at.saturating_add(ttl as i64)),
        request: input_kind(&item.input.request),
    }
}

/// One question of a task with its answer.
pub fn input(i: &InputRecord) -> InputView {
    InputView {
        key: i.key.clone(),
        state: match i.state {
            LedgerInputState::Pending => InputState::Pending,
            LedgerInputState::Answered => InputState::Answered,
            LedgerInputState::Delivered => InputState::Delivered,
            LedgerInputState::Superseded => InputState::Superseded,
        },
        requested_at_ms: i.requested_at,
        request: input_kind(&i.request),
        answer: i.answer.clone(),
        answered_at_ms: i.answered_at,
        answered_by: i.answered_by.clone(),
        delivered_at_ms: i.delivered_at,
    }
}

/// A ledger event.
pub fn event(e: &StoredEvent) -> EventView {
    EventView {
        id: e.id,
        at_ms: e.at,
        task_row: e.task,
        task_id: e.task_id.clone(),
        server_id: e.server_id,
        server_name: e.server.clone(),
        via: match e.via {
            Via::Poll => EventVia::Poll,
            Via::Push => EventVia::Push,
            Via::Call => EventVia::Call,
            Via::User => EventVia::User,
            Via::Engine => EventVia::Engine,
        },
        fact: e.kind.clone(),
    }
}

/// A registered server with what the engine last concluded about reaching it.
pub fn server(
    s: &ServerRecord,
    seen: Option<&ServerReachability>,
    sign_in: Option<&SignInState>,
    info: Option<SignInInfo>,
) -> ServerView {
    let discovered = s.discovered_at;
    // The newest verdict wins: a discovery after a failure means reachable again.
    let health = match seen {
        Some(r) if discovered.is_none_or(|d| r.at > d) => ServerHealth {
            state: if r.reachable {
                Reachability::Reachable
            } else {
                Reachability::Unreachable
            },
            at_ms: Some(r.at),
            message: r.message.clone(),
        },
        _ => match discovered {
            Some(at) => ServerHealth {
                state: Reachability::Reachable,
                at_ms: Some(at),
                message: None,
            },
            None => ServerHealth {
                state: Reachability::Unknown,
                at_ms: None,
                message: None,
            },
        },
    };
    // Waiting for a sign-in outranks reachability: nothing is sent to the server meanwhile.
    let health = match sign_in {
        Some(SignInState {
            needed: Some(message),
            at,
            ..
        }) => ServerHealth {
            state: Reachability::SignInNeeded,
            at_ms: Some(*at),
            message: Some(message.clone()),
        },
        _ => health,
    };
    let identity = s.server_info.as_ref().and_then(|info| {
        let name = info
            .get("title")
            .or_else(|| info.get("name"))
            .and_then(Value::as_str)?;
        Some(match info.get("version").and_then(Value::as_str) {
            Some(v) => format!("{name} {v}"),
            None => name.to_owned(),
        })
    });
    let stdio = s.command.as_ref().map(|spec| StdioView {
        command: spec.command().display(),
        cwd: spec.cwd.clone(),
        env: spec.env.keys().cloned().collect(),
        secret_env: spec.secret_env.clone(),
        process: None,
    });
    ServerView {
        stdio,
        id: s.id,
        name: s.name.clone(),
        url: s.url.clone(),
        has_token: s.has_token,
        poll_floor_ms: s.poll_floor_ms,
        created_at_ms: s.created_at,
        discovered_at_ms: s.discovered_at,
        identity,
        server_info: s.server_info.clone(),
        // Each era declares tasks its own way: the Tasks extension, or `tasks.requests.tools.call`.
        supports_tasks: match s.era {
            Some(mcp::Era::Legacy) => s
                .legacy_session
                .as_ref()
                .is_some_and(mcp::LegacySession::supports_tool_tasks),
            _ => s
                .capabilities
                .as_ref()
                .and_then(|c| c.get("extensions"))
                .and_then(Value::as_object)
                .is_some_and(|e| e.contains_key(mcp::TASKS_EXTENSION)),
        },
        era: s.era,
        protocol_version: s.protocol_version.clone(),
        capabilities: s.capabilities.clone(),
        health,
        signed_in: sign_in.is_some_and(|state| state.signed_in),
        sign_in: info.filter(|_| sign_in.is_some_and(|state| state.signed_in)),
    }
}

/// A tool definition.
pub fn tool(t: &mcp::Tool) -> ToolView {
    ToolView {
        name: t.name.clone(),
        title: t.title().map(str::to_owned),
        description: t.description().map(str::to_owned),
        input_schema: t
            .input_schema()
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        task_support: t.task_support().map(str::to_owned),
    }
}

/// An audit record, with the fields of an answer pulled out of its detail.
pub fn audit(r: &AuditRecord) -> AuditEntry {
    let d = &r.detail;
    AuditEntry {
        id: r.id,
        at_ms: r.at,
        actor: r.actor.clone(),
        action: r.action,
        server: r.server.clone(),
        task_id: r.task_id.clone(),
        input_key: r.input_key.clone(),
        question: d.get("question").and_then(question_text),
        answer: d
            .get("response")
            .cloned()
            .or_else(|| d.get("inputResponses").cloned()),
        waited_ms: d.get("waited_ms").and_then(Value::as_i64),
        decision: d
            .get("decision")
            .and_then(Value::as_str)
            .and_then(crate::decision::Decision::parse),
        detail: d.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::audit::AuditAction;
    use crate::ledger::events::TaskOrigin;
    use serde_json::json;

    #[test]
    fn stored_requests_become_forms_urls_or_unsupported() {
        let form = json!({"method":"elicitation/create","params":{"message":"Go?","requestedSchema":{"type":"object"}}});
        assert!(
            matches!(input_kind(&form), InputKind::Form { ref message, .. } if message == "Go?")
        );
        let url = json!({"method":"elicitation/create","params":{"mode":"url","message":"Sign in","url":"https://h/x","elicitationId":"e1"}});
        assert!(
            matches!(input_kind(&url), InputKind::Url { ref url, ref elicitation_id, .. } if url == "https://h/x" && elicitation_id.as_deref() == Some("e1"))
        );
        let sampling = json!({"method":"sampling/createMessage","params":{}});
        assert_eq!(
            input_kind(&sampling),
            InputKind::Unsupported {
                method: "sampling/createMessage".into()
            }
        );
        assert!(matches!(
            input_kind(&json!("nonsense")),
            InputKind::Unsupported { .. }
        ));
    }

    fn ended(
        status: LedgerStatus,
        decision: Option<Decision>,
        cancelled: bool,
        tool_error: bool,
    ) -> Option<String> {
        outcome(&TaskSummary {
            id: 1,
            server_id: 1,
            server: "s".into(),
            task_id: "t".into(),
            tool: None,
            origin: TaskOrigin::Call,
            status,
            status_message: None,
            ttl_ms: None,
            created_at: 0,
            updated_at: 0,
            finished_at: None,
            poll_error: None,
            pending_inputs: 0,
            last_decision: decision,
            cancel_requested: cancelled,
            result_is_error: tool_error,
        })
    }

    #[test]
    fn how_a_task_ended_is_said_in_the_persons_terms() {
        use LedgerStatus::*;
        assert_eq!(ended(Working, Some(Decision::Denied), false, false), None);
        assert_eq!(ended(Completed, None, false, false), None);
        assert_eq!(
            ended(Completed, Some(Decision::Denied), false, true).as_deref(),
            Some("denied by you"),
            "a tool error that follows a denial is the denial"
        );
        assert_eq!(
            ended(Completed, Some(Decision::Approved), false, true).as_deref(),
            Some("tool reported an error · approved by you")
        );
        assert_eq!(
            ended(Completed, None, false, true).as_deref(),
            Some("tool reported an error")
        );
        assert_eq!(
            ended(Cancelled, Some(Decision::Approved), true, false).as_deref(),
            Some("by you")
        );
        assert_eq!(
            ended(Failed, Some(Decision::Answered), false, false).as_deref(),
            Some("answered by you")
        );
    }

    #[test]
    fn audit_answers_expose_question_answer_and_wait() {
        let r = AuditRecord {
            id: 1,
            at: 10,
            actor: "ada".into(),
            action: AuditAction::AnswerAccept,
            server: Some("demo".into()),
            task_id: Some("t1".into()),
            input_key: Some("approval".into()),
            detail: json!({"question":{"method":"elicitation/create","params":{"message":"Deploy?"}},
                "response":{"action":"accept","content":{"approve":true}},"decision":"approved","waited_ms":4200,"tool":"deploy"}),
        };
        let e = audit(&r);
        assert_eq!(e.question.as_deref(), Some("Deploy?"));
        assert_eq!(
            e.answer,
            Some(json!({"action":"accept","content":{"approve":true}}))
        );
        assert_eq!(e.waited_ms, Some(4200));
        assert_eq!(e.decision, Some(crate::decision::Decision::Approved));
    }
}
