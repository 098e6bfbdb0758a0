//! Applying the person's settings ([`countersign_core::settings`]: keys, defaults, checks; stored
//! in the ledger through the console) to the background app. The Settings page is the window's;
//! what it saves reaches here through the feed (`settings_changed`, also from
//! `countersign settings set`) or at once through the control socket's `Reload`.
//! - the do-not-disturb schedule and the sound go to the [`Notifier`](crate::notify::Notifier);
//!   the schedule is checked against the local clock every [`DND_CHECK`] (and at each change),
//!   and when notifications stop being held, one summary tells of what still waits;
//! - start at login: the desktop's autostart entry (`~/.config/autostart/Countersign.desktop`),
//!   launching this resident `--background` on this data directory;
//! - the local MCP gateway: started, moved to another port or stopped live. `--gateway PORT`
//!   (or `--demo`) overrides the setting for the run.
//!
//! The poll floor needs nothing here: the engine reads it from the ledger.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::{Datelike, Timelike};
use countersign_core::console::notifications;
use countersign_core::resident::Page;
use countersign_core::settings::{Day, DndSchedule, Settings};
use countersign_gateway::endpoint::{Gateway, GatewayConfig};

use crate::Resident;

/// How often the do-not-disturb schedule is compared with the clock.
pub const DND_CHECK: Duration = Duration::from_secs(15);

/// The name of the autostart entry (`Countersign.desktop`), as the app wrote it before the
/// split, so an entry made then is found and removed.
pub const AUTOSTART_NAME: &str = "Countersign";

/// What the resident applied of the settings.
#[derive(Default)]
pub struct Applied {
    /// `--gateway PORT` or the demo's: overrides the gateway setting for this run (set once).
    gateway_flag: OnceLock<u16>,
    /// The gateway of the setting, with the port it was asked for (0: any).
    gateway: tokio::sync::Mutex<Option<(u16, Gateway)>>,
    /// The gateway of the launch flag: serves for the whole run.
    flag_gateway: OnceLock<Gateway>,
    /// The gateway's base URL, whichever runs.
    gateway_url: Mutex<Option<String>>,
    /// Why the gateway asked for could not start.
    gateway_error: Mutex<Option<String>>,
    /// Why the autostart entry could not be written or removed.
    autostart_error: Mutex<Option<String>>,
    /// The do-not-disturb schedule in force (compared with the clock by [`check_dnd`]).
    schedule: Mutex<Option<DndSchedule>>,
    /// The demo server's URL, once started.
    demo_url: Mutex<Option<String>>,
    /// The data directory the autostart entry names (set once at launch by [`follow`]).
    data_dir: OnceLock<std::path::PathBuf>,
}

type Snapshot = (
    Option<String>,
    Option<u16>,
    Option<String>,
    Option<String>,
    bool,
);

impl Applied {
    /// Gateway URL, flag, gateway error, autostart error, whether the autostart entry exists.
    pub fn snapshot(&self) -> Snapshot {
        let get = |m: &Mutex<Option<String>>| m.lock().ok().and_then(|v| v.clone());
        (
            get(&self.gateway_url),
            self.gateway_flag.get().copied(),
            get(&self.gateway_error),
            get(&self.autostart_error),
            self.autostart()
                .is_some_and(|a| a.is_enabled().unwrap_or(false)),
        )
    }

    /// The demo server's URL, once started.
    pub fn demo_url(&self) -> Option<String> {
        self.demo_url.lock().ok().and_then(|v| v.clone())
    }

    /// The autostart entry: this executable (or the AppImage it runs from, whose window process
    /// starts the resident on `--background`), `--background`, this data directory. `None`
    /// before the launch set the data directory, or when this executable's path is unknown
    /// (then start at login cannot be offered).
    fn autostart(&self) -> Option<auto_launch::AutoLaunch> {
        let exe = countersign_core::resident::launch::appimage()
            .or_else(|| std::env::current_exe().ok())?;
        let dir = self.data_dir.get()?;
        auto_launch::AutoLaunchBuilder::new()
            .set_app_name(AUTOSTART_NAME)
            .set_app_path(&exe.display().to_string())
            .set_args(&[
                "--background",
                "--data-dir",
                &exec_quoted(&dir.display().to_string()),
            ])
            .set_linux_launch_mode(auto_launch::LinuxLaunchMode::XdgAutostart)
            .build()
            .ok()
    }

    /// Records the demo server's URL.
    pub fn set_demo_url(&self, url: String) {
        if let Ok(mut slot) = self.demo_url.lock() {
            *slot = Some(url);
        }
    }
}

/// An argument as the desktop entry spec's `Exec` key needs it (auto-launch joins arguments
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

/// Reads the settings and applies them (at launch, on `Reload`, and when another process
/// changed them).
pub async fn reload(resident: &Arc<Resident>) {
    match resident.console.settings().await {
        Ok(settings) => apply(resident, &settings).await,
        Err(e) => tracing::warn!("cannot read the settings: {e}"),
    }
}

