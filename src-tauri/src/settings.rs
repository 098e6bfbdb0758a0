//! The Settings page's commands ([`countersign_core::settings`]: keys, defaults, checks; stored in
//! the ledger through the console). The resident applies them (do-not-disturb schedule, sound,
//! start at login, the gateway): after saving, the page asks it to reload at once and shows what
//! it applied. The poll floor needs nothing: the engine reads it from the ledger.

use countersign_core::settings::Settings;
use countersign_desktop_ipc::{Request, ResidentState};
use tauri::State;

use crate::commands::Result;
use crate::ipc::{CommandError, SettingsPage};
use crate::Shell;

/// The Settings page: the settings and how the resident applies them now.
#[tauri::command]
pub async fn settings_get(shell: State<'_, Shell>) -> Result<SettingsPage> {
    let settings = shell.console.settings().await.map_err(CommandError::from)?;
    let applied = applied(&shell, &Request::State).await;
    Ok(page(&shell, settings, applied))
}

/// Saves the settings (every value checked by the console first: a mistake names its field)
/// and has the resident apply them at once.
#[tauri::command]
pub async fn settings_set(shell: State<'_, Shell>, request: Settings) -> Result<SettingsPage> {
    let settings = shell
        .console
        .set_settings(request)
        .await
        .map_err(CommandError::from)?;
    let applied = applied(&shell, &Request::Reload).await;
    Ok(page(&shell, settings, applied))
}

/// The resident's state after `request`; without a resident (it ended), the last one known:
/// the settings are saved and the next resident applies them at its start.
async fn applied(shell: &Shell, request: &Request) -> ResidentState {
    match crate::resident::ask_state(shell, request).await {
        Ok(state) => state,
        Err(e) => {
            tracing::warn!("the background process did not apply the settings: {e}");
            shell.resident_state()
        }
    }
}

fn page(shell: &Shell, settings: Settings, applied: ResidentState) -> SettingsPage {
    SettingsPage {
        settings,
        data_dir: shell.console.data_dir().display().to_string(),
        dnd_active: applied.dnd || applied.dnd_scheduled,
        start_at_login_active: applied.start_at_login_active,
        autostart_error: applied.autostart_error,
        gateway_url: applied.gateway_url,
        gateway_flag: applied.gateway_flag,
        gateway_error: applied.gateway_error,
    }
}
