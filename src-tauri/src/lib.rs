//! Countersign's desktop shell: a thin Tauri 2 layer over the headless core.
//!
//! - [`console`]: the seam to the engine ([`console::Console`]) and the standalone stand-in;
//! - [`commands`]: the commands the webview may call (granted in `capabilities/main.json`);
//! - [`ipc`]: every type that crosses IPC (ts-rs generates `ui/src/bindings/` from it);
//! - [`notify`]: one desktop notification per input key, with Approve/Decline when possible;
//! - [`tray`]: the tray icon and the pending count in its tooltip and the window title.
//!
//! The shell owns no business state beyond do-not-disturb: it forwards [`console::ConsoleEvent`]s
//! to the webview, to notifications and to the tray.

pub mod commands;
pub mod console;
pub mod ipc;
pub mod notify;
pub mod tray;

use console::{Console, ConsoleEvent, Standalone};
use ipc::{event, CommandError, InputFocusRequested, InputResponse, ShellState};
use notify::{Notifier, QuickAnswer};
use std::sync::Arc;
use tauri::{AppHandle, Emitter, Manager, Runtime};
use tokio::sync::broadcast::error::RecvError;

/// Why the app could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Tauri failed (no display, bad config, …).
    #[error(transparent)]
    Tauri(#[from] tauri::Error),
    /// The `COUNTERSIGN_SEED` file could not be used.
    #[error("seed: {0}")]
    Seed(CommandError),
}

/// Managed state: the engine and the notifier.
pub struct Shell {
    /// The engine (standalone until the core engine is wired).
    pub console: Arc<dyn Console>,
    /// Desktop notifications and do-not-disturb.
    pub notifier: Arc<Notifier>,
}

impl Shell {
    /// Pending count, DND and notification capabilities, as of now.
    pub async fn state(&self) -> ShellState {
        let pending = self
            .console
            .input_list()
            .await
            .map(|l| l.len() as u32)
            .unwrap_or(0);
        ShellState {
            pending,
            dnd: self.notifier.dnd(),
            notification_actions: self.notifier.actions_supported(),
        }
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Starts the app with the standalone console (seeded from `COUNTERSIGN_SEED` if set).
pub fn run() -> Result<(), Error> {
    let standalone = Arc::new(Standalone::new(now_rfc3339));
    let seed = match std::env::var_os("COUNTERSIGN_SEED") {
        Some(path) => Some(Standalone::read_seed(path.as_ref()).map_err(Error::Seed)?),
        None => None,
    };
    let seeder = Arc::clone(&standalone);
    let app = builder(tauri::Builder::default(), standalone)
        .build(tauri::generate_context!("../tauri.conf.json"))?;
    // Seed after the forwarder subscribed, so seeded inputs notify like real ones.
    if let Some(seed) = seed {
        seeder.seed(seed).map_err(Error::Seed)?;
    }
    app.run(|_, _| {});
    Ok(())
}

/// Wires state, commands and event forwarding onto a builder (also used by the IPC tests).
pub fn builder<R: Runtime>(
    builder: tauri::Builder<R>,
    console: Arc<dyn Console>,
) -> tauri::Builder<R> {
    let events = console.subscribe();
    builder
        .manage(Shell {
            console,
            notifier: Arc::new(Notifier::default()),
        })
        .invoke_handler(tauri::generate_handler![
            commands::app_info,
            commands::notify_dnd_set,
            commands::input_list,
            commands::input_answer,
            commands::task_list,
            commands::task_get,
            commands::task_cancel,
            commands::server_list,
            commands::tool_list,
            commands::tool_call,
            commands::audit_list,
            commands::url_open,
        ])
        .setup(move |app| {
            let handle = app.handle().clone();
            if let Err(e) = tray::install(&handle) {
                tracing::warn!("no tray icon: {e}");
            }
            // Ask the notification daemon for its capabilities off the main thread, once.
            let notifier = Arc::clone(&handle.state::<Shell>().notifier);
            std::thread::spawn(move || notifier.actions_supported());
            tauri::async_runtime::spawn(forward(handle, events));
            Ok(())
        })
}

/// Fans console events out to the webview, notifications and the tray.
async fn forward<R: Runtime>(
    app: AppHandle<R>,
    mut events: tokio::sync::broadcast::Receiver<ConsoleEvent>,
) {
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!("webview missed {missed} console events; asking it to reload");
                let _ = app.emit(event::EVENTS_DROPPED, missed);
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let shell = app.state::<Shell>();
        let sent = match &event {
            ConsoleEvent::InputRequested(input) => {
                let (on_answer, on_open) = (app.clone(), app.clone());
                let (key, key2) = (input.key.clone(), input.key.clone());
                shell.notifier.input_requested(
                    input,
                    move |quick| answer_from_notification(&on_answer, key, quick),
                    move || {
                        show_main_window(&on_open);
                        let _ = on_open.emit(
                            event::INPUT_FOCUS_REQUESTED,
                            InputFocusRequested { key: key2 },
                        );
                    },
                );
                app.emit(event::INPUT_REQUESTED, input)
            }
            ConsoleEvent::InputAnswered(answered) => {
                shell.notifier.input_answered(answered);
                app.emit(event::INPUT_ANSWERED, answered)
            }
            ConsoleEvent::TaskUpdated(task) => app.emit(event::TASK_UPDATED, task),
            ConsoleEvent::AuditAppended(entry) => app.emit(event::AUDIT_APPENDED, entry),
        };
        if let Err(e) = sent {
            tracing::warn!("emit failed: {e}");
        }
        if matches!(
            event,
            ConsoleEvent::InputRequested(_) | ConsoleEvent::InputAnswered(_)
        ) {
            refresh_shell_state(&app, &shell).await;
        }
    }
}

/// Runs on the notification thread: the user pressed Approve or Decline.
fn answer_from_notification<R: Runtime>(app: &AppHandle<R>, key: String, quick: QuickAnswer) {
    let response = match quick {
        QuickAnswer::Approve(field) => InputResponse::Accept {
            content: Some(serde_json::Map::from_iter([(
                field,
                serde_json::Value::Bool(true),
            )])),
        },
        QuickAnswer::Decline => InputResponse::Decline,
    };
    let console = Arc::clone(&app.state::<Shell>().console);
    if let Err(e) = tauri::async_runtime::block_on(console.input_answer(&key, response)) {
        // Typically already answered in the window; the inbox is the source of truth.
        tracing::info!("notification answer for {key} not applied: {e}");
    }
}

/// Recomputes the shell state, shows it in tray and title, and tells the webview.
pub async fn refresh_shell_state<R: Runtime>(app: &AppHandle<R>, shell: &Shell) -> ShellState {
    let state = shell.state().await;
    tray::show_state(app, &state);
    let _ = app.emit(event::SHELL_STATE_CHANGED, state);
    state
}

/// Brings the main window to the front.
pub fn show_main_window<R: Runtime>(app: &AppHandle<R>) {
    if let Some(window) = app.get_webview_window("main") {
        let _ = window.unminimize();
        let _ = window.show();
        let _ = window.set_focus();
    }
}