/// Applies `settings` to the resident.
pub async fn apply(resident: &Arc<Resident>, settings: &Settings) {
    let applied = &resident.applied;
    if let Ok(mut schedule) = applied.schedule.lock() {
        *schedule = Some(settings.dnd.clone());
    }
    resident.notifier.set_sound(settings.sound);
    apply_autostart(applied, settings.start_at_login);
    apply_gateway(resident, settings).await;
    check_dnd(resident).await;
}

/// Launch: applies the settings, then compares the do-not-disturb schedule with the clock
/// every [`DND_CHECK`] for as long as the resident runs.
pub async fn follow(resident: Arc<Resident>) {
    let _ = resident
        .applied
        .data_dir
        .set(resident.console.data_dir().to_path_buf());
    reload(&resident).await;
    resident.refresh().await;
    let mut tick = tokio::time::interval(DND_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        check_dnd(&resident).await;
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
pub async fn check_dnd(resident: &Arc<Resident>) {
    let (day, minute) = local_now();
    let scheduled = resident
        .applied
        .schedule
        .lock()
        .ok()
        .and_then(|s| s.as_ref().map(|s| s.active_at(day, minute)))
        .unwrap_or(false);
    let notifier = &resident.notifier;
    let was = notifier.scheduled();
    notifier.set_scheduled(scheduled);
    if !notifier.holding() {
        release_held(resident).await;
    }
    if was != scheduled {
        tracing::info!(
            "do-not-disturb schedule {}",
            if scheduled { "began" } else { "ended" }
        );
        resident.refresh().await;
    }
}

/// Tells in one summary of what arrived while notifications were held and still waits.
async fn release_held(resident: &Arc<Resident>) {
    let held = resident.notifier.take_held();
    if held.is_empty() {
        return;
    }
    let console = &resident.console;
    let mut waiting: Vec<String> = console
        .inbox()
        .await
        .map(|list| list.iter().map(notifications::id_of).collect())
        .unwrap_or_default();
    if let Ok(calls) = console.pending_gated_calls().await {
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
    let on_open = Arc::clone(resident);
    resident
        .notifier
        .questions_summarised(still.len(), servers, move || {
            on_open.open(Some(Page::Inbox { question: None }), None)
        });
    tracing::info!(
        "notified: {} held while do-not-disturb was on, in one summary",
        still.len()
    );
}

fn apply_autostart(applied: &Applied, wanted: bool) {
    let Some(entry) = applied.autostart() else {
        return;
    };
    let result = match (wanted, entry.is_enabled().unwrap_or(false)) {
        (true, false) => entry.enable(),
        (false, true) => entry.disable(),
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

/// Starts the gateway of `--gateway PORT` (or the demo's) for the whole run, on the first of
/// `ports` that is free; the setting is then left for the next launch. Returns its base URL.
pub async fn start_flag_gateway(resident: &Arc<Resident>, ports: &[u16]) -> Option<String> {
    let applied = &resident.applied;
    let mut error = None;
    for &port in ports {
        match start_gateway(resident, port).await {
            Ok(gateway) => {
                let url = gateway.base_url();
                // Its actual port (0 asks for any): what the Settings page shows.
                let _ = applied.gateway_flag.set(gateway.addr().port());
                set(&applied.gateway_url, Some(url.clone()));
                let _ = applied.flag_gateway.set(gateway);
                return Some(url);
            }
            Err(message) => error = Some(message),
        }
    }
    set(&applied.gateway_error, error);
    None
}

fn set(slot: &Mutex<Option<String>>, value: Option<String>) {
    if let Ok(mut slot) = slot.lock() {
        *slot = value;
    }
}

async fn start_gateway(resident: &Arc<Resident>, port: u16) -> Result<Gateway, String> {
    let config = GatewayConfig {
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        ..GatewayConfig::default()
    };
    match Gateway::start(Arc::clone(&resident.console), config).await {
        Ok(gateway) => {
            // One line for people and for the tests, as `countersign gateway` prints it.
            eprintln!("countersign: gateway on {}", gateway.base_url());
            Ok(gateway)
        }
        Err(e) => {
            tracing::error!("the gateway did not start: {e}");
            Err(format!("the gateway did not start on port {port}: {e}"))
        }
    }
}

/// Starts, moves or stops the gateway to match the setting. Only a resident that runs the
/// engine serves agents. A gateway of the launch ([`start_flag_gateway`]) runs for the whole
/// run and the setting is left alone.
async fn apply_gateway(resident: &Arc<Resident>, settings: &Settings) {
    let applied = &resident.applied;
    if applied.gateway_flag.get().is_some() {
        return;
    }
    let wanted = settings.gateway.enabled.then_some(settings.gateway.port);
    let wanted = wanted.filter(|_| resident.console.runs_engine());
    let mut running = applied.gateway.lock().await;
    if running.as_ref().map(|(port, _)| *port) == wanted {
        return;
    }
    if let Some((_, gateway)) = running.take() {
        gateway.shutdown().await;
        eprintln!("countersign: gateway stopped");
    }
    let (mut url, mut error) = (None, None);
    if let Some(port) = wanted {
        match start_gateway(resident, port).await {
            Ok(gateway) => {
                url = Some(gateway.base_url());
                *running = Some((port, gateway));
            }
            Err(message) => error = Some(message),
        }
    }
    set(&applied.gateway_url, url);
    set(&applied.gateway_error, error);
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
