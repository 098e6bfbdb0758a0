//! What crosses the IPC boundary: the command and event contract, declared once.
//!
//! [`contract!`] lists every command with its request and response type and every event with its
//! payload. The views themselves are the console's ([`countersign_core::console::view`], shared
//! with the CLI's `--json`); this file adds only the request envelopes (one argument per command)
//! and the shell's own state. `ts-rs` generates `ui/src/bindings/` from the contract (one file
//! per type, plus `Contract.ts`, the typed command/event map the UI's `call`/`listen` use); the
//! test at the bottom fails on any drift (refresh with `cargo xtask bless`).

pub use countersign_core::console::hosts::{ImportReport, ImportUndone};
pub use countersign_core::console::view::*;
pub use countersign_core::hosts::Snippet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

/// Declares the IPC contract once: command names with request and response types, event names
/// with payload types. Expands to [`COMMANDS`], the `event` name constants, and (in tests) the
/// generator of `ui/src/bindings/Contract.ts`.
macro_rules! contract {
    (
        commands { $($cmd:ident : $req:ty => $res:ty,)* }
        events { $($ev:ident = $evname:literal : $payload:ty,)* }
    ) => {
        /// Every command the webview may call, by name (each also needs an `allow-<name>` grant in
        /// `capabilities/main.json` and a line in `build.rs`; the IPC tests check both).
        pub const COMMANDS: &[&str] = &[$(stringify!($cmd)),*];

        /// Names of the events the shell emits to the webview (past-tense facts).
        pub mod event {
            $(
                #[doc = concat!("Payload: `", stringify!($payload), "`.")]
                pub const $ev: &str = $evname;
            )*
        }

        /// Visits every type the contract names.
        #[cfg(test)]
        fn visit_contract(v: &mut impl ts_rs::TypeVisitor) {
            $( v.visit::<$req>(); v.visit::<$res>(); )*
            $( v.visit::<$payload>(); )*
        }

        #[cfg(test)]
        pub(crate) fn contract_ts(cfg: &ts_rs::Config) -> String {
            let mut declared = Declared { cfg, names: Default::default(), export: false, error: None };
            visit_contract(&mut declared);
            let mut out = String::from("// Generated from src-tauri/src/ipc.rs (contract!). Do not edit: run\n// `COUNTERSIGN_BLESS=1 cargo test -p countersign-desktop bindings`.\n");
            for name in &declared.names {
                out.push_str(&format!("import type {{ {name} }} from \"./{name}\";\n"));
            }
            out.push_str("\n/** Every command: `req` is `null` when it takes no argument. */\nexport interface Commands {\n");
            $(
                out.push_str(&format!("  {}: {{ req: {}; res: {} }};\n", stringify!($cmd), <$req as TS>::name(cfg), <$res as TS>::name(cfg)));
            )*
            out.push_str("}\n\n/** Every event and its payload. */\nexport interface Events {\n");
            $(
                out.push_str(&format!("  {}: {};\n", $evname, <$payload as TS>::name(cfg)));
            )*
            out.push_str("}\n");
            out
        }

        #[cfg(test)]
        pub(crate) fn export_types(cfg: &ts_rs::Config) -> Result<(), String> {
            let mut declared = Declared { cfg, names: Default::default(), export: true, error: None };
            visit_contract(&mut declared);
            // Every command rejects with this shape.
            ts_rs::TypeVisitor::visit::<CommandError>(&mut declared);
            declared.error.map_or(Ok(()), Err)
        }
    };
}

/// Collects (and optionally exports) the declared types a type names, through its generics.
#[cfg(test)]
struct Declared<'a> {
    cfg: &'a ts_rs::Config,
    names: std::collections::BTreeSet<String>,
    export: bool,
    error: Option<String>,
}

#[cfg(test)]
impl ts_rs::TypeVisitor for Declared<'_> {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if T::output_path().is_some() {
            self.names.insert(T::ident(self.cfg));
            if self.export {
                if let Err(e) = T::export_all(self.cfg) {
                    self.error
                        .get_or_insert(format!("{}: {e}", T::ident(self.cfg)));
                }
            }
        }
        T::visit_generics(self);
    }
}

