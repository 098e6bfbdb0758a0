//! The commands the webview may call (each granted in `capabilities/main.json`, listed in
//! `build.rs` and declared with its types in [`crate::ipc`]'s contract).
//!
//! Every command takes at most one argument, named `request`, so the UI's typed `call` maps one
//! Rust type to one TypeScript type. They delegate to the core's
//! [`Console`](countersign_core::console::Console), the one the CLI uses too.

use countersign_core::browser::OpenError;
use countersign_core::console::hosts::ImportTarget;
use countersign_core::console::{Console, Error as ConsoleError};
use countersign_core::hosts;
use countersign_core::mcp::ToolCall;

use crate::ipc::{
    AdoptableTasks, AgentCreated, AgentRef, AgentView, AgentsPage, AppInfo, AuditEntry,
    AuditExport, AuditExportRequest, CommandError, DndRequest, ErrorCode, GatedAnswerRequest,
    GatedCallView, GatedDecideRequest, GatedQuestionsView, GatedRef, GatedTimeline,
    HostImportRequest, ImportReport, ImportUndone, InputAnswerRequest, InputRequestView,
    PaintedRequest, RuleRef, ServerAddRequest, ServerRef, ServerSnippets, ServerUpdateRequest,
    ServerView, ShellState, StdioAddRequest, TaskAdoptRequest, TaskDetail, TaskListRequest,
    TaskRef, TaskView, ToolCallAnswerRequest, ToolCallOutcome, ToolCallRequest, ToolView,
    UrlOpenRequest, ViewRequest, ZoomRequest,
};
use crate::Shell;
use countersign_desktop_ipc::{ControlError, Request};
use tauri::{AppHandle, Manager, Runtime, State};

/// Result of a command: errors cross IPC as `{code, message}`.
pub type Result<T, E = CommandError> = std::result::Result<T, E>;

fn ipc<T>(r: std::result::Result<T, ConsoleError>) -> Result<T> {
    r.map_err(CommandError::from)
}

/// Version, data directory, engine and shell state.
#[tauri::command]
pub async fn app_info(shell: State<'_, Shell>) -> Result<AppInfo> {
    // Asked now (its watch may not have said anything yet at the window's first call).
    if let Err(e) = crate::resident::ask_state(&shell, &Request::State).await {
        tracing::warn!("the background process did not answer: {e}");
    }
    Ok(AppInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        data_dir: shell.console.data_dir().display().to_string(),
        user: shell.console.actor().to_owned(),
        // The resident's engine is this app's: the window shows it as running here.
        engine: shell.console.engine_state().unwrap_or_else(|| {
            let resident = shell.resident_state();
            if resident.runs_engine {
                crate::ipc::EngineState::Running {
                    resumed: resident.resumed,
                }
            } else {
                crate::ipc::EngineState::Elsewhere {
                    pid: resident.engine_pid,
                }
            }
        }),
        demo_url: shell.resident_state().demo_url,
        gateway_url: shell.resident_state().gateway_url,
        shell: shell.state().await,
    })
}

/// The UI is mounted: the window, built hidden, is shown now (once; see `window::reveal`).
#[tauri::command]
pub async fn ui_mounted<R: Runtime>(app: AppHandle<R>) -> Result<()> {
    crate::window::reveal(&app);
    Ok(())
}

/// The UI drew its first frame (startup time, printed once).
#[tauri::command]
pub async fn ui_painted<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    request: PaintedRequest,
) -> Result<()> {
    shell.painted(Some(request));
    crate::window::painted(&app);
    Ok(())
}

/// Turns do-not-disturb on or off.
#[tauri::command]
pub async fn notify_dnd_set<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    request: DndRequest,
) -> Result<ShellState> {
    // The resident holds the notifications (and, turned off, tells what arrived meanwhile in one
    // summary); its watch brings the new state to the tray and every window.
    crate::resident::ask_state(
        &shell,
        &Request::Dnd {
            on: request.enabled,
        },
    )
    .await
    .map_err(unavailable)?;
    Ok(crate::refresh_shell_state(&app, &shell).await)
}

