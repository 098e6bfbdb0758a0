//! The commands the webview may call (each granted in `capabilities/main.json`).
//!
//! Every command takes at most one argument, named `request`, so the UI's typed `call` maps
//! one Rust type to one TypeScript type. They delegate to the [`Console`](crate::console::Console).

use crate::console::Result;
use crate::ipc::{
    AppInfo, AuditEntry, AuditQuery, DndRequest, InputAnswerRequest, InputRequestView, ServerRef,
    ServerView, ShellState, TaskDetail, TaskRef, TaskView, ToolCallOutcome, ToolCallRequest,
    ToolView, UrlOpenRequest,
};
use crate::ipc::{CommandError, ErrorCode};
use crate::Shell;
use tauri::{AppHandle, State};

/// Version, engine and shell state.
#[tauri::command]
pub async fn app_info(shell: State<'_, Shell>) -> Result<AppInfo> {
    Ok(AppInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        engine: shell.console.engine_name().to_owned(),
        shell: shell.state().await,
    })
}

/// Turns do-not-disturb on or off.
#[tauri::command]
pub async fn notify_dnd_set<R: tauri::Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    request: DndRequest,
) -> Result<ShellState> {
    shell.notifier.set_dnd(request.enabled);
    Ok(crate::refresh_shell_state(&app, &shell).await)
}

/// Pending inputs, oldest first.
#[tauri::command]
pub async fn input_list(shell: State<'_, Shell>) -> Result<Vec<InputRequestView>> {
    shell.console.input_list().await
}

/// Answers one input.
#[tauri::command]
pub async fn input_answer(shell: State<'_, Shell>, request: InputAnswerRequest) -> Result<()> {
    shell
        .console
        .input_answer(&request.key, request.response)
        .await
}

/// Tasks, newest first.
#[tauri::command]
pub async fn task_list(shell: State<'_, Shell>) -> Result<Vec<TaskView>> {
    shell.console.task_list().await
}

/// One task with outcome and timeline.
#[tauri::command]
pub async fn task_get(shell: State<'_, Shell>, request: TaskRef) -> Result<TaskDetail> {
    shell.console.task_get(&request.task_id).await
}

/// Requests cancellation of a task.
#[tauri::command]
pub async fn task_cancel(shell: State<'_, Shell>, request: TaskRef) -> Result<()> {
    shell.console.task_cancel(&request.task_id).await
}

/// Configured servers.
#[tauri::command]
pub async fn server_list(shell: State<'_, Shell>) -> Result<Vec<ServerView>> {
    shell.console.server_list().await
}

/// Tools of one server.
#[tauri::command]
pub async fn tool_list(shell: State<'_, Shell>, request: ServerRef) -> Result<Vec<ToolView>> {
    shell.console.tool_list(&request.server_id).await
}

/// Calls a tool.
#[tauri::command]
pub async fn tool_call(
    shell: State<'_, Shell>,
    request: ToolCallRequest,
) -> Result<ToolCallOutcome> {
    shell.console.tool_call(request).await
}

/// Audit entries after a cursor.
#[tauri::command]
pub async fn audit_list(shell: State<'_, Shell>, request: AuditQuery) -> Result<Vec<AuditEntry>> {
    shell.console.audit_list(request).await
}

/// Opens an http(s) URL in the user's browser. The UI asks consent first (showing the host); this
/// re-checks the scheme so no other kind of URL can be launched through IPC.
#[tauri::command]
pub async fn url_open(request: UrlOpenRequest) -> Result<()> {
    let url = checked_http_url(&request.url)?;
    #[cfg(target_os = "linux")]
    let mut cmd = std::process::Command::new("xdg-open");
    #[cfg(target_os = "macos")]
    let mut cmd = std::process::Command::new("open");
    #[cfg(target_os = "windows")]
    let mut cmd = {
        let mut c = std::process::Command::new("rundll32");
        c.arg("url.dll,FileProtocolHandler");
        c
    };
    cmd.arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| {
            CommandError::new(
                ErrorCode::Unavailable,
                format!("cannot start the browser: {e}"),
            )
        })
}

/// The URL if it is absolute http(s) with a host and no whitespace or control characters.
pub fn checked_http_url(url: &str) -> Result<&str> {
    let bad = || {
        CommandError::new(
            ErrorCode::InvalidInput,
            "only http and https links can be opened",
        )
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let ok_scheme = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    if !ok_scheme || host.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad());
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::checked_http_url;

    #[test]
    fn only_http_and_https_urls_may_be_opened() {
        assert!(checked_http_url("https://login.example.com/a?b=c").is_ok());
        assert!(checked_http_url("HTTP://h:8080").is_ok());
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://",
            "ftp://h/x",
            "https://h/a b",
            "-https://h",
        ] {
            assert!(checked_http_url(bad).is_err(), "{bad} must be refused");
        }
    }
}
