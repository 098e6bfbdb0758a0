//! `countersign-resident`: Countersign in the background, without GTK, WebKit or Tauri, so an
//! app left running all day costs about what its engine costs.
//!
//! One per data directory (a lock file, [`countersign_core::resident::LOCK`]). It runs:
//! - the engine ([`Console`] with [`Start::Now`]): polling, resuming, the ledger;
//! - [`feed`]: follows the ledger's events and turns them into desktop notifications
//!   ([`notify`]: Approve/Decline answer without a window) and the tray's count;
//! - [`tray`]: a StatusNotifierItem over D-Bus (ksni): Open, Do not disturb, Quit;
//! - [`settings`]: do-not-disturb schedule, sound, start at login, the local MCP gateway;
//! - [`control`]: the control socket the window process and second launches talk to
//!   ([`countersign_core::resident`]);
//! - [`window`]: starts the window process (`countersign-desktop`) on Open, a notification's
//!   click or a link; the window process ends when its window closes, freeing GTK and WebKit;
//! - [`demo`]: `--demo`, the built-in demo server, its gateway and demo agent.

mod control;
mod demo;
mod feed;
mod notify;
mod options;
mod settings;
mod tray;
mod window;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use countersign_core::console::view::EngineState;
use countersign_core::console::{self, Console, Setup, Start};
use countersign_core::resident::{self, Page, ResidentState};
use notify::Notifier;
use options::Options;

