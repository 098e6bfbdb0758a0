//! The Settings page's commands, and applying the person's settings to this app
//! ([`countersign_core::settings`]: keys, defaults, checks; stored in the ledger through the
//! console).
//!
//! Applied at launch, after every change from the page, and when another process changed them
//! (`countersign settings set`: the feed sees `settings_changed` and calls [`reload`]):
//! - the do-not-disturb schedule and the sound go to the [`Notifier`](crate::notify::Notifier);
//!   the schedule is checked against the local clock every [`DND_CHECK`] (and at each change),
//!   and when notifications stop being held, one summary tells of what still waits;
//! - start at login: the autostart entry (tauri-plugin-autostart; on Linux
//!   `~/.config/autostart/Countersign.desktop`, launching `--background` on this data directory);
//! - the local MCP gateway: started, moved to another port or stopped live. `--gateway PORT`
//!   overrides the setting for the run.
//!
//! The poll floor needs nothing here: the engine reads it from the ledger.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{Datelike, Timelike};
use countersign_core::console::notifications;
use countersign_core::gateway::endpoint::{Gateway, GatewayConfig};
use countersign_core::settings::{Day, Settings};
use tauri::{AppHandle, Manager, Runtime, State};

use crate::commands::Result;
use crate::ipc::{CommandError, SettingsPage};
use crate::Shell;

/// How often the do-not-disturb schedule is compared with the clock.
pub const DND_CHECK: Duration = Duration::from_secs(15);

/// The name of the autostart entry (`Countersign.desktop` on Linux).
pub const AUTOSTART_NAME: &str = "Countersign";

/// What this app applied of the settings (managed state).
#[derive(Default)]
pub struct Applied {
    /// `--gateway PORT`: overrides the gateway setting for this run (set once, at launch).
    gateway_flag: std::sync::OnceLock<u16>,
    /// The gateway this app runs, with the port it was asked for (0: any).
    gateway: tokio::sync::Mutex<Option<(u16, Gateway)>>,
    /// Why the gateway asked for could not start (shown on the page).
    gateway_error: Mutex<Option<String>>,
    /// Why the autostart entry could not be written or removed (shown on the page).
    autostart_error: Mutex<Option<String>>,
    /// The do-not-disturb schedule in force (compared with the clock by [`check_dnd`]).
    schedule: Mutex<Option<countersign_core::settings::DndSchedule>>,
}

impl Applied {
    /// `--gateway PORT` was given: it overrides the setting for this run.
    pub fn set_gateway_flag(&self, port: u16) {
        let _ = self.gateway_flag.set(port);
    }

    fn gateway_flag(&self) -> Option<u16> {
        self.gateway_flag.get().copied()
    }
}

/// The start-at-login plugin: the entry launches this executable in the background on this
/// data directory.
pub fn autostart_plugin<R: Runtime>(data_dir: &std::path::Path) -> tauri::plugin::TauriPlugin<R> {
    tauri_plugin_autostart::Builder::new()
        .app_name(AUTOSTART_NAME)
        .args([
            "--background".to_owned(),
            "--data-dir".to_owned(),
            exec_quoted(&data_dir.display().to_string()),
        ])
        .build()
}

