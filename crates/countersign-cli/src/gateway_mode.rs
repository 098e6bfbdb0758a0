//! The gateway's commands: `gateway` (the engine plus the local MCP endpoint agents connect
//! to), `agents` (with `agents import`, a host's file put behind the gateway), `policy`, and the gated calls in `inbox` and `answer`. Every action is a
//! core [`Console`] method; this module only prints.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use countersign_core::console::hosts::{ImportAction, ImportItem, ImportTarget, ImportedServer};
use countersign_core::console::view::{GatedCallView, GatedDecision, RuleAction, RuleSetRequest};
use countersign_core::console::Console;
use countersign_core::hosts;
use countersign_core::ledger;
use countersign_gateway::endpoint::{self, Gateway, GatewayConfig};
use countersign_gateway::relay;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::ledger_mode::Desk;
use crate::terminal::{self, say, tell};
use crate::{CliError, EXIT_COMPLETED};

/// Whether `id` names a gated call (Countersign's own task ids) rather than a server's task.
pub(crate) fn is_gated(id: &str) -> bool {
    id.trim()
        .starts_with(countersign_core::gateway::TASK_PREFIX)
}

/// `countersign gateway [--port P] [--hold-seconds S]`: runs until SIGINT/SIGTERM.
pub(crate) async fn serve(desk: Desk, port: u16, hold_seconds: u64) -> Result<u8, CliError> {
    let console = Arc::new(desk.into_console());
    let config = GatewayConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        hold: Duration::from_secs(hold_seconds.max(1)),
        ..GatewayConfig::default()
    };
    let gateway = match Gateway::start(console.clone(), config).await {
        Ok(gateway) => gateway,
        Err(e) => {
            close(console).await;
            return Err(match e {
                endpoint::Error::Console(e) => e.into(),
                endpoint::Error::Bind { source, .. } => CliError::Io(source),
                e @ endpoint::Error::EngineElsewhere { .. } => CliError::Usage(e.to_string()),
            });
        }
    };
    // First line: the base URL (tests and scripts read it); then one line per server.
    say!("{}", gateway.base_url());
    match console.server_records().await {
        Ok(servers) => {
            for server in servers {
                tell!("  {} → {}{}", server.name, gateway.base_url(), server.name);
            }
        }
        Err(e) => tell!("warning: cannot list the servers: {e}"),
    }
    tell!("agents connect with a bearer token from `countersign agents add NAME`; Ctrl-C stops");
    crate::shutdown_signal().await;
    gateway.shutdown().await;
    close(console).await;
    Ok(EXIT_COMPLETED)
}

async fn close(console: Arc<Console>) {
    // Something may still hold it (a request being answered): the process ends anyway, and
    // every write was committed before it was acknowledged.
    if let Ok(console) = Arc::try_unwrap(console) {
        console.close().await;
    }
}

/// Prints what a command did: `value` as JSON with `--json`, else as `human` tells a person.
fn report<T: Serialize + ?Sized>(
    json_out: bool,
    value: &T,
    human: impl FnOnce(&T),
) -> Result<u8, CliError> {
    if json_out {
        terminal::json(&serde_json::to_value(value).unwrap_or(Value::Null));
    } else {
        human(value);
    }
    Ok(EXIT_COMPLETED)
}

/// [`report`] for a list: for a person, a line per item, or `empty` when there is none.
fn report_list<T: Serialize>(
    json_out: bool,
    items: &[T],
    empty: &str,
    line: impl Fn(&T),
) -> Result<u8, CliError> {
    report(json_out, items, |items| {
        if items.is_empty() {
            say!("{empty}");
        }
        items.iter().for_each(line);
    })
}

/// `agents add NAME`: prints the token once.
pub(crate) async fn agents_add(desk: &Desk, name: &str, json_out: bool) -> Result<u8, CliError> {
    let (agent, token) = desk.console().add_agent(name).await?;
    if json_out {
        terminal::json(&json!({"name": agent.name, "token": token.expose()}));
    } else {
        say!(
            "agent {} added; its token (shown only now, keep it secret):",
            agent.name
        );
        say!("{}", token.expose());
    }
    Ok(EXIT_COMPLETED)
}

/// `agents remove NAME`: revokes its token.
pub(crate) async fn agents_remove(desk: &Desk, name: &str, json_out: bool) -> Result<u8, CliError> {
    let agent = desk.console().remove_agent(name).await?;
    report(json_out, &agent, |agent| {
        say!("agent {} revoked: its token no longer works", agent.name)
    })
}

