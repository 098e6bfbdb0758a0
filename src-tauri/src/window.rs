//! The one window. This process exists for it: it is started (by a person, or by the resident on
//! the tray's Open, a notification's click or a link) with the page to show, and it ends when the
//! window closes, so GTK, WebKit and their processes end with it and background mode costs only
//! the resident. A second start on the same data directory while the window is up hands its
//! arguments to this one ([`handed_over`]): the window goes to the page and comes forward.

use std::sync::Mutex;
use std::time::Duration;

use tauri::{AppHandle, Emitter, Manager, Runtime, WebviewWindow, WebviewWindowBuilder};

/// The label of the one window (as in `tauri.conf.json` and `capabilities/main.json`).
pub const MAIN: &str = "main";

pub use countersign_desktop_ipc::Page;

/// How long a window built hidden waits for its UI to mount before it is shown all the same (a
/// UI that fails to start still shows its window).
pub const REVEAL_AT_MOST: Duration = Duration::from_secs(2);

/// A page asked for before the window had painted (a link on the command line): a script run
/// before the page has loaded would be lost, so it waits for the first paint.
#[derive(Default)]
pub struct FirstPaint(Mutex<FirstPaintState>);

#[derive(Default)]
struct FirstPaintState {
    painted: bool,
    page: Option<Page>,
}

/// Opens `page` in the window the app starts with, once that has painted (a script run before
/// the page has loaded would be lost); at once when it has.
pub fn open_when_painted<R: Runtime>(app: &AppHandle<R>, page: Page) {
    if let Some(first) = app.try_state::<FirstPaint>() {
        if let Ok(mut first) = first.0.lock() {
            if !first.painted {
                first.page = Some(page);
                return;
            }
        }
    }
    open(app, Some(page));
}

/// Shows the window at `page`, building a new one when it was closed. Errors are logged: a
/// window that cannot be built leaves the engine and the tray running.
pub fn open<R: Runtime>(app: &AppHandle<R>, page: Option<Page>) {
    tracing::info!(
        "opening the window at {}",
        page.as_ref()
            .map_or_else(|| "its last page".to_owned(), Page::route)
    );
    if let Some(window) = app.get_webview_window(MAIN) {
        if let Some(page) = &page {
            if let Err(e) = window.eval(go_script(page)) {
                tracing::warn!("could not open {}: {e}", page.route());
            }
        }
        focus(&window);
        return;
    }
    match build(app, page.as_ref()) {
        Ok(_) => {
            let app = app.clone();
            tauri::async_runtime::spawn(async move {
                tokio::time::sleep(REVEAL_AT_MOST).await;
                reveal(&app);
            });
        }
        Err(e) => tracing::warn!("could not open the window: {e}"),
    }
}

/// Shows the window built hidden (`build`), once its UI has mounted (`ui_mounted`) or after
/// [`REVEAL_AT_MOST`]; nothing when it shows already.
pub fn reveal<R: Runtime>(app: &AppHandle<R>) {
    let Some(window) = app.get_webview_window(MAIN) else {
        return;
    };
    if window.is_visible().unwrap_or(true) {
        return;
    }
    if let Some(shell) = app.try_state::<crate::Shell>() {
        tracing::info!(
            "startup: window shown {} ms after launch",
            shell.since_launch()
        );
    }
    focus(&window);
}

/// The webview painted its first frame: a page asked for meanwhile is opened now.
pub fn painted<R: Runtime>(app: &AppHandle<R>) {
    let waiting = app.try_state::<FirstPaint>().and_then(|first| {
        first.0.lock().ok().and_then(|mut first| {
            first.painted = true;
            first.page.take()
        })
    });
    if let Some(page) = waiting {
        open(app, Some(page));
    }
}

