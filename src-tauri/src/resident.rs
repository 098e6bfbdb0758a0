//! The window's side of the resident ([`countersign_desktop_ipc`]): starting it when it does
//! not run, following its state (do-not-disturb, notification buttons, gateway, start at login)
//! for the title bar's toggle and the Settings and Agents pages, telling it what the window
//! shows, ending with it (the tray's Quit ends every window), and starting it again when it went
//! away without a Quit (a crash: the window says so meanwhile, and offers Retry if it fails).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use countersign_desktop_ipc::{
    self as resident, ControlError, Reply, Request, ResidentState, Watch,
};
use tauri::{AppHandle, Manager, Runtime};

use crate::ipc::{ResidentLink, ServerView};
use crate::{Error, Options, Shell};

/// How long a resident just started may take to answer (it opens the ledger first; a debug
/// build on a loaded machine is slow).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The resident's executable: `COUNTERSIGN_RESIDENT`, else `countersign-resident` beside this
/// executable (how the package installs both, and how cargo builds both).
pub fn resident_exe() -> PathBuf {
    resident::launch::sibling_exe("COUNTERSIGN_RESIDENT", "countersign-resident")
}

/// Makes sure a resident runs on the data directory: starts one (its own process group, so it
/// outlives this window) and waits until it answers, which also means the ledger exists and is
/// migrated before this process opens it. With `--demo` and a resident already running, asks
/// it for the demo server.
pub fn ensure(options: &Options) -> Result<(), Error> {
    tauri::async_runtime::block_on(start(options))
}

/// How long a launch waits for a running resident's answers before it shows the window itself
/// (a resident that accepts connections but does not answer: hung, or stopped in a debugger).
const HAND_OVER_TIMEOUT: Duration = Duration::from_secs(5);

/// A launch while the resident runs (a second launch, a link, the desktop entry with the app in
/// the tray) asks it to open the window at the page or link asked for, as the tray's Open does:
/// the resident starts a window process at that page, or a window already up goes to it. One
/// resident per data directory, one window per resident. `true`: the resident took the request
/// and this process has nothing more to do.
/// `false`, and `run` goes on as a first launch: `--background`; a window process the resident
/// started (`--asked-at`: it must never hand the request back); one driven by WebDriver, which
/// talks to the webview of the process it started; no resident answering (within
/// [`HAND_OVER_TIMEOUT`]); or the resident could not start a window (logged).
pub fn open_in_running(options: &Options) -> bool {
    if options.background
        || options.asked_at.is_some()
        || std::env::var("TAURI_WEBVIEW_AUTOMATION").as_deref() == Ok("true")
    {
        return false;
    }
    let asked = async {
        let dir = &options.data_dir;
        if options.demo.is_some() {
            match resident::ask(dir, &Request::Demo).await {
                Ok(_) => {}
                Err(ControlError::NotRunning { .. }) => return false,
                // The window still opens; the demo's failure is the resident's to tell.
                Err(e) => tracing::warn!("the background process could not start the demo: {e}"),
            }
        }
        let open = Request::Open {
            page: options.page.clone(),
            link: options.link.clone(),
        };
        match resident::ask(dir, &open).await {
            Ok(_) => {
                eprintln!(
                    "countersign: Countersign runs in the background on {}: it opens the window",
                    dir.display()
                );
                true
            }
            Err(ControlError::NotRunning { .. }) => false,
            Err(e) => {
                tracing::warn!(
                    "the background process did not open the window ({e}): opening it here"
                );
                false
            }
        }
    };
    tauri::async_runtime::block_on(async {
        match tokio::time::timeout(HAND_OVER_TIMEOUT, asked).await {
            Ok(taken) => taken,
            Err(_) => {
                tracing::warn!(
                    "the background process did not answer within {} s: opening the window here",
                    HAND_OVER_TIMEOUT.as_secs()
                );
                false
            }
        }
    })
}