contract! {
    commands {
        app_info: () => AppInfo,
        ui_mounted: () => (),
        ui_painted: PaintedRequest => (),
        notify_dnd_set: DndRequest => ShellState,
        view_set: ViewRequest => (),
        view_zoom_set: ZoomRequest => (),
        input_list: () => Vec<InputRequestView>,
        input_answer: InputAnswerRequest => (),
        task_list: TaskListRequest => Vec<TaskView>,
        task_get: TaskRef => TaskDetail,
        task_cancel: TaskRef => (),
        task_adopt: TaskAdoptRequest => TaskView,
        task_adoptable: ServerRef => AdoptableTasks,
        task_link: TaskRef => String,
        server_list: () => Vec<ServerView>,
        server_add: ServerAddRequest => ServerView,
        server_add_stdio: StdioAddRequest => ServerView,
        server_update: ServerUpdateRequest => ServerView,
        server_remove: ServerRef => (),
        server_check: ServerRef => ServerView,
        server_sign_in_plan: SignInPlanRequest => SignInPlan,
        server_sign_in: SignInRequest => ServerView,
        server_sign_out: ServerRef => ServerView,
        server_check_cancel: () => (),
        demo_start: () => ServerView,
        gated_list: () => Vec<GatedCallView>,
        gated_decide: GatedDecideRequest => GatedCallView,
        gated_timeline: GatedRef => GatedTimeline,
        gated_questions_list: () => Vec<GatedQuestionsView>,
        gated_answer: GatedAnswerRequest => GatedCallView,
        agents_get: () => AgentsPage,
        agent_add: AgentRef => AgentCreated,
        agent_remove: AgentRef => AgentView,
        host_import_preview: HostImportRequest => ImportReport,
        host_import_apply: HostImportRequest => ImportReport,
        host_import_undo: HostImportRequest => ImportUndone,
        rule_remove: RuleRef => (),
        tool_list: ServerRef => Vec<ToolView>,
        tool_call: ToolCallRequest => ToolCallOutcome,
        tool_call_answer: ToolCallAnswerRequest => ToolCallOutcome,
        audit_list: () => Vec<AuditEntry>,
        audit_export: AuditExportRequest => AuditExport,
        url_open: UrlOpenRequest => (),
        settings_get: () => SettingsPage,
        settings_set: Settings => SettingsPage,
        resident_restart: () => ShellState,
    }
    events {
        EVENT_RECORDED = "event_recorded": EventView,
        TASK_UPDATED = "task_updated": TaskView,
        INBOX_CHANGED = "inbox_changed": Vec<InputRequestView>,
        SERVERS_CHANGED = "servers_changed": Vec<ServerView>,
        SHELL_STATE_CHANGED = "shell_state_changed": ShellState,
        INPUT_FOCUS_REQUESTED = "input_focus_requested": InputFocusRequested,
        GATED_CHANGED = "gated_changed": Vec<GatedCallView>,
        GATED_QUESTIONS_CHANGED = "gated_questions_changed": Vec<GatedQuestionsView>,
    }
}

/// `app_info` response.
#[derive(Debug, Clone, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AppInfo {
    /// Crate version.
    pub version: String,
    /// The ledger's directory.
    pub data_dir: String,
    /// The OS user recorded in the audit log.
    pub user: String,
    /// Whether this process runs the engine.
    pub engine: EngineState,
    /// URL of the built-in demo server when started with `--demo`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub demo_url: Option<String>,
    /// The local MCP gateway's base URL (`…/mcp/`; agents add a server's name), when this app
    /// runs it (`--gateway PORT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub gateway_url: Option<String>,
    /// Shell state at the time of the call.
    pub shell: ShellState,
}

/// How the window is linked to the resident (Countersign's background service: the engine, the
/// tray, the notifications). Only a resident that went away without saying Quit (a crash, a
/// `kill -9`) is started again; a Quit ends the window too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum ResidentLink {
    /// Following its state (or not started by this window: the IPC tests).
    #[default]
    Connected,
    /// It went away without a Quit; this window is starting it again.
    Restarting,
    /// Starting it again failed; `resident_restart` tries again.
    Failed {
        /// Why, for a person.
        message: String,
    },
}

/// State owned by the shell itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ShellState {
    /// Questions waiting for the user.
    pub pending: u32,
    /// Do-not-disturb: no desktop notifications while on.
    pub dnd: bool,
    /// Whether the notification daemon supports action buttons.
    pub notification_actions: bool,
    /// The do-not-disturb schedule (Settings) holds notifications now.
    pub dnd_scheduled: bool,
    /// Whether the background service is there (else a banner says it is being restarted, or
    /// why it could not be, with Retry).
    pub resident: ResidentLink,
}

pub use countersign_core::settings::{Day, DndSchedule, GatewaySetting, Settings};

/// The Settings page: the settings, and how this app applies them now.
#[derive(Debug, Clone, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SettingsPage {
    /// The settings as stored.
    pub settings: Settings,
    /// The ledger's directory (shown read-only, with "Copy path").
    pub data_dir: String,
    /// Notifications are held now (the schedule or the toggle).
    pub dnd_active: bool,
    /// The desktop's autostart entry exists.
    pub start_at_login_active: bool,
    /// Why the autostart entry could not be changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub autostart_error: Option<String>,
    /// The gateway's base URL while this app runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub gateway_url: Option<String>,
    /// `--gateway PORT` given at launch: it overrides the setting for this run.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub gateway_flag: Option<u16>,
    /// Why the gateway asked for could not start (a port in use).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub gateway_error: Option<String>,
}

