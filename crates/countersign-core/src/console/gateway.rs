//! The gateway's actions on the console: agents, rules and gated calls (record, decide, claim
//! and run, withdraw, expire, conclude after a crash). Each is one synced ledger transaction with
//! its `gated_call_changed` event, and a person's decisions also get an audit record, as every
//! other console action. The endpoint ([`crate::gateway::endpoint`]), the CLI and the app all
//! come through here.

use serde_json::{json, Map, Value};

use super::view::{
    AgentView, CallQuestion, GatedCallView, GatedDecision, GatedQuestionsView, GatedTimeline,
    RuleSetRequest, RuleView,
};
use super::{present, Console, Error, Result};
use crate::actions::{self, Called};
use crate::gateway::{self, outcome, policy};
use crate::ledger::agents::{self, AgentRecord};
use crate::ledger::audit::{self, AuditAction, NewAudit};
use crate::ledger::events::NewEvent;
use crate::ledger::gated::{
    self, GatedMode, GatedQuestions, GatedRecord, GatedState, NewGated, ToolInfo,
};
use crate::ledger::rules::{self, NewRule, RuleAction, RuleRecord};
use crate::ledger::servers::ServerRecord;
use crate::ledger::{self, events, now_ms, tasks, EventKind, Via, WriteCtx};
use crate::mcp::{self, ToolCall};
use crate::sensitive::Sensitive;

/// At most this many of one agent's calls wait for a person at once; more are refused (not
/// queued), so a looping agent cannot bury the inbox.
pub const MAX_PENDING_PER_AGENT: u64 = 20;

/// At most this many new approval requests per agent in [`ASK_RATE_WINDOW_MS`]; more are
/// refused (not queued): the waiting cap bounds the inbox, this bounds how fast an agent that
/// keeps asking (deciding or withdrawing each) can interrupt a person.
pub const MAX_ASKS_PER_WINDOW: u64 = 30;

/// The window of [`MAX_ASKS_PER_WINDOW`].
pub const ASK_RATE_WINDOW_MS: i64 = 60 * 1000;

/// How long a call waits for a decision before it expires (the tool then never runs).
pub const APPROVAL_WINDOW_MS: i64 = 24 * 3600 * 1000;

/// Longest agent name.
const MAX_AGENT_NAME: usize = 64;

/// What the policy made of an agent's call.
#[derive(Debug, Clone)]
pub enum Gate {
    /// Send it upstream now.
    Allow,
    /// Refused, and recorded; the agent is told the tool did not run.
    Denied(GatedRecord),
    /// A person decides: a new pending call, or the identical call already pending, approved
    /// (ready to run once) or running.
    Held(GatedRecord),
}

/// An agent's `tools/call` as the gateway received it.
#[derive(Debug, Clone, Copy)]
pub struct AgentCall<'a> {
    /// Who calls.
    pub agent: &'a AgentRecord,
    /// The upstream server.
    pub server: &'a ServerRecord,
    /// The tool.
    pub tool: &'a str,
    /// The arguments as sent.
    pub arguments: &'a Map<String, Value>,
    /// How the agent can wait.
    pub mode: GatedMode,
    /// What the upstream last listed about the tool (its `readOnlyHint` counts for the
    /// read-only switch; unknown = not read-only), recorded with a held call for the person.
    pub tool_info: Option<&'a ToolInfo>,
}

/// What one agent request needs from the ledger, read at once (one blocking read, not three:
/// the ledger has one reader connection, shared by every request).
#[derive(Debug, Clone)]
pub struct Admission {
    /// The live agent holding the token, if any.
    pub agent: Option<AgentRecord>,
    /// The server of that name, if registered.
    pub server: Option<ServerRecord>,
    /// The policy for the tool called (`tools/call` only), for [`Console::gate`].
    pub policy: Option<PolicyInput>,
}

/// The stored policy for one agent, server and tool.
#[derive(Debug, Clone, Default)]
pub struct PolicyInput {
    /// The rules that can apply.
    pub rules: Vec<RuleRecord>,
    /// The server's read-only switch.
    pub allow_read_only: bool,
}

/// The outcome of claiming an approved call for sending.
#[derive(Debug, Clone)]
pub enum Claim {
    /// Ours to send, now `running`.
    Run(GatedRecord),
    /// Not ours: another request claimed it, it was withdrawn, or the fresh policy check
    /// refused it (the record says which).
    Not(GatedRecord),
}

fn changed(ctx: &mut WriteCtx<'_>, call: &GatedRecord, via: Via) -> ledger::Result<()> {
    ctx.append(NewEvent {
        task: None,
        server_id: Some(call.server_id),
        via,
        kind: EventKind::GatedCallChanged {
            task_id: call.task_id.clone(),
            agent: call.agent.clone(),
            tool: call.tool.clone(),
            state: call.state,
        },
    })?;
    Ok(())
}

