//! Countersign's desktop window: a thin Tauri 2 layer over the headless core, started only while
//! a window is open. The engine, the tray and the notifications live in the resident
//! (`countersign-resident`, no GTK or WebKit), which this process starts when it is not running
//! and which starts this process again on the tray's Open, a notification's click or a link.
//! This process ends when its window closes, and with it GTK, WebKit and their memory.
//!
//! Every action and every view is the core's [`Console`] (`countersign_core::console`), the same
//! one the CLI uses (the engine elsewhere: the ledger's change feed crosses processes); this crate
//! only wires it to a window:
//! - [`commands`]: the commands the webview may call (granted in `capabilities/main.json`), each
//!   one call on the console;
//! - [`ipc`]: the command/event contract, declared once (ts-rs generates `ui/src/bindings/`);
//! - [`feed`]: follows the ledger's events and fans them out to the webview;
//! - [`resident`]: starts the resident when needed, and follows its state (do-not-disturb,
//!   gateway, start at login) over its control socket;
//! - [`sign_in`]: signing in to and out of OAuth-protected servers;
//! - [`window`]: the one window, at the page asked for; the process ends with it;
//! - [`links`]: `countersign://` links;
//! - [`options`]: the command line (`--data-dir`, `--demo`, `--page`…) and the launch time;
//! - [`rendering`]: how the webview draws (no GL compositing without a GPU: a faster first
//!   paint);
//! - [`settings`]: the Settings page's commands (the resident applies what they save).

pub mod commands;
pub mod feed;
pub mod ipc;
pub mod links;
pub mod options;
pub mod rendering;
pub mod resident;
pub mod settings;
pub mod sign_in;
pub mod window;

use std::sync::{Arc, Mutex};

use countersign_core::console::{self, Console, Setup, Start};
use countersign_desktop_ipc::{ResidentState, WatchWriter};
use ipc::{event, PaintedRequest, ShellState, ViewRequest};
pub use options::{Launch, Options};
use tauri::{AppHandle, Emitter, Manager, Runtime};