/// `notify_dnd_set` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct DndRequest {
    /// New do-not-disturb state.
    pub enabled: bool,
}

/// The Agents view: who may connect, the rules, and the latest calls with their decisions.
#[derive(Debug, Clone, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AgentsPage {
    /// Every agent, revoked ones too (never a token: it is shown once, by the CLI).
    pub agents: Vec<AgentView>,
    /// Every rule.
    pub rules: Vec<RuleView>,
    /// The newest calls the gateway held or denied, newest first.
    pub calls: Vec<GatedCallView>,
    /// The gateway's base URL when this app runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub gateway_url: Option<String>,
}

/// `agent_add` reply: the new agent and its token. **The one place a credential crosses IPC**, on
/// purpose: a person must copy the token into their agent's configuration, and it exists nowhere
/// else (the ledger keeps only its digest). It is in this reply only, shown once by the window,
/// never in an event, a log, or a later reply; `Debug` leaves it out.
#[derive(Clone, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AgentCreated {
    /// The agent.
    pub agent: AgentView,
    /// Its bearer token (`csa_…`), shown this once.
    pub token: String,
    /// The gateway's base URL when this app runs it (`…/mcp/`; agents add a server's name).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub gateway_url: Option<String>,
    /// The configuration to paste for each host, per registered server (they carry the token
    /// too: made here, once, from the same reply).
    pub snippets: Vec<ServerSnippets>,
}

/// The snippets for one server.
#[derive(Clone, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerSnippets {
    /// The server's name (the gateway path's last segment).
    pub server: String,
    /// One per host.
    pub snippets: Vec<Snippet>,
}

/// `host_import_*` request: a host's configuration file (`~/` is the home directory).
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct HostImportRequest {
    /// The file's full path.
    pub path: String,
}

impl std::fmt::Debug for AgentCreated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentCreated")
            .field("agent", &self.agent)
            .field("token", &"<redacted>")
            .field("gateway_url", &self.gateway_url)
            .field("snippets", &self.snippets.len())
            .finish()
    }
}

/// `agent_add` and `agent_remove` request: an agent by name.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AgentRef {
    /// The agent's name.
    pub name: String,
}

/// `rule_remove` request.
#[derive(Debug, Clone, Copy, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RuleRef {
    /// The rule's row id.
    pub id: i64,
}

/// `gated_timeline` request: one agent call by Countersign's task id.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct GatedRef {
    /// Countersign's task id of the call (`csg-…`).
    pub task_id: String,
}

/// `gated_decide` request: a person's decision on an agent's call held by the gateway.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct GatedDecideRequest {
    /// Countersign's task id of the call (`csg-…`).
    pub task_id: String,
    /// Approve or decline, why, and whether to always allow this tool for this agent.
    pub decision: GatedDecision,
}

/// `gated_answer` request: the person's answers to the questions an approved call's upstream
/// asked before running it.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct GatedAnswerRequest {
    /// Countersign's task id of the call (`csg-…`).
    pub task_id: String,
    /// One answer per question, by its key (every key asked, and only those).
    pub answers: Vec<CallAnswer>,
}

/// `ui_painted` request: when the webview reached each step of its first page, in unix
/// milliseconds by its clock (`performance.timeOrigin + performance.now()`, this machine's
/// clock), for the cold-start budget. Only logged.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct PaintedRequest {
    /// The page's navigation started (`performance.timeOrigin`).
    pub navigated_ms: f64,
    /// The UI's script began to run (its bundle fetched, parsed and its imports evaluated).
    pub script_ms: f64,
    /// The UI was mounted (its first render in the DOM, before layout and paint).
    pub mounted_ms: f64,
    /// The first frame with the UI was painted (two animation frames after mounting).
    pub painted_ms: f64,
}

/// `view_zoom_set` request: the window's text size (page zoom).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ZoomRequest {
    /// In percent: 100, 125, 150, 175 or 200.
    pub percent: u16,
}

/// `view_set` request: what the window shows, so no notification interrupts the user about a
/// question they are already looking at.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ViewRequest {
    /// The task whose detail is open.
    #[serde(default)]
    #[ts(optional)]
    pub task_row: Option<i64>,
    /// The question open in the inbox (with `task_row`).
    #[serde(default)]
    #[ts(optional)]
    pub key: Option<String>,
}

/// `input_answer` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputAnswerRequest {
    /// The task's row.
    pub task_row: i64,
    /// The question's key.
    pub key: String,
    /// The answer.
    pub response: InputResponse,
}

