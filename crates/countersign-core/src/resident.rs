//! The resident's control channel: how the window process (and a second launch) talks to the
//! background process that runs the engine, the tray and the notifier.
//!
//! Countersign on a desktop is two processes per data directory: the resident
//! (`countersign-resident`: no GTK, no WebKit, a few tens of MB, running all day) and, only
//! while a window is open, the window process (the Tauri app, a face like the CLI). They share
//! the ledger (its change feed crosses processes) and talk over one Unix socket in the data
//! directory, [`SOCKET`], mode 0600: the owner's processes only. One JSON line per request and
//! one per reply; a [`Request::Watch`] connection stays open and receives a [`Reply::State`]
//! line at every change, and [`Reply::Quit`] when the resident ends (the window then ends too).
//!
//! Nothing secret crosses it: pages, links, switches and the resident's applied state.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod launch;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::OwnedReadHalf;
use tokio::net::UnixStream;

/// The control socket's file name in the data directory.
pub const SOCKET: &str = "resident.sock";

/// The lock file one resident per data directory holds for as long as it runs.
pub const LOCK: &str = "resident.lock";

/// The longest line either side accepts (a state or a page is a few hundred bytes).
pub const MAX_LINE: usize = 64 * 1024;

/// The control socket of the resident on `data_dir`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SOCKET)
}