/// Tries again to start the background service after a restart failed (the banner's Retry).
#[tauri::command]
pub async fn resident_restart<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
) -> Result<ShellState> {
    crate::resident::retry(&shell);
    Ok(crate::refresh_shell_state(&app, &shell).await)
}

/// Text sizes the window offers (page zoom, in percent).
pub const ZOOM_PERCENTS: [u16; 5] = [100, 125, 150, 175, 200];

/// Sets the window's text size: the page zoom of the webview that asked, as a person with low
/// vision would use the browser's zoom (every size the layout must work at).
#[tauri::command]
pub async fn view_zoom_set<R: Runtime>(
    webview: tauri::Webview<R>,
    request: ZoomRequest,
) -> Result<()> {
    if !ZOOM_PERCENTS.contains(&request.percent) {
        return Err(CommandError::new(
            ErrorCode::InvalidInput,
            format!(
                "text size {} % is not offered (100, 125, 150, 175 or 200 %)",
                request.percent
            ),
        ));
    }
    webview
        .set_zoom(f64::from(request.percent) / 100.0)
        .map_err(|e| CommandError::new(ErrorCode::Internal, format!("cannot zoom: {e}")))
}

/// What the window shows now (told to the resident: no notification for a question on screen).
#[tauri::command]
pub async fn view_set<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    request: ViewRequest,
) -> Result<()> {
    if let Ok(mut viewing) = shell.viewing.lock() {
        *viewing = request;
    }
    crate::resident::tell_viewing(&app).await;
    Ok(())
}

/// Pending questions, oldest first.
#[tauri::command]
pub async fn input_list(shell: State<'_, Shell>) -> Result<Vec<InputRequestView>> {
    ipc(shell.console.inbox().await)
}

/// Answers one question.
#[tauri::command]
pub async fn input_answer(shell: State<'_, Shell>, request: InputAnswerRequest) -> Result<()> {
    ipc(shell
        .console
        .answer(request.task_row, &request.key, &request.response)
        .await)
}

/// Tasks, newest first.
#[tauri::command]
pub async fn task_list(shell: State<'_, Shell>, request: TaskListRequest) -> Result<Vec<TaskView>> {
    ipc(shell.console.tasks(request.limit).await)
}

/// One task with its timeline, questions and outcome.
#[tauri::command]
pub async fn task_get(shell: State<'_, Shell>, request: TaskRef) -> Result<TaskDetail> {
    ipc(shell.console.task_detail(request.row).await)
}

/// Requests cancellation of a task.
#[tauri::command]
pub async fn task_cancel(shell: State<'_, Shell>, request: TaskRef) -> Result<()> {
    ipc(shell.console.cancel(request.row).await)
}

/// The task's `countersign://task/<server URL>/<task id>` link ("Copy link").
#[tauri::command]
pub async fn task_link(shell: State<'_, Shell>, request: TaskRef) -> Result<String> {
    ipc(shell.console.task_link(request.row).await)
}

/// Starts tracking a task created elsewhere, by its id (the person confirmed it, also when a
/// link led there).
#[tauri::command]
pub async fn task_adopt(shell: State<'_, Shell>, request: TaskAdoptRequest) -> Result<TaskView> {
    let record = ipc(shell
        .console
        .adopt(request.server_id, &request.task_id)
        .await)?;
    ipc(shell.console.task(record.id).await)
}

/// The tasks a 2025-11-25 server lists for adoption (its session's own).
#[tauri::command]
pub async fn task_adoptable(shell: State<'_, Shell>, request: ServerRef) -> Result<AdoptableTasks> {
    ipc(shell.console.adoptable(request.server_id).await)
}

