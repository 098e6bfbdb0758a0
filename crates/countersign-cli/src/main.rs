//! `countersign`: the headless command line over the Countersign core.
//!
//! Exit codes are a contract for scripts: 0 completed, 1 completed with `isError`, 2 failed,
//! 3 cancelled, 4 input needed, 5 still working (`task get`), 64 usage, 69 connection or
//! protocol error, 77 sign-in needed, 141 stdout closed early.
//!
//! - [`args`]: the command line as clap reads it;
//! - [`error`]: [`CliError`], the exit codes and the `--json` error's code;
//! - `direct`: commands on a server given by URL, no ledger, on servers of either era
//!   (`direct/legacy.rs`: the 2025-11-25 generation, its session and its Tasks);
//! - `ledger_mode`: commands on the ledger ([`ledger_mode::Desk`]: the console, an engine here or
//!   elsewhere);
//! - `gateway_mode`: the gateway, agents, policy, the stdio relay;
//! - `settings_mode`, `demo_mode`; `terminal` (every byte for the terminal) and `prompt`
//!   (questions asked on it).

// The error is the cold path; its size is not worth boxing.
#![allow(clippy::result_large_err)]
// Every byte for the terminal goes through `terminal`, which neutralises server text.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod demo_mode;
mod direct;
mod error;
mod gateway_mode;
mod ledger_mode;
mod prompt;
mod settings_mode;
mod stdio_mode;
mod terminal;

use std::process::ExitCode;

use clap::Parser;
use countersign_core::mcp::{Client, ClientOptions, Endpoint};
use countersign_core::sensitive::Sensitive;
use serde_json::{json, Map, Value};
use terminal::tell;

use args::{
    AgentsCommand, Cli, Command, PolicyCommand, ServersCommand, SettingsCommand, TaskCommand,
};
pub(crate) use args::{AnswerArgs, Global};
pub(crate) use error::*;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
                _ => EXIT_USAGE,
            });
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tell!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_UNAVAILABLE);
        }
    };
    let json = cli.global.json;
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if json {
                let mut error = json!({"code": e.code(), "message": e.to_string()});
                if let Some(reason) = e.reason() {
                    error["reason"] = json!(reason);
                }
                terminal::json(&json!({"outcome": "error", "error": error}));
            }
            tell!("error: {e}");
            // A server that could not be reached or spoke wrongly: the same plain sentence and
            // advice as the app's server form.
            if let Some(m) = e.server_error() {
                let d = countersign_core::diagnosis::diagnose(m.url(), m);
                tell!("  {} {}", d.summary, d.advice);
            }
            ExitCode::from(e.exit_code())
        }
    }
}

pub(crate) fn client(url: &str, global: &Global) -> Result<Client, CliError> {
    let (endpoint, options) = endpoint(url, global);
    Ok(Client::with_options(endpoint, options, None)?)
}

/// The server at `url` as the command line names it (`--token`, `--timeout`), for a client of
/// either era.
pub(crate) fn endpoint(url: &str, global: &Global) -> (Endpoint, ClientOptions) {
    let endpoint = Endpoint::new(url).with_token(
        global
            .token
            .clone()
            .filter(|t| !t.is_empty())
            .map(Sensitive::new),
    );
    let options = ClientOptions {
        request_timeout: std::time::Duration::from_secs(global.timeout.max(1)),
        ..ClientOptions::default()
    };
    (endpoint, options)
}

pub(crate) fn parse_object(what: &str, text: &str) -> Result<Map<String, Value>, CliError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(CliError::Usage(format!("{what} must be a JSON object"))),
        Err(e) => Err(CliError::Usage(format!("{what} is not valid JSON: {e}"))),
    }
}

/// Runs one command: those on a server given by URL and those that run a long-lived service
/// here; every other command works on the ledger.
async fn run(cli: Cli) -> Result<u8, CliError> {
    let Cli { global, command } = cli;
    match command {
        Command::Discover { url } if url.contains("://") => direct::discover(&url, &global).await,
        Command::Tools { url } if url.contains("://") => direct::tools(&url, &global).await,
        Command::Call(args) if args.url.contains("://") => {
            let arguments = args.arguments()?;
            let policy = direct::AnswerPolicy::from_args(&args.answer)?;
            direct::call(
                &args.url,
                &global,
                &args.tool,
                arguments,
                policy,
                args.no_follow,
            )
            .await
        }
        Command::Task(TaskCommand::Get { url, task_id }) => {
            direct::task_get(&url, &task_id, &global).await
        }
        Command::Task(TaskCommand::Cancel { url, task_id }) => {
            direct::task_cancel(&url, &task_id, &global).await
        }
        Command::Task(TaskCommand::Answer {
            url,
            task_id,
            answer,
        }) => direct::task_answer(&url, &task_id, &answer, &global).await,
        Command::Gateway { port, hold_seconds } => {
            let desk = ledger_mode::Desk::open(&global).await?;
            gateway_mode::serve(desk, port, hold_seconds).await
        }
        Command::Connect {
            server,
            url,
            print_config,
        } => gateway_mode::connect(&global, &server, url, print_config).await,
        Command::DemoServer(args) => demo_mode::serve(args).await,
        command => {
            let json = global.json;
            let token = global
                .token
                .clone()
                .filter(|t| !t.is_empty())
                .map(Sensitive::new);
            with_desk(&global, |desk| {
                Box::pin(on_ledger(desk, command, token, json))
            })
            .await
        }
    }
}

