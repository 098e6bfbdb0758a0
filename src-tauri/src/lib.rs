//! Countersign's desktop shell: a thin Tauri 2 layer over the headless core, whose engine runs
//! inside the app process (resuming every unfinished task at launch).
//!
//! Every action and every view is the core's [`Console`] (`countersign_core::console`), the same
//! one the CLI uses; this crate only wires it to a window:
//! - [`commands`]: the commands the webview may call (granted in `capabilities/main.json`), each
//!   one call on the console;
//! - [`ipc`]: the command/event contract, declared once (ts-rs generates `ui/src/bindings/`);
//! - [`feed`]: follows the ledger's events and fans them out to the webview, notifications, tray;
//! - [`notify`]: one desktop notification per question, with Approve/Decline when possible;
//! - [`sign_in`]: signing in to and out of OAuth-protected servers, the "sign in again" notice;
//! - [`tray`]: the tray icon, and the pending count in its tooltip and the window title;
//! - [`window`]: background mode: the window is destroyed on close and rebuilt on demand;
//! - [`demo`]: `--demo`, the built-in demo server in-process;
//! - [`options`]: the command line (`--data-dir`, `--demo`) and the launch time;
//! - [`settings`]: the Settings page's commands, and applying the settings (do-not-disturb
//!   schedule, sound, start at login, gateway) to this app.

pub mod commands;
pub mod demo;
pub mod feed;
pub mod ipc;
pub mod links;
pub mod notify;
pub mod options;
pub mod settings;
pub mod sign_in;
pub mod tray;
pub mod window;

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use countersign_core::console::{self, Console, Setup, Start};
use ipc::{event, ShellState, ViewRequest};
use notify::Notifier;
pub use options::{Launch, Options};
use tauri::{AppHandle, Emitter, Manager, Runtime};

