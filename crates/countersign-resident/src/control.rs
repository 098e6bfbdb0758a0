//! The control socket ([`countersign_desktop_ipc`]): one JSON line in, one out; a watch stays
//! open and gets the state at every change, and `Quit` when the resident ends.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use countersign_desktop_ipc::{Reply, Request, ServerProcess, MAX_LINE};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};

use crate::Resident;

/// Binds the socket, readable and writable by the owner only (the data directory may be
/// shared; the socket opens windows and quits the app).
pub fn listen(path: &Path) -> std::io::Result<UnixListener> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves connections until the process ends.
pub async fn serve(resident: Arc<Resident>, listener: UnixListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(connection(Arc::clone(&resident), stream));
            }
            Err(e) => {
                tracing::warn!("the control socket failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    }
}

async fn connection(resident: Arc<Resident>, stream: UnixStream) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let request = match lines.next_line().await {
        Ok(Some(line)) => parse(&line),
        Ok(None) | Err(_) => return,
    };
    let request = match request {
        Ok(request) => request,
        Err(message) => {
            let _ = reply(&mut write, &Reply::Failed { message }).await;
            return;
        }
    };
    if request == Request::Watch {
        watch(&resident, lines, write).await;
        return;
    }
    let answer = answer(&resident, request).await;
    let _ = reply(&mut write, &answer).await;
}

fn parse(line: &str) -> Result<Request, String> {
    if line.len() > MAX_LINE {
        return Err(format!("a request of {} bytes is too long", line.len()));
    }
    serde_json::from_str(line).map_err(|e| format!("not a request: {e}"))
}

async fn reply(write: &mut OwnedWriteHalf, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await
}

async fn answer(resident: &Arc<Resident>, request: Request) -> Reply {
    let state = |r: &Resident| Reply::State { state: r.state() };
    match request {
        // A launch of the app that asked shows the window itself on `Failed`.
        Request::Open { page, link } => match resident.try_open(page, link) {
            Ok(()) => Reply::Done,
            Err(message) => Reply::Failed { message },
        },
        Request::Quit => {
            resident.quit();
            Reply::Done
        }
        Request::Dnd { on } => {
            resident.notifier.set_dnd(on);
            // Turned off: what arrived meanwhile is told in one summary.
            crate::settings::check_dnd(resident).await;
            resident.refresh().await;
            state(resident)
        }
        Request::State => state(resident),
        Request::Reload => {
            crate::settings::reload(resident).await;
            resident.refresh().await;
            state(resident)
        }
        Request::Demo => match crate::demo::ensure(resident).await {
            Ok(()) => {
                resident.refresh().await;
                state(resident)
            }
            Err(message) => Reply::Failed { message },
        },
        Request::Viewing { task_row, key } => {
            set_viewing(resident, task_row, key);
            Reply::Done
        }
        Request::StdioProcesses => stdio_processes(resident).await,
        // Handled by `connection`.
        Request::Watch => Reply::Done,
    }
}

/// Each stdio server's process as this process's engine runs it, logs cut to fit one line.
async fn stdio_processes(resident: &Resident) -> Reply {
    let servers = match resident.console.server_records().await {
        Ok(servers) => servers,
        Err(e) => {
            return Reply::Failed {
                message: format!("cannot read the servers: {e}"),
            }
        }
    };
    let mut processes: BTreeMap<i64, _> = servers
        .iter()
        .filter(|s| s.is_stdio())
        .filter_map(|s| Some((s.id, resident.console.stdio_process(s)?)))
        .collect();
    countersign_desktop_ipc::fit_logs(&mut processes);
    Reply::StdioProcesses {
        processes: processes
            .into_iter()
            .map(|(server_id, process)| ServerProcess { server_id, process })
            .collect(),
    }
}

fn set_viewing(resident: &Resident, task_row: Option<i64>, key: Option<String>) {
    if let Ok(mut viewing) = resident.viewing.lock() {
        viewing.task_row = task_row;
        viewing.key = key;
    }
}

/// A window's watch: the state now and at every change, its `Viewing` lines, and `Quit` at the
/// end. While it is open the window counts as on screen for [`Resident::on_screen`].
async fn watch(
    resident: &Arc<Resident>,
    mut lines: tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
    mut write: OwnedWriteHalf,
) {
    let mut states = resident.state.subscribe();
    let mut quitting = resident.quit.subscribe();
    if let Ok(mut viewing) = resident.viewing.lock() {
        viewing.windows += 1;
    }
    let mut due = Some(Reply::State {
        state: resident.state(),
    });
    loop {
        if let Some(next) = due.take() {
            if reply(&mut write, &next).await.is_err() {
                break;
            }
        }
        tokio::select! {
            changed = states.changed() => {
                if changed.is_err() { break; }
                due = Some(Reply::State { state: states.borrow_and_update().clone() });
            }
            // The guard `wait_for` returns ends inside the block (it must not cross an await).
            _ = async { let _ = quitting.wait_for(|q| *q).await; } => {
                let _ = reply(&mut write, &Reply::Quit).await;
                break;
            }
            line = lines.next_line() => match line.map(|l| l.map(|l| parse(&l))) {
                Ok(Some(Ok(Request::Viewing { task_row, key }))) => {
                    set_viewing(resident, task_row, key);
                }
                // Only `Viewing` is read on a watch; a line needs no answer.
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            },
        }
    }
    if let Ok(mut viewing) = resident.viewing.lock() {
        viewing.windows = viewing.windows.saturating_sub(1);
        if viewing.windows == 0 {
            viewing.task_row = None;
            viewing.key = None;
        }
    }
}
