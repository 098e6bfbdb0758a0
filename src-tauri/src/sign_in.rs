//! Signing in to OAuth-protected servers from the window, in two steps: `server_sign_in_plan`
//! (where the person will sign in: the authorization server's host, the scopes, the client; no
//! browser yet) and, once they confirm, `server_sign_in` (the browser step, bound to the host
//! they saw) and `server_sign_out` (the resident posts the notification a needed sign-in gets). Each command is
//! one console call. The authorization URL opens in the system browser as every face opens a link
//! (`core::browser`: `$BROWSER`, else the platform's opener, `xdg-open` on Linux); the core's
//! loopback listener takes the answer.
//! Nothing of a token crosses IPC: the commands answer with the server's view or the plan.

use std::time::Duration;

use countersign_core::auth;
use countersign_core::console::SignInClient;
use countersign_core::ledger::servers::ServerRecord;
use tauri::State;

use crate::commands::Result;
use crate::ipc::{
    CommandError, ServerRef, ServerView, SignInPlan, SignInPlanRequest, SignInRequest,
};
use crate::Shell;

/// How long the loopback listener waits for the person to finish in the browser.
pub(crate) const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);

/// Opens the authorization URL in the system browser.
async fn open(url: String) -> auth::Result<()> {
    tracing::info!(
        host = %countersign_core::notice::link_host(&url).unwrap_or_default(),
        "opening the browser to sign in"
    );
    countersign_core::browser::open(&url).map_err(|e| auth::Error::Browser {
        message: e.to_string(),
    })
}

/// Where signing in to a server will lead, before anything opens.
#[tauri::command]
pub async fn server_sign_in_plan(
    shell: State<'_, Shell>,
    request: SignInPlanRequest,
) -> Result<SignInPlan> {
    let client = SignInClient {
        client_id: request.client_id,
        redirect_port: request.redirect_port,
        ..SignInClient::default()
    };
    shell
        .console
        .sign_in_plan(request.server_id, client)
        .await
        .map_err(CommandError::from)
}

/// Signs in (again) to a server in the browser, at the host the person confirmed; its tasks
/// waiting for the sign-in resume.
#[tauri::command]
pub async fn server_sign_in(shell: State<'_, Shell>, request: SignInRequest) -> Result<ServerView> {
    let client = SignInClient {
        client_id: request.client_id,
        client_secret: request.client_secret.map(|s| s.0),
        metadata_document_url: None,
        redirect_port: request.redirect_port,
    };
    let record = shell
        .console
        .sign_in_confirmed(
            request.server_id,
            client,
            &request.host,
            open,
            SIGN_IN_TIMEOUT,
        )
        .await;
    view_of(&shell, record).await
}

/// Signs out of a server: its tokens leave the OS keyring (the client registration stays, so
/// signing in again is the same client); the server and its tasks stay.
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
