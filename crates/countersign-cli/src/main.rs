//! `countersign`: the headless command line over the Countersign core.
//!
//! Exit codes are a contract for scripts: 0 completed, 1 completed with `isError`, 2 failed,
//! 3 cancelled, 4 input needed, 5 still working (`task get`), 64 usage, 69 connection or
//! protocol error, 141 stdout closed early.

// The error is the cold path; its size is not worth boxing.
#![allow(clippy::result_large_err)]
// Every byte for the terminal goes through `terminal`, which neutralises server text.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod direct;
mod gateway_mode;
mod ledger_mode;
mod prompt;
mod settings_mode;
mod terminal;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use countersign_core::mcp::{self, Client, ClientOptions, Endpoint};
use countersign_core::sensitive::Sensitive;
use serde_json::{json, Map, Value};
use terminal::{say, tell};

/// Exit code: the outcome was completed.
pub const EXIT_COMPLETED: u8 = 0;
/// Exit code: completed with `isError: true`.
pub const EXIT_TOOL_ERROR: u8 = 1;
/// Exit code: the task failed.
pub const EXIT_FAILED: u8 = 2;
/// Exit code: the task was cancelled.
pub const EXIT_CANCELLED: u8 = 3;
/// Exit code: a question needs a human and none could answer.
pub const EXIT_INPUT_NEEDED: u8 = 4;
/// Exit code: the task is still working (`task get` of an unfinished task).
pub const EXIT_WORKING: u8 = 5;
/// Exit code: bad command line.
pub const EXIT_USAGE: u8 = 64;
/// Exit code: connection or protocol error.
pub const EXIT_UNAVAILABLE: u8 = 69;
/// Exit code: the server needs a person to sign in (OAuth) and the sign-in did not happen
/// (`EX_NOPERM`).
pub const EXIT_SIGN_IN_NEEDED: u8 = 77;

/// The exit-code contract, shown by `--help` (the README's paragraph says the same).
const EXIT_CODES_HELP: &str = "\
Exit codes: 0 completed, 1 completed with isError, 2 failed, 3 cancelled, 4 input needed \
(no answer flag and no terminal), 5 still working (task get), 64 usage, 69 connection or \
protocol error (also: the server misbehaved, e.g. kept asking questions or reused a task id; \
another engine already runs on this ledger), 77 sign-in needed or failed (`servers login NAME`), \
141 stdout closed early (e.g. `| head`). \
`call` exits by how the call ended; `call --no-follow` exits 0 once the handle is recorded; \
`task get` exits by the task's current status.";

/// How `task get` exits.
const TASK_GET_HELP: &str = "\
Exits by the task's status now, with the codes `call` uses when a call ends: 0 completed, \
1 completed with isError, 2 failed, 3 cancelled, 4 input_required, 5 working; 69 when the \
server cannot be reached or does not know the task.";