/// A second start's arguments (the single-instance plugin): a page (`--page`, from the
/// resident), links (the desktop entry's `%u`, in any position), else just the window.
pub fn handed_over<R: Runtime>(app: &AppHandle<R>, args: Vec<String>) {
    let mut args = args.into_iter().skip(1);
    let mut page = None;
    let mut links = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--page" {
            page = args
                .next()
                .and_then(|json| crate::options::page(&json).ok());
        } else if crate::links::is_link(&arg) {
            links.push(arg);
        }
    }
    if links.is_empty() {
        if let Some(Page::Inbox {
            question: Some((row, key)),
        }) = &page
        {
            // The inbox opens on the question (a notification's click).
            let focus = crate::ipc::InputFocusRequested {
                task_row: *row,
                key: key.clone(),
            };
            let _ = app.emit(crate::ipc::event::INPUT_FOCUS_REQUESTED, focus);
        }
        open(app, page);
    }
    for link in links {
        crate::links::open(app, link);
    }
}

/// Shows the pending count in the window title (the tray is the resident's).
pub fn show_state<R: Runtime>(app: &AppHandle<R>, state: &crate::ipc::ShellState) {
    if let Some(window) = app.get_webview_window(MAIN) {
        let _ = window.set_title(&title(state.pending));
    }
}

/// "Countersign — 3 waiting" / "Countersign".
pub fn title(pending: u32) -> String {
    match pending {
        0 => "Countersign".to_owned(),
        1 => "Countersign — 1 waiting".to_owned(),
        n => format!("Countersign — {n} waiting"),
    }
}

fn build<R: Runtime>(app: &AppHandle<R>, page: Option<&Page>) -> tauri::Result<WebviewWindow<R>> {
    let config = app
        .config()
        .app
        .windows
        .iter()
        .find(|w| w.label == MAIN)
        .cloned()
        .ok_or_else(|| tauri::Error::WindowNotFound)?;
    // Built hidden, shown when the UI has mounted (`reveal`). WebKitGTK's first draw of a
    // software-rendered view (no GL compositing, `rendering.rs`) blocks the window's main thread
    // for up to 500 ms waiting for the web process's first frame, and that web process may itself
    // be waiting on this main thread, which serves the page's `tauri://` files: about one reopen
    // in two stalled that long (issue 12). Mounted, the page needs nothing more from here to
    // draw, and the window shows with its content, not blank.
    let mut builder = WebviewWindowBuilder::from_config(app, &config)?.visible(false);
    if let Some(page) = page {
        // Runs before the UI's scripts, so the router starts on the page; only on a load
        // without a route of its own (a reload keeps where the person went).
        let route = json_string(&page.route());
        builder = builder.initialization_script(format!(
            "if (location.hash === '' || location.hash === '#') location.hash = {route};"
        ));
    }
    builder.build()
}

fn focus<R: Runtime>(window: &WebviewWindow<R>) {
    let _ = window.unminimize();
    let _ = window.show();
    let _ = window.set_focus();
}

fn go_script(page: &Page) -> String {
    format!("location.hash = {};", json_string(&page.route()))
}

/// A JS string literal (JSON is one).
fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_counts_waiting_inputs() {
        assert_eq!(title(0), "Countersign");
        assert_eq!(title(1), "Countersign — 1 waiting");
        assert_eq!(title(12), "Countersign — 12 waiting");
    }

    #[test]
    fn a_notification_on_an_agents_call_opens_the_inbox_on_that_call() {
        // What the resident passes with `--page` on the click (feed.rs), as the window reads it.
        let page = crate::options::page(r#"{"page":"gatedCall","taskId":"csg-4f2a"}"#)
            .expect("the resident's page parses");
        assert_eq!(
            page,
            Page::GatedCall {
                task_id: "csg-4f2a".into()
            }
        );
        assert_eq!(
            go_script(&page),
            "location.hash = \"#/inbox/call/csg-4f2a\";"
        );
        let hostile = Page::GatedCall {
            task_id: "\";alert(1)//\u{2028}".into(),
        };
        assert_eq!(
            go_script(&hostile),
            "location.hash = \"#/inbox/call/%22%3Balert(1)%2F%2F%E2%80%A8\";"
        );
    }

    #[test]
    fn a_hostile_key_stays_inside_the_script_string() {
        let page = Page::Inbox {
            question: Some((1, "';alert(1)//\"</script>\u{2028}".into())),
        };
        let script = go_script(&page);
        // Quotes and line separators are percent-encoded before they reach the literal.
        assert_eq!(
            script,
            "location.hash = \"#/inbox/1/'%3Balert(1)%2F%2F%22%3C%2Fscript%3E%E2%80%A8\";"
        );
    }
}