/// [`ensure`], for a caller on the runtime (the restart after a crash).
async fn start(options: &Options) -> Result<(), Error> {
    let dir = &options.data_dir;
    let asked = if options.demo.is_some() {
        resident::ask(dir, &Request::Demo).await.map(|_| ())
    } else {
        resident::ask(dir, &Request::State).await.map(|_| ())
    };
    match asked {
        Ok(()) => return Ok(()),
        Err(ControlError::NotRunning { .. }) => {}
        Err(e) => tracing::warn!("the background process answered badly: {e}"),
    }
    let exe = &options.resident;
    let mut command = Command::new(exe);
    command.arg("--data-dir").arg(dir);
    if options.demo.is_some() {
        command.arg("--demo");
    }
    if let Some(port) = options.gateway {
        command.arg("--gateway").arg(port.to_string());
    }
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|source| Error::ResidentSpawn {
            exe: exe.clone(),
            source,
        })?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if resident::running(dir).await {
            break;
        }
        match child.try_wait() {
            // Another resident won the race for the lock (it handed over and ended): fine once
            // that one answers.
            Ok(Some(status)) if status.success() => {}
            Ok(Some(status)) => return Err(Error::ResidentExited { status }),
            Ok(None) | Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(Error::ResidentSilent {
                seconds: START_TIMEOUT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Reaped when it ends (if before this window: the Quit of the tray).
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// A resident that goes away this soon after this window reached it did not really come back:
/// after [`MAX_QUICK_LOSSES`] of those in a row the window stops restarting it and says so.
const QUICK_LOSS: Duration = Duration::from_secs(10);

/// How many quick losses in a row end the restarts (until Retry).
const MAX_QUICK_LOSSES: u32 = 3;

/// How a watch ended.
enum Ended {
    /// The resident said Quit: the window ends too.
    Quit,
    /// It went away without one (a crash, `kill -9`), or the connection broke.
    Lost,
}

/// Follows the resident's state for as long as the window runs; ends the window when the
/// resident quits (the tray's Quit, or `countersign-resident --quit`). When it goes away without
/// a Quit (it crashed, or was killed), the window says so (a banner: [`ResidentLink`]), starts
/// it again as `run` did at launch, and follows the new one; a failed start waits for Retry
/// ([`retry`]).
pub async fn follow<R: Runtime>(app: AppHandle<R>) {
    let dir = app.state::<Shell>().console.data_dir().to_path_buf();
    let mut quick_losses = 0;
    loop {
        match Watch::open(&dir).await {
            Ok(watch) => {
                let since = Instant::now();
                set_link(&app, ResidentLink::Connected).await;
                match watch_until_it_ends(&app, watch).await {
                    Ended::Quit => {
                        tracing::info!("the background process ends: so does the window");
                        app.exit(0);
                        return;
                    }
                    Ended::Lost => {
                        quick_losses = if since.elapsed() < QUICK_LOSS {
                            quick_losses + 1
                        } else {
                            0
                        }
                    }
                }
            }
            Err(e) => {
                // Not there (it ended between the start and now), or not answering a watch:
                // counted as a quick loss, so a resident that answers but cannot be watched is
                // not started again and again.
                tracing::warn!("cannot follow the background process: {e}");
                quick_losses += 1;
            }
        }
        *app.state::<Shell>().viewer.lock().await = None;
        let Some(options) = app.state::<Shell>().restart.clone() else {
            // The IPC tests: the window still works on the ledger; do-not-disturb and the
            // gateway show what was last known.
            tracing::warn!("not following the background process any more");
            return;
        };
        if quick_losses >= MAX_QUICK_LOSSES {
            let message = format!(
                "it stopped {quick_losses} times in a row within {} s of starting",
                QUICK_LOSS.as_secs()
            );
            tracing::error!("the background process {message}: not starting it again by itself");
            quick_losses = 0;
            set_link(&app, ResidentLink::Failed { message }).await;
            app.state::<Shell>().retry.notified().await;
        }
        restart(&app, &options).await;
    }
}

/// Starts the resident again until it answers, waiting for Retry after each failure.
async fn restart<R: Runtime>(app: &AppHandle<R>, options: &Options) {
    loop {
        tracing::warn!("the background process went away: starting it again");
        set_link(app, ResidentLink::Restarting).await;
        match start(options).await {
            Ok(()) => return,
            Err(e) => {
                tracing::error!("could not start the background process again: {e}");
                set_link(
                    app,
                    ResidentLink::Failed {
                        message: e.to_string(),
                    },
                )
                .await;
                app.state::<Shell>().retry.notified().await;
            }
        }
    }
}

/// The banner's Retry: starts the resident again now, if a restart failed. The link turns
/// `Restarting` here, under its lock, so a second click before the restart begins finds nothing
/// to retry (a stored wake-up would skip the wait after the next failure).
pub fn retry(shell: &Shell) {
    let claimed = shell.link.lock().is_ok_and(|mut slot| {
        let failed = matches!(*slot, ResidentLink::Failed { .. });
        if failed {
            *slot = ResidentLink::Restarting;
        }
        failed
    });
    if claimed {
        shell.retry.notify_one();
    }
}

/// Records the link to the resident and tells the webview (the banner) and the title.
async fn set_link<R: Runtime>(app: &AppHandle<R>, link: ResidentLink) {
    let shell = app.state::<Shell>();
    let changed = shell.link.lock().is_ok_and(|mut slot| {
        let changed = *slot != link;
        *slot = link;
        changed
    });
    if changed {
        crate::refresh_shell_state(app, &shell).await;
    }
}

/// Follows one watch until the resident quits or goes away.
async fn watch_until_it_ends<R: Runtime>(app: &AppHandle<R>, watch: Watch) -> Ended {
    let (mut reader, writer) = watch.into_split();
    *app.state::<Shell>().viewer.lock().await = Some(writer);
    tell_viewing(app).await;
    loop {
        match reader.next().await {
            Ok(Some(Reply::State { state })) => {
                let shell = app.state::<Shell>();
                if let Ok(mut slot) = shell.resident.lock() {
                    *slot = state;
                }
                crate::refresh_shell_state(app, &shell).await;
            }
            Ok(Some(Reply::Quit)) => return Ended::Quit,
            Ok(Some(_)) => {}
            Ok(None) => {
                tracing::warn!("the background process went away");
                return Ended::Lost;
            }
            Err(e) => {
                tracing::warn!("lost the background process: {e}");
                return Ended::Lost;
            }
        }
    }
}

/// Asks the resident something answered with its state, and keeps that state.
pub async fn ask_state(shell: &Shell, request: &Request) -> Result<ResidentState, ControlError> {
    let state = resident::ask_state(shell.console.data_dir(), request).await?;
    if let Ok(mut slot) = shell.resident.lock() {
        *slot = state.clone();
    }
    Ok(state)
}

/// The window gained or lost the focus: a question on screen is only "seen" while it has it.
pub fn focused<R: Runtime>(app: &AppHandle<R>, focused: bool) {
    if let Ok(mut slot) = app.state::<Shell>().focused.lock() {
        *slot = focused;
    }
    let app = app.clone();
    tauri::async_runtime::spawn(async move { tell_viewing(&app).await });
}

/// Tells the resident what the window shows (nothing while it is not focused).
pub async fn tell_viewing<R: Runtime>(app: &AppHandle<R>) {
    let shell = app.state::<Shell>();
    let focused = shell.focused.lock().map(|f| *f).unwrap_or(false);
    let view = shell.viewing.lock().map(|v| v.clone()).unwrap_or_default();
    let request = if focused {
        Request::Viewing {
            task_row: view.task_row,
            key: view.key,
        }
    } else {
        Request::Viewing {
            task_row: None,
            key: None,
        }
    };
    let mut viewer = shell.viewer.lock().await;
    if let Some(writer) = viewer.as_mut() {
        if let Err(e) = writer.tell(&request).await {
            tracing::debug!("cannot tell the background process what is on screen: {e}");
        }
    }
}

/// How long the server list waits for the resident's stdio processes: the list itself comes
/// from the ledger, so a busy or hung resident must not hold it up.
const PROCESSES_TIMEOUT: Duration = Duration::from_secs(2);

/// Fills each stdio server's `process` from the resident, whose engine runs those processes
/// (this process runs none). Left empty, and logged, when the resident does not answer: the
/// page then says it cannot tell.
pub async fn fill_stdio_processes(shell: &Shell, views: &mut [ServerView]) {
    if !views.iter().any(|v| v.stdio.is_some()) {
        return;
    }
    let dir = shell.console.data_dir();
    let mut processes =
        match tokio::time::timeout(PROCESSES_TIMEOUT, resident::stdio_processes(dir)).await {
            Ok(Ok(processes)) => processes,
            Ok(Err(e)) => {
                tracing::debug!("no stdio processes from the background process: {e}");
                return;
            }
            Err(_) => {
                tracing::debug!("the background process did not say its stdio processes in time");
                return;
            }
        };
    for view in views {
        if let Some(stdio) = &mut view.stdio {
            if let Some(process) = processes.remove(&view.id) {
                stdio.process = Some(process);
            }
        }
    }
}