#[derive(Parser, Debug)]
#[command(
    name = "countersign",
    version,
    about = "Sign off on agent actions and watch long MCP tasks.",
    after_help = EXIT_CODES_HELP
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct Global {
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Bearer token for a server given by URL, or for `servers add` (kept in the OS keyring for
    /// that server only); ledger commands use each server's own token from the keyring. Prefer
    /// the environment variable: arguments are visible to other users.
    #[arg(long, global = true, env = "COUNTERSIGN_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Seconds to wait for any one request.
    #[arg(long, global = true, default_value_t = 30)]
    pub(crate) timeout: u64,
    /// The ledger's directory (default: the platform data directory, e.g. ~/.local/share/countersign).
    #[arg(long, global = true, env = "COUNTERSIGN_DATA_DIR")]
    pub(crate) data_dir: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Ask a server what it is and what it supports (server/discover).
    Discover {
        /// The server's MCP endpoint URL.
        url: String,
    },
    /// List a server's tools (tools/list).
    Tools {
        /// The server's MCP endpoint URL.
        url: String,
    },
    /// Call a tool (on a URL, or a server NAME from the ledger) and follow the outcome to its end.
    Call(CallArgs),
    /// Act on one task: by URL and id (direct), or `show` from the ledger.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Manage the servers the ledger knows.
    #[command(subcommand)]
    Servers(ServersCommand),
    /// Run the engine in the foreground: resume every unfinished task, print events as lines.
    Watch,
    /// List tracked tasks.
    Tasks {
        /// Only this status (working, input_required, completed, failed, cancelled, expired, lost).
        #[arg(long)]
        status: Option<String>,
        /// Only this server.
        #[arg(long)]
        server: Option<String>,
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
    },
    /// Answer a tracked task's pending questions (recorded, then delivered by the engine).
    Answer {
        /// The task id (or #ROW).
        // Server task ids may start with '-' (base64url): never read one as a flag.
        #[arg(allow_hyphen_values = true)]
        task_id: String,
        /// Only this question key (default: every pending one).
        #[arg(long)]
        key: Option<String>,
        #[command(flatten)]
        answer: RequiredAnswer,
        /// Why (with --decline of an agent's tool call: the agent is told).
        #[arg(long, requires = "decline")]
        reason: Option<String>,
    },
    /// Cancel a tracked task (recorded, then delivered by the engine).
    Cancel {
        /// The task id (or #ROW).
        #[arg(allow_hyphen_values = true)]
        task_id: String,
    },
    /// Track a task created elsewhere, by its id.
    Adopt {
        /// The server name.
        server: String,
        /// The server's task id.
        #[arg(allow_hyphen_values = true)]
        task_id: String,
    },
    /// Pending questions across all servers and agent tool calls waiting for approval, oldest
    /// first.
    Inbox,
    /// Run the engine and the local MCP gateway agents connect to (prints its URL first):
    /// `http://127.0.0.1:PORT/mcp/<server-name>`, a bearer token per agent.
    Gateway {
        /// Port to listen on (0 = any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// How long a call of an agent without the tasks extension is held waiting for
        /// approval before it is told to repeat it (keep it below the agent's time-out).
        #[arg(long, default_value_t = 45)]
        hold_seconds: u64,
    },
    /// A stdio MCP server relaying to the running gateway under the same policies, for hosts
    /// that only start stdio servers. The agent's token comes from COUNTERSIGN_AGENT_TOKEN.
    Connect {
        /// The server's name in Countersign.
        server: String,
        /// The gateway's base URL (default: the one the running gateway wrote to the data
        /// directory).
        #[arg(long)]
        url: Option<String>,
        /// Print the configuration entry to paste into the host, then exit.
        #[arg(long)]
        print_config: bool,
    },
    /// Agents that may connect to the gateway.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Which agent tool calls pass, ask a person, or are refused.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Show or change the settings (the app's Settings page): `settings`, `settings get KEY`,
    /// `settings set KEY VALUE` (e.g. `settings set dnd.from 22:00`).
    Settings {
        #[command(subcommand)]
        command: Option<SettingsCommand>,
    },
    /// Every human decision, oldest first.
    Audit {
        /// CSV instead of text.
        #[arg(long)]
        csv: bool,
    },
    /// Serve the built-in demo MCP Tasks server on 127.0.0.1 (prints its URL first).
    DemoServer {
        /// Port to listen on (0 = any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Speed factor: 1 is realistic pacing, 10 runs ten times faster.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// The pollIntervalMs the server advertises.
        #[arg(long, default_value_t = 1000)]
        poll_interval_ms: u64,
        /// The ttlMs of new tasks (0 = unlimited).
        #[arg(long, default_value_t = 900_000)]
        ttl_ms: u64,
        /// Reply framing: json, sse (every reply, like rmcp) or mixed.
        #[arg(long, default_value = "json")]
        mode: String,
        /// Answer subscriptions/listen with -32601 (like servers without push), so clients poll.
        #[arg(long)]
        no_push: bool,
        /// Require this bearer token (prefer COUNTERSIGN_DEMO_TOKEN: arguments are visible to other users).
        #[arg(long, env = "COUNTERSIGN_DEMO_TOKEN", hide_env_values = true)]
        require_token: Option<String>,
    },
}

#[derive(Args, Debug)]
struct CallArgs {
    /// The server's MCP endpoint URL, or the name of a server in the ledger.
    url: String,
    /// The tool name.
    tool: String,
    /// The arguments as a JSON object.
    args_json: Option<String>,
    #[command(flatten)]
    answer: AnswerArgs,
    /// Print the task handle and exit instead of following it.
    #[arg(long)]
    no_follow: bool,
}

#[derive(Args, Debug, Clone, Default)]
#[group(multiple = false)]
pub(crate) struct AnswerArgs {
    /// Answer every form question with {"action":"accept","content":JSON} (URL questions: consent).
    #[arg(long, value_name = "JSON")]
    accept: Option<String>,
    /// Decline every question.
    #[arg(long)]
    decline: bool,
}

#[derive(Subcommand, Debug)]
enum TaskCommand {
    /// Show a task's current state (tasks/get); exits by that state, like `call` at its end.
    #[command(after_help = TASK_GET_HELP)]
    Get {
        /// The server's MCP endpoint URL.
        url: String,
        /// The task id.
        #[arg(allow_hyphen_values = true)]
        task_id: String,
    },
    /// Ask the server to cancel a task (tasks/cancel).
    Cancel {
        /// The server's MCP endpoint URL.
        url: String,
        /// The task id.
        #[arg(allow_hyphen_values = true)]
        task_id: String,
    },
    /// The timeline of a tracked task, from the ledger.
    Show {
        /// The task id (or #ROW).
        #[arg(allow_hyphen_values = true)]
        task_id: String,
    },
    /// Answer every open question of a task (tasks/update).
    Answer {
        /// The server's MCP endpoint URL.
        url: String,
        /// The task id.
        #[arg(allow_hyphen_values = true)]
        task_id: String,
        #[command(flatten)]
        answer: RequiredAnswer,
    },
}

/// Who Countersign is when it signs in (default: a dynamic registration where offered).
#[derive(clap::Args, Debug, Clone, Default)]
struct SignInClientArgs {
    /// A client id you registered with the server's authorization server yourself.
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
    /// The name of an environment variable holding that client's secret (a confidential
    /// client). Never the secret itself: a command line is visible to every process. The
    /// secret is kept in the OS keyring with the sign-in, nowhere else.
    #[arg(long, value_name = "VAR", requires = "client_id")]
    client_secret_env: Option<String>,
    /// The URL of Countersign's client ID metadata document as you publish it (https, with a
    /// path), used where the authorization server supports them.
    #[arg(long, value_name = "URL")]
    client_metadata_url: Option<String>,
    /// Listen for the sign-in's answer on this fixed loopback port: for a client registered
    /// with the exact redirect URI http://127.0.0.1:PORT/callback (servers that do not accept
    /// any port). Kept with the client, so `login` later uses it again.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    redirect_port: Option<u16>,
}

impl SignInClientArgs {
    /// The console's client, with the secret read from its variable.
    fn client(&self) -> Result<countersign_core::console::SignInClient, CliError> {
        let client_secret = match &self.client_secret_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(secret) if !secret.is_empty() => {
                    Some(countersign_core::sensitive::Sensitive::new(secret))
                }
                _ => {
                    return Err(CliError::Usage(format!(
                        "--client-secret-env {var}: the variable is not set (or empty)"
                    )))
                }
            },
        };
        Ok(countersign_core::console::SignInClient {
            client_id: self.client_id.clone(),
            client_secret,
            metadata_document_url: self.client_metadata_url.clone(),
            redirect_port: self.redirect_port,
        })
    }
}

