//! Background mode: the window is optional, the engine is not.
//!
//! Closing the window destroys it, webview included, so WebKit's web and network processes end
//! and the app costs what its engine costs; the engine, the notifications and the tray keep
//! running (the run loop keeps the app alive while a tray icon exists, see [`keep_running`]).
//! Opening it again (the tray's "Open", a notification, a link, a second launch) builds a new
//! window from `tauri.conf.json` at the page asked for. Only the tray's "Quit" ends the app.

use std::sync::Mutex;
use std::time::Instant;

use tauri::{AppHandle, Manager, Runtime, WebviewWindow, WebviewWindowBuilder};

/// The label of the one window (as in `tauri.conf.json` and `capabilities/main.json`).
pub const MAIN: &str = "main";

/// A page of the UI to open: the hash routes of `ui/src/app/router.svelte.ts`. Built here from
/// typed parts only, so nothing a server sends can become script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// The inbox, on one question when given.
    Inbox(Option<(i64, String)>),
    /// One task's detail, by its ledger row.
    Task(i64),
    /// "Adopt a task by id", filled in: the person confirms (a link to an untracked task).
    Adopt {
        /// The registered server's row.
        server_id: i64,
        /// The task id.
        task_id: String,
    },
    /// "Adopt a task by id" for a server not added yet: the page says to add it first.
    AddServer {
        /// The server's endpoint from the link.
        url: String,
        /// The task id.
        task_id: String,
    },
}

impl Page {
    /// The UI's hash route, e.g. `#/inbox/3/approve%2Fdeploy`.
    pub fn route(&self) -> String {
        match self {
            Page::Inbox(None) => "#/inbox".to_owned(),
            Page::Inbox(Some((row, key))) => format!("#/inbox/{row}/{}", uri_component(key)),
            Page::Task(row) => format!("#/tasks/{row}"),
            Page::Adopt { server_id, task_id } => {
                format!("#/adopt/{server_id}/{}", uri_component(task_id))
            }
            Page::AddServer { url, task_id } => format!(
                "#/adopt/url/{}/{}",
                uri_component(url),
                uri_component(task_id)
            ),
        }
    }
}

/// When the last window was asked for, until its first paint (the reopen time); and a page
/// asked for before the first window had painted (a link on the command line).
#[derive(Default)]
pub struct Reopen {
    asked: Mutex<Option<Instant>>,
    first: Mutex<FirstPaint>,
}

#[derive(Default)]
struct FirstPaint {
    painted: bool,
    page: Option<Page>,
}