/// A page of the UI to open: the hash routes of `ui/src/app/router.svelte.ts`. Built from typed
/// parts only, so nothing a server sends can become script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "page")]
pub enum Page {
    /// The inbox, on one question when given.
    Inbox {
        /// The question's task row and key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<(i64, String)>,
    },
    /// The inbox on one agent's call held by the gateway (waiting for approval, or approved and
    /// asked questions by its upstream), by Countersign's task id (`csg-…`): its card focused.
    #[serde(rename_all = "camelCase")]
    GatedCall {
        /// Countersign's task id of the call.
        task_id: String,
    },
    /// One task's detail, by its ledger row.
    Task {
        /// The ledger row.
        row: i64,
    },
    /// "Adopt a task by id", filled in: the person confirms (a link to an untracked task).
    #[serde(rename_all = "camelCase")]
    Adopt {
        /// The registered server's row.
        server_id: i64,
        /// The task id.
        task_id: String,
    },
    /// "Adopt a task by id" for a server not added yet: the page says to add it first.
    #[serde(rename_all = "camelCase")]
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
            Page::Inbox { question: None } => "#/inbox".to_owned(),
            Page::Inbox {
                question: Some((row, key)),
            } => format!("#/inbox/{row}/{}", uri_component(key)),
            Page::GatedCall { task_id } => format!("#/inbox/call/{}", uri_component(task_id)),
            Page::Task { row } => format!("#/tasks/{row}"),
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

/// What the window process (or a second launch) asks of the resident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "ask")]
pub enum Request {
    /// Show the window (start the window process, or bring the running one forward) at `page`,
    /// or where `link` (`countersign://…`) leads.
    Open {
        /// The page, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        page: Option<Page>,
        /// A link, if any (read by the window process's console).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        link: Option<String>,
    },
    /// End the resident and every window (the tray's "Quit").
    Quit,
    /// Do-not-disturb on or off (the toggle in the window, as the tray's check item).
    Dnd {
        /// On.
        on: bool,
    },
    /// The resident's state now.
    State,
    /// Re-read the settings from the ledger and apply them now (the window just saved them),
    /// then reply with the state.
    Reload,
    /// Start the built-in demo server (idempotent), then reply with the state.
    Demo,
    /// What the focused window shows (no notification for a question already on screen);
    /// `None` for both when it shows nothing in particular or lost focus.
    #[serde(rename_all = "camelCase")]
    Viewing {
        /// The task row on screen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_row: Option<i64>,
        /// The question key on screen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
    /// Keep this connection: a [`Reply::State`] now and at every change, [`Reply::Quit`] at the
    /// end. While it is open the sender counts as a window (its [`Request::Viewing`] holds).
    Watch,
}

/// What the resident applied and knows, for the window's tray-like state, Settings and Agents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResidentState {
    /// The resident's process id.
    pub pid: u32,
    /// Whether the resident runs the engine (else another process holds the ledger's engine
    /// lock, e.g. `countersign watch`: nothing here polls or notifies).
    pub runs_engine: bool,
    /// Unfinished tasks the resident's engine resumed at its start.
    pub resumed: u32,
    /// The process that runs the engine instead, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_pid: Option<u32>,
    /// Do-not-disturb by hand.
    pub dnd: bool,
    /// The do-not-disturb schedule holds notifications now.
    pub dnd_scheduled: bool,
    /// The notification daemon offers buttons.
    pub notification_actions: bool,
    /// The autostart entry exists.
    pub start_at_login_active: bool,
    /// Why the autostart entry could not be written or removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostart_error: Option<String>,
    /// The local MCP gateway's base URL, when the resident runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_url: Option<String>,
    /// `--gateway PORT` (or the demo's) overrides the gateway setting for this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_flag: Option<u16>,
    /// Why the gateway asked for could not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_error: Option<String>,
    /// The built-in demo server's endpoint, once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demo_url: Option<String>,
}

/// The resident's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "reply")]
pub enum Reply {
    /// Done.
    Done,
    /// The state (to [`Request::State`], [`Request::Dnd`], [`Request::Reload`],
    /// [`Request::Demo`], and on a watch at every change).
    State {
        /// The state.
        state: ResidentState,
    },
    /// The resident ends (on a watch): windows end too.
    Quit,
    /// The request could not be carried out.
    Failed {
        /// Why, for a person.
        message: String,
    },
}

/// Why talking to the resident failed.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No resident answers on this data directory.
    #[error("no Countersign runs in the background on {}: {source}", path.display())]
    NotRunning {
        /// The socket tried.
        path: PathBuf,
        /// Why the connection failed.
        source: std::io::Error,
    },
    /// The connection broke.
    #[error("the background process's connection broke: {0}")]
    Io(#[from] std::io::Error),
    /// A line was not a reply (another program on the socket, or a version mismatch).
    #[error("the background process answered something unreadable: {0}")]
    Protocol(#[from] serde_json::Error),
    /// It closed the connection without a reply.
    #[error("the background process closed the connection without answering")]
    Closed,
    /// It answered with a failure.
    #[error("{message}")]
    Failed {
        /// The resident's message.
        message: String,
    },
}

async fn connect(data_dir: &Path) -> Result<UnixStream, ControlError> {
    let path = socket_path(data_dir);
    UnixStream::connect(&path)
        .await
        .map_err(|source| ControlError::NotRunning { path, source })
}

async fn send(stream: &mut UnixStream, request: &Request) -> Result<(), ControlError> {
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    stream.write_all(&line).await?;
    Ok(())
}

/// Asks the resident on `data_dir` one thing and waits for its reply ([`Reply::Failed`] becomes
/// [`ControlError::Failed`]).
pub async fn ask(data_dir: &Path, request: &Request) -> Result<Reply, ControlError> {
    let mut stream = connect(data_dir).await?;
    send(&mut stream, request).await?;
    let (read, _write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    match read_reply(&mut lines).await? {
        Some(Reply::Failed { message }) => Err(ControlError::Failed { message }),
        Some(reply) => Ok(reply),
        None => Err(ControlError::Closed),
    }
}

/// Asks for something answered with the state.
pub async fn ask_state(data_dir: &Path, request: &Request) -> Result<ResidentState, ControlError> {
    match ask(data_dir, request).await? {
        Reply::State { state } => Ok(state),
        other => Err(ControlError::Failed {
            message: format!("the background process answered {other:?} where its state was due"),
        }),
    }
}

/// Whether a resident answers on `data_dir` now.
pub async fn running(data_dir: &Path) -> bool {
    ask(data_dir, &Request::State).await.is_ok()
}

/// A [`Request::Watch`] connection: the resident's state at every change.
pub struct Watch {
    lines: Lines<BufReader<OwnedReadHalf>>,
    /// Kept open: [`Watch::tell`] sends on it (the resident reads [`Request::Viewing`] here).
    write: tokio::net::unix::OwnedWriteHalf,
}

impl Watch {
    /// Opens a watch on the resident of `data_dir`.
    pub async fn open(data_dir: &Path) -> Result<Self, ControlError> {
        let mut stream = connect(data_dir).await?;
        send(&mut stream, &Request::Watch).await?;
        let (read, write) = stream.into_split();
        Ok(Self {
            lines: BufReader::new(read).lines(),
            write,
        })
    }

    /// The next reply: a state, or `Quit`; `None` when the resident went away.
    pub async fn next(&mut self) -> Result<Option<Reply>, ControlError> {
        read_reply(&mut self.lines).await
    }

    /// The sending half, to tell the resident what this window views.
    pub fn into_split(self) -> (WatchReader, WatchWriter) {
        (
            WatchReader { lines: self.lines },
            WatchWriter { write: self.write },
        )
    }
}

/// A watch's replies.
pub struct WatchReader {
    lines: Lines<BufReader<OwnedReadHalf>>,
}

impl WatchReader {
    /// The next reply: a state, or `Quit`; `None` when the resident went away.
    pub async fn next(&mut self) -> Result<Option<Reply>, ControlError> {
        read_reply(&mut self.lines).await
    }
}

/// A watch's requests (only [`Request::Viewing`] is read on a watch).
pub struct WatchWriter {
    write: tokio::net::unix::OwnedWriteHalf,
}

impl WatchWriter {
    /// Sends `request` on the watch.
    pub async fn tell(&mut self, request: &Request) -> Result<(), ControlError> {
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        self.write.write_all(&line).await?;
        Ok(())
    }
}

async fn read_reply(
    lines: &mut Lines<BufReader<OwnedReadHalf>>,
) -> Result<Option<Reply>, ControlError> {
    match lines.next_line().await? {
        Some(line) if line.len() > MAX_LINE => Err(ControlError::Failed {
            message: format!("a reply of {} bytes is too long", line.len()),
        }),
        Some(line) => Ok(Some(serde_json::from_str(&line)?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_match_the_ui_router_and_escape_the_question_key() {
        assert_eq!(Page::Inbox { question: None }.route(), "#/inbox");
        assert_eq!(Page::Task { row: 42 }.route(), "#/tasks/42");
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
        let question = Page::Inbox {
            question: Some((3, "approve/deploy #1".into())),
        };
        assert_eq!(question.route(), "#/inbox/3/approve%2Fdeploy%20%231");
        let accented = Page::Inbox {
            question: Some((1, "é".into())),
        };
        assert_eq!(accented.route(), "#/inbox/1/%C3%A9");
        let call = Page::GatedCall {
            task_id: "csg-0a1b".into(),
        };
        assert_eq!(call.route(), "#/inbox/call/csg-0a1b");
        let hostile = Page::GatedCall {
            task_id: "x/';alert(1)//#".into(),
        };
        assert_eq!(hostile.route(), "#/inbox/call/x%2F'%3Balert(1)%2F%2F%23");
    }

    #[test]
    fn a_gated_call_page_is_typed_on_the_wire() {
        let page = Page::GatedCall {
            task_id: "csg-7".into(),
        };
        let wire = serde_json::to_value(&page).expect("serializes");
        assert_eq!(wire, json!({"page": "gatedCall", "taskId": "csg-7"}));
        assert_eq!(serde_json::from_value::<Page>(wire).expect("parses"), page);
        assert!(
            serde_json::from_value::<Page>(json!({"page": "gatedCall"})).is_err(),
            "a call page names its call"
        );
    }

    #[test]
    fn requests_and_replies_are_one_json_object_each_and_round_trip() {
        let open = Request::Open {
            page: Some(Page::Inbox {
                question: Some((3, "k".into())),
            }),
            link: None,
        };
        let wire = serde_json::to_value(&open).expect("serializes");
        assert_eq!(
            wire,
            json!({"ask": "open", "page": {"page": "inbox", "question": [3, "k"]}})
        );
        assert_eq!(
            serde_json::from_value::<Request>(wire).expect("parses"),
            open
        );
        let state = Reply::State {
            state: ResidentState {
                pid: 7,
                dnd: true,
                ..ResidentState::default()
            },
        };
        let wire = serde_json::to_value(&state).expect("serializes");
        assert_eq!(wire["reply"], "state");
        assert_eq!(wire["state"]["dnd"], true);
        assert_eq!(
            serde_json::from_value::<Reply>(wire).expect("parses"),
            state
        );
        assert!(serde_json::from_str::<Request>(r#"{"ask":"rm -rf"}"#).is_err());
    }
}
