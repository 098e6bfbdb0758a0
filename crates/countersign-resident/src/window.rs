//! Starting the window process (`countersign-desktop`) at a page. The resident keeps no window
//! process warm: that is the memory background mode saves, so every Open is a cold start of
//! the window process, which ends when its window closes.
//!
//! When a window already runs on this data directory, the new process hands its arguments to it
//! (the app's single-instance check) and ends: the running window goes to the page. So the
//! resident need not know whether a window is open.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use countersign_core::resident::{preload, Page};

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

/// Starts the window process on `data_dir` at `page` (or where `link` leads). Its log goes where
/// the resident's goes. Failure is logged: the tray and the engine go on.
pub fn open(data_dir: &Path, page: Option<&Page>, link: Option<&str>) {
    let asked_at = countersign_core::resident::launch::unix_ms();
    let exe = desktop_exe();
    let mut command = Command::new(&exe);
    // Only the window executable itself, not the AppImage that stands in for it.
    if exe == window_exe() {
        if let Some(hot) = PRELOAD.get() {
            preload::apply(&mut command, hot);
        }
    }
    command
        .arg("--data-dir")
        .arg(data_dir)
        // The reopen time is measured from here to the window's first paint.
        .arg(format!("--asked-at={asked_at}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(page) = page {
        match serde_json::to_string(page) {
            Ok(json) => {
                command.arg("--page").arg(json);
            }
            Err(e) => tracing::warn!("cannot pass the page to the window: {e}"),
        }
    }
    if let Some(link) = link {
        command.arg(link);
    }
    tracing::info!(
        "opening the window at {}",
        page.map_or_else(|| "its first page".to_owned(), Page::route)
    );
    match command.spawn() {
        // Reaped on a thread of its own: the window lives as long as the person keeps it.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => tracing::warn!("could not start the window ({}): {e}", exe.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
