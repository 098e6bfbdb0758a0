//! The sweep for what a killed engine left behind. The server process itself dies with its
//! engine (PR_SET_PDEATHSIG), and a child of it that reads its stdin sees it close; a child that
//! does neither would live on. Every process we start carries its engine's pid in
//! [`OWNER_VAR`], inherited by whatever it starts, so the next engine finds and ends them.

use super::sys::{self, Signal};

/// The environment variable naming the pid of the engine that started a server.
pub const OWNER_VAR: &str = "COUNTERSIGN_STDIO_OWNER";

/// Kills (SIGKILL) every process whose [`OWNER_VAR`] names a pid that no longer runs, and
/// returns how many. Linux only (it reads `/proc`); elsewhere it finds none.
pub fn sweep() -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let prefix = format!("{OWNER_VAR}=");
    let mut killed = 0;
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue; // gone, or not ours to read
        };
        let owner = environ
            .split(|b| *b == 0)
            .find_map(|v| v.strip_prefix(prefix.as_bytes()))
            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u32>().ok());
        let Some(owner) = owner else { continue };
        if owner == std::process::id() || std::path::Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        sys::signal_process(pid, Signal::Kill);
        killed += 1;
    }
    killed
}