/// Registered servers, each stdio server with its process as the resident runs it.
#[tauri::command]
pub async fn server_list(shell: State<'_, Shell>) -> Result<Vec<ServerView>> {
    let mut servers = ipc(shell.console.servers().await)?;
    crate::resident::fill_stdio_processes(&shell, &mut servers).await;
    Ok(servers)
}

/// One server's view, a stdio server's with its process as the resident runs it.
async fn server_view(shell: &Shell, id: i64) -> Result<ServerView> {
    let mut view = ipc(shell.console.server_view(id).await)?;
    crate::resident::fill_stdio_processes(shell, std::slice::from_mut(&mut view)).await;
    Ok(view)
}

/// Registers a stdio server: a command the engine starts when it needs the server. Its secret
/// variables go to the OS keyring only, and the view returned names them without their values.
/// With `discover`, the command is started once here and asked what it is, and one that does not
/// answer is not added (its last words on stderr are in the error).
#[tauri::command]
pub async fn server_add_stdio(
    shell: State<'_, Shell>,
    request: StdioAddRequest,
) -> Result<ServerView> {
    let record = ipc(shell.console.add_stdio_server(request).await)?;
    server_view(&shell, record.id).await
}

/// Registers a server (its token goes to the OS keyring only); an OAuth-protected one is added
/// "sign-in needed", and the window shows where the person would sign in
/// (`server_sign_in_plan`) before any browser opens.
#[tauri::command]
pub async fn server_add(shell: State<'_, Shell>, request: ServerAddRequest) -> Result<ServerView> {
    let record = ipc(shell.console.add_server_awaiting_sign_in(request).await)?;
    ipc(shell.console.server_view(record.id).await)
}

/// Changes a server's URL, poll floor or token.
#[tauri::command]
pub async fn server_update(
    shell: State<'_, Shell>,
    request: ServerUpdateRequest,
) -> Result<ServerView> {
    let record = ipc(shell.console.update_server(request).await)?;
    ipc(shell.console.server_view(record.id).await)
}

/// Removes a server, its tasks and its token.
#[tauri::command]
pub async fn server_remove(shell: State<'_, Shell>, request: ServerRef) -> Result<()> {
    ipc(shell.console.remove_server(request.server_id).await)?;
    Ok(())
}

/// Asks a server to describe itself again.
#[tauri::command]
pub async fn server_check(shell: State<'_, Shell>, request: ServerRef) -> Result<ServerView> {
    let record = ipc(shell.console.check_server(request.server_id).await)?;
    server_view(&shell, record.id).await
}

/// Tools of one server.
/// Stops every server check still waiting (the "Cancel" beside "Checking…").
#[tauri::command]
pub async fn server_check_cancel(shell: State<'_, Shell>) -> Result<()> {
    shell.console.cancel_checks();
    Ok(())
}

/// Starts the built-in demo server in the resident and registers it as `demo` (the one-click
/// example of the empty views), with a pipeline and an approval to look at; once started, it
/// serves until the resident ends, and asking again returns the same server.
#[tauri::command]
pub async fn demo_start(shell: State<'_, Shell>) -> Result<ServerView> {
    crate::resident::ask_state(&shell, &Request::Demo)
        .await
        .map_err(unavailable)?;
    let server = ipc(shell.console.server_named(DEMO_SERVER).await)?.ok_or_else(|| {
        CommandError::new(ErrorCode::Internal, "the demo server is not registered")
    })?;
    ipc(shell.console.server_view(server.id).await)
}

/// The name the resident registers its demo server under.
const DEMO_SERVER: &str = "demo";

/// The resident did not do what was asked (it ended, or failed).
fn unavailable(e: ControlError) -> CommandError {
    CommandError::new(ErrorCode::Unavailable, e.to_string())
}

/// The agents' calls held by the gateway for a person, oldest first.
#[tauri::command]
pub async fn gated_list(shell: State<'_, Shell>) -> Result<Vec<GatedCallView>> {
    ipc(shell.console.pending_gated_calls().await)
}