/// Why the resident could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line was wrong.
    #[error(transparent)]
    Usage(#[from] countersign_core::resident::launch::UsageError),
    /// The data directory or the lock file could not be made.
    #[error("cannot use the data directory {}: {source}", path.display())]
    DataDir {
        /// The path.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The control socket could not be made.
    #[error("cannot listen on {}: {source}", path.display())]
    Socket {
        /// The socket's path.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The ledger or engine failed to open.
    #[error(transparent)]
    Console(#[from] console::OpenError),
    /// `--demo` could not start its server.
    #[error("{0}")]
    Demo(String),
    /// Talking to the running resident failed (`--quit`, or handing a link over).
    #[error(transparent)]
    Control(#[from] resident::ControlError),
    /// The async runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// What the resident is: shared by the feed, the tray, the settings and the control socket.
pub struct Resident {
    /// The core.
    pub console: Arc<Console>,
    /// Desktop notifications and do-not-disturb.
    pub notifier: Arc<Notifier>,
    /// What a window shows, while one watches (no notification for a question on screen).
    pub viewing: Mutex<Viewing>,
    /// Process start (agents' calls since then are told even before the feed's first cursor).
    pub launched: Instant,
    /// The built-in demo server, once started; it serves for as long as the resident runs.
    pub demo: tokio::sync::Mutex<Option<demo::Demo>>,
    /// What the settings applied (gateway, autostart, schedule).
    pub applied: settings::Applied,
    /// The state windows watch; each change reaches them.
    state: tokio::sync::watch::Sender<ResidentState>,
    /// Set once: the resident ends.
    quit: tokio::sync::watch::Sender<bool>,
    /// The tray, once shown.
    pub tray: OnceLock<ksni::Handle<tray::Tray>>,
    /// This process's runtime (notification threads block on it).
    pub runtime: tokio::runtime::Handle,
}

/// What the focused window shows.
#[derive(Debug, Default, Clone)]
pub struct Viewing {
    /// Open watches (windows).
    pub windows: usize,
    /// The task row on screen.
    pub task_row: Option<i64>,
    /// The question key on screen.
    pub key: Option<String>,
}

impl Resident {
    /// The state as of now (without the pending count: windows read it from the ledger).
    pub fn state(&self) -> ResidentState {
        let (gateway_url, gateway_flag, gateway_error, autostart_error, start_at_login_active) =
            self.applied.snapshot();
        let (runs_engine, resumed, engine_pid) = match self.console.engine_state() {
            Some(EngineState::Running { resumed }) => (true, resumed, None),
            Some(EngineState::Elsewhere { pid }) => (false, 0, pid),
            None => (false, 0, None),
        };
        ResidentState {
            pid: std::process::id(),
            runs_engine,
            resumed,
            engine_pid,
            dnd: self.notifier.dnd(),
            dnd_scheduled: self.notifier.scheduled(),
            notification_actions: self.notifier.actions_known(),
            start_at_login_active,
            autostart_error,
            gateway_url,
            gateway_flag,
            gateway_error,
            demo_url: self.applied.demo_url(),
        }
    }

    /// Recomputes the pending count for the tray, and tells watching windows of any change.
    pub async fn refresh(&self) {
        let pending = self.console.waiting_count().await;
        let dnd = self.notifier.dnd();
        if let Some(tray) = self.tray.get() {
            tray.update(|t| {
                t.pending = pending;
                t.dnd = dnd;
            })
            .await;
        }
        let state = self.state();
        self.state.send_if_modified(|current| {
            let changed = *current != state;
            *current = state;
            changed
        });
    }

    /// Shows the window at `page` or where `link` leads (see [`window::open`]); a failure is
    /// logged there.
    pub fn open(&self, page: Option<Page>, link: Option<String>) {
        let _ = self.try_open(page, link);
    }

    /// [`Resident::open`], saying why no window process could be started.
    pub fn try_open(&self, page: Option<Page>, link: Option<String>) -> Result<(), String> {
        window::open(self.console.data_dir(), page.as_ref(), link.as_deref())
    }

    /// Ends the resident (and, through their watches, the windows).
    pub fn quit(&self) {
        self.quit.send_replace(true);
    }

    /// Whether `task_row`/`key` is on the screen of a focused window.
    pub fn on_screen(&self, task_row: i64, key: &str) -> bool {
        self.viewing.lock().is_ok_and(|v| {
            v.windows > 0
                && v.task_row == Some(task_row)
                && v.key.as_deref().is_none_or(|k| k == key)
        })
    }
}

fn main() {
    // Warnings by default; RUST_LOG=info|debug for more. Nothing logged ever holds a token.
    resident::launch::init_logging();
    let result = Options::parse(std::env::args().skip(1)).and_then(|options| {
        // Two workers: the engine's polls, the feed and the socket are light; notification
        // threads block on this runtime from outside it.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        runtime.block_on(run(options))
    });
    match result {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("countersign: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(options: Options) -> Result<(), Error> {
    let dir = options.data_dir.clone();
    if options.quit {
        resident::ask(&dir, &resident::Request::Quit).await?;
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(|source| Error::DataDir {
        path: dir.clone(),
        source,
    })?;
    // One resident per data directory: the lock is held for the life of the process (the OS
    // releases it however the process ends, so a crash leaves no stale lock).
    let lock_path = dir.join(resident::LOCK);
    let lock = std::fs::File::create(&lock_path).map_err(|source| Error::DataDir {
        path: lock_path.clone(),
        source,
    })?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return hand_over(&options).await,
        Err(std::fs::TryLockError::Error(source)) => {
            return Err(Error::DataDir {
                path: lock_path,
                source,
            })
        }
    }
    let mut setup = Setup::new(&dir);
    setup.start = Start::Now;
    let console = Arc::new(Console::open(setup).await?);
    // The lock is ours, so a socket file left there is a dead resident's.
    let socket = resident::socket_path(&dir);
    let _ = std::fs::remove_file(&socket);
    let listener = control::listen(&socket).map_err(|source| Error::Socket {
        path: socket.clone(),
        source,
    })?;
    let (state, _) = tokio::sync::watch::channel(ResidentState::default());
    let (quit, mut quitting) = tokio::sync::watch::channel(false);
    let resident = Arc::new(Resident {
        console: Arc::clone(&console),
        notifier: Arc::new(Notifier::default()),
        viewing: Mutex::default(),
        launched: Instant::now(),
        demo: tokio::sync::Mutex::new(None),
        applied: settings::Applied::default(),
        state,
        quit,
        tray: OnceLock::new(),
        runtime: tokio::runtime::Handle::current(),
    });
    // One line for people and for the tests (which find the resident by it).
    eprintln!(
        "countersign: resident {} on {}",
        std::process::id(),
        dir.display()
    );
    if let Some(speed) = options.demo {
        demo::launch(&resident, speed, options.gateway)
            .await
            .map_err(Error::Demo)?;
    } else if let Some(port) = options.gateway {
        settings::start_flag_gateway(&resident, &[port]).await;
    }
    // Ask the notification daemon for its capabilities off the runtime, once (a D-Bus round
    // trip that a missing daemon can hold up for the bus's timeout); windows learn the answer
    // through the state.
    let asking = Arc::clone(&resident);
    std::thread::spawn(move || {
        asking.notifier.actions_supported();
        let runtime = asking.runtime.clone();
        runtime.spawn(async move { asking.refresh().await });
    });
    tokio::spawn(control::serve(Arc::clone(&resident), listener));
    tray::show(&resident).await;
    tokio::spawn(settings::follow(Arc::clone(&resident)));
    tokio::spawn(feed::follow(Arc::clone(&resident)));
    if let Some(link) = options.link {
        resident.open(None, Some(link));
    }
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = quitting.wait_for(|q| *q) => {}
        _ = tokio::signal::ctrl_c() => resident.quit(),
        _ = async { match terminate.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => resident.quit(),
    }
    eprintln!("countersign: resident ends");
    // The notifications still on screen would offer buttons nobody listens to any more.
    let notifier = Arc::clone(&resident.notifier);
    let _ = tokio::task::spawn_blocking(move || notifier.withdraw_all()).await;
    // Windows read the Quit on their watch; a moment for it to leave before the socket goes.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let _ = std::fs::remove_file(&socket);
    drop(lock);
    Ok(())
}

/// Another resident runs on this data directory: hand it the link (and `--demo`), if any, and
/// end. It may hold the lock but not answer yet (it is still opening the ledger): asked again
/// for a while.
async fn hand_over(options: &Options) -> Result<(), Error> {
    let dir = &options.data_dir;
    let mut requests = Vec::new();
    if let Some(link) = &options.link {
        requests.push(resident::Request::Open {
            page: None,
            link: Some(link.clone()),
        });
    }
    if options.demo.is_some() {
        requests.push(resident::Request::Demo);
    }
    for request in requests {
        let deadline = Instant::now() + HAND_OVER_TIMEOUT;
        loop {
            match resident::ask(dir, &request).await {
                Ok(_) => break,
                Err(resident::ControlError::NotRunning { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    eprintln!(
        "countersign: Countersign already runs in the background on {}",
        dir.display()
    );
    Ok(())
}

/// How long a second start waits for the running resident to answer.
const HAND_OVER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
