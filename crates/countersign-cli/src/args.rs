//! The command line as clap reads it: every command, its arguments and their help. `main`
//! parses it once and dispatches each command to its `*_mode` module.

use clap::{Args, Parser, Subcommand};

use crate::CliError;

/// The exit-code contract, shown by `--help` (the README's paragraph says the same).
pub(crate) const EXIT_CODES_HELP: &str = "\
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
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
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
pub(crate) enum Command {
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
    /// Track a task created elsewhere, by its id; `--list` shows the tasks a 2025-11-25 server
    /// lists (those of Countersign's own session).
    Adopt {
        /// The server name.
        server: String,
        /// The server's task id.
        #[arg(allow_hyphen_values = true, required_unless_present = "list")]
        task_id: Option<String>,
        /// List the server's tasks (`tasks/list`) instead of adopting one.
        #[arg(long, conflicts_with = "task_id")]
        list: bool,
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
    DemoServer(DemoServerArgs),
}

#[derive(Args, Debug)]
pub(crate) struct CallArgs {
    /// The server's MCP endpoint URL, or the name of a server in the ledger.
    pub(crate) url: String,
    /// The tool name.
    pub(crate) tool: String,
    /// The arguments as a JSON object.
    pub(crate) args_json: Option<String>,
    #[command(flatten)]
    pub(crate) answer: AnswerArgs,
    /// Print the task handle and exit instead of following it.
    #[arg(long)]
    pub(crate) no_follow: bool,
}

impl CallArgs {
    /// The arguments, checked to be a JSON object.
    pub(crate) fn arguments(
        &self,
    ) -> Result<Option<serde_json::Map<String, serde_json::Value>>, CliError> {
        self.args_json
            .as_deref()
            .map(|a| crate::parse_object("ARGS_JSON", a))
            .transpose()
    }
}

#[derive(Args, Debug, Clone, Default)]
#[group(multiple = false)]
pub(crate) struct AnswerArgs {
    /// Answer every form question with {"action":"accept","content":JSON} (URL questions: consent).
    #[arg(long, value_name = "JSON")]
    pub(crate) accept: Option<String>,
    /// Decline every question.
    #[arg(long)]
    pub(crate) decline: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum TaskCommand {
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
pub(crate) struct SignInClientArgs {
    /// A client id you registered with the server's authorization server yourself.
    #[arg(long, value_name = "ID")]
    pub(crate) client_id: Option<String>,
    /// The name of an environment variable holding that client's secret (a confidential
    /// client). Never the secret itself: a command line is visible to every process. The
    /// secret is kept in the OS keyring with the sign-in, nowhere else.
    #[arg(long, value_name = "VAR", requires = "client_id")]
    pub(crate) client_secret_env: Option<String>,
    /// The URL of Countersign's client ID metadata document as you publish it (https, with a
    /// path), used where the authorization server supports them.
    #[arg(long, value_name = "URL")]
    pub(crate) client_metadata_url: Option<String>,
    /// Listen for the sign-in's answer on this fixed loopback port: for a client registered
    /// with the exact redirect URI http://127.0.0.1:PORT/callback (servers that do not accept
    /// any port). Kept with the client, so `login` later uses it again.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) redirect_port: Option<u16>,
}

impl SignInClientArgs {
    /// The console's client, with the secret read from its variable.
    pub(crate) fn client(&self) -> Result<countersign_core::console::SignInClient, CliError> {
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
pub(crate) enum ServersCommand {
    /// Register a server (its identity is discovered first): an HTTP server by its URL, or a
    /// stdio server by its command after `--` (`servers add files -- npx -y
    /// @modelcontextprotocol/server-filesystem ~/work`), which the engine starts when needed.
    Add {
        /// A unique name.
        name: String,
        /// Its MCP endpoint URL (an HTTP server).
        #[arg(required_unless_present = "command", conflicts_with = "command")]
        url: Option<String>,
        /// A stdio server's command and its arguments, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
        /// A stdio server's environment variable, `KEY=VALUE` (repeatable). Kept in the ledger:
        /// use --env-secret for secrets.
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// A stdio server's secret variable (repeatable): its value is read from this command's
        /// own environment variable of that name and kept in the OS keyring only.
        #[arg(long = "env-secret", value_name = "KEY")]
        env_secret: Vec<String>,
        /// A stdio server's working directory.
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
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
pub(crate) enum SettingsCommand {
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
pub(crate) enum AgentsCommand {
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
    /// Put a host's servers behind Countersign: reads FILE (`.mcp.json`, `.cursor/mcp.json`,
    /// `.vscode/mcp.json`, Codex's `config.toml`, or any JSON with `mcpServers`), prints what
    /// would be registered and the diff of the file; `--apply` registers them, adds an agent
    /// and rewrites FILE so each goes through the gateway (the original kept as
    /// FILE.countersign-backup); `--undo` restores it.
    Import {
        /// The host's configuration file.
        file: std::path::PathBuf,
        /// Register the servers and rewrite the file.
        #[arg(long, conflicts_with = "undo")]
        apply: bool,
        /// Restore the file from its backup and revoke the agent the import added.
        #[arg(long)]
        undo: bool,
        /// The agent to add for the file (default: the host's name, e.g. claude-code).
        #[arg(long, conflicts_with = "undo")]
        agent: Option<String>,
        /// The gateway's base URL the entries point at (default: the running gateway's, else
        /// http://127.0.0.1:8788/mcp/).
        #[arg(long, conflicts_with = "undo")]
        gateway_url: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum PolicyCommand {
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
pub(crate) struct RequiredAnswer {
    /// Accept with this JSON object as the form content.
    #[arg(long, value_name = "JSON")]
    pub(crate) accept: Option<String>,
    /// Decline.
    #[arg(long)]
    pub(crate) decline: bool,
}

/// `demo-server`'s options.
#[derive(Args, Debug)]
pub(crate) struct DemoServerArgs {
    /// Port to listen on (0 = any free port).
    #[arg(long, default_value_t = 0)]
    pub(crate) port: u16,
    /// Speed factor: 1 is realistic pacing, 10 runs ten times faster.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) speed: f64,
    /// The pollIntervalMs the server advertises.
    #[arg(long, default_value_t = 1000)]
    pub(crate) poll_interval_ms: u64,
    /// The ttlMs of new tasks (0 = unlimited).
    #[arg(long, default_value_t = 900_000)]
    pub(crate) ttl_ms: u64,
    /// Reply framing: json, sse (every reply, like rmcp) or mixed.
    #[arg(long, default_value = "json")]
    pub(crate) mode: String,
    /// Answer subscriptions/listen with -32601 (like servers without push), so clients poll.
    #[arg(long)]
    pub(crate) no_push: bool,
    /// Require this bearer token (prefer COUNTERSIGN_DEMO_TOKEN: arguments are visible to other users).
    #[arg(long, env = "COUNTERSIGN_DEMO_TOKEN", hide_env_values = true)]
    pub(crate) require_token: Option<String>,
    /// Protocol generation: 2026-07-28 (stateless, the Tasks extension) or 2025-11-25 (sessions
    /// and SEP-1686 Tasks, as a server on the TypeScript SDK 1.x serves them; same tools).
    #[arg(long, default_value = "2026-07-28", value_parser = ["2026-07-28", "2025-11-25"])]
    pub(crate) era: String,
}