/// A gated call as the inbox and the Agents view show it.
pub fn gated_view(call: &GatedRecord) -> GatedCallView {
    GatedCallView {
        kind: "tool_call",
        task_id: call.task_id.clone(),
        agent: call.agent.clone(),
        server: call.server.clone(),
        tool: call.tool.clone(),
        arguments: Value::Object(call.arguments.clone()),
        state: call.state,
        mode: call.mode,
        reason: call.reason.clone(),
        decided_by: call.decided_by.clone(),
        created_at: call.created_at,
        expires_at: call.expires_at,
        decided_at: call.decided_at,
        upstream_task: call.upstream_task,
        tool_info: call.tool_info.clone(),
    }
}

fn agent_view(agent: &AgentRecord) -> AgentView {
    AgentView {
        id: agent.id,
        name: agent.name.clone(),
        created_at: agent.created_at,
        revoked_at: agent.revoked_at,
    }
}

fn rule_view(rule: &RuleRecord) -> RuleView {
    RuleView {
        id: rule.id,
        agent: rule.agent.clone(),
        server: rule.server.clone(),
        tool: rule.tool.clone(),
        action: rule.action,
        condition: rule.condition.clone().map(Value::Object),
        created_at: rule.created_at,
    }
}

fn check_agent_name(name: &str) -> Result<&str> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::Invalid("an agent needs a name".into()));
    }
    if name.len() > MAX_AGENT_NAME
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(Error::Invalid(format!(
            "agent names are at most {MAX_AGENT_NAME} letters, digits, '-', '_' or '.': {name:?}"
        )));
    }
    Ok(name)
}

impl Console {
    // ---- agents ---------------------------------------------------------------------------

    /// Every agent, revoked ones too.
    pub async fn agents(&self) -> Result<Vec<AgentView>> {
        Ok(self
            .read(agents::list)
            .await?
            .iter()
            .map(agent_view)
            .collect())
    }

    /// Adds an agent and returns its token: shown this once, stored only as a digest.
    pub async fn add_agent(&self, name: &str) -> Result<(AgentView, Sensitive<String>)> {
        let name = check_agent_name(name)?.to_owned();
        let token = gateway::new_token();
        let digest = gateway::token_digest(token.expose());
        let actor = self.actor.clone();
        let agent = self
            .ledger
            .write(move |ctx| {
                let agent = agents::add(ctx.conn, &name, &digest)?;
                audit::record(
                    ctx.conn,
                    NewAudit {
                        actor: &actor,
                        action: AuditAction::AgentAdd,
                        server: None,
                        task_id: None,
                        input_key: None,
                        detail: json!({"agent": agent.name}),
                    },
                )?;
                Ok(agent)
            })
            .await
            .map_err(|e| match e {
                ledger::Error::Conflict(why) => Error::Invalid(why),
                e => e.into(),
            })?;
        Ok((agent_view(&agent), token))
    }

    /// Revokes an agent's token: its next request gets 401, and its approved calls not yet
    /// sent are refused when claimed.
    pub async fn remove_agent(&self, name: &str) -> Result<AgentView> {
        let name = name.trim().to_owned();
        let actor = self.actor.clone();
        let agent = self
            .ledger
            .write(move |ctx| {
                let agent = agents::revoke(ctx.conn, &name)?;
                audit::record(
                    ctx.conn,
                    NewAudit {
                        actor: &actor,
                        action: AuditAction::AgentRemove,
                        server: None,
                        task_id: None,
                        input_key: None,
                        detail: json!({"agent": agent.name}),
                    },
                )?;
                Ok(agent)
            })
            .await?;
        Ok(agent_view(&agent))
    }

    /// The live agent holding `token`, if any (the endpoint's authentication).
    pub async fn authenticate_agent(&self, token: &str) -> Result<Option<AgentRecord>> {
        let digest = gateway::token_digest(token);
        self.read(move |c| agents::by_token_digest(c, &digest))
            .await
    }

    /// Everything one agent request needs, in one read: the agent holding `token`, the server
    /// named `server`, and, for a `tools/call` of `tool`, the policy that applies.
    pub async fn admit(&self, token: &str, server: &str, tool: Option<&str>) -> Result<Admission> {
        let digest = gateway::token_digest(token);
        let (server, tool) = (server.to_owned(), tool.map(str::to_owned));
        self.read(move |c| {
            let agent = agents::by_token_digest(c, &digest)?;
            let server = crate::ledger::servers::by_name(c, &server)?;
            let policy = match (&agent, &server, tool) {
                (Some(agent), Some(server), Some(tool)) => Some(PolicyInput {
                    rules: rules::for_call(c, agent.id, server.id, &tool)?,
                    allow_read_only: rules::allows_read_only(c, server.id)?,
                }),
                _ => None,
            };
            Ok(Admission {
                agent,
                server,
                policy,
            })
        })
        .await
    }

