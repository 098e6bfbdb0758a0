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
//!
//! [`launch`]: the flags both processes take, where the sibling executables are, and logging.
//! Only the two desktop processes use this crate; the CLI never compiles it.
#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use countersign_core::console::view::StdioProcessView;
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
    /// The stdio servers' processes as the resident's engine runs them (the window process runs
    /// no engine, so only the resident knows them): answered with [`Reply::StdioProcesses`].
    StdioProcesses,
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
    /// To [`Request::StdioProcesses`]: each stdio server's process (a server the engine has not
    /// run yet is missing or not started), logs cut by [`fit_logs`].
    StdioProcesses {
        /// The processes, by server (a list: this enum's tag leaves no room for integer keys).
        processes: Vec<ServerProcess>,
    },
    /// The request could not be carried out.
    Failed {
        /// Why, for a person.
        message: String,
    },
}

/// One stdio server's process, as [`Reply::StdioProcesses`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerProcess {
    /// The server's row.
    pub server_id: i64,
    /// Its process now.
    pub process: StdioProcessView,
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

/// The bytes of stdio logs one [`Reply::StdioProcesses`] carries at most, as JSON: the rest of
/// [`MAX_LINE`] is left for the other fields of each process.
pub const LOG_BUDGET: usize = 48 * 1024;

/// Cuts the processes' logs so that the reply fits one line: each keeps its newest lines within
/// an even share of [`LOG_BUDGET`] (a person reads the end of a log first; a newest line longer
/// than that is cut at its end), and says how many earlier lines are not shown. A process's own
/// log is bounded, but several of them, or lines of escaped control characters, would not fit.
pub fn fit_logs(processes: &mut BTreeMap<i64, StdioProcessView>) {
    let logged = processes.values().filter(|p| !p.log.is_empty()).count();
    if logged == 0 {
        return;
    }
    // Room is kept for the note saying what was cut.
    let room = (LOG_BUDGET / logged).saturating_sub(NOTE_ROOM);
    for process in processes.values_mut() {
        let mut used = 0;
        let mut kept = 0;
        for line in process.log.iter().rev() {
            // As it crosses: quoted, escaped, and a comma.
            let cost = json_len(line) + 1;
            if used + cost > room {
                break;
            }
            used += cost;
            kept += 1;
        }
        if kept == 0 {
            if let Some(newest) = process.log.last_mut() {
                cut_to(newest, room);
                kept = 1;
            }
        }
        let dropped = process.log.len() - kept;
        if dropped > 0 {
            process.log.drain(..dropped);
            process.log.insert(
                0,
                format!("[countersign] {dropped} earlier lines not shown"),
            );
        }
    }
}

/// `s`'s length as a JSON string.
fn json_len(s: &str) -> usize {
    serde_json::to_string(s).map_or(s.len() * 6, |j| j.len())
}

/// Cuts `line` at a character boundary so that it takes at most `room` bytes as JSON, with `…`.
fn cut_to(line: &mut String, room: usize) {
    let mut used = json_len("…") + 1;
    let mut end = 0;
    for (at, c) in line.char_indices() {
        let cost = json_len(c.encode_utf8(&mut [0; 4])) - 2;
        if used + cost > room {
            break;
        }
        used += cost;
        end = at + c.len_utf8();
    }
    line.truncate(end);
    line.push('…');
}

/// The most the note of [`fit_logs`] takes, as JSON.
const NOTE_ROOM: usize = 64;

/// The stdio servers' processes the resident's engine runs, by server id.
pub async fn stdio_processes(
    data_dir: &Path,
) -> Result<BTreeMap<i64, StdioProcessView>, ControlError> {
    match ask(data_dir, &Request::StdioProcesses).await? {
        Reply::StdioProcesses { processes } => Ok(processes
            .into_iter()
            .map(|p| (p.server_id, p.process))
            .collect()),
        other => Err(ControlError::Failed {
            message: format!(
                "the background process answered {other:?} where its stdio processes were due"
            ),
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

    fn process(log: Vec<String>) -> StdioProcessView {
        StdioProcessView {
            pid: Some(41),
            starts: 3,
            recent_exits: 2,
            last_exit: Some("exit status: 1".into()),
            crash_loop: true,
            log,
        }
    }

    #[test]
    fn stdio_processes_cross_by_server_id_and_round_trip() {
        let request = serde_json::to_value(Request::StdioProcesses).expect("serializes");
        assert_eq!(request, json!({"ask": "stdioProcesses"}));
        let reply = Reply::StdioProcesses {
            processes: vec![ServerProcess {
                server_id: 7,
                process: process(vec!["boom".into()]),
            }],
        };
        let wire = serde_json::to_value(&reply).expect("serializes");
        assert_eq!(
            wire,
            json!({"reply": "stdioProcesses", "processes": [{"serverId": 7, "process": {
                "pid": 41, "starts": 3, "recentExits": 2, "lastExit": "exit status: 1",
                "crashLoop": true, "log": ["boom"]
            }}]})
        );
        assert_eq!(
            serde_json::from_value::<Reply>(wire).expect("parses"),
            reply
        );
        let not_started = json!({"reply": "stdioProcesses", "processes": [{"serverId": 2, "process": {
            "starts": 0, "recentExits": 0, "crashLoop": false, "log": []
        }}]});
        let Reply::StdioProcesses { processes } =
            serde_json::from_value::<Reply>(not_started).expect("parses")
        else {
            panic!("a stdio processes reply")
        };
        assert_eq!(
            processes[0].process.pid, None,
            "a process not started has no pid"
        );
    }

    #[test]
    fn full_stdio_logs_of_many_servers_are_cut_to_one_line_keeping_the_newest() {
        // Each at the bound a process keeps (200 lines of 2 KiB), one of escaped control bytes.
        let long = |n: usize, c: char| -> Vec<String> {
            (0..200)
                .map(|i| format!("{n}:{i}:{}", c.to_string().repeat(2040)))
                .collect()
        };
        let mut processes: BTreeMap<i64, StdioProcessView> = (1..=5)
            .map(|n| (n, process(long(n as usize, 'x'))))
            .collect();
        processes.insert(6, process(long(6, '\u{1}')));
        processes.insert(7, process(Vec::new()));
        fit_logs(&mut processes);
        let reply = Reply::StdioProcesses {
            processes: processes
                .iter()
                .map(|(&server_id, p)| ServerProcess {
                    server_id,
                    process: p.clone(),
                })
                .collect(),
        };
        let line = serde_json::to_string(&reply).expect("serializes");
        assert!(
            line.len() <= MAX_LINE,
            "the reply fits one line the window reads ({} bytes)",
            line.len()
        );
        for (id, p) in &processes {
            if *id == 7 {
                assert!(p.log.is_empty(), "an empty log stays empty");
                continue;
            }
            let last = p.log.last().expect("the newest lines are kept");
            assert!(
                last.starts_with(&format!("{id}:199:")),
                "the newest line is last, got {:.20}",
                last
            );
            if *id == 6 {
                assert!(
                    last.ends_with('…') && p.log.len() == 2,
                    "a newest line too long for its share is cut, not dropped"
                );
            }
            assert!(
                p.log[0].starts_with("[countersign] ")
                    && p.log[0].ends_with("earlier lines not shown"),
                "what was cut is said, got {:?}",
                p.log[0]
            );
        }
        let mut short = BTreeMap::from([(1, process(vec!["a".into(), "b".into()]))]);
        fit_logs(&mut short);
        assert_eq!(short[&1].log, ["a", "b"], "a log that fits is left whole");
    }
}