#[derive(Subcommand, Debug)]
enum ServersCommand {
    /// Register a server (its identity is discovered first).
    Add {
        /// A unique name.
        name: String,
        /// Its MCP endpoint URL.
        url: String,
        /// Do not contact the server now.
        #[arg(long)]
        no_discover: bool,
        /// If the server needs a sign-in, only print the URL; open no browser.
        #[arg(long)]
        no_browser: bool,
        #[command(flatten)]
        client: SignInClientArgs,
    },
    /// Sign in to an OAuth-protected server (again): opens the browser (`$BROWSER`, else
    /// `xdg-open`) at the authorization server and prints the URL too.
    Login {
        /// Its name.
        name: String,
        /// Only print the URL; open no browser.
        #[arg(long)]
        no_browser: bool,
        #[command(flatten)]
        client: SignInClientArgs,
    },
    /// Sign out: forget the server's OAuth tokens. The client registration stays in the
    /// keyring, so `login` is the same client again and the server's tasks resume.
    Logout {
        /// Its name.
        name: String,
        /// Forget the client registration too (the next `login` registers a new client).
        #[arg(long)]
        forget_client: bool,
    },
    /// List servers.
    List,
    /// Remove a server and the tasks tracked on it.
    Remove {
        /// Its name.
        name: String,
    },
}