/// `agents list`.
pub(crate) async fn agents_list(desk: &Desk, json_out: bool) -> Result<u8, CliError> {
    let agents = desk.console().agents().await?;
    report_list(
        json_out,
        &agents,
        "no agents (add one with `countersign agents add NAME`)",
        |agent| {
            let state = if agent.revoked_at.is_some() {
                "revoked"
            } else {
                "active"
            };
            say!("{} ({state})", agent.name);
        },
    )
}

/// `policy list`.
pub(crate) async fn policy_list(desk: &Desk, json_out: bool) -> Result<u8, CliError> {
    let rules = desk.console().rules().await?;
    report_list(
        json_out,
        &rules,
        "no rules: every agent tool call asks a person",
        |rule| {
            say!(
                "#{} {} {} {} for {}{}",
                rule.id,
                rule.server,
                rule.tool,
                rule.action.as_str(),
                rule.agent.as_deref().unwrap_or("every agent"),
                rule.condition
                    .as_ref()
                    .map(|c| format!(" when {c}"))
                    .unwrap_or_default()
            )
        },
    )
}

/// `policy set SERVER TOOL allow|ask|deny [--agent NAME] [--when JSON]`.
pub(crate) async fn policy_set(
    desk: &Desk,
    request: (String, String, String, Option<String>, Option<String>),
    json_out: bool,
) -> Result<u8, CliError> {
    let (server, tool, action, agent, when) = request;
    let action = RuleAction::parse(action.trim()).ok_or_else(|| {
        CliError::Usage(format!("the action is allow, ask or deny, not {action:?}"))
    })?;
    let condition = when
        .map(|w| crate::parse_object("--when", &w).map(Value::Object))
        .transpose()?;
    let rule = desk
        .console()
        .set_rule(RuleSetRequest {
            server,
            tool,
            action,
            agent,
            condition,
        })
        .await?;
    report(json_out, &rule, |rule| {
        say!(
            "rule #{} set: {} {} {}",
            rule.id,
            rule.server,
            rule.tool,
            rule.action.as_str()
        )
    })
}

/// `policy remove ID`.
pub(crate) async fn policy_remove(desk: &Desk, id: i64) -> Result<u8, CliError> {
    desk.console().remove_rule(id).await?;
    say!("rule #{id} removed");
    Ok(EXIT_COMPLETED)
}

/// `policy read-only SERVER on|off`.
pub(crate) async fn policy_read_only(desk: &Desk, server: &str, on: &str) -> Result<u8, CliError> {
    let allow = match on {
        "on" => true,
        "off" => false,
        other => {
            return Err(CliError::Usage(format!(
                "read-only is on or off, not {other:?}"
            )))
        }
    };
    desk.console().set_allow_read_only(server, allow).await?;
    say!(
        "{server}: tools it marks read-only {}",
        if allow {
            "pass without asking"
        } else {
            "ask like any other"
        }
    );
    Ok(EXIT_COMPLETED)
}

/// The pending gated calls, for `inbox`.
pub(crate) async fn pending(desk: &Desk) -> Result<Vec<GatedCallView>, CliError> {
    Ok(desk.console().pending_gated_calls().await?)
}

/// One inbox line for a gated call.
pub(crate) fn inbox_line(call: &GatedCallView) {
    let waited = (ledger::now_ms() - call.created_at).max(0) / 1000;
    say!(
        "{} {} [{}] agent {} asks to run it with {} (waiting {waited}s; approve: countersign answer {} --accept '{{}}')",
        call.server,
        call.task_id,
        call.tool,
        call.agent,
        call.arguments,
        call.task_id
    );
}

/// `answer ID --accept JSON | --decline [--reason TEXT]` for a gated call. `accept` may say
/// `{"alwaysAllow": true}` to also allow this tool for this agent from now on. For an approved
/// call whose upstream asked questions before running, it answers them instead: `--accept
/// JSON` is the content of the answer to each question (or to the one `--key` names, when it is
/// the only one), `--decline` declines them.
pub(crate) async fn answer(
    desk: &Desk,
    id: &str,
    key: Option<&str>,
    accept: Option<&str>,
    reason: Option<String>,
    json_out: bool,
) -> Result<u8, CliError> {
    let call = desk.console().gated_call(id).await?;
    if let Some(questions) = call.questions.as_ref().filter(|_| call.answers.is_none()) {
        if let Some(key) = key.filter(|k| !questions.input_requests.contains_key(*k)) {
            return Err(CliError::Usage(format!(
                "{} has no open question {key:?}",
                call.task_id
            )));
        }
        let response = match accept {
            Some(text) => {
                json!({"action": "accept", "content": crate::parse_object("--accept", text)?})
            }
            None => json!({"action": "decline"}),
        };
        let answers: Map<String, Value> = questions
            .input_requests
            .keys()
            .map(|k| (k.clone(), response.clone()))
            .collect();
        let answered = desk.console().answer_gated(id, answers).await?;
        return report(json_out, &answered, |answered| {
            say!(
                "{} answered: {} of {} by agent {} goes upstream again with the answers",
                answered.task_id,
                answered.tool,
                answered.server,
                answered.agent
            )
        });
    }
    let decision = match accept {
        Some(text) => {
            let content = crate::parse_object("--accept", text)?;
            GatedDecision {
                approve: true,
                reason,
                always_allow: content.get("alwaysAllow").and_then(Value::as_bool) == Some(true),
            }
        }
        None => GatedDecision {
            approve: false,
            reason,
            always_allow: false,
        },
    };
    let decided = desk.console().decide_gated(id, decision).await?;
    report(json_out, &decided, |decided| {
        say!(
            "{} {}: {} of {} by agent {}",
            decided.task_id,
            decided.state.as_str(),
            decided.tool,
            decided.server,
            decided.agent
        )
    })
}