/// `input_focus_requested` payload: the user clicked a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct InputFocusRequested {
    /// The task's row.
    pub task_row: i64,
    /// The question to show.
    pub key: String,
}

/// `task_list` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskListRequest {
    /// At most this many, newest first (absent = all).
    #[serde(default)]
    #[ts(optional)]
    pub limit: Option<u32>,
}

/// `task_get`/`task_cancel` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskRef {
    /// Ledger row id.
    pub row: i64,
}

/// `task_adopt` request: start tracking a task created elsewhere.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct TaskAdoptRequest {
    /// Server row id.
    pub server_id: i64,
    /// The server's task id.
    pub task_id: String,
}

/// A request naming one server.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ServerRef {
    /// Row id.
    pub server_id: i64,
}

/// `server_sign_in_plan` request: the server, and the client the person registered themselves,
/// if they gave one (else dynamic registration, or the client kept from before).
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SignInPlanRequest {
    /// Row id.
    pub server_id: i64,
    /// A client id registered with the authorization server by hand.
    #[serde(default)]
    #[ts(optional)]
    pub client_id: Option<String>,
    /// The fixed loopback port of that client's redirect URI.
    #[serde(default)]
    #[ts(optional)]
    pub redirect_port: Option<u16>,
}

/// `server_sign_in` request (deserialise-only: it may carry a client secret): the server, the
/// host the person was shown (`server_sign_in_plan`) and confirmed (the browser opens nothing
/// else), and the client they gave, if any.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SignInRequest {
    /// Row id.
    pub server_id: i64,
    /// [`SignInPlan::host`] as shown.
    pub host: String,
    /// A client id registered with the authorization server by hand.
    #[serde(default)]
    #[ts(optional)]
    pub client_id: Option<String>,
    /// Its secret (a confidential client), kept only in the OS keyring with the sign-in.
    #[serde(default)]
    #[ts(optional, type = "string")]
    pub client_secret: Option<SecretText>,
    /// The fixed loopback port of that client's redirect URI.
    #[serde(default)]
    #[ts(optional)]
    pub redirect_port: Option<u16>,
}

/// `tool_call` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRequest {
    /// Server row id.
    pub server_id: i64,
    /// Tool name.
    pub name: String,
    /// Arguments object.
    #[ts(type = "Record<string, unknown>")]
    pub arguments: serde_json::Map<String, Value>,
}

/// `tool_call_answer` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallAnswerRequest {
    /// From [`ToolCallOutcome::InputRequired`].
    pub call_id: u64,
    /// One answer per question.
    pub answers: Vec<CallAnswer>,
}

/// `audit_export` request.
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuditExportRequest {
    /// The format.
    pub format: AuditFormat,
}

/// `url_open` request: open an http(s) URL in the default browser (URL-mode elicitation, after
/// the user saw the host and consented).
#[derive(Debug, Clone, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct UrlOpenRequest {
    /// Absolute `http:` or `https:` URL.
    pub url: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn export_bindings(dir: &Path) {
        let cfg = ts_rs::Config::new()
            .with_out_dir(dir)
            .with_large_int("number");
        export_types(&cfg).unwrap_or_else(|e| panic!("export bindings: {e}"));
        std::fs::write(dir.join("Contract.ts"), contract_ts(&cfg)).expect("write Contract.ts");
    }

    fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "ts"))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out.into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap_or_default();
                (PathBuf::from(p.file_name().unwrap_or_default()), bytes)
            })
            .collect()
    }

    /// The UI's types are generated from these; a stale copy would let the two sides drift.
    #[test]
    fn bindings_are_fresh() {
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/src/bindings");
        if std::env::var_os("COUNTERSIGN_BLESS").is_some() {
            if let Ok(rd) = std::fs::read_dir(&committed) {
                for e in rd.filter_map(Result::ok) {
                    if e.path().extension().is_some_and(|x| x == "ts") {
                        std::fs::remove_file(e.path()).unwrap();
                    }
                }
            }
            std::fs::create_dir_all(&committed).unwrap();
            export_bindings(&committed);
            return;
        }
        let fresh =
            std::env::temp_dir().join(format!("countersign-bindings-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&fresh);
        std::fs::create_dir_all(&fresh).unwrap();
        export_bindings(&fresh);
        let (want, have) = (files(&fresh), files(&committed));
        let _ = std::fs::remove_dir_all(&fresh);
        let names = |v: &[(PathBuf, Vec<u8>)]| v.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&have),
            names(&want),
            "ui/src/bindings is stale: run `cargo xtask bless`"
        );
        for ((name, w), (_, h)) in want.iter().zip(&have) {
            assert!(
                w == h,
                "ui/src/bindings/{} is stale: run `cargo xtask bless`",
                name.display()
            );
        }
    }
}
