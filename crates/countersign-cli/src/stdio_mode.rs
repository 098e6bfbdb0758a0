//! `countersign servers add NAME -- COMMAND [ARGS…]`: a stdio server, following the agent hosts'
//! own convention (`claude mcp add NAME -- npx …`).

use countersign_core::console::view::{SecretText, StdioAddRequest};
use countersign_core::sensitive::Sensitive;
use serde_json::Value;

use crate::ledger_mode::Desk;
use crate::terminal::{self, say};
use crate::{CliError, EXIT_COMPLETED};

/// What the command line gave for a stdio server.
pub(crate) struct StdioAdd {
    pub(crate) command: Vec<String>,
    pub(crate) env: Vec<String>,
    pub(crate) env_secret: Vec<String>,
    pub(crate) cwd: Option<String>,
}

pub(crate) async fn servers_add(
    desk: &Desk,
    name: &str,
    given: StdioAdd,
    discover: bool,
    json_out: bool,
) -> Result<u8, CliError> {
    let mut words = given.command.into_iter();
    let program = words.next().ok_or_else(|| {
        CliError::Usage("give the server's URL, or its command after `--`".into())
    })?;
    let env = given
        .env
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
            _ => Err(CliError::Usage(format!(
                "--env takes KEY=VALUE, not {pair:?}"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    // A secret's value never appears on the command line (shell history, `ps`): it is read
    // from this process's environment.
    let secret_env = given
        .env_secret
        .iter()
        .map(|key| match std::env::var(key) {
            Ok(value) if !value.is_empty() => {
                Ok((key.clone(), SecretText(Sensitive::new(value))))
            }
            _ => Err(CliError::Usage(format!(
                "--env-secret {key}: set {key} in this command's environment; its value goes to the OS keyring"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let record = desk
        .console
        .add_stdio_server(StdioAddRequest {
            name: name.to_owned(),
            program,
            args: words.collect(),
            env,
            secret_env,
            cwd: given.cwd,
            discover,
        })
        .await?;
    if json_out {
        terminal::json(&serde_json::to_value(&record).unwrap_or(Value::Null));
    } else {
        let identity = record
            .server_info
            .as_ref()
            .and_then(|i| i.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("not started");
        let version = record.protocol_version.as_deref().unwrap_or("-");
        say!(
            "added stdio server {} → {} ({identity}; legacy {version}); the engine (the app or `countersign watch`) starts it when needed",
            record.name,
            command_line(&record)
        );
    }
    Ok(EXIT_COMPLETED)
}

/// A stdio server's command line as `servers list` shows it.
pub(crate) fn command_line(record: &countersign_core::ledger::servers::ServerRecord) -> String {
    match &record.command {
        Some(spec) => spec.command().display(),
        None => record.url.clone(),
    }
}

/// `discover NAME` of a registered server: asked again (a stdio server: started for it, unless
/// the engine here runs it) and recorded.
pub(crate) async fn discover(desk: &Desk, name: &str, json_out: bool) -> Result<u8, CliError> {
    let server = desk.server(name).await?;
    let peer = desk.console.peer(&server).await?;
    let countersign_core::mcp::Peer::Legacy(peer) = peer else {
        return Err(CliError::Usage(format!(
            "{name} is an HTTP server: `countersign discover {}`",
            server.url
        )));
    };
    let client = peer.client().await?;
    let connection = countersign_core::mcp::Connection::Legacy(client.clone());
    desk.console.check_server(server.id).await?;
    crate::direct::legacy::discover(&client, &connection.profile(), json_out);
    Ok(EXIT_COMPLETED)
}

/// `tools NAME` of a registered server.
pub(crate) async fn tools(desk: &Desk, name: &str, json_out: bool) -> Result<u8, CliError> {
    let server = desk.server(name).await?;
    let peer = desk.console.peer(&server).await?;
    let countersign_core::mcp::Peer::Legacy(peer) = peer else {
        return Err(CliError::Usage(format!(
            "{name} is an HTTP server: `countersign tools {}`",
            server.url
        )));
    };
    let client = peer.client().await?;
    crate::direct::legacy::tools(&client, json_out).await
}

/// Before `call` on a stdio server: the task lives in the process that serves it, so the call
/// and the polls must come from the one engine that runs it. With no engine running, this
/// command becomes it (and follows the task to its end); with one elsewhere, or with
/// `--no-follow` (this command's process, and the server with it, would end at once), it says
/// so instead of leaving a task whose server is about to exit.
pub(crate) async fn own_for_call(
    desk: &Desk,
    server: &countersign_core::ledger::servers::ServerRecord,
    no_follow: bool,
) -> Result<(), CliError> {
    let name = &server.name;
    if no_follow {
        return Err(CliError::Usage(format!(
            "{name} is a stdio server: its task lives in the process Countersign starts, which ends with this command. \
             Call it without --no-follow (this command follows it to the end), or from the app"
        )));
    }
    if let Some(pid) = desk.ensure_engine().await? {
        return Err(CliError::Usage(format!(
            "{name} is a stdio server run by the engine of process {pid} (the app or `countersign watch`): \
             call it from there, or through `countersign gateway`"
        )));
    }
    Ok(())
}