/// Approves (the call runs once) or declines (it never runs) an agent's held call.
#[tauri::command]
pub async fn gated_decide(
    shell: State<'_, Shell>,
    request: GatedDecideRequest,
) -> Result<GatedCallView> {
    ipc(shell
        .console
        .decide_gated(&request.task_id, request.decision)
        .await)
}

/// Approved agents' calls whose upstream asks questions before running them, oldest first.
#[tauri::command]
pub async fn gated_questions_list(shell: State<'_, Shell>) -> Result<Vec<GatedQuestionsView>> {
    ipc(shell.console.gated_questions_views().await)
}

/// Answers the questions an approved call's upstream asked (accept with the form's content, or
/// decline); the gateway sends the call again with them.
#[tauri::command]
pub async fn gated_answer(
    shell: State<'_, Shell>,
    request: GatedAnswerRequest,
) -> Result<GatedCallView> {
    let answers = ipc(Console::call_responses(request.answers))?;
    ipc(shell.console.answer_gated(&request.task_id, answers).await)
}

/// One agent call from request to outcome: the call and its timeline.
#[tauri::command]
pub async fn gated_timeline(shell: State<'_, Shell>, request: GatedRef) -> Result<GatedTimeline> {
    ipc(shell.console.gated_timeline(&request.task_id).await)
}

/// How many of the latest agents' calls the Agents view lists.
const RECENT_CALLS: usize = 50;

/// The Agents view.
#[tauri::command]
pub async fn agents_get(shell: State<'_, Shell>) -> Result<AgentsPage> {
    Ok(AgentsPage {
        agents: ipc(shell.console.agents().await)?,
        rules: ipc(shell.console.rules().await)?,
        calls: ipc(shell.console.gated_calls(RECENT_CALLS).await)?,
        gateway_url: shell.resident_state().gateway_url,
    })
}

/// Adds an agent and returns its token, the one time it crosses IPC (see [`AgentCreated`]).
#[tauri::command]
pub async fn agent_add(shell: State<'_, Shell>, request: AgentRef) -> Result<AgentCreated> {
    let (agent, token) = ipc(shell.console.add_agent(&request.name).await)?;
    let gateway_url = shell.resident_state().gateway_url;
    let route = hosts::Route {
        gateway_url: gateway_url
            .clone()
            .unwrap_or_else(|| hosts::DEFAULT_GATEWAY_URL.to_owned()),
        token: token.clone(),
        command: "countersign".into(),
        data_dir: Some(shell.console.data_dir().display().to_string()),
    };
    let mut servers: Vec<String> = ipc(shell.console.server_records().await)?
        .into_iter()
        .map(|s| s.name)
        .collect();
    if servers.is_empty() {
        servers.push("SERVER".into());
    }
    let snippets = servers
        .into_iter()
        .map(|server| ServerSnippets {
            snippets: hosts::snippets(&route, &server),
            server,
        })
        .collect();
    Ok(AgentCreated {
        agent,
        token: token.expose().clone(),
        gateway_url,
        snippets,
    })
}

/// Where a host import's entries point: the gateway this app runs, else the README's port.
fn import_target(shell: &Shell) -> ImportTarget {
    ImportTarget {
        gateway_url: shell
            .resident_state()
            .gateway_url
            .unwrap_or_else(|| hosts::DEFAULT_GATEWAY_URL.to_owned()),
        command: "countersign".into(),
        data_dir: Some(shell.console.data_dir().display().to_string()),
        agent: None,
    }
}

/// The file a host import names: `~/` expanded, and a full path (the app's own working
/// directory means nothing to a person).
fn import_path(request: &HostImportRequest) -> Result<std::path::PathBuf> {
    let path = hosts::expand_home(request.path.trim());
    if !path.is_absolute() {
        return Err(ConsoleError::Invalid(format!(
            "give the file's full path (or ~/…), not {:?}",
            request.path
        ))
        .into());
    }
    Ok(path)
}