#[derive(Subcommand, Debug)]
enum SettingsCommand {
    /// Every setting as `key = value`, or one value.
    Get {
        /// One of: dnd.enabled, dnd.from, dnd.to, dnd.days, sound, start_at_login,
        /// poll_floor_ms, gateway.enabled, gateway.port.
        key: Option<String>,
    },
    /// Change one setting (checked first; a running app applies it at once).
    Set {
        /// The setting.
        key: String,
        /// Its new value (on/off, HH:MM, mon,tue,…, a number).
        value: String,
    },
}

#[derive(Subcommand, Debug)]
enum AgentsCommand {
    /// Add an agent; prints its bearer token once (`--json`: {"name", "token"}).
    Add {
        /// A unique name.
        name: String,
    },
    /// Revoke an agent's token.
    Remove {
        /// Its name.
        name: String,
    },
    /// List agents.
    List,
}

#[derive(Subcommand, Debug)]
enum PolicyCommand {
    /// List the rules.
    List,
    /// Set a rule: what to do with calls of TOOL on SERVER.
    Set {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
        /// allow, ask or deny.
        action: String,
        /// Only for this agent (default: every agent).
        #[arg(long)]
        agent: Option<String>,
        /// Only when the arguments have these values, e.g. '{"environment": "staging"}'.
        #[arg(long, value_name = "JSON")]
        when: Option<String>,
    },
    /// Remove a rule by its number.
    Remove {
        /// The rule's number (`policy list`).
        id: i64,
    },
    /// Let the tools a server marks read-only pass without asking (off by default: the
    /// marks are the server's own claims).
    ReadOnly {
        /// The server's name.
        server: String,
        /// on or off.
        state: String,
    },
}

#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct RequiredAnswer {
    /// Accept with this JSON object as the form content.
    #[arg(long, value_name = "JSON")]
    accept: Option<String>,
    /// Decline.
    #[arg(long)]
    decline: bool,
}

/// A failure that ends the command, with its exit code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The command line was wrong (exit 64).
    #[error("{0}")]
    Usage(String),
    /// The server could not be reached or spoke wrongly (exit 69).
    #[error(transparent)]
    Mcp(#[from] mcp::Error),
    /// Local I/O failed (exit 69).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The server kept answering a call with questions (MRTR) after every round of answers
    /// (exit 69): the call never ran.
    #[error("the server still asks questions after {rounds} rounds of answers to {tool}; giving up (the tool did not run)")]
    MrtrRounds {
        /// The tool called.
        tool: String,
        /// The rounds answered, [`mcp::MAX_MRTR_ROUNDS`].
        rounds: usize,
    },
    /// The server answered in a way the ledger must refuse (exit 69).
    #[error(transparent)]
    Action(countersign_core::actions::Error),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] countersign_core::ledger::Error),
    /// The engine could not start.
    #[error(transparent)]
    Engine(#[from] countersign_core::engine::Error),
    /// The OS keyring (Secret Service) refused or is not there (exit 69).
    #[error("{0}; tokens are kept only in the OS keyring, never in a file")]
    Keyring(countersign_core::secrets::Error),
    /// Signing in to an OAuth-protected server failed or is needed (exit 77).
    #[error("{0}")]
    SignIn(countersign_core::auth::SessionError),
}

impl From<countersign_core::actions::Error> for CliError {
    fn from(e: countersign_core::actions::Error) -> Self {
        match e {
            countersign_core::actions::Error::Ledger(e) => Self::Ledger(e),
            countersign_core::actions::Error::Mcp(e) => Self::Mcp(e),
            countersign_core::actions::Error::Invalid(m) => Self::Usage(m),
            e @ countersign_core::actions::Error::TaskIdReused { .. } => Self::Action(e),
        }
    }
}

