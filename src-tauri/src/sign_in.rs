//! Signing in to OAuth-protected servers from the window: the `server_sign_in` and
//! `server_sign_out` commands (each one console call; `server_add` signs in with [`open`] too) and the one notification a needed sign-in
//! gets. The browser step is the core's: the authorization URL opens in the system browser
//! (`countersign_core::browser`: `$BROWSER`, else the platform's opener), the core's loopback
//! listener takes the answer.
//! Nothing of a token crosses IPC: the commands answer with the server's view.

use std::time::Duration;

use countersign_core::auth;
use countersign_core::ledger::servers::ServerRecord;
use tauri::State;

use crate::commands::Result;
use crate::ipc::{CommandError, ServerRef, ServerView};
use crate::Shell;

/// How long the loopback listener waits for the person to finish in the browser.
pub(crate) const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);

/// Opens the authorization URL in the system browser.
pub(crate) async fn open(url: String) -> auth::Result<()> {
    tracing::info!(
        host = %countersign_core::notice::link_host(&url).unwrap_or_default(),
        "opening the browser to sign in"
    );
    countersign_core::browser::open(&url).map_err(|e| auth::Error::Browser {
        message: e.to_string(),
    })
}

/// Signs in (again) to a server in the browser; its tasks waiting for the sign-in resume.
#[tauri::command]
pub async fn server_sign_in(shell: State<'_, Shell>, request: ServerRef) -> Result<ServerView> {
    let record = shell
        .console
        .sign_in(request.server_id, open, SIGN_IN_TIMEOUT)
        .await;
    view_of(&shell, record).await
}

/// Signs out of a server: its sign-in leaves the OS keyring; the server and its tasks stay.
#[tauri::command]
pub async fn server_sign_out(shell: State<'_, Shell>, request: ServerRef) -> Result<ServerView> {
    let record = shell.console.sign_out(request.server_id).await;
    view_of(&shell, record).await
}

/// The server as the window shows it after a sign-in action.
async fn view_of(
    shell: &Shell,
    record: Result<ServerRecord, countersign_core::console::Error>,
) -> Result<ServerView> {
    let record = record.map_err(CommandError::from)?;
    shell
        .console
        .server_view(record.id)
        .await
        .map_err(CommandError::from)
}

/// Tells the person once that `server` needs them to sign in again (the engine records the
/// need once per refusal, so this is called once). Do-not-disturb keeps it off the screen; the
/// Servers view and the inbox banner still say it.
pub fn notify_needed(dnd: bool, server: &str) {
    if dnd {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let summary = format!("{server}: sign in again");
        // Off the feed's task: the daemon round trip must not hold up the window's updates.
        std::thread::spawn(move || {
            let result = notify_rust::Notification::new()
                .appname("Countersign")
                .summary(&summary)
                .body("Its tasks wait until you sign in (Servers → Sign in).")
                .show();
            if let Err(e) = result {
                tracing::warn!("the sign-in notification was not shown: {e}");
            }
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = server;
}