/// Opens `page` in the window the app starts with, once that has painted (a script run before
/// the page has loaded would be lost); at once when it has.
pub fn open_when_painted<R: Runtime>(app: &AppHandle<R>, page: Page) {
    if let Some(reopen) = app.try_state::<Reopen>() {
        if let Ok(mut first) = reopen.first.lock() {
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
    if let Some(reopen) = app.try_state::<Reopen>() {
        if let Ok(mut asked) = reopen.asked.lock() {
            *asked = Some(Instant::now());
        }
    }
    match build(app, page.as_ref()) {
        Ok(window) => focus(&window),
        Err(e) => tracing::warn!("could not open the window: {e}"),
    }
}

/// A webview painted its first frame: after a reopen, says how long that took.
pub fn painted<R: Runtime>(app: &AppHandle<R>) {
    let Some(reopen) = app.try_state::<Reopen>() else {
        return;
    };
    let waiting = reopen.first.lock().ok().and_then(|mut first| {
        first.painted = true;
        first.page.take()
    });
    if let Some(page) = waiting {
        open(app, Some(page));
    }
    let Ok(mut asked) = reopen.asked.lock() else {
        return;
    };
    if let Some(at) = asked.take() {
        // One line for people and for the background-mode test and benchmark.
        eprintln!(
            "countersign: window reopened, first paint {} ms after it was asked for",
            at.elapsed().as_millis()
        );
    }
}

/// The window was destroyed (closed by the person or the window manager): WebKit's web process
/// ends with its page; its network process is ended here (see [`webkit`]).
pub fn destroyed<R: Runtime>(app: &AppHandle<R>) {
    #[cfg(target_os = "linux")]
    {
        let app = app.clone();
        std::thread::spawn(move || webkit::end_network_process(&app));
    }
    #[cfg(not(target_os = "linux"))]
    let _ = app;
}

/// WebKitGTK keeps its network process for the life of the app even with no webview left (Tauri
/// keeps the web context alive on Linux for that reason, tauri#14626): tens of MB that background
/// mode does not need. Once the web process has ended (the page is gone) and no window was
/// opened meanwhile, we end it; WebKit starts a new one for the next window.
#[cfg(target_os = "linux")]
mod webkit {
    use std::time::{Duration, Instant};

    use tauri::{AppHandle, Manager, Runtime};

    /// How long the web process may take to end after its page closed.
    const WEB_PROCESS_GRACE: Duration = Duration::from_secs(10);

    pub(super) fn end_network_process<R: Runtime>(app: &AppHandle<R>) {
        let deadline = Instant::now() + WEB_PROCESS_GRACE;
        while !children("WebKitWebProces").is_empty() {
            if Instant::now() >= deadline {
                tracing::warn!("WebKit's web process still runs; keeping its network process");
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if app.get_webview_window(super::MAIN).is_some() {
            return; // reopened meanwhile: the new page uses it
        }
        for pid in children("WebKitNetworkPr") {
            // SAFETY: kill(2) with a pid read from /proc as our own child; no memory involved.
            if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
                tracing::info!("ended WebKit's network process {pid} (no window)");
            }
        }
    }

    /// Our direct children whose command name (at most 15 bytes in /proc) starts with `prefix`.
    fn children(prefix: &str) -> Vec<i32> {
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    return false;
                };
                // "pid (comm) state ppid …": comm may hold spaces and parentheses.
                let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                    return false;
                };
                let ppid = stat[close + 1..].split_whitespace().nth(1);
                stat[open + 1..close].starts_with(prefix)
                    && ppid.and_then(|p| p.parse::<u32>().ok()) == Some(me)
            })
            .collect()
    }
}

/// Whether the app stays when its last window closes: yes while a tray icon can bring it back
/// (without one, nothing could, so closing the window quits).
pub fn keep_running<R: Runtime>(app: &AppHandle<R>) -> bool {
    app.tray_by_id(crate::tray::TRAY_ID).is_some()
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
    let mut builder = WebviewWindowBuilder::from_config(app, &config)?;
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

/// `encodeURIComponent`: everything but `A-Z a-z 0-9 - _ . ! ~ * ' ( )` percent-encoded as UTF-8.
fn uri_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_the_ui_router_and_escape_the_question_key() {
        assert_eq!(Page::Inbox(None).route(), "#/inbox");
        assert_eq!(Page::Task(42).route(), "#/tasks/42");
        let adopt = Page::Adopt {
            server_id: 2,
            task_id: "a/b".into(),
        };
        assert_eq!(adopt.route(), "#/adopt/2/a%2Fb");
        let add = Page::AddServer {
            url: "https://h.example/mcp".into(),
            task_id: "t".into(),
        };
        assert_eq!(add.route(), "#/adopt/url/https%3A%2F%2Fh.example%2Fmcp/t");
        assert_eq!(
            Page::Inbox(Some((3, "approve/deploy #1".into()))).route(),
            "#/inbox/3/approve%2Fdeploy%20%231"
        );
        assert_eq!(
            Page::Inbox(Some((1, "é".into()))).route(),
            "#/inbox/1/%C3%A9"
        );
    }

    #[test]
    fn a_hostile_key_stays_inside_the_script_string() {
        let page = Page::Inbox(Some((1, "';alert(1)//\"</script>\u{2028}".into())));
        let script = go_script(&page);
        // Quotes and line separators are percent-encoded before they reach the literal.
        assert_eq!(
            script,
            "location.hash = \"#/inbox/1/'%3Balert(1)%2F%2F%22%3C%2Fscript%3E%E2%80%A8\";"
        );
    }
}