/// An argument as the desktop entry spec's `Exec` key needs it (the plugin joins arguments
/// with spaces as they are): quoted when it holds anything but plain characters, with `"`,
/// `` ` ``, `$` and `\` escaped.
fn exec_quoted(arg: &str) -> String {
    let plain = arg
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@".contains(c));
    if plain {
        return arg.to_owned();
    }
    let mut out = String::from("\"");
    for c in arg.chars() {
        if matches!(c, '"' | '`' | '$' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The Settings page: the settings and how they are applied now.
#[tauri::command]
pub async fn settings_get<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
) -> Result<SettingsPage> {
    let settings = shell.console.settings().await.map_err(CommandError::from)?;
    Ok(page(&app, &shell, settings))
}

/// Saves the settings (every value checked by the console first: a mistake names its field)
/// and applies them at once.
#[tauri::command]
pub async fn settings_set<R: Runtime>(
    app: AppHandle<R>,
    shell: State<'_, Shell>,
    request: Settings,
) -> Result<SettingsPage> {
    let settings = shell
        .console
        .set_settings(request)
        .await
        .map_err(CommandError::from)?;
    apply(&app, &settings).await;
    Ok(page(&app, &shell, settings))
}

fn page<R: Runtime>(app: &AppHandle<R>, shell: &Shell, settings: Settings) -> SettingsPage {
    let applied = app.try_state::<Applied>();
    let error = |slot: Option<&Mutex<Option<String>>>| {
        slot.and_then(|m| m.lock().ok().and_then(|e| e.clone()))
    };
    SettingsPage {
        settings,
        data_dir: shell.console.data_dir().display().to_string(),
        dnd_active: shell.notifier.holding(),
        start_at_login_active: autostart_enabled(app),
        autostart_error: error(applied.as_ref().map(|a| &a.autostart_error)),
        gateway_url: shell.gateway_url.lock().ok().and_then(|u| u.clone()),
        gateway_flag: applied.as_ref().and_then(|a| a.gateway_flag()),
        gateway_error: error(applied.as_ref().map(|a| &a.gateway_error)),
    }
}

/// Reads the settings and applies them (at launch, and when another process changed them).
pub async fn reload<R: Runtime>(app: &AppHandle<R>) {
    let console = Arc::clone(&app.state::<Shell>().console);
    match console.settings().await {
        Ok(settings) => apply(app, &settings).await,
        Err(e) => tracing::warn!("cannot read the settings: {e}"),
    }
}

/// Applies `settings` to this app.
pub async fn apply<R: Runtime>(app: &AppHandle<R>, settings: &Settings) {
    let shell = app.state::<Shell>();
    if let Some(applied) = app.try_state::<Applied>() {
        if let Ok(mut schedule) = applied.schedule.lock() {
            *schedule = Some(settings.dnd.clone());
        }
        shell.notifier.set_sound(settings.sound);
        apply_autostart(app, &applied, settings.start_at_login);
        apply_gateway(app, &applied, settings).await;
    }
    check_dnd(app).await;
}

/// Launch: applies the settings, then compares the do-not-disturb schedule with the clock
/// every [`DND_CHECK`] for as long as the app runs.
pub async fn follow<R: Runtime>(app: AppHandle<R>) {
    reload(&app).await;
    let mut tick = tokio::time::interval(DND_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        check_dnd(&app).await;
    }
}

/// The local weekday and minute of the day now.
fn local_now() -> (Day, u16) {
    let now = chrono::Local::now();
    let day = Day::ALL[now.weekday().num_days_from_monday() as usize % 7];
    (day, (now.hour() * 60 + now.minute()) as u16)
}

/// Whether the schedule holds notifications now; when notifications stop being held (the
/// schedule ended, or was changed, or the toggle was turned off), one summary of what arrived
/// meanwhile and still waits.
pub async fn check_dnd<R: Runtime>(app: &AppHandle<R>) {
    let shell = app.state::<Shell>();
    let (day, minute) = local_now();
    let scheduled = app.try_state::<Applied>().is_some_and(|applied| {
        applied
            .schedule
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.active_at(day, minute)))
            .unwrap_or(false)
    });
    let was = shell.notifier.scheduled();
    shell.notifier.set_scheduled(scheduled);
    if !shell.notifier.holding() {
        release_held(app, &shell).await;
    }
    if was != scheduled {
        tracing::info!(
            "do-not-disturb schedule {}",
            if scheduled { "began" } else { "ended" }
        );
        crate::refresh_shell_state(app, &shell).await;
    }
}