/// What importing a host's file would do: its servers and the diff; nothing written.
#[tauri::command]
pub async fn host_import_preview(
    shell: State<'_, Shell>,
    request: HostImportRequest,
) -> Result<ImportReport> {
    let path = import_path(&request)?;
    ipc(shell
        .console
        .import_preview(&path, &import_target(&shell))
        .await)
}

/// Registers a host file's servers and rewrites it through the gateway (a backup beside it).
#[tauri::command]
pub async fn host_import_apply(
    shell: State<'_, Shell>,
    request: HostImportRequest,
) -> Result<ImportReport> {
    let path = import_path(&request)?;
    ipc(shell
        .console
        .import_apply(&path, &import_target(&shell))
        .await)
}

/// Restores a host's file from its backup and revokes the agent the import added.
#[tauri::command]
pub async fn host_import_undo(
    shell: State<'_, Shell>,
    request: HostImportRequest,
) -> Result<ImportUndone> {
    let path = import_path(&request)?;
    ipc(shell.console.import_undo(&path).await)
}

/// Revokes an agent's token: its next request gets 401.
#[tauri::command]
pub async fn agent_remove(shell: State<'_, Shell>, request: AgentRef) -> Result<AgentView> {
    ipc(shell.console.remove_agent(&request.name).await)
}

/// Removes a gateway rule.
#[tauri::command]
pub async fn rule_remove(shell: State<'_, Shell>, request: RuleRef) -> Result<()> {
    ipc(shell.console.remove_rule(request.id).await)
}

#[tauri::command]
pub async fn tool_list(shell: State<'_, Shell>, request: ServerRef) -> Result<Vec<ToolView>> {
    ipc(shell.console.tools(request.server_id).await)
}

/// Calls a tool.
#[tauri::command]
pub async fn tool_call(
    shell: State<'_, Shell>,
    request: ToolCallRequest,
) -> Result<ToolCallOutcome> {
    let call = ToolCall::new(request.name, Some(request.arguments));
    let step = ipc(shell.console.call(request.server_id, call).await)?;
    ipc(shell.console.call_view(step).await)
}

/// Answers the questions a server asked before running a tool, and calls it again.
#[tauri::command]
pub async fn tool_call_answer(
    shell: State<'_, Shell>,
    request: ToolCallAnswerRequest,
) -> Result<ToolCallOutcome> {
    let responses = ipc(Console::call_responses(request.answers))?;
    let step = ipc(shell.console.answer_call(request.call_id, responses).await)?;
    ipc(shell.console.call_view(step).await)
}

/// The audit log, oldest first.
#[tauri::command]
pub async fn audit_list(shell: State<'_, Shell>) -> Result<Vec<AuditEntry>> {
    ipc(shell.console.audit().await)
}

/// Writes the audit log as JSON or CSV to the Downloads folder (else the data directory).
#[tauri::command]
pub async fn audit_export<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    request: AuditExportRequest,
) -> Result<AuditExport> {
    let dir = app
        .path()
        .download_dir()
        .ok()
        .filter(|d| std::fs::create_dir_all(d).is_ok());
    ipc(shell.console.audit_export(request.format, dir).await)
}

/// Opens an http(s) URL in the user's browser. The UI asks consent first (showing the host); the
/// core re-checks the scheme, so no other kind of URL can be launched through IPC.
#[tauri::command]
pub async fn url_open(request: UrlOpenRequest) -> Result<()> {
    countersign_core::browser::open(&request.url).map_err(|e| match e {
        OpenError::NotHttp => CommandError::new(ErrorCode::InvalidInput, e.to_string()),
        OpenError::Spawn { .. } => CommandError::new(ErrorCode::Unavailable, e.to_string()),
    })
}