/// `inbox`: the server questions and the agent calls waiting for a person. With `--json`, one
/// array: the questions as before, then the calls (`"kind": "tool_call"`).
pub(crate) async fn inbox(desk: &Desk, json_out: bool) -> Result<u8, CliError> {
    let calls = pending(desk).await?;
    let asking = desk.console().gated_questions().await?;
    let questions = desk.console().inbox_records()?;
    if json_out {
        let mut items = match serde_json::to_value(&questions) {
            Ok(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        items.extend(calls.iter().filter_map(|c| serde_json::to_value(c).ok()));
        items.extend(asking.iter().map(|c| {
            json!({
                "kind": "tool_call_questions", "task_id": c.task_id, "agent": c.agent,
                "server": c.server, "tool": c.tool, "arguments": c.arguments,
                "questions": c.questions.as_ref().map(|q| &q.input_requests),
            })
        }));
        terminal::json(&Value::Array(items));
        return Ok(EXIT_COMPLETED);
    }
    for call in &calls {
        inbox_line(call);
    }
    for call in &asking {
        let asked = call
            .questions
            .as_ref()
            .map(|q| Value::Object(q.input_requests.clone()))
            .unwrap_or_default();
        say!(
            "{} {} [{}] approved for agent {}; the server asks first: {} (answer: countersign answer {} --accept JSON)",
            call.server,
            call.task_id,
            call.tool,
            call.agent,
            asked,
            call.task_id
        );
    }
    if (calls.is_empty() && asking.is_empty()) || !questions.is_empty() {
        crate::ledger_mode::inbox(desk, false)?;
    }
    Ok(EXIT_COMPLETED)
}

/// `connect SERVER [--url BASE] [--print-config]`: relays stdin/stdout to the running gateway.
pub(crate) async fn connect(
    global: &crate::Global,
    server: &str,
    url: Option<String>,
    print_config: bool,
) -> Result<u8, CliError> {
    if print_config {
        // The same entry the Agents view and `agents import` write for stdio hosts.
        let route = hosts::Route {
            gateway_url: hosts::DEFAULT_GATEWAY_URL.to_owned(),
            token: countersign_core::sensitive::Sensitive::new(
                "<the token from `countersign agents add NAME`>".to_owned(),
            ),
            command: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "countersign".into()),
            data_dir: global.data_dir.as_ref().map(|d| d.display().to_string()),
        };
        let entry = hosts::entry_json(hosts::Host::Stdio, &route, server).unwrap_or_default();
        terminal::json(&json!({"mcpServers": {server: entry}}));
        return Ok(EXIT_COMPLETED);
    }
    let token = std::env::var("COUNTERSIGN_AGENT_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            CliError::Usage(
                "set COUNTERSIGN_AGENT_TOKEN to the agent's token (countersign agents add NAME)"
                    .into(),
            )
        })?;
    let base = match url {
        Some(url) => url,
        None => {
            let data_dir = global
                .data_dir
                .clone()
                .unwrap_or_else(ledger::default_data_dir);
            let file = data_dir.join(relay::URL_FILE);
            std::fs::read_to_string(&file)
                .map_err(|e| {
                    CliError::Usage(format!(
                        "no running gateway found ({}: {e}); start `countersign gateway` or give --url",
                        file.display()
                    ))
                })?
                .trim()
                .to_owned()
        }
    };
    let base = if base.ends_with('/') {
        base
    } else {
        format!("{base}/")
    };
    let (stdin, stdout) = (
        std_stream(&std::io::stdin())?,
        std_stream(&std::io::stdout())?,
    );
    relay::relay(
        format!("{base}{server}"),
        countersign_core::sensitive::Sensitive::new(token),
        tokio::io::BufReader::new(tokio::fs::File::from_std(stdin)),
        tokio::fs::File::from_std(stdout),
    )
    .await
    .map_err(|e| match e {
        relay::Error::Io(e) => CliError::Io(e),
        e => CliError::Usage(e.to_string()),
    })?;
    Ok(EXIT_COMPLETED)
}