/// Why the app could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Tauri failed (no display, bad config, …).
    #[error(transparent)]
    Tauri(#[from] tauri::Error),
    /// The ledger failed to open.
    #[error(transparent)]
    Console(#[from] console::OpenError),
    /// The command line was wrong.
    #[error(transparent)]
    Usage(#[from] countersign_desktop_ipc::launch::UsageError),
    /// The resident could not be started.
    #[error("cannot start Countersign's background process {}: {source}", exe.display())]
    ResidentSpawn {
        /// The executable tried.
        exe: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The resident started but ended before it answered.
    #[error("Countersign's background process ended at start ({status}); its log says why")]
    ResidentExited {
        /// How it ended.
        status: std::process::ExitStatus,
    },
    /// The resident did not answer in time.
    #[error("Countersign's background process did not answer within {seconds} s")]
    ResidentSilent {
        /// How long it was given.
        seconds: u64,
    },
}

/// Managed state.
pub struct Shell {
    /// The core (the engine runs in the resident).
    pub console: Arc<Console>,
    /// What the window shows (told to the resident: no notification for a question on screen).
    pub viewing: Mutex<ViewRequest>,
    /// Whether the window has the focus.
    pub focused: Mutex<bool>,
    /// Process start.
    pub launch: Launch,
    /// Milliseconds from launch to the UI's first paint, once reported.
    pub painted_ms: Mutex<Option<u64>>,
    /// The resident's state, as its watch last said (default until then, or without one).
    pub resident: Mutex<ResidentState>,
    /// The resident's watch, to tell it what the window views.
    pub viewer: tokio::sync::Mutex<Option<WatchWriter>>,
    /// Whether the resident is there, being restarted, or could not be restarted.
    pub link: Mutex<ipc::ResidentLink>,
    /// How to start the resident again when it goes away without a Quit (as `run` started it);
    /// `None`: this window did not start it (the IPC tests), so it only follows it.
    pub restart: Option<Options>,
    /// Woken by `resident_restart`: try again after a failed restart.
    pub retry: tokio::sync::Notify,
}

impl Shell {
    /// A shell over `console` (no resident state until its watch says).
    pub fn new(console: Arc<Console>, launch: Launch) -> Self {
        Self {
            console,
            viewing: Mutex::default(),
            focused: Mutex::new(true),
            launch,
            painted_ms: Mutex::default(),
            resident: Mutex::default(),
            viewer: tokio::sync::Mutex::new(None),
            link: Mutex::default(),
            restart: None,
            retry: tokio::sync::Notify::new(),
        }
    }

    /// Starts the resident again with `options` when it goes away without a Quit.
    pub fn restarting_with(mut self, options: Options) -> Self {
        self.restart = Some(options);
        self
    }

    /// Whether the resident is there, as last known.
    pub fn link(&self) -> ipc::ResidentLink {
        self.link.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The resident's state as last known.
    pub fn resident_state(&self) -> ResidentState {
        self.resident.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Pending count (questions and agents' held calls), DND and notification capabilities, as
    /// of now.
    pub async fn state(&self) -> ShellState {
        let pending = self.console.waiting_count().await;
        let resident = self.resident_state();
        ShellState {
            pending,
            dnd: resident.dnd,
            dnd_scheduled: resident.dnd_scheduled,
            notification_actions: resident.notification_actions,
            resident: self.link(),
        }
    }

    /// Milliseconds since this process started.
    pub fn since_launch(&self) -> u128 {
        self.launch.at.elapsed().as_millis()
    }

    /// Records the UI's first paint (once) and says how long the launch took, and, when the
    /// resident started this window, how long since it was asked for (the reopen time). `steps`:
    /// the webview's own timestamps, for the cold-start budget (RUST_LOG=info).
    pub fn painted(&self, steps: Option<PaintedRequest>) {
        let Ok(mut painted) = self.painted_ms.lock() else {
            return;
        };
        if painted.is_none() {
            let ms = self.launch.at.elapsed().as_millis() as u64;
            let wall = options::unix_ms();
            *painted = Some(ms);
            // When the frame was painted, by the webview's clock (this machine's): the report
            // arrives a few milliseconds later. A time outside this launch is not believed.
            let painted_at = steps
                .as_ref()
                .map(|steps| steps.painted_ms.round() as u128)
                .filter(|&at| (self.launch.wall_ms..=wall).contains(&at))
                .unwrap_or(wall);
            if let Some(steps) = steps {
                // The webview's clock is this machine's: its unix times line up with ours.
                let at = |unix_ms: f64| (unix_ms - self.launch.wall_ms as f64).round() as i64;
                tracing::info!(
                    "startup: page navigation started {} ms, UI script started {} ms, UI mounted {} ms, first frame painted {} ms after launch",
                    at(steps.navigated_ms),
                    at(steps.script_ms),
                    at(steps.mounted_ms),
                    at(steps.painted_ms)
                );
            }
            // One line for people and for .ci/e2e/measure.sh.
            eprintln!("countersign: first paint {ms} ms after launch (unix_ms={wall})");
            if let Some(asked) = self.launch.asked_at_ms {
                // For the background-mode and tray tests and the footprint benchmark.
                eprintln!(
                    "countersign: window reopened, first paint {} ms after it was asked for (reported after {} ms)",
                    painted_at.saturating_sub(asked),
                    wall.saturating_sub(asked)
                );
            }
        }
    }
}

/// Starts the window: makes sure the resident runs (starting it), opens the ledger, shows the
/// window. `--background` only starts the resident. With a resident already running, a launch
/// it did not start asks it for the window and ends ([`resident::open_in_running`]).
pub fn run(options: Options, launch: Launch) -> Result<(), Error> {
    // Where a window's cold start goes (RUST_LOG=info): the reopen-time budget.
    let phase = |what: &str| {
        tracing::info!(
            "startup: {what} {} ms after launch",
            launch.at.elapsed().as_millis()
        )
    };
    if let Some(asked) = options.asked_at {
        tracing::info!(
            "startup: launched {} ms after the window was asked for",
            launch.wall_ms.saturating_sub(asked)
        );
    }
    // With a resident running, it opens the window (one resident per data directory), unless
    // this process is the window it started, or `--background`.
    if resident::open_in_running(&options) {
        phase("handed to the running background process");
        return Ok(());
    }
    resident::ensure(&options)?;
    if options.background {
        return Ok(());
    }
    phase("resident answers");
    // The engine is the resident's: no resume work here, so the window comes up fast.
    let mut setup = Setup::new(&options.data_dir);
    setup.start = Start::WhenNeeded;
    let console = tauri::async_runtime::block_on(Console::open(setup))?;
    phase("ledger open");
    let launch = Launch {
        asked_at_ms: options.asked_at,
        ..launch
    };
    let shell = Shell::new(Arc::new(console), launch).restarting_with(options.clone());
    // One window per ledger: a second window launch on the same data directory hands its
    // arguments to the running one (which goes to the page or link) and exits. First among the
    // plugins, so the second instance stops before anything else starts.
    let single = tauri_plugin_single_instance::Builder::new()
        .dbus_id(instance_id(&options.data_dir))
        .callback(|app, args, _cwd| window::handed_over(app, args))
        .build();
    let mut context = tauri::generate_context!();
    // The window is built in `setup`, at the page asked for (`window::build`).
    for window in &mut context.config_mut().app.windows {
        window.create = false;
    }
    let mut page = options.page.clone();
    let app = builder(tauri::Builder::default().plugin(single), shell)
        .plugin(tauri_plugin_deep_link::init())
        .plugin(links::plugin(options.link.clone()))
        .build(context)?;
    phase("Tauri and GTK up");
    // Closing the window ends the process (Tauri's default with no window left).
    app.run(move |app, event| {
        if let tauri::RunEvent::Ready = event {
            window::open(app, page.take());
            tracing::info!(
                "startup: window built {} ms after launch",
                launch.at.elapsed().as_millis()
            );
        }
    });
    Ok(())
}

/// Wires state, commands and the feed onto a builder (also used by the IPC tests).
pub fn builder<R: Runtime>(builder: tauri::Builder<R>, shell: Shell) -> tauri::Builder<R> {
    builder
        .manage(shell)
        .invoke_handler(tauri::generate_handler![
            commands::app_info,
            commands::ui_mounted,
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
            commands::task_adoptable,
            commands::task_link,
            commands::server_list,
            commands::server_add,
            commands::server_add_stdio,
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
            commands::host_import_preview,
            commands::host_import_apply,
            commands::host_import_undo,
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
            commands::resident_restart,
        ])
        .on_page_load(|webview, payload| {
            let shell = webview.state::<Shell>();
            let what = match payload.event() {
                tauri::webview::PageLoadEvent::Started => "page load committed",
                tauri::webview::PageLoadEvent::Finished => "page load finished",
            };
            tracing::info!("startup: {what} {} ms after launch", shell.since_launch());
        })
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::Focused(focused) = event {
                if window.label() == window::MAIN {
                    resident::focused(window.app_handle(), *focused);
                }
            }
        })
        .setup(|app| {
            app.manage(window::FirstPaint::default());
            let handle = app.handle().clone();
            tauri::async_runtime::spawn(resident::follow(handle.clone()));
            tauri::async_runtime::spawn(feed::follow(handle));
            Ok(())
        })
}

/// Recomputes the shell state, shows it in the title, and tells the webview.
pub async fn refresh_shell_state<R: Runtime>(app: &AppHandle<R>, shell: &Shell) -> ShellState {
    let state = shell.state().await;
    window::show_state(app, &state);
    let _ = app.emit(event::SHELL_STATE_CHANGED, state.clone());
    state
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