/// The commands on the ledger, each one call into its mode.
async fn on_ledger(
    desk: &mut ledger_mode::Desk,
    command: Command,
    token: Option<Sensitive<String>>,
    json: bool,
) -> Result<u8, CliError> {
    use gateway_mode as gateway;
    use ledger_mode as ledger;
    match command {
        Command::Call(args) => {
            let arguments = args.arguments()?;
            let policy = direct::AnswerPolicy::from_args(&args.answer)?;
            ledger::call(
                desk,
                &args.url,
                &args.tool,
                arguments,
                policy,
                args.no_follow,
                json,
            )
            .await
        }
        Command::Servers(ServersCommand::Add {
            name,
            url: None,
            command,
            env,
            env_secret,
            cwd,
            no_discover,
            ..
        }) => {
            let stdio = stdio_mode::StdioAdd {
                command,
                env,
                env_secret,
                cwd,
            };
            stdio_mode::servers_add(desk, &name, stdio, !no_discover, json).await
        }
        Command::Servers(ServersCommand::Add {
            name,
            url: Some(url),
            no_discover,
            no_browser,
            client,
            ..
        }) => {
            let with = ledger::SignInWith {
                client: client.client()?,
                browser: !no_browser,
            };
            // `--token`/`COUNTERSIGN_TOKEN` here is this server's token: kept in the keyring.
            ledger::servers_add(desk, &name, &url, token, !no_discover, with, json).await
        }
        Command::Servers(ServersCommand::Login {
            name,
            no_browser,
            client,
        }) => {
            let with = ledger::SignInWith {
                client: client.client()?,
                browser: !no_browser,
            };
            ledger::servers_login(desk, &name, with, json).await
        }
        Command::Servers(ServersCommand::Logout {
            name,
            forget_client,
        }) => ledger::servers_logout(desk, &name, forget_client, json).await,
        Command::Servers(ServersCommand::List) => ledger::servers_list(desk, json).await,
        Command::Servers(ServersCommand::Remove { name }) => {
            ledger::servers_remove(desk, &name, json).await
        }
        Command::Watch => ledger::watch(desk, json).await,
        Command::Tasks {
            status,
            server,
            tool,
        } => ledger::tasks_list(desk, status.as_deref(), server, tool, json).await,
        Command::Task(TaskCommand::Show { task_id }) => {
            ledger::task_show(desk, &task_id, json).await
        }
        Command::Answer {
            task_id,
            key,
            answer,
            reason,
        } if gateway::is_gated(&task_id) => {
            let accept = answer.accept.as_deref();
            gateway::answer(desk, &task_id, key.as_deref(), accept, reason, json).await
        }
        Command::Answer {
            task_id,
            key,
            answer,
            reason: _,
        } => {
            let policy = direct::AnswerPolicy::from_args(&AnswerArgs {
                accept: answer.accept,
                decline: answer.decline,
            })?;
            ledger::answer(desk, &task_id, key.as_deref(), &policy, json).await
        }
        Command::Cancel { task_id } => ledger::cancel(desk, &task_id, json).await,
        Command::Adopt {
            server,
            task_id: None,
            ..
        } => ledger::adoptable(desk, &server, json).await,
        Command::Adopt {
            server,
            task_id: Some(task_id),
            ..
        } => ledger::adopt(desk, &server, &task_id, json).await,
        Command::Inbox => gateway::inbox(desk, json).await,
        Command::Agents(AgentsCommand::Add { name }) => {
            gateway::agents_add(desk, &name, json).await
        }
        Command::Agents(AgentsCommand::Remove { name }) => {
            gateway::agents_remove(desk, &name, json).await
        }
        Command::Agents(AgentsCommand::List) => gateway::agents_list(desk, json).await,
        Command::Agents(AgentsCommand::Import {
            file,
            apply,
            undo,
            agent,
            gateway_url,
        }) => {
            let how = gateway::Import {
                apply,
                undo,
                agent,
                gateway_url,
            };
            gateway::agents_import(desk, &file, how, json).await
        }
        Command::Policy(PolicyCommand::List) => gateway::policy_list(desk, json).await,
        Command::Policy(PolicyCommand::Set {
            server,
            tool,
            action,
            agent,
            when,
        }) => gateway::policy_set(desk, (server, tool, action, agent, when), json).await,
        Command::Policy(PolicyCommand::Remove { id }) => gateway::policy_remove(desk, id).await,
        Command::Policy(PolicyCommand::ReadOnly { server, state }) => {
            gateway::policy_read_only(desk, &server, &state).await
        }
        Command::Settings { command: None } => settings_mode::get(desk, None, json).await,
        Command::Settings {
            command: Some(SettingsCommand::Get { key }),
        } => settings_mode::get(desk, key.as_deref(), json).await,
        Command::Settings {
            command: Some(SettingsCommand::Set { key, value }),
        } => settings_mode::set(desk, &key, &value, json).await,
        Command::Audit { csv } => ledger::audit_log(desk, csv, json),
        // `run` dispatches these before opening the ledger.
        // A name rather than a URL: a registered server (a stdio server has no URL to give).
        Command::Discover { url } => stdio_mode::discover(desk, &url, json).await,
        Command::Tools { url } => stdio_mode::tools(desk, &url, json).await,
        Command::Task(_)
        | Command::Gateway { .. }
        | Command::Connect { .. }
        | Command::DemoServer(_) => Err(CliError::Usage(
            "this command does not work on the ledger".into(),
        )),
    }
}

type DeskFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<u8, CliError>> + 'a>>;

/// Opens the ledger, runs `f`, and closes it (stopping an engine the command started) whatever
/// `f` returned.
async fn with_desk(
    global: &Global,
    f: impl for<'a> FnOnce(&'a mut ledger_mode::Desk) -> DeskFuture<'a>,
) -> Result<u8, CliError> {
    let mut desk = ledger_mode::Desk::open(global).await?;
    let result = f(&mut desk).await;
    desk.close().await;
    result
}

pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