    // ---- rules ----------------------------------------------------------------------------

    /// Every rule.
    pub async fn rules(&self) -> Result<Vec<RuleView>> {
        Ok(self
            .read(rules::list)
            .await?
            .iter()
            .map(rule_view)
            .collect())
    }

    /// Sets a rule (replacing the one with the same agent, server, tool and condition).
    pub async fn set_rule(&self, request: RuleSetRequest) -> Result<RuleView> {
        let server = self
            .server_named(request.server.trim())
            .await?
            .ok_or_else(|| Error::NotFound(format!("server {:?}", request.server.trim())))?;
        let tool = request.tool.trim().to_owned();
        if tool.is_empty() {
            return Err(Error::Invalid("a rule needs a tool name".into()));
        }
        let condition = match request.condition {
            None => None,
            Some(Value::Object(map)) if map.is_empty() => None,
            Some(value @ Value::Object(_)) => Some(gateway::canonical_text(&value)),
            Some(other) => {
                return Err(Error::Invalid(format!(
                    "a condition is a JSON object of argument values, e.g. {{\"environment\": \"staging\"}}; got {other}"
                )))
            }
        };
        let agent = match request.agent.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(name) => {
                let name = name.to_owned();
                let found = self.read(move |c| agents::active_by_name(c, &name)).await?;
                Some(found.ok_or_else(|| {
                    Error::NotFound(format!("agent {:?}", request.agent.unwrap_or_default()))
                })?)
            }
        };
        let actor = self.actor.clone();
        let action = request.action;
        let rule = self
            .ledger
            .write(move |ctx| {
                let rule = rules::set(
                    ctx.conn,
                    NewRule {
                        agent_id: agent.as_ref().map(|a| a.id),
                        server_id: server.id,
                        tool: &tool,
                        action,
                        condition: condition.as_deref(),
                    },
                )?;
                audit::record(
                    ctx.conn,
                    NewAudit {
                        actor: &actor,
                        action: AuditAction::RuleSet,
                        server: Some(&server.name),
                        task_id: None,
                        input_key: None,
                        detail: json!({
                            "rule": rule.id, "agent": rule.agent, "tool": rule.tool,
                            "action": rule.action, "condition": rule.condition,
                        }),
                    },
                )?;
                Ok(rule)
            })
            .await?;
        Ok(rule_view(&rule))
    }

    /// Removes a rule.
    pub async fn remove_rule(&self, id: i64) -> Result<()> {
        let actor = self.actor.clone();
        self.ledger
            .write(move |ctx| {
                let rule = rules::remove(ctx.conn, id)?;
                audit::record(
                    ctx.conn,
                    NewAudit {
                        actor: &actor,
                        action: AuditAction::RuleRemove,
                        server: Some(&rule.server),
                        task_id: None,
                        input_key: None,
                        detail: json!({"rule": rule.id, "agent": rule.agent, "tool": rule.tool,
                                       "action": rule.action, "condition": rule.condition}),
                    },
                )?;
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Switches "allow the tools this server marks read-only" (off unless switched on).
    pub async fn set_allow_read_only(&self, server: &str, allow: bool) -> Result<()> {
        let server = self
            .server_named(server.trim())
            .await?
            .ok_or_else(|| Error::NotFound(format!("server {:?}", server.trim())))?;
        let actor = self.actor.clone();
        self.ledger
            .write(move |ctx| {
                rules::set_allow_read_only(ctx.conn, server.id, allow)?;
                audit::record(
                    ctx.conn,
                    NewAudit {
                        actor: &actor,
                        action: AuditAction::GatewayReadOnly,
                        server: Some(&server.name),
                        task_id: None,
                        input_key: None,
                        detail: json!({"allow_read_only": allow}),
                    },
                )?;
                Ok(())
            })
            .await?;
        Ok(())
    }

    // ---- gated calls ----------------------------------------------------------------------

    /// Gated calls waiting for a person, oldest first (the inbox).
    pub async fn pending_gated_calls(&self) -> Result<Vec<GatedCallView>> {
        Ok(self
            .read(|c| gated::in_state(c, GatedState::Pending))
            .await?
            .iter()
            .map(gated_view)
            .collect())
    }

    /// The newest gated calls, whatever their state.
    pub async fn gated_calls(&self, limit: usize) -> Result<Vec<GatedCallView>> {
        Ok(self
            .read(move |c| gated::recent(c, limit))
            .await?
            .iter()
            .map(gated_view)
            .collect())
    }

    /// One gated call from request to outcome, from the ledger (see [`GatedTimeline`]).
    pub async fn gated_timeline(&self, task_id: &str) -> Result<GatedTimeline> {
        let id = task_id.trim().to_owned();
        let found = self
            .read(move |c| {
                let Some(call) = gated::by_task_id(c, &id)? else {
                    return Ok(None);
                };
                let mut events = events::for_gated_call(c, &call.task_id)?;
                if let Some(row) = call.upstream_task {
                    events.extend(events::for_task(c, row)?);
                }
                Ok(Some((call, events)))
            })
            .await?;
        let (call, mut events) =
            found.ok_or_else(|| Error::NotFound(format!("gated call {:?}", task_id.trim())))?;
        // Ids are commit order, so the call's own events and its upstream task's interleave
        // as they happened.
        events.sort_by_key(|e| e.id);
        Ok(GatedTimeline {
            call: gated_view(&call),
            result: call.result.clone(),
            events: events.iter().map(present::event).collect(),
        })
    }

    /// One gated call by Countersign's task id.
    pub async fn gated_call(&self, task_id: &str) -> Result<GatedRecord> {
        let id = task_id.trim().to_owned();
        self.read(move |c| gated::by_task_id(c, &id))
            .await?
            .ok_or_else(|| Error::NotFound(format!("gated call {:?}", task_id.trim())))
    }

    /// Decides a gated call: approve (it runs once, when the gateway claims it) or decline (it
    /// never runs). "Always allow" also sets a rule allowing this tool for this agent.
    pub async fn decide_gated(
        &self,
        task_id: &str,
        decision: GatedDecision,
    ) -> Result<GatedCallView> {
        let call = self.gated_call(task_id).await?;
        if call.state != GatedState::Pending {
            return Err(Error::AlreadyAnswered(format!(
                "This call was already decided ({}).",
                call.state.as_str()
            )));
        }
        let actor = self.actor.clone();
        let to = if decision.approve {
            GatedState::Approved
        } else {
            GatedState::Declined
        };
        let reason = decision
            .reason
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty());
        let decided = self
            .ledger
            .write(move |ctx| {
                if !gated::transition(
                    ctx.conn,
                    call.id,
                    GatedState::Pending,
                    to,
                    Some(&actor),
                    reason.as_deref(),
                )? {
                    return Err(ledger::Error::Conflict(
                        "This call was decided, withdrawn or expired meanwhile.".into(),
                    ));
                }
                let decided = gated::get(ctx.conn, call.id)?;
                audit::record(
                    ctx.conn,
                    NewAudit {
                        actor: &actor,
                        action: if decision.approve {
                            AuditAction::GatedCallApprove
                        } else {
                            AuditAction::GatedCallDecline
                        },
                        server: Some(&decided.server),
                        task_id: Some(&decided.task_id),
                        input_key: None,
                        detail: json!({
                            "agent": decided.agent, "tool": decided.tool,
                            "arguments": decided.arguments, "argsDigest": decided.args_digest,
                            "reason": decided.reason, "alwaysAllow": decision.always_allow,
                            "waited_ms": now_ms() - decided.created_at,
                        }),
                    },
                )?;
                if decision.approve && decision.always_allow {
                    let rule = rules::set(
                        ctx.conn,
                        NewRule {
                            agent_id: Some(decided.agent_id),
                            server_id: decided.server_id,
                            tool: &decided.tool,
                            action: RuleAction::Allow,
                            condition: None,
                        },
                    )?;
                    audit::record(
                        ctx.conn,
                        NewAudit {
                            actor: &actor,
                            action: AuditAction::RuleSet,
                            server: Some(&decided.server),
                            task_id: Some(&decided.task_id),
                            input_key: None,
                            detail: json!({"rule": rule.id, "agent": rule.agent, "tool": rule.tool,
                                           "action": rule.action, "condition": null}),
                        },
                    )?;
                }
                changed(ctx, &decided, Via::User)?;
                Ok(decided)
            })
            .await
            .map_err(|e| match e {
                ledger::Error::Conflict(why) => Error::AlreadyAnswered(why),
                e => e.into(),
            })?;
        Ok(gated_view(&decided))
    }

    /// Applies the policy (read with [`Console::admit`]) to an agent's call. A call that needs a person is on disk (or merged
    /// with the identical one already waiting) before this returns; nothing has been sent.
    pub async fn gate(&self, call: AgentCall<'_>, policy: &PolicyInput) -> Result<Gate> {
        let (agent_id, server_id, tool) = (call.agent.id, call.server.id, call.tool.to_owned());
        let verdict = policy::evaluate(
            &policy.rules,
            agent_id,
            call.arguments,
            policy.allow_read_only,
            call.tool_info.and_then(|t| t.read_only_hint) == Some(true),
        );
        if verdict.action == RuleAction::Allow {
            return Ok(Gate::Allow);
        }
        let arguments = call.arguments.clone();
        let digest = gateway::args_digest(&arguments);
        let mode = call.mode;
        let tool_info = call.tool_info.cloned();
        let deny_reason = match verdict.basis {
            policy::Basis::Rule(id) if verdict.action == RuleAction::Deny => {
                Some(format!("rule #{id}"))
            }
            _ => None,
        };
        Ok(self
            .ledger
            .write(move |ctx| {
                let record = |ctx: &mut WriteCtx<'_>, state, reason: Option<&str>| {
                    let task_id = gateway::new_task_id();
                    let call = gated::insert(
                        ctx.conn,
                        NewGated {
                            task_id: &task_id,
                            agent_id,
                            server_id,
                            tool: &tool,
                            arguments: &arguments,
                            args_digest: &digest,
                            mode,
                            state,
                            reason,
                            expires_at: now_ms() + APPROVAL_WINDOW_MS,
                            tool_info: tool_info.as_ref(),
                        },
                    )?;
                    changed(ctx, &call, Via::Call)?;
                    Ok::<_, ledger::Error>(call)
                };
                if let Some(reason) = &deny_reason {
                    return Ok(Gate::Denied(record(ctx, GatedState::Denied, Some(reason))?));
                }
                // The identical call (same agent, server, tool, arguments) already waiting,
                // approved or running is the same request: merged, never a second approval.
                for state in [
                    GatedState::Approved,
                    GatedState::Pending,
                    GatedState::Running,
                ] {
                    // Only a call waiting the same way: an approved held call runs on the
                    // agent's retry, an approved task call from the gateway's sender.
                    if let Some(existing) =
                        gated::with_binding(ctx.conn, agent_id, server_id, &tool, &digest, state)?
                            .filter(|existing| existing.mode == mode)
                    {
                        return Ok(Gate::Held(existing));
                    }
                }
                if gated::pending_count(ctx.conn, agent_id)? >= MAX_PENDING_PER_AGENT {
                    let reason = format!(
                        "{MAX_PENDING_PER_AGENT} calls of this agent already wait for approval"
                    );
                    return Ok(Gate::Denied(record(
                        ctx,
                        GatedState::Denied,
                        Some(&reason),
                    )?));
                }
                if gated::asked_since(ctx.conn, agent_id, now_ms() - ASK_RATE_WINDOW_MS)?
                    >= MAX_ASKS_PER_WINDOW
                {
                    let reason = format!(
                        "this agent asked for {MAX_ASKS_PER_WINDOW} approvals within a minute; ask again later"
                    );
                    return Ok(Gate::Denied(record(
                        ctx,
                        GatedState::Denied,
                        Some(&reason),
                    )?));
                }
                Ok(Gate::Held(record(ctx, GatedState::Pending, None)?))
            })
            .await?)
    }

    /// Claims an approved call for sending: `approved` → `running` in one synced write, after a
    /// fresh check (the approval is an input to the decision, not a grant): a revoked agent or
    /// a rule that now denies turns it `denied` instead.
    pub async fn claim_gated(&self, id: i64) -> Result<Claim> {
        Ok(self
            .ledger
            .write(move |ctx| {
                let call = gated::get(ctx.conn, id)?;
                if call.state != GatedState::Approved {
                    return Ok(Claim::Not(call));
                }
                let agent = agents::get(ctx.conn, call.agent_id)?;
                let rules = rules::for_call(ctx.conn, call.agent_id, call.server_id, &call.tool)?;
                let verdict =
                    policy::evaluate(&rules, call.agent_id, &call.arguments, false, false);
                let refusal = if agent.revoked_at.is_some() {
                    Some("the agent's token was revoked after the approval".to_owned())
                } else if verdict.action == RuleAction::Deny {
                    Some("a rule denies it since the approval".to_owned())
                } else {
                    None
                };
                let to = if refusal.is_some() {
                    GatedState::Denied
                } else {
                    GatedState::Running
                };
                gated::transition(
                    ctx.conn,
                    id,
                    GatedState::Approved,
                    to,
                    None,
                    refusal.as_deref(),
                )?;
                let call = gated::get(ctx.conn, id)?;
                changed(ctx, &call, Via::Engine)?;
                Ok(if to == GatedState::Running {
                    Claim::Run(call)
                } else {
                    Claim::Not(call)
                })
            })
            .await?)
    }

    /// Sends a claimed (`running`) call upstream once, through the console's call path (the
    /// call intent on disk first), and records what came back: a result, or the upstream task
    /// that will carry it (the engine tracks it). A request that may have reached the server
    /// without an answer is `outcome_unknown`, never sent again.
    ///
    /// `upstream` is the server's peer of its era (a client, for a 2026-07-28 server): a legacy
    /// server's task tools run as its 2025-11-25 tasks, within its session.
    pub async fn run_gated(
        &self,
        call: &GatedRecord,
        upstream: impl Into<mcp::Peer>,
    ) -> Result<GatedRecord> {
        let tool_call = ToolCall::new(call.tool.clone(), Some(call.arguments.clone()));
        self.send_gated(call, &upstream.into(), tool_call, 1).await
    }

    /// Sends the next round of a call whose upstream asked questions, once the person answered
    /// them: the same call with the answers and the upstream's `requestState` (MRTR). Only one
    /// caller takes an answered round; `None` for the others (nothing sent).
    pub async fn resend_gated(
        &self,
        call: &GatedRecord,
        upstream: impl Into<mcp::Peer>,
    ) -> Result<Option<GatedRecord>> {
        let id = call.id;
        let Some((questions, answers)) = self
            .ledger
            .write(move |ctx| gated::take_answered(ctx.conn, id))
            .await?
        else {
            return Ok(None);
        };
        let tool_call = ToolCall {
            name: call.tool.clone(),
            arguments: Some(call.arguments.clone()),
            input_responses: Some(answers),
            request_state: questions.request_state,
        };
        self.send_gated(call, &upstream.into(), tool_call, questions.rounds + 1)
            .await
            .map(Some)
    }

    /// Sends one round of a `running` call and records what came back: a result, the upstream
    /// task that will carry it, or the upstream's questions (MRTR: nothing ran; they wait for
    /// the person, and [`Console::resend_gated`] sends the answers).
    async fn send_gated(
        &self,
        call: &GatedRecord,
        peer: &mcp::Peer,
        tool_call: ToolCall,
        rounds: usize,
    ) -> Result<GatedRecord> {
        let server = self.server(call.server_id).await?;
        let actor = format!(
            "{} (agent {} via the gateway)",
            call.decided_by.as_deref().unwrap_or(&self.actor),
            call.agent
        );
        let outcome = actions::call(&self.ledger, peer, &server, &tool_call, &actor).await;
        enum Recorded {
            Finished(Option<Value>, Option<i64>),
            Asked(GatedQuestions),
            Unknown,
        }
        let recorded = match outcome {
            Ok(Called::Complete(result)) => Recorded::Finished(Some(Value::Object(result.0)), None),
            Ok(Called::Task(record)) => {
                self.nudge();
                Recorded::Finished(None, Some(record.id))
            }
            // A server that answers every round with new questions must not keep a call going
            // for ever (as for the console's own calls).
            Ok(Called::InputRequired(_)) if rounds >= mcp::MAX_MRTR_ROUNDS => Recorded::Finished(
                Some(outcome::refusal(
                    &format!(
                        "{} on {} asked questions {rounds} times without running; Countersign stopped there. The tool did not run.",
                        call.tool, call.server
                    ),
                    outcome::Disposition::ExecutionError,
                )),
                None,
            ),
            Ok(Called::InputRequired(question)) => Recorded::Asked(GatedQuestions {
                input_requests: match serde_json::to_value(&question.input_requests) {
                    Ok(Value::Object(map)) => map,
                    _ => Map::new(),
                },
                request_state: question.request_state,
                rounds,
            }),
            Err(actions::Error::Mcp(
                mcp::Error::Timeout { .. } | mcp::Error::Transport { .. },
            )) => Recorded::Unknown,
            Err(actions::Error::Mcp(e)) => Recorded::Finished(
                Some(outcome::refusal(
                    &format!("{} on {} failed: {}", call.tool, call.server, upstream_words(&e)),
                    outcome::Disposition::ExecutionError,
                )),
                None,
            ),
            Err(e) => return Err(e.into()),
        };
        let id = call.id;
        Ok(self
            .ledger
            .write(move |ctx| {
                match &recorded {
                    Recorded::Unknown => {
                        gated::transition(
                            ctx.conn,
                            id,
                            GatedState::Running,
                            GatedState::OutcomeUnknown,
                            None,
                            None,
                        )?;
                    }
                    Recorded::Finished(result, upstream_task) => {
                        gated::finish(ctx.conn, id, result.as_ref(), *upstream_task)?;
                    }
                    Recorded::Asked(questions) => {
                        gated::ask(ctx.conn, id, questions)?;
                    }
                }
                let call = gated::get(ctx.conn, id)?;
                changed(ctx, &call, Via::Call)?;
                Ok(call)
            })
            .await?)
    }

    /// Answers the questions an approved call's upstream asked before running (MRTR), by
    /// input-request key; the gateway then sends the call again with them. Every key asked must
    /// be answered, and only those.
    pub async fn answer_gated(
        &self,
        task_id: &str,
        answers: Map<String, Value>,
    ) -> Result<GatedCallView> {
        let call = self.gated_call(task_id).await?;
        let Some(questions) = call.questions.as_ref().filter(|_| call.answers.is_none()) else {
            return Err(Error::AlreadyAnswered(format!(
                "{} has no open questions ({}).",
                call.task_id,
                call.state.as_str()
            )));
        };
        let asked: Vec<&String> = questions.input_requests.keys().collect();
        if answers.len() != asked.len() || asked.iter().any(|k| !answers.contains_key(*k)) {
            return Err(Error::Invalid(format!(
                "answer each question of {} by its key: {}",
                call.task_id,
                asked
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let actor = self.actor.clone();
        let answered = self
            .ledger
            .write(move |ctx| {
                if !gated::answer(ctx.conn, call.id, &answers)? {
                    return Err(ledger::Error::Conflict(
                        "These questions were answered meanwhile.".into(),
                    ));
                }
                let answered = gated::get(ctx.conn, call.id)?;
                audit::record(
                    ctx.conn,
                    NewAudit {
                        actor: &actor,
                        action: AuditAction::GatedCallAnswer,
                        server: Some(&answered.server),
                        task_id: Some(&answered.task_id),
                        input_key: None,
                        detail: json!({
                            "agent": answered.agent, "tool": answered.tool,
                            "inputResponses": answers,
                        }),
                    },
                )?;
                changed(ctx, &answered, Via::User)?;
                Ok(answered)
            })
            .await
            .map_err(|e| match e {
                ledger::Error::Conflict(why) => Error::AlreadyAnswered(why),
                e => e.into(),
            })?;
        Ok(gated_view(&answered))
    }

    /// Approved calls whose upstream's questions wait for the person, oldest first.
    pub async fn gated_questions(&self) -> Result<Vec<GatedRecord>> {
        self.read(gated::asking).await
    }

    /// [`Console::gated_questions`] as the window shows them: each call with its open questions
    /// in the form the inbox's question forms read ([`present::input_kind`]), oldest first.
    pub async fn gated_questions_views(&self) -> Result<Vec<GatedQuestionsView>> {
        Ok(self
            .gated_questions()
            .await?
            .iter()
            .filter_map(|call| {
                let asked = call.questions.as_ref()?;
                Some(GatedQuestionsView {
                    call: gated_view(call),
                    questions: asked
                        .input_requests
                        .iter()
                        .map(|(key, request)| CallQuestion {
                            key: key.clone(),
                            request: present::input_kind(request),
                        })
                        .collect(),
                    round: u32::try_from(asked.rounds).unwrap_or(u32::MAX),
                })
            })
            .collect())
    }

    /// Approved calls whose questions were answered and whose next round is not sent yet: the
    /// gateway sends them ([`Console::resend_gated`]).
    pub async fn answered_gated_calls(&self) -> Result<Vec<GatedRecord>> {
        self.read(gated::answered_calls).await
    }

    /// The agent's view of its task `task_id` (`tasks/get`), or `None` when that agent has no
    /// such task.
    pub async fn agent_task(&self, agent_id: i64, task_id: &str) -> Result<Option<Value>> {
        let task_id = task_id.to_owned();
        self.read(move |c| {
            let Some(call) = gated::by_task_id(c, &task_id)?.filter(|g| g.agent_id == agent_id)
            else {
                return Ok(None);
            };
            let upstream = match call.upstream_task {
                Some(row) => Some(tasks::get(c, row)?),
                None => None,
            };
            Ok(Some(outcome::agent_task(&call, upstream.as_ref())))
        })
        .await
    }

    /// An agent's tasks on a server, newest first, each as [`Console::agent_task`] shows it
    /// (its `tasks/list`): at most `limit`.
    pub async fn agent_tasks(
        &self,
        agent_id: i64,
        server_id: i64,
        limit: usize,
    ) -> Result<Vec<Value>> {
        self.read(move |c| {
            gated::agent_tasks(c, agent_id, server_id, limit)?
                .iter()
                .map(|call| {
                    let upstream = match call.upstream_task {
                        Some(row) => Some(tasks::get(c, row)?),
                        None => None,
                    };
                    Ok(outcome::agent_task(call, upstream.as_ref()))
                })
                .collect()
        })
        .await
    }

    /// The agent withdraws its call (`tasks/cancel`): one not yet sent (or whose upstream asked
    /// questions before running, not yet sent again) is `cancelled` and never runs; one running as an upstream task is cancelled upstream (cooperatively). `None`
    /// when that agent has no such task.
    pub async fn withdraw_gated(
        &self,
        agent_id: i64,
        task_id: &str,
    ) -> Result<Option<GatedRecord>> {
        let tid = task_id.to_owned();
        let withdrawn = self
            .ledger
            .write(move |ctx| {
                let Some(call) =
                    gated::by_task_id(ctx.conn, &tid)?.filter(|g| g.agent_id == agent_id)
                else {
                    return Ok(None);
                };
                for from in [GatedState::Pending, GatedState::Approved] {
                    if gated::transition(
                        ctx.conn,
                        call.id,
                        from,
                        GatedState::Cancelled,
                        None,
                        None,
                    )? {
                        let call = gated::get(ctx.conn, call.id)?;
                        changed(ctx, &call, Via::Call)?;
                        return Ok(Some(call));
                    }
                }
                // Approved, but its upstream asked questions first: nothing ran yet.
                if gated::withdraw_asking(ctx.conn, call.id)? {
                    let call = gated::get(ctx.conn, call.id)?;
                    changed(ctx, &call, Via::Call)?;
                    return Ok(Some(call));
                }
                Ok(Some(call))
            })
            .await?;
        if let Some(call) = &withdrawn {
            if let (GatedState::Done | GatedState::Running, Some(row)) =
                (call.state, call.upstream_task)
            {
                match self.cancel(row).await {
                    // Finished upstream already: nothing to cancel.
                    Ok(()) | Err(Error::Invalid(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(withdrawn)
    }

    /// Expires the calls nobody decided in time. Returns how many.
    pub async fn expire_gated(&self) -> Result<usize> {
        let now = now_ms();
        self.sweep_gated(GatedState::Pending, GatedState::Expired, move |g| {
            g.expires_at <= now
        })
        .await
    }

    /// After a crash: calls claimed for sending whose answer was never recorded may have run,
    /// so they become `outcome_unknown` (never sent again). Only the process that runs the
    /// engine (and so the gateway) calls this, at its start. Returns how many.
    pub async fn conclude_interrupted_gated(&self) -> Result<usize> {
        // A call whose upstream asked questions did not run: it waits for its answers, or to
        // be sent with them, across the restart.
        self.sweep_gated(GatedState::Running, GatedState::OutcomeUnknown, |g| {
            g.result.is_none() && g.upstream_task.is_none() && g.questions.is_none()
        })
        .await
    }

    /// Moves every call in state `from` that `due` picks to `to`, each with its event, in one
    /// transaction (a call that changed meanwhile is left alone). Returns how many moved.
    async fn sweep_gated(
        &self,
        from: GatedState,
        to: GatedState,
        due: impl Fn(&GatedRecord) -> bool + Send + 'static,
    ) -> Result<usize> {
        Ok(self
            .ledger
            .write(move |ctx| {
                let mut moved = 0;
                for call in gated::in_state(ctx.conn, from)?
                    .into_iter()
                    .filter(|g| due(g))
                {
                    if gated::transition(ctx.conn, call.id, from, to, None, None)? {
                        let call = gated::get(ctx.conn, call.id)?;
                        changed(ctx, &call, Via::Engine)?;
                        moved += 1;
                    }
                }
                Ok(moved)
            })
            .await?)
    }

    /// Approved calls of agents holding a task, oldest first: the gateway claims and runs them.
    pub async fn approved_task_calls(&self) -> Result<Vec<GatedRecord>> {
        Ok(self
            .read(|c| gated::in_state(c, GatedState::Approved))
            .await?
            .into_iter()
            .filter(|g| g.mode == GatedMode::Task)
            .collect())
    }

    /// One gated call by row.
    pub async fn gated_row(&self, id: i64) -> Result<GatedRecord> {
        self.read(move |c| gated::get(c, id)).await
    }
}

/// An upstream failure in words for the agent: the JSON-RPC error's own message, or the kind
/// of failure (never a URL or a credential).
pub fn upstream_words(e: &mcp::Error) -> String {
    match e {
        mcp::Error::Rpc { error, .. } => format!(
            "the server answered error {}: {}",
            error.code, error.message
        ),
        e => format!("the upstream server could not serve it ({})", e.code()),
    }
}
