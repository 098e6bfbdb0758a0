//! `countersign://task/<server>/<task id>` links (this launch's argument, a second launch's
//! arguments through the single-instance plugin, or the OS's open-URL event through
//! tauri-plugin-deep-link, which is how macOS delivers them): the core reads the link
//! (`Console::open_link`, strict about hostile input) and says where it leads; this opens the
//! window there. Nothing is adopted or added here: a task not tracked yet opens "Adopt a task"
//! filled in, for the person to confirm.

use countersign_core::console::link::LinkTarget;
use tauri::plugin::TauriPlugin;
use tauri::{AppHandle, Manager, Runtime};

use crate::window::{self, Page};
use crate::Shell;

/// Follows links: `first` (from this launch's command line) once the app is up, then every link
/// the OS or a second launch hands over (tauri-plugin-deep-link's open-URL event). A plugin, so
/// it runs after the deep-link plugin is set up, beside the app's own setup.
pub fn plugin<R: Runtime>(first: Option<String>) -> TauriPlugin<R> {
    tauri::plugin::Builder::new("countersign-links")
        .setup(move |app, _api| {
            use tauri_plugin_deep_link::DeepLinkExt;
            let handle = app.clone();
            app.deep_link().on_open_url(move |event| {
                for url in event.urls() {
                    open(&handle, url.to_string());
                }
            });
            if let Some(link) = first.clone() {
                follow(app, link, true);
            }
            Ok(())
        })
        .build()
}

pub use countersign_core::console::link::is_link;

/// Opens the window where `link` leads; a link that cannot be opened opens the window on the
/// task list and is logged with the reason (never the link itself: it may carry anything).
pub fn open<R: Runtime>(app: &AppHandle<R>, link: String) {
    follow(app, link, false);
}

fn follow<R: Runtime>(app: &AppHandle<R>, link: String, at_launch: bool) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let console = std::sync::Arc::clone(&app.state::<Shell>().console);
        let page = match console.open_link(&link).await {
            Ok(LinkTarget::Tracked { row }) => Page::Task { row },
            Ok(LinkTarget::Adopt {
                server_id, task_id, ..
            }) => Page::Adopt { server_id, task_id },
            Ok(LinkTarget::AddServer { url, task_id }) => Page::AddServer { url, task_id },
            Err(e) => {
                tracing::warn!("cannot open the link: {e}");
                window::open(&app, None);
                return;
            }
        };
        if at_launch {
            window::open_when_painted(&app, page);
        } else {
            window::open(&app, Some(page));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_countersign_links_are_taken_from_the_command_line() {
        assert!(is_link("countersign://task/demo/t"));
        assert!(is_link("COUNTERSIGN:x"));
        assert!(!is_link("--data-dir"));
        assert!(!is_link("countersign"));
        assert!(!is_link("countersignx://task"));
        assert!(!is_link("https://example.com"));
        assert!(!is_link("countersigné:"));
    }
}
