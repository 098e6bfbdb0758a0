//! Starting the window process (`countersign-desktop`) at a page. The window process ends when
//! its window closes, with WebKit's processes: background mode holds no GTK display, no webview.
//! To spare the next Open the window process's own start (exec and dynamic linking, ~50–60 ms),
//! the resident keeps one started ahead and waiting ([`countersign_core::resident::ready`]):
//! linked, trimmed to ~12 MiB (~22 MiB with the GL driver loaded ahead where there is no GPU),
//! touching nothing until asked. An Open hands it the arguments a
//! cold start would have had; without one waiting (the first seconds after a start or an Open,
//! or `COUNTERSIGN_WINDOW_READY=0`) the Open starts a process as before.
//!
//! A launch of the app while the resident runs (a second launch, a link) asks the resident for
//! the window too, so it takes the same path. When a window already runs on this data directory
//! (it watches the resident), the Open starts a process with the request on its command line,
//! which hands it to that window (the app's single-instance check, which forwards the command
//! line) and ends: the running window goes to the page. The process started ahead is kept for
//! the next reopen: its request comes on its stdin, which that check would not forward.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use countersign_core::resident::{preload, ready, Page};

/// The window process's executable: `COUNTERSIGN_DESKTOP`, else `countersign-desktop` beside
/// this executable (how the package installs both, and how cargo builds both). From an AppImage
/// extracted rather than mounted (no FUSE), that copy is deleted when the first window closes:
/// then the AppImage itself, which extracts again and starts the window.
pub fn desktop_exe() -> PathBuf {
    choose_exe(window_exe(), countersign_core::resident::launch::appimage())
}

/// The window executable beside this one (or `COUNTERSIGN_DESKTOP`), which [`open`] starts
/// unless the AppImage stands in for it.
fn window_exe() -> PathBuf {
    countersign_core::resident::launch::sibling_exe("COUNTERSIGN_DESKTOP", "countersign-desktop")
}

/// What the window process preloads ([`preload`]): asked of the dynamic linker once, on a thread
/// of its own, when the resident starts ([`learn_preload`]); until it has answered, windows start
/// without it.
static PRELOAD: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// Finds what the window process will preload, off the caller's thread.
pub fn learn_preload() {
    let exe = window_exe();
    std::thread::spawn(move || {
        let hot = if exe.is_file() {
            preload::hot_libraries(&exe)
        } else {
            Vec::new()
        };
        tracing::debug!("the window process preloads {hot:?}");
        let _ = PRELOAD.set(hot);
    });
}

fn choose_exe(beside: PathBuf, appimage: Option<PathBuf>) -> PathBuf {
    match appimage {
        Some(image) if !beside.exists() => image,
        _ => beside,
    }
}

/// The arguments of a window process on `data_dir` at `page` (or where `link` leads), asked for
/// at `asked_at` (unix ms).
fn window_args(
    data_dir: &Path,
    page: Option<&Page>,
    link: Option<&str>,
    asked_at: u128,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--data-dir".into(), data_dir.into()];
    // The reopen time is measured from here to the window's first paint. It also tells the
    // window process that the resident started it: it must not hand the request back
    // (`countersign_desktop::resident::open_in_running`).
    args.push(format!("--asked-at={asked_at}").into());
    if let Some(page) = page {
        match serde_json::to_string(page) {
            Ok(json) => args.extend(["--page".into(), json.into()]),
            Err(e) => tracing::warn!("cannot pass the page to the window: {e}"),
        }
    }
    if let Some(link) = link {
        args.push(link.into());
    }
    args
}

