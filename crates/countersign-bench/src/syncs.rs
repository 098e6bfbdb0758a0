//! How often the engine under test asks the disk to make its writes durable, and how often it
//! opens a TCP connection: the `fsync` + `fdatasync` and the `connect` calls of its process
//! during the steady window, counted from outside by `perf stat` on the kernel's syscall
//! tracepoints. (The demo server counts the connections it accepts; the fastmcp peer server
//! counts nothing for us, so on the peer this is the only count.)
//!
//! Counted from outside so that any build of the engine (a `--compare-exe` from before a change)
//! is measured the same way and needs no counter of its own. A sync is what a group commit saves:
//! SQLite in WAL mode with `synchronous=FULL` syncs the WAL on every commit, with `fdatasync` on
//! Linux (which is why both calls are counted; counting `fsync` alone sees almost nothing).
//!
//! The engine runs under `perf stat` with its counters disabled; the driver enables them at the
//! window's start and disables them at its end through a control FIFO, so task creation (two
//! synced writes per task) is not counted. `perf stat -p <pid>` cannot be used instead: on some
//! virtual machines it attaches but never counts. Where `perf` is missing or the kernel refuses
//! the tracepoints (no root, `perf_event_paranoid`), there is no count and the report says so;
//! nothing else depends on it.

use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

/// The tracepoints counted.
const EVENTS: &str = "syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync,\
                      syscalls:sys_enter_connect,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,\
                      syscalls:sys_enter_pwrite64,syscalls:sys_enter_fcntl";
const SYNCS: [&str; 2] = ["syscalls:sys_enter_fsync", "syscalls:sys_enter_fdatasync"];
const CONNECTS: [&str; 1] = ["syscalls:sys_enter_connect"];
const WAKEUPS: [&str; 1] = ["syscalls:sys_enter_epoll_wait"];
const FUTEXES: [&str; 1] = ["syscalls:sys_enter_futex"];
const PWRITES: [&str; 1] = ["syscalls:sys_enter_pwrite64"];
const FCNTLS: [&str; 1] = ["syscalls:sys_enter_fcntl"];

/// What was counted in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// `fsync` + `fdatasync` calls.
    pub syncs: u64,
    /// `connect` calls (each a new TCP connection, for an engine that talks only HTTP).
    pub connects: u64,
    /// `epoll_wait` calls: how often the runtime's I/O driver went to sleep and woke. A poll
    /// that arrives alone costs at least one; polls that arrive together share them.
    #[serde(default)]
    pub epoll_waits: u64,
    /// `futex` calls: threads waking each other (runtime workers, the ledger's writer thread).
    #[serde(default)]
    pub futexes: u64,
    /// `pwrite64` calls: SQLite's writes to the WAL and, at checkpoints, to the database; two
    /// per page a transaction changes (frame header, page).
    #[serde(default)]
    pub pwrites: u64,
    /// `fcntl` calls: SQLite's file locks, a few per transaction.
    #[serde(default)]
    pub fcntls: u64,
}

/// Whether `perf stat` can count the sync tracepoints here (asked once per run).
pub async fn available() -> bool {
    let probe = Command::new("perf")
        .args(["stat", "-x", ",", "-e", EVENTS, "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(std::time::Duration::from_secs(10), probe).await {
        Ok(Ok(output)) => {
            output.status.success() && parse(&String::from_utf8_lossy(&output.stderr)).is_some()
        }
        _ => false,
    }
}

/// The counter of one engine process: its control FIFO and the file `perf` writes at exit.
pub struct SyncCount {
    control: PathBuf,
    output: PathBuf,
}

impl SyncCount {
    /// `command`'s program and arguments under `perf stat`, counters off until
    /// [`enable`](Self::enable); the FIFO and the output file go in `dir`. `None` if the FIFO
    /// cannot be made. (The engine's commands set no environment or directory to carry over.)
    // perf's control FIFO: std has no mkfifo; one libc call on a path we own.
    #[allow(unsafe_code)]
    pub fn wrap(command: &std::process::Command, dir: &Path) -> Option<(Command, Self)> {
        let control = dir.join("perf-control");
        let output = dir.join("perf-syncs.csv");
        let _ = std::fs::remove_file(&control);
        let _ = std::fs::remove_file(&output);
        let c_path = std::ffi::CString::new(control.as_os_str().as_bytes()).ok()?;
        // SAFETY: mkfifo(3) with a NUL-terminated path we own and a plain mode.
        if unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } != 0 {
            return None;
        }
        let mut perf = Command::new("perf");
        perf.args(["stat", "-x", ",", "-e", EVENTS, "-D", "-1", "--control"])
            .arg(format!("fifo:{}", control.display()))
            .arg("-o")
            .arg(&output)
            .arg("--")
            .arg(command.get_program())
            .args(command.get_args());
        Some((perf, Self { control, output }))
    }

    /// Starts counting.
    pub fn enable(&self) -> bool {
        self.tell("enable")
    }

    /// Stops counting.
    pub fn disable(&self) -> bool {
        self.tell("disable")
    }

    /// Non-blocking: if `perf` is not reading its FIFO (it exited), the open fails at once.
    fn tell(&self, command: &str) -> bool {
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.control)
            .and_then(|mut fifo| fifo.write_all(format!("{command}\n").as_bytes()))
            .is_ok()
    }

    /// The calls counted while enabled; read once the wrapped process (and `perf`) exited.
    pub fn read(self) -> Option<Counts> {
        let text = std::fs::read_to_string(&self.output).ok();
        let _ = std::fs::remove_file(&self.control);
        let _ = std::fs::remove_file(&self.output);
        parse(&text?)
    }
}

