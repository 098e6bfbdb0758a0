//! Starting the window process (`countersign-desktop`) at a page. The window process ends when
//! its window closes, with WebKit's processes: background mode holds no GTK display, no webview.
//! Every Open starts one.
//!
//! A launch of the app while the resident runs (a second launch, a link) asks the resident for
//! the window too, so it takes the same path. When a window already runs on this data directory,
//! the process started hands its command line to that window (the app's single-instance check)
//! and ends: the running window goes to the page.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use countersign_core::resident::Page;

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

/// Starts the window process on `data_dir` at `page` (or where `link` leads). Its log goes where
/// the resident's goes. Failure is logged: the tray and the engine go on.
///
/// `Err` (why, for a person) when no window process could be started: the caller that asked
/// over the socket (a launch of the app) then shows the window itself.
pub fn open(data_dir: &Path, page: Option<&Page>, link: Option<&str>) -> Result<(), String> {
    let asked_at = countersign_core::resident::launch::unix_ms();
    let args = window_args(data_dir, page, link, asked_at);
    tracing::info!(
        "opening the window at {}",
        page.map_or_else(|| "its first page".to_owned(), Page::route)
    );
    let exe = desktop_exe();
    let mut command = Command::new(&exe);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_asked_for_by_its_command_line() {
        let page = Page::Task { row: 7 };
        let args = window_args(
            Path::new("/srv/ledger"),
            Some(&page),
            Some("countersign://task/ci/42"),
            1234,
        );
        assert_eq!(
            args,
            [
                "--data-dir",
                "/srv/ledger",
                "--asked-at=1234",
                "--page",
                r#"{"page":"task","row":7}"#,
                "countersign://task/ci/42"
            ]
        );
        let args = window_args(Path::new("/srv/ledger"), None, None, 1);
        assert_eq!(args, ["--data-dir", "/srv/ledger", "--asked-at=1"]);
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