/// Starts the window process on `data_dir` at `page` (or where `link` leads): hands the request
/// to the process waiting for it when there is one, else starts one. Its log goes where the
/// resident's goes. Failure is logged: the tray and the engine go on.
///
/// `window_up` (a window watches the resident): the new process only hands its arguments to
/// that window and ends (single instance). The plugin that does so sends the process's command
/// line, and a process started ahead was given its arguments on its stdin, not its command line:
/// then a process is started with them on its command line, and the one waiting stays for the
/// next reopen.
///
/// `Err` (why, for a person) when no window process could be started: the caller that asked
/// over the socket (a launch of the app) then shows the window itself.
pub fn open(
    data_dir: &Path,
    page: Option<&Page>,
    link: Option<&str>,
    window_up: bool,
) -> Result<(), String> {
    let asked_at = countersign_core::resident::launch::unix_ms();
    let args = window_args(data_dir, page, link, asked_at);
    tracing::info!(
        "opening the window at {}",
        page.map_or_else(|| "its first page".to_owned(), Page::route)
    );
    // The next one waits again once this window had the machine to itself for a while.
    if let Some(keeper) = KEEPER.get().filter(|_| !window_up) {
        let _ = keeper.lock().map(|k| k.send(()));
    }
    let waiting = if window_up {
        None
    } else {
        WAITING.lock().ok().and_then(|mut w| w.take())
    };
    if let Some(waiting) = waiting {
        match waiting.hand(&args) {
            Ok(child) => {
                reap(child);
                return Ok(());
            }
            Err(why) => tracing::info!("the window process started ahead {why}: starting one"),
        }
    }
    let exe = desktop_exe();
    let mut command = Command::new(&exe);
    // Only the window executable itself, not the AppImage that stands in for it.
    if exe == window_exe() {
        if let Some(hot) = PRELOAD.get() {
            preload::apply(&mut command, hot);
        }
    }
    command
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match command.spawn() {
        Ok(child) => {
            reap(child);
            Ok(())
        }
        Err(e) => {
            let why = format!("could not start the window ({}): {e}", exe.display());
            tracing::warn!("{why}");
            Err(why)
        }
    }
}

/// Reaped on a thread of its own: the window lives as long as the person keeps it.
fn reap(mut child: Child) {
    std::thread::spawn(move || child.wait());
}

/// The window process started ahead, waiting for its request on its stdin.
struct Waiting {
    child: Child,
    stdin: ChildStdin,
    started: Instant,
}

impl Waiting {
    /// Starts `exe` waiting ([`ready::FLAG`]), with the window's preload.
    fn start(exe: &Path, hot: &[PathBuf]) -> std::io::Result<Self> {
        let mut command = Command::new(exe);
        preload::apply(&mut command, hot);
        let mut child = command
            .arg(ready::FLAG)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("the waiting window process has no stdin"))?;
        Ok(Self {
            child,
            stdin,
            started: Instant::now(),
        })
    }

    /// Whether it still waits (it has not ended).
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Whether an upgrade replaced its executable or a library it runs since it started
    /// ([`ready::replaced_on_disk`]): then it must not become the window.
    fn outdated(&self) -> bool {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.child.id()));
        match maps.map(|m| ready::replaced_on_disk(&m)) {
            Ok(gone) if !gone.is_empty() => {
                tracing::info!("the window process started ahead runs replaced files: {gone:?}");
                true
            }
            _ => false,
        }
    }

    /// Hands it `args` and lets it go: it is the window process now. `Err` (why, for the log)
    /// when it had ended or its pipe is gone; then it is killed and reaped here.
    fn hand(mut self, args: &[OsString]) -> Result<Child, &'static str> {
        if !self.alive() {
            return Err("had ended");
        }
        if self.outdated() {
            self.end();
            return Err("runs files an upgrade replaced");
        }
        let Some(args) = args
            .iter()
            .map(|a| a.clone().into_string().ok())
            .collect::<Option<Vec<String>>>()
        else {
            self.end();
            return Err("takes only UTF-8 arguments");
        };
        match self.stdin.write_all(&ready::encode(&args)) {
            // Closing the pipe completes the request.
            Ok(()) => {
                drop(self.stdin);
                Ok(self.child)
            }
            Err(_) => {
                self.end();
                Err("could not be reached")
            }
        }
    }

    /// Ends it (its pipe closes: it exits) and reaps it.
    fn end(self) {
        let Self {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let _ = child.kill();
        reap(child);
    }
}