/// Why the app could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Tauri failed (no display, bad config, …).
    #[error(transparent)]
    Tauri(#[from] tauri::Error),
    /// The ledger or engine failed to open.
    #[error(transparent)]
    Console(#[from] console::OpenError),
    /// The command line was wrong.
    #[error("{0}")]
    Usage(String),
    /// `--demo` could not start its server.
    #[error("{0}")]
    Demo(String),
}

/// Managed state.
pub struct Shell {
    /// The core.
    pub console: Arc<Console>,
    /// Desktop notifications and do-not-disturb.
    pub notifier: Arc<Notifier>,
    /// What the window shows (no notification for a question already on screen).
    pub viewing: Mutex<ViewRequest>,
    /// Process start.
    pub launch: Launch,
    /// Milliseconds from launch to the UI's first paint, once reported.
    pub painted_ms: Mutex<Option<u64>>,
    /// The built-in demo server, once started (`--demo`, or "Try the demo server" in an empty
    /// view); it serves for as long as the app runs.
    pub demo: tokio::sync::Mutex<Option<demo::Demo>>,
    /// The local MCP gateway's base URL, when this app runs it (`--gateway PORT`).
    pub gateway_url: Mutex<Option<String>>,
}

impl Shell {
    /// Pending count (questions and agents' held calls), DND and notification capabilities, as
    /// of now.
    pub async fn state(&self) -> ShellState {
        let questions = self.console.inbox().await.map(|l| l.len()).unwrap_or(0);
        let calls = self
            .console
            .pending_gated_calls()
            .await
            .map(|l| l.len())
            .unwrap_or(0);
        let pending = u32::try_from(questions + calls).unwrap_or(u32::MAX);
        ShellState {
            pending,
            dnd: self.notifier.dnd(),
            dnd_scheduled: self.notifier.scheduled(),
            notification_actions: self.notifier.actions_supported(),
        }
    }

    /// Records the UI's first paint (once) and says how long the launch took.
    pub fn painted(&self) {
        let Ok(mut painted) = self.painted_ms.lock() else {
            return;
        };
        if painted.is_none() {
            let ms = self.launch.at.elapsed().as_millis() as u64;
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            *painted = Some(ms);
            // One line for people and for .ci/e2e/measure.sh.
            eprintln!("countersign: first paint {ms} ms after launch (unix_ms={wall})");
        }
    }
}

/// Starts the app: opens the ledger, starts the engine (and the demo server), shows the window.
pub fn run(options: Options, launch: Launch) -> Result<(), Error> {
    let mut setup = Setup::new(&options.data_dir);
    setup.start = Start::Now;
    let console = tauri::async_runtime::block_on(Console::open(setup))?;
    let console = Arc::new(console);
    let demo = match options.demo {
        Some(speed) => Some(
            tauri::async_runtime::block_on(demo::start(&console, speed)).map_err(Error::Demo)?,
        ),
        None => None,
    };
    let first_calls = demo.as_ref().is_some_and(|d| d.first_launch);
    let shell = Shell {
        console: Arc::clone(&console),
        notifier: Arc::new(Notifier::default()),
        viewing: Mutex::default(),
        launch,
        painted_ms: Mutex::default(),
        demo: tokio::sync::Mutex::new(demo),
        gateway_url: Mutex::default(),
    };
    // One app per ledger: a second launch on the same data directory hands its arguments to the
    // running one (which opens its window) and exits. First among the plugins, so the second
    // instance stops before anything else starts.
    let single = tauri_plugin_single_instance::Builder::new()
        .dbus_id(instance_id(&options.data_dir))
        .callback(|app, args, _cwd| {
            // Links among its arguments (the desktop entry's `%u`; any position, unlike the
            // deep-link plugin's single-argument rule), else just the window; nothing for a
            // start at login (`--background`) while the app already runs.
            let background = args.iter().any(|a| a == "--background");
            let links: Vec<String> = args
                .into_iter()
                .skip(1)
                .filter(|a| links::is_link(a))
                .collect();
            if links.is_empty() && !background {
                window::open(app, None);
            }
            for link in links {
                links::open(app, link);
            }
        })
        .build();
    let mut context = tauri::generate_context!();
    if options.background {
        // Started at login: the tray, the engine and notifications, no window until asked for
        // (`window::open` builds it from the same config).
        for window in &mut context.config_mut().app.windows {
            window.create = false;
        }
    }
    let app = builder(tauri::Builder::default().plugin(single), shell)
        .plugin(tauri_plugin_deep_link::init())
        .plugin(settings::autostart_plugin(&options.data_dir))
        .plugin(links::plugin(options.link.clone()))
        .build(context)?;
    // After the single-instance check: only the app that runs the engine serves agents. The
    // demo runs the gateway too (on the README's port when free), for its demo agent.
    let gateway = match (options.gateway, options.demo) {
        (Some(port), _) => start_gateway(&app, &console, port),
        (None, Some(_)) => start_gateway(&app, &console, demo::GATEWAY_PORT)
            .or_else(|| start_gateway(&app, &console, 0)),
        (None, None) => None,
    };
    if let (Some(_), Some(gateway)) = (options.demo, &gateway) {
        let (console, url) = (Arc::clone(&console), gateway.base_url());
        tauri::async_runtime::spawn(async move { demo::agent(&console, &url).await });
    }
    // A gateway of the launch (`--gateway PORT`, or the demo's) overrides the gateway setting
    // for this run: `settings` leaves it alone and the page says so.
    if let Some(gateway) = &gateway {
        app.state::<settings::Applied>()
            .set_gateway_flag(gateway.addr().port());
    }
    if first_calls {
        tauri::async_runtime::spawn(async move { demo::first_calls(&console).await });
    }
    app.run(move |app, event| {
        let _serving = &gateway;
        match event {
            // The last window closed (no exit code: not the tray's "Quit"): background mode.
            tauri::RunEvent::ExitRequested {
                code: None, api, ..
            } if window::keep_running(app) => api.prevent_exit(),
            tauri::RunEvent::Exit => app.state::<Shell>().notifier.withdraw_all(),
            _ => {}
        }
    });
    Ok(())
}

/// Starts the local MCP gateway on 127.0.0.1:`port` for this app's console. A gateway that
/// cannot start (the port is taken, another process runs the engine) is logged and the app runs
/// without it: the window still shows and decides every held call the ledger has.
fn start_gateway<R: Runtime>(
    app: &tauri::App<R>,
    console: &Arc<Console>,
    port: u16,
) -> Option<countersign_core::gateway::endpoint::Gateway> {
    use countersign_core::gateway::endpoint::{Gateway, GatewayConfig};
    let config = GatewayConfig {
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        ..GatewayConfig::default()
    };
    match tauri::async_runtime::block_on(Gateway::start(Arc::clone(console), config)) {
        Ok(gateway) => {
            let url = gateway.base_url();
            // One line for people and for the tests, as `countersign gateway` prints it.
            eprintln!("countersign: gateway on {url}");
            if let Ok(mut slot) = app.state::<Shell>().gateway_url.lock() {
                *slot = Some(url);
            }
            Some(gateway)
        }
        Err(e) => {
            tracing::error!("the gateway did not start: {e}");
            None
        }
    }
}

/// Wires state, commands and the feed onto a builder (also used by the IPC tests).
pub fn builder<R: Runtime>(builder: tauri::Builder<R>, shell: Shell) -> tauri::Builder<R> {
    builder
        // The sign-in's browser step (sign_in.rs); the webview is granted none of it.
        .plugin(tauri_plugin_opener::init())
        .manage(shell)
        .manage(settings::Applied::default())
        .invoke_handler(tauri::generate_handler![
            commands::app_info,
            commands::ui_painted,
            commands::notify_dnd_set,
            commands::view_set,
            commands::view_zoom_set,
            commands::input_list,
            commands::input_answer,
            commands::task_list,
            commands::task_get,
            commands::task_cancel,
            commands::task_adopt,
            commands::task_link,
            commands::server_list,
            commands::server_add,
            commands::server_update,
            commands::server_remove,
            commands::server_check,
            sign_in::server_sign_in_plan,
            sign_in::server_sign_in,
            sign_in::server_sign_out,
            commands::server_check_cancel,
            commands::demo_start,
            commands::gated_list,
            commands::gated_decide,
            commands::gated_timeline,
            commands::gated_questions_list,
            commands::gated_answer,
            commands::agents_get,
            commands::agent_add,
            commands::agent_remove,
            commands::rule_remove,
            commands::tool_list,
            commands::tool_call,
            commands::tool_call_answer,
            commands::audit_list,
            commands::audit_export,
            commands::url_open,
            settings::settings_get,
            settings::settings_set,
        ])
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::Destroyed = event {
                if window.label() == window::MAIN {
                    window::destroyed(window.app_handle());
                }
            }
        })
        .setup(|app| {
            app.manage(window::Reopen::default());
            let handle = app.handle().clone();
            if let Err(e) = tray::install(&handle) {
                tracing::warn!("no tray icon: {e}");
            }
            // Ask the notification daemon for its capabilities off the main thread, once.
            let notifier = Arc::clone(&handle.state::<Shell>().notifier);
            std::thread::spawn(move || notifier.actions_supported());
            tauri::async_runtime::spawn(settings::follow(handle.clone()));
            tauri::async_runtime::spawn(feed::follow(handle));
            Ok(())
        })
}

/// Recomputes the shell state, shows it in tray and title, and tells the webview.
pub async fn refresh_shell_state<R: Runtime>(app: &AppHandle<R>, shell: &Shell) -> ShellState {
    let state = shell.state().await;
    tray::show_state(app, &state);
    let _ = app.emit(event::SHELL_STATE_CHANGED, state);
    state
}

/// Brings the main window to the front, rebuilding it if it was closed.
pub fn show_main_window<R: Runtime>(app: &AppHandle<R>) {
    window::open(app, None);
}

/// The single-instance D-Bus name for a data directory (`dev.countersign.app.l<hash>`): one app
/// per ledger, as one engine per ledger, so apps on different ledgers run side by side. FNV-1a,
/// so every build of the app computes the same name.
fn instance_id(data_dir: &std::path::Path) -> String {
    let dir = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    let hash = dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("dev.countersign.app.l{hash:016x}")
}