impl From<countersign_core::console::Error> for CliError {
    fn from(e: countersign_core::console::Error) -> Self {
        use countersign_core::console::Error as C;
        use countersign_core::ledger::Error as L;
        match e {
            C::Invalid(why) => Self::Usage(why),
            C::Link(e) => Self::Usage(e.to_string()),
            C::Settings(e) => Self::Usage(e.to_string()),
            C::NotFound(what) => Self::Ledger(L::NotFound(what)),
            C::AlreadyAnswered(why) => Self::Ledger(L::Conflict(why)),
            C::TooManyRounds { tool, rounds } => Self::MrtrRounds { tool, rounds },
            C::Server(e) => Self::Mcp(e),
            C::Refused(e) => Self::Action(e),
            C::Ledger(e) => Self::Ledger(e),
            C::Keyring(e) => Self::Keyring(e),
            C::Engine(e) => Self::Engine(e),
            C::SignIn(e) => Self::SignIn(e),
            // Only a window cancels checks; kept for completeness.
            C::Cancelled => Self::Io(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "stopped before the server answered",
            )),
            C::Write { path, source } => Self::Io(std::io::Error::new(
                source.kind(),
                format!("cannot write {}: {source}", path.display()),
            )),
        }
    }
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => EXIT_USAGE,
            Self::Ledger(
                countersign_core::ledger::Error::NotFound(_)
                | countersign_core::ledger::Error::Conflict(_)
                | countersign_core::ledger::Error::Invalid(_),
            ) => EXIT_USAGE,
            // A URL that cannot be used as given is the caller's to fix, like any bad argument.
            Self::Mcp(countersign_core::mcp::Error::InvalidUrl { .. }) => EXIT_USAGE,
            Self::Engine(countersign_core::engine::Error::Lock(_)) => EXIT_UNAVAILABLE,
            // A sign-in that could not reach the authorization server is a connection error.
            Self::SignIn(countersign_core::auth::SessionError::Mcp(_))
            | Self::SignIn(countersign_core::auth::SessionError::Auth(
                countersign_core::auth::Error::Transport { .. }
                | countersign_core::auth::Error::TokenRequest { .. },
            )) => EXIT_UNAVAILABLE,
            Self::SignIn(_) => EXIT_SIGN_IN_NEEDED,
            Self::Mcp(_)
            | Self::Io(_)
            | Self::MrtrRounds { .. }
            | Self::Action(_)
            | Self::Ledger(_)
            | Self::Engine(_)
            | Self::Keyring(_) => EXIT_UNAVAILABLE,
        }
    }
}

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
                terminal::json(
                    &json!({"outcome": "error", "error": {"code": error_code(&e), "message": e.to_string()}}),
                );
            }
            tell!("error: {e}");
            // A server that could not be reached or spoke wrongly: the same plain sentence and
            // advice as the app's server form.
            if let CliError::Mcp(m) = &e {
                let d = countersign_core::diagnosis::diagnose(m.url(), m);
                tell!("  {} {}", d.summary, d.advice);
            }
            ExitCode::from(e.exit_code())
        }
    }
}

fn error_code(e: &CliError) -> &'static str {
    match e {
        CliError::Usage(_) => "usage",
        CliError::Mcp(e) => e.code(),
        CliError::Io(_) => "io",
        CliError::MrtrRounds { .. } => "too_many_question_rounds",
        CliError::Action(countersign_core::actions::Error::TaskIdReused { .. }) => "task_id_reused",
        CliError::Action(_) => "action",
        CliError::Ledger(countersign_core::ledger::Error::NotFound(_)) => "not_found",
        CliError::Ledger(countersign_core::ledger::Error::Conflict(_)) => "conflict",
        CliError::Ledger(countersign_core::ledger::Error::Invalid(_)) => "invalid",
        CliError::Ledger(_) => "ledger",
        CliError::Engine(_) => "engine",
        CliError::Keyring(_) => "keyring",
        CliError::SignIn(_) => "sign_in",
    }
}