/// The counts in `perf stat -x ,` output (`count,unit,event,...` per line); `None` unless
/// every event has a line.
fn parse(output: &str) -> Option<Counts> {
    Some(Counts {
        syncs: sum(output, &SYNCS)?,
        connects: sum(output, &CONNECTS)?,
        epoll_waits: sum(output, &WAKEUPS)?,
        futexes: sum(output, &FUTEXES)?,
        pwrites: sum(output, &PWRITES)?,
        fcntls: sum(output, &FCNTLS)?,
    })
}

/// The sum of `events`' counts; `<not counted>` (the counters were never on while the process
/// ran) is zero, `<not supported>` is no count.
fn sum(output: &str, events: &[&str]) -> Option<u64> {
    events.iter().try_fold(0u64, |sum, event| {
        let count = output.lines().find_map(|line| {
            let mut fields = line.split(',');
            let count = fields.next()?.trim();
            let _unit = fields.next()?;
            if fields.next()? != *event {
                return None;
            }
            match count {
                "<not counted>" => Some(Some(0)),
                _ => Some(count.parse::<u64>().ok()),
            }
        })??;
        Some(sum + count)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_both_sync_calls_and_counts_connects_from_perf_csv() {
        let output = "# started on Thu Dec  3 11:40:00 2026\n\n\
                      5,,syscalls:sys_enter_fsync,30000981,100.00,,\n\
                      1234,,syscalls:sys_enter_fdatasync,30000981,100.00,,\n\
                      3,,syscalls:sys_enter_connect,30000981,100.00,,\n\
                      900,,syscalls:sys_enter_epoll_wait,30000981,100.00,,\n\
                      2000,,syscalls:sys_enter_futex,30000981,100.00,,\n\
                      40,,syscalls:sys_enter_pwrite64,30000981,100.00,,\n\
                      8,,syscalls:sys_enter_fcntl,30000981,100.00,,\n";
        assert_eq!(
            parse(output),
            Some(Counts {
                syncs: 1239,
                connects: 3,
                epoll_waits: 900,
                futexes: 2000,
                pwrites: 40,
                fcntls: 8,
            })
        );
    }

    #[test]
    fn not_counted_is_zero_and_not_supported_is_no_count() {
        let idle = "<not counted>,,syscalls:sys_enter_fsync,0,100.00,,\n\
                    7,,syscalls:sys_enter_fdatasync,30000981,100.00,,\n\
                    <not counted>,,syscalls:sys_enter_connect,0,100.00,,\n\
                    <not counted>,,syscalls:sys_enter_epoll_wait,0,100.00,,\n\
                    <not counted>,,syscalls:sys_enter_futex,0,100.00,,\n\
                    <not counted>,,syscalls:sys_enter_pwrite64,0,100.00,,\n\
                    <not counted>,,syscalls:sys_enter_fcntl,0,100.00,,\n";
        assert_eq!(
            parse(idle),
            Some(Counts {
                syncs: 7,
                connects: 0,
                epoll_waits: 0,
                futexes: 0,
                pwrites: 0,
                fcntls: 0,
            })
        );
        let refused = "<not supported>,,syscalls:sys_enter_fsync,0,100.00,,\n\
                       7,,syscalls:sys_enter_fdatasync,30000981,100.00,,\n\
                       0,,syscalls:sys_enter_connect,0,100.00,,\n";
        assert_eq!(parse(refused), None);
        assert_eq!(parse("perf: command not found"), None);
    }
}