/// Tells in one summary of what arrived while notifications were held and still waits.
async fn release_held<R: Runtime>(app: &AppHandle<R>, shell: &Shell) {
    let held = shell.notifier.take_held();
    if held.is_empty() {
        return;
    }
    let mut waiting: Vec<String> = shell
        .console
        .inbox()
        .await
        .map(|list| list.iter().map(notifications::id_of).collect())
        .unwrap_or_default();
    if let Ok(calls) = shell.console.pending_gated_calls().await {
        waiting.extend(calls.into_iter().map(|c| c.task_id));
    }
    let still: Vec<&(String, String)> =
        held.iter().filter(|(id, _)| waiting.contains(id)).collect();
    if still.is_empty() {
        return;
    }
    let mut servers: Vec<String> = Vec::new();
    for (_, server) in &still {
        if !servers.contains(server) {
            servers.push(server.clone());
        }
    }
    let on_open = app.clone();
    shell
        .notifier
        .questions_summarised(still.len(), servers, move || {
            crate::window::open(&on_open, Some(crate::window::Page::Inbox(None)))
        });
    tracing::info!(
        "notified: {} held while do-not-disturb was on, in one summary",
        still.len()
    );
}

/// Whether the autostart entry exists (false without the plugin, as in the IPC tests).
fn autostart_enabled<R: Runtime>(app: &AppHandle<R>) -> bool {
    app.try_state::<tauri_plugin_autostart::AutoLaunchManager>()
        .is_some_and(|m| m.is_enabled().unwrap_or(false))
}

fn apply_autostart<R: Runtime>(app: &AppHandle<R>, applied: &Applied, wanted: bool) {
    let Some(manager) = app.try_state::<tauri_plugin_autostart::AutoLaunchManager>() else {
        return;
    };
    let result = match (wanted, manager.is_enabled().unwrap_or(false)) {
        (true, false) => manager.enable(),
        (false, true) => manager.disable(),
        _ => Ok(()),
    };
    let error = result.err().map(|e| {
        tracing::warn!("start at login: {e}");
        format!("the desktop's autostart entry could not be changed: {e}")
    });
    if let Ok(mut slot) = applied.autostart_error.lock() {
        *slot = error;
    }
}

/// Starts, moves or stops the gateway to match the setting. Only the app that runs the engine
/// serves agents. A gateway the launch started (`--gateway PORT`, or the demo's, `lib.rs`)
/// runs for the whole run and the setting is left for the next launch.
async fn apply_gateway<R: Runtime>(app: &AppHandle<R>, applied: &Applied, settings: &Settings) {
    if applied.gateway_flag().is_some() {
        return;
    }
    let shell = app.state::<Shell>();
    let wanted = settings.gateway.enabled.then_some(settings.gateway.port);
    let wanted = wanted.filter(|_| shell.console.runs_engine());
    let mut running = applied.gateway.lock().await;
    if running.as_ref().map(|(port, _)| *port) == wanted {
        return;
    }
    if let Some((_, gateway)) = running.take() {
        gateway.shutdown().await;
        eprintln!("countersign: gateway stopped");
    }
    let mut url = None;
    let mut error = None;
    if let Some(port) = wanted {
        let config = GatewayConfig {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            ..GatewayConfig::default()
        };
        match Gateway::start(Arc::clone(&shell.console), config).await {
            Ok(gateway) => {
                // One line for people and for the tests, as `countersign gateway` prints it.
                eprintln!("countersign: gateway on {}", gateway.base_url());
                url = Some(gateway.base_url());
                *running = Some((port, gateway));
            }
            Err(e) => {
                tracing::error!("the gateway did not start: {e}");
                error = Some(format!("the gateway did not start on port {port}: {e}"));
            }
        }
    }
    if let Ok(mut slot) = shell.gateway_url.lock() {
        *slot = url;
    }
    if let Ok(mut slot) = applied.gateway_error.lock() {
        *slot = error;
    }
}

#[cfg(test)]
mod tests {
    use super::exec_quoted;

    #[test]
    fn autostart_arguments_are_quoted_for_the_desktop_entry_when_needed() {
        assert_eq!(
            exec_quoted("/home/ann/.local/share/countersign"),
            "/home/ann/.local/share/countersign"
        );
        assert_eq!(exec_quoted("/home/ann/My Data"), "\"/home/ann/My Data\"");
        assert_eq!(exec_quoted("/tmp/a$b\"c"), "\"/tmp/a\\$b\\\"c\"");
    }
}