/// stdin or stdout as a file tokio can read or write (through its blocking pool), so the relay
/// needs no more of tokio than the workspace already builds.
#[cfg(unix)]
fn std_stream(stream: &impl std::os::fd::AsFd) -> Result<std::fs::File, CliError> {
    Ok(std::fs::File::from(stream.as_fd().try_clone_to_owned()?))
}

/// stdin or stdout as a file tokio can read or write (through its blocking pool).
#[cfg(windows)]
fn std_stream(stream: &impl std::os::windows::io::AsHandle) -> Result<std::fs::File, CliError> {
    Ok(std::fs::File::from(
        stream.as_handle().try_clone_to_owned()?,
    ))
}

/// How `agents import` was asked to run.
pub(crate) struct Import {
    pub(crate) apply: bool,
    pub(crate) undo: bool,
    pub(crate) agent: Option<String>,
    pub(crate) gateway_url: Option<String>,
}

/// `agents import FILE [--apply | --undo]`: a preview (what would be registered, the diff of
/// the file), the import itself, or its undo.
pub(crate) async fn agents_import(
    desk: &Desk,
    file: &std::path::Path,
    how: Import,
    json_out: bool,
) -> Result<u8, CliError> {
    let console = desk.console();
    if how.undo {
        let undone = console.import_undo(file).await?;
        return report(json_out, &undone, |undone| {
            say!("{} restored from its backup", undone.path);
            if let Some(agent) = &undone.agent_revoked {
                say!("agent {agent} revoked (its token was only in the rewritten file)");
            }
            say!("the servers it registered stay (`countersign servers remove NAME`)");
        });
    }
    let data_dir = console.data_dir();
    // The running gateway's URL, when there is one: the entries must point where agents can
    // reach it.
    let running = std::fs::read_to_string(data_dir.join(relay::URL_FILE))
        .ok()
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty());
    let target = ImportTarget {
        gateway_url: how
            .gateway_url
            .or(running)
            .unwrap_or_else(|| hosts::DEFAULT_GATEWAY_URL.to_owned()),
        command: std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "countersign".into()),
        data_dir: (data_dir != ledger::default_data_dir()).then(|| data_dir.display().to_string()),
        agent: how.agent,
    };
    let imported = if how.apply {
        console.import_apply(file, &target).await?
    } else {
        console.import_preview(file, &target).await?
    };
    report(json_out, &imported, |r| {
        say!("{} ({})", r.path, r.host.id());
        if r.items.is_empty() {
            say!("  no servers in it");
        }
        for item in &r.items {
            say!("  {}", import_line(item, r.applied));
        }
        if r.applied {
            if let (Some(agent), Some(backup)) = (&r.agent, &r.backup) {
                say!("rewritten for agent {agent} (its token is in the file); the original is {backup}");
                say!("undo: countersign agents import {} --undo", r.path);
            }
        } else if r.diff.is_empty() {
            say!("nothing to rewrite");
        } else {
            // Line by line: each line is the file's own text, shown with its control
            // characters escaped.
            for line in r.diff.lines() {
                say!("{line}");
            }
            match &r.backup {
                Some(backup) => say!("already imported (the original is {backup}); --undo first"),
                None => say!("apply with: countersign agents import {} --apply", r.path),
            }
        }
    })
}

/// One entry of an import, for a person.
fn import_line(item: &ImportItem, applied: bool) -> String {
    let how = match &item.server {
        ImportedServer::Http { url, has_token } => {
            format!(
                "{url}{}",
                if *has_token {
                    " (token → OS keyring)"
                } else {
                    ""
                }
            )
        }
        ImportedServer::Stdio { command, args, .. } => std::iter::once(command.as_str())
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        ImportedServer::Other => String::new(),
    };
    let what = match &item.action {
        ImportAction::Register if applied => "registered".to_owned(),
        ImportAction::Register => "register with Countersign, then through the gateway".to_owned(),
        ImportAction::Registered => "registered; now through the gateway".to_owned(),
        ImportAction::Reuse => "already registered; through the gateway".to_owned(),
        ImportAction::AlreadyBehind => "already through Countersign".to_owned(),
        ImportAction::Conflict { reason }
        | ImportAction::Unsupported { reason }
        | ImportAction::Failed { reason } => format!("left as it is: {reason}"),
    };
    if how.is_empty() {
        format!("{}: {what}", item.name)
    } else {
        format!("{} {how}: {what}", item.name)
    }
}