pub(crate) fn client(url: &str, global: &Global) -> Result<Client, CliError> {
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
    Ok(Client::with_options(endpoint, options, None)?)
}

pub(crate) fn parse_object(what: &str, text: &str) -> Result<Map<String, Value>, CliError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(CliError::Usage(format!("{what} must be a JSON object"))),
        Err(e) => Err(CliError::Usage(format!("{what} is not valid JSON: {e}"))),
    }
}

async fn run(cli: Cli) -> Result<u8, CliError> {
    let global = cli.global;
    let json = global.json;
    match cli.command {
        Command::Discover { url } => {
            let discovery = client(&url, &global)?.discover().await?;
            if global.json {
                terminal::json(&Value::Object(discovery.raw.clone()));
            } else {
                say!(
                    "server:     {}",
                    discovery
                        .server_label()
                        .unwrap_or_else(|| "(unnamed)".into())
                );
                say!("versions:   {}", discovery.supported_versions.join(", "));
                say!(
                    "tasks:      {}",
                    if discovery.supports_tasks() {
                        "yes"
                    } else {
                        "no"
                    }
                );
                let caps: Vec<&String> = discovery.capabilities.keys().collect();
                say!(
                    "capabilities: {}",
                    caps.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if let Some(i) = &discovery.instructions {
                    say!("instructions:");
                    terminal::lines(i);
                }
            }
            Ok(EXIT_COMPLETED)
        }
        Command::Tools { url } => {
            let list = client(&url, &global)?.list_tools().await?;
            for excluded in &list.excluded {
                tell!(
                    "warning: tool {:?} excluded: {}",
                    excluded.name,
                    excluded.reason
                );
            }
            if global.json {
                let tools: Vec<Value> = list
                    .tools
                    .iter()
                    .map(|t| Value::Object(t.definition.clone()))
                    .collect();
                let excluded: Vec<Value> = list
                    .excluded
                    .iter()
                    .map(|e| json!({"name": e.name, "reason": e.reason}))
                    .collect();
                terminal::json(&json!({"tools": tools, "excluded": excluded}));
            } else {
                for tool in &list.tools {
                    let support = tool
                        .task_support()
                        .map(|s| format!(" [task: {s}]"))
                        .unwrap_or_default();
                    say!("{}{support}", tool.name);
                    say!("    {}", tool.description().unwrap_or(""));
                }
            }
            Ok(EXIT_COMPLETED)
        }
        Command::Call(args) => {
            let arguments = args
                .args_json
                .as_deref()
                .map(|a| parse_object("ARGS_JSON", a))
                .transpose()?;
            let policy = direct::AnswerPolicy::from_args(&args.answer)?;
            if args.url.contains("://") {
                let client = client(&args.url, &global)?;
                direct::call(
                    &client,
                    &args.tool,
                    arguments,
                    policy,
                    args.no_follow,
                    global.json,
                )
                .await
            } else {
                with_desk(&global, |desk| {
                    Box::pin(async move {
                        ledger_mode::call(
                            desk,
                            &args.url,
                            &args.tool,
                            arguments,
                            policy,
                            args.no_follow,
                            json,
                        )
                        .await
                    })
                })
                .await
            }
        }
        Command::Servers(ServersCommand::Add {
            name,
            url,
            no_discover,
            no_browser,
            client,
        }) => {
            let client = client.client()?;
            // `--token`/`COUNTERSIGN_TOKEN` here is this server's token: kept in the keyring.
            let token = global
                .token
                .clone()
                .filter(|t| !t.is_empty())
                .map(countersign_core::sensitive::Sensitive::new);
            with_desk(&global, |desk| {
                Box::pin(async move {
                    ledger_mode::servers_add(
                        desk,
                        &name,
                        &url,
                        token,
                        !no_discover,
                        ledger_mode::SignInWith {
                            client,
                            browser: !no_browser,
                        },
                        json,
                    )
                    .await
                })
            })
            .await
        }
        Command::Servers(ServersCommand::Login {
            name,
            no_browser,
            client,
        }) => {
            let client = client.client()?;
            let with = ledger_mode::SignInWith {
                client,
                browser: !no_browser,
            };
            with_desk(&global, |desk| {
                Box::pin(async move { ledger_mode::servers_login(desk, &name, with, json).await })
            })
            .await
        }
        Command::Servers(ServersCommand::Logout {
            name,
            forget_client,
        }) => {
            with_desk(&global, |desk| {
                Box::pin(async move {
                    ledger_mode::servers_logout(desk, &name, forget_client, json).await
                })
            })
            .await
        }
        Command::Servers(ServersCommand::List) => {
            with_desk(&global, |desk| {
                Box::pin(async move { ledger_mode::servers_list(desk, json).await })
            })
            .await
        }
        Command::Servers(ServersCommand::Remove { name }) => {
            with_desk(&global, |desk| {
                Box::pin(async move { ledger_mode::servers_remove(desk, &name, json).await })
            })
            .await
        }
        Command::Watch => {
            with_desk(&global, |desk| {
                Box::pin(async move { ledger_mode::watch(desk, json).await })
            })
            .await
        }
        Command::Tasks {
            status,
            server,
            tool,
        } => {
            with_desk(&global, |desk| {
                Box::pin(async move {
                    ledger_mode::tasks_list(desk, status.as_deref(), server, tool, json).await
                })
            })
            .await
        }
        Command::Task(TaskCommand::Show { task_id }) => {
            with_desk(&global, |desk| {
                Box::pin(async move { ledger_mode::task_show(desk, &task_id, json).await })
            })
            .await
        }
        Command::Answer {
            task_id,
            key,
            answer,
            reason,
            ..
        } if gateway_mode::is_gated(&task_id) => {
            with_desk(&global, |desk| {
                Box::pin(async move {
                    let accept = answer.accept.as_deref();
                    gateway_mode::answer(desk, &task_id, key.as_deref(), accept, reason, json).await
                })
            })
            .await
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
            with_desk(&global, |desk| {
                Box::pin(async move {
                    ledger_mode::answer(desk, &task_id, key.as_deref(), &policy, json).await
                })
            })
            .await
        }
        Command::Cancel { task_id } => {
            with_desk(&global, |desk| {
                Box::pin(async move { ledger_mode::cancel(desk, &task_id, json).await })
            })
            .await
        }
        Command::Adopt { server, task_id } => {
            with_desk(&global, |desk| {
                Box::pin(async move { ledger_mode::adopt(desk, &server, &task_id, json).await })
            })
            .await
        }
        Command::Inbox => {
            with_desk(&global, |desk| {
                Box::pin(async move { gateway_mode::inbox(desk, json).await })
            })
            .await
        }
        Command::Gateway { port, hold_seconds } => {
            let desk = ledger_mode::Desk::open(&global).await?;
            gateway_mode::serve(desk, port, hold_seconds).await
        }
        Command::Connect {
            server,
            url,
            print_config,
        } => gateway_mode::connect(&global, &server, url, print_config).await,
        Command::Agents(command) => {
            with_desk(&global, |desk| {
                Box::pin(async move {
                    match command {
                        AgentsCommand::Add { name } => {
                            gateway_mode::agents_add(desk, &name, json).await
                        }
                        AgentsCommand::Remove { name } => {
                            gateway_mode::agents_remove(desk, &name, json).await
                        }
                        AgentsCommand::List => gateway_mode::agents_list(desk, json).await,
                    }
                })
            })
            .await
        }
        Command::Policy(command) => {
            with_desk(&global, |desk| {
                Box::pin(async move {
                    match command {
                        PolicyCommand::List => gateway_mode::policy_list(desk, json).await,
                        PolicyCommand::Set {
                            server,
                            tool,
                            action,
                            agent,
                            when,
                        } => {
                            gateway_mode::policy_set(
                                desk,
                                (server, tool, action, agent, when),
                                json,
                            )
                            .await
                        }
                        PolicyCommand::Remove { id } => gateway_mode::policy_remove(desk, id).await,
                        PolicyCommand::ReadOnly { server, state } => {
                            gateway_mode::policy_read_only(desk, &server, &state).await
                        }
                    }
                })
            })
            .await
        }
        Command::Settings { command } => {
            with_desk(&global, |desk| {
                Box::pin(async move {
                    match command {
                        None => settings_mode::get(desk, None, json).await,
                        Some(SettingsCommand::Get { key }) => {
                            settings_mode::get(desk, key.as_deref(), json).await
                        }
                        Some(SettingsCommand::Set { key, value }) => {
                            settings_mode::set(desk, &key, &value, json).await
                        }
                    }
                })
            })
            .await
        }
        Command::Audit { csv } => {
            with_desk(&global, |desk| {
                Box::pin(async move { ledger_mode::audit_log(desk, csv, json) })
            })
            .await
        }
        Command::Task(TaskCommand::Get { url, task_id }) => {
            let task = client(&url, &global)?.get_task(&task_id).await?;
            if global.json {
                terminal::json(&task.to_json());
            } else {
                direct::print_task_line(&task);
                direct::print_payload(&task);
            }
            Ok(direct::exit_code_for(&task))
        }
        Command::Task(TaskCommand::Cancel { url, task_id }) => {
            client(&url, &global)?.cancel_task(&task_id).await?;
            if global.json {
                terminal::json(&json!({"taskId": task_id, "cancelRequested": true}));
            } else {
                say!("cancel requested for task {task_id}");
            }
            Ok(EXIT_COMPLETED)
        }
        Command::Task(TaskCommand::Answer {
            url,
            task_id,
            answer,
        }) => {
            let policy = direct::AnswerPolicy::from_args(&AnswerArgs {
                accept: answer.accept,
                decline: answer.decline,
            })?;
            let client = client(&url, &global)?;
            let task = client.get_task(&task_id).await?;
            let mcp::TaskState::InputRequired { input_requests } = &task.state else {
                return Err(CliError::Usage(format!(
                    "task {task_id} is {}, not waiting for input",
                    task.status()
                )));
            };
            let mut responses = Map::new();
            for (key, request) in input_requests {
                let response = policy.automatic(request).ok_or_else(|| {
                    CliError::Usage(format!(
                        "cannot answer {key}: unsupported request {}",
                        request.method
                    ))
                })?;
                responses.insert(key.clone(), response);
            }
            let keys: Vec<String> = responses.keys().cloned().collect();
            client.update_task(&task_id, responses).await?;
            if global.json {
                terminal::json(&json!({"taskId": task_id, "answered": keys}));
            } else {
                say!("answered {} question(s) of task {task_id}", keys.len());
            }
            Ok(EXIT_COMPLETED)
        }
        Command::DemoServer {
            port,
            speed,
            poll_interval_ms,
            ttl_ms,
            mode,
            no_push,
            require_token,
        } => {
            serve_demo(
                port,
                speed,
                poll_interval_ms,
                ttl_ms,
                &mode,
                !no_push,
                require_token,
            )
            .await
        }
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

async fn serve_demo(
    port: u16,
    speed: f64,
    poll_interval_ms: u64,
    ttl_ms: u64,
    mode: &str,
    push: bool,
    required_token: Option<String>,
) -> Result<u8, CliError> {
    if !(speed.is_finite() && speed > 0.0) {
        return Err(CliError::Usage("--speed must be a positive number".into()));
    }
    let response_mode = match mode {
        "json" => countersign_demo::ResponseMode::Json,
        "sse" => countersign_demo::ResponseMode::Sse,
        "mixed" => countersign_demo::ResponseMode::Mixed,
        other => {
            return Err(CliError::Usage(format!(
                "--mode must be json, sse or mixed, not {other:?}"
            )))
        }
    };
    let config = countersign_demo::DemoConfig {
        time_scale: 1.0 / speed,
        poll_interval_ms,
        default_ttl_ms: (ttl_ms > 0).then_some(ttl_ms),
        response_mode,
        required_token: required_token.filter(|t| !t.is_empty()),
        push,
        ..countersign_demo::DemoConfig::default()
    };
    let server = countersign_demo::DemoServer::start(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        config,
    )
    .await?;
    say!("{}", server.url());
    tell!("countersign demo server listening; Ctrl-C to stop");
    shutdown_signal().await;
    server.shutdown().await;
    Ok(EXIT_COMPLETED)
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