/// The window process waiting for the next Open, when there is one.
static WAITING: Mutex<Option<Waiting>> = Mutex::new(None);

/// Tells the keeper ([`keep_ready`]) of each Open.
static KEEPER: OnceLock<Mutex<mpsc::Sender<()>>> = OnceLock::new();

/// How long the keeper lets the machine be after the resident starts or a window opens, before
/// it starts the next waiting process: a window starting has the CPU to itself.
const REST: Duration = Duration::from_secs(5);

/// How often the keeper checks that the waiting process still waits.
const CHECK: Duration = Duration::from_secs(60);

/// A waiting process that ends sooner than this after its start did not really start.
const QUICK_END: Duration = Duration::from_secs(30);

/// How many such ends in a row make the keeper stop (every Open then starts a process).
const MAX_QUICK_ENDS: u32 = 3;

/// Keeps one window process waiting ([`ready`]) from [`REST`] after now, and again [`REST`]
/// after each Open, for as long as the resident runs (it ends with the resident: its pipe
/// closes). Not with [`ready::SWITCH`]` = 0`, nor where the AppImage stands in for the window
/// executable.
pub fn keep_ready() {
    if !ready::enabled(std::env::var(ready::SWITCH).ok().as_deref()) {
        tracing::info!("no window process started ahead ({}=0)", ready::SWITCH);
        return;
    }
    let (tell, told) = mpsc::channel();
    if KEEPER.set(Mutex::new(tell)).is_err() {
        return;
    }
    std::thread::spawn(move || {
        let mut quick_ends = 0;
        let mut rest = REST;
        loop {
            match told.recv_timeout(rest) {
                Ok(()) => {
                    rest = REST;
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            rest = CHECK;
            let exe = window_exe();
            if desktop_exe() != exe {
                continue;
            }
            let Ok(mut waiting) = WAITING.lock() else {
                return;
            };
            if let Some(w) = waiting.as_mut() {
                if w.alive() && !w.outdated() {
                    continue;
                }
                if w.alive() {
                    // An upgrade: the next one starts from the new files.
                    tracing::info!("the window process started ahead is replaced after an upgrade");
                } else {
                    let quick = w.started.elapsed() < QUICK_END;
                    quick_ends = if quick { quick_ends + 1 } else { 0 };
                    tracing::info!("the window process started ahead ended");
                }
                if let Some(w) = waiting.take() {
                    w.end();
                }
            }
            if quick_ends >= MAX_QUICK_ENDS {
                tracing::warn!(
                    "the window process started ahead ended {quick_ends} times at once: \
                     every Open starts one from now on"
                );
                return;
            }
            // The window's preload, as a cold start has it (known within a second of the start).
            let hot = PRELOAD.wait();
            match Waiting::start(&exe, hot) {
                Ok(w) => {
                    tracing::debug!(
                        "a window process waits for the next Open ({})",
                        w.child.id()
                    );
                    *waiting = Some(w);
                }
                Err(e) => {
                    tracing::warn!(
                        "could not start a window process ahead ({}): {e}",
                        exe.display()
                    );
                    return;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real process in the waiting process's place (`sh`: its stdin copied to a file) shows
    /// what a hand-over writes and that it closes the pipe (the copy ends).
    fn stand_in(out: &Path, script: &str) -> Waiting {
        stand_in_from(Path::new("sh"), out, script)
    }

    fn stand_in_from(shell: &Path, out: &Path, script: &str) -> Waiting {
        let mut child = Command::new(shell)
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(out)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("sh");
        let stdin = child.stdin.take().expect("stdin");
        Waiting {
            child,
            stdin,
            started: Instant::now(),
        }
    }

    #[test]
    fn a_waiting_process_whose_files_an_upgrade_replaced_is_not_handed_anything() {
        // The stand-in runs a copy of sh, deleted once it runs, as an upgrade leaves a library.
        let dir = std::env::temp_dir().join(format!("countersign-upgraded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let shell = dir.join("sh");
        std::fs::copy("/bin/sh", &shell).expect("a copy of sh");
        let out = dir.join("read");
        // (`; :` keeps sh itself running: a last command alone may replace it.)
        let waiting = stand_in_from(&shell, &out, r#"cat > "$1"; :"#);
        let until = Instant::now() + Duration::from_secs(5);
        while !std::fs::read_to_string(format!("/proc/{}/maps", waiting.child.id()))
            .is_ok_and(|m| m.contains(shell.to_str().expect("utf-8")))
        {
            assert!(Instant::now() < until, "the copy of sh never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!waiting.outdated(), "nothing replaced yet");
        std::fs::remove_file(&shell).expect("the copy deleted");
        assert!(waiting.outdated());
        let args = window_args(Path::new("/srv/ledger"), None, None, 1);
        assert_eq!(
            waiting.hand(&args).map(|_| ()),
            Err("runs files an upgrade replaced")
        );
        // Ended without a request: it read nothing.
        assert_eq!(std::fs::read(&out).unwrap_or_default(), b"");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_hand_over_writes_the_request_and_closes_the_pipe() {
        let out = std::env::temp_dir().join(format!("countersign-hand-{}", std::process::id()));
        let waiting = stand_in(&out, r#"cat > "$1""#);
        let page = Page::Task { row: 7 };
        let args = window_args(
            Path::new("/srv/ledger"),
            Some(&page),
            Some("countersign://task/ci/42"),
            1234,
        );
        let mut child = waiting.hand(&args).expect("handed over");
        // It ends only once the pipe is closed: the hand-over closed it.
        assert!(child.wait().expect("wait").success());
        let written = std::fs::read(&out).expect("what it read");
        let expected: Vec<String> = args
            .iter()
            .map(|a| a.to_str().expect("utf-8").to_owned())
            .collect();
        assert_eq!(ready::decode(&written), Ok(Some(expected.clone())));
        assert_eq!(
            expected,
            [
                "--data-dir",
                "/srv/ledger",
                "--asked-at=1234",
                "--page",
                r#"{"page":"task","row":7}"#,
                "countersign://task/ci/42"
            ]
        );
        let _ = std::fs::remove_file(&out);
    }

    #[test]
    fn a_waiting_process_that_ended_is_not_handed_anything() {
        let out = std::env::temp_dir().join(format!("countersign-gone-{}", std::process::id()));
        let mut waiting = stand_in(&out, "exit 3");
        while waiting.alive() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let args = window_args(Path::new("/srv/ledger"), None, None, 1);
        assert_eq!(waiting.hand(&args).map(|_| ()), Err("had ended"));
        // And one whose arguments are not UTF-8 is ended, not handed half a request.
        let waiting = stand_in(&out, r#"cat > "$1""#);
        let bad = vec![OsString::from("--data-dir"), {
            use std::os::unix::ffi::OsStringExt;
            OsString::from_vec(vec![b'/', 0xff])
        }];
        assert_eq!(
            waiting.hand(&bad).map(|_| ()),
            Err("takes only UTF-8 arguments")
        );
        let _ = std::fs::remove_file(&out);
    }

    #[test]
    fn the_window_starts_through_the_appimage_only_when_its_copy_is_gone() {
        let dir = std::env::temp_dir().join(format!("countersign-exe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let beside = dir.join("countersign-desktop");
        std::fs::write(&beside, b"").expect("exe");
        let image = dir.join("Countersign.AppImage");
        // Mounted (or an extracted copy still there): the window beside the resident.
        assert_eq!(choose_exe(beside.clone(), Some(image.clone())), beside);
        assert_eq!(choose_exe(beside.clone(), None), beside);
        // The extracted copy was deleted when the first window closed: the AppImage.
        std::fs::remove_file(&beside).expect("remove");
        assert_eq!(choose_exe(beside.clone(), Some(image.clone())), image);
        // Not from an AppImage: the path as it is (spawning it says what is missing).
        assert_eq!(choose_exe(beside.clone(), None), beside);
        let _ = std::fs::remove_dir_all(dir);
    }
}
