//! What a process costs, read the way `top` does: CPU from `/proc/self/stat` (utime + stime, in
//! clock ticks) and memory from `/proc/self/status` (`VmHWM`, the peak resident set).
//! The Python client reads the same files the same way, so both columns mean the same thing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// A reading of this process.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// User + system CPU time since the process started.
    pub cpu: Duration,
    /// Peak resident set size (KiB) since start or the last [`reset_peak`].
    pub peak_rss_kb: u64,
}

// The clock-tick rate has no safe std API; one libc call, no preconditions.
#[allow(unsafe_code)]
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions; it only reads a constant of the running system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// utime + stime from the text of a `/proc/<pid>/stat` file.
pub(crate) fn cpu_from_stat(stat: &str) -> Option<Duration> {
    // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')' comes field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = ticks_per_second();
    Some(Duration::from_micros((utime + stime) * 1_000_000 / ticks))
}

/// The value in KiB of a `Name:   123 kB` line of `/proc/<pid>/status`.
pub(crate) fn status_kb(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

/// Reads this process's CPU time and memory.
pub fn own() -> Result<Usage> {
    let read = |path: &str| {
        std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {path}"), e))
    };
    let stat = read("/proc/self/stat")?;
    let status = read("/proc/self/status")?;
    let unreadable = |what: &str| Error::Unexpected(format!("cannot read {what} from /proc/self"));
    Ok(Usage {
        cpu: cpu_from_stat(&stat).ok_or_else(|| unreadable("utime/stime"))?,
        peak_rss_kb: status_kb(&status, "VmHWM").ok_or_else(|| unreadable("VmHWM"))?,
    })
}

/// CPU time (utime + stime) of another process so far; `None` once it is gone.
pub fn cpu_of(pid: u32) -> Option<Duration> {
    cpu_from_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Restarts the peak-RSS measurement (`VmHWM` := current RSS), so a steady window can be
/// measured apart from the creation burst before it. Returns false where the kernel refuses.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// CPU used between two readings, as a percentage of one core over `wall`.
pub fn cpu_percent(before: &Usage, after: &Usage, wall: Duration) -> f64 {
    if wall.is_zero() {
        return 0.0;
    }
    after.cpu.saturating_sub(before.cpu).as_secs_f64() / wall.as_secs_f64() * 100.0
}

/// Wall-clock now in Unix microseconds (system clock).
pub fn system_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_a_hostile_command_name() {
        let stat = "4242 (a) b (c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0";
        let cpu = cpu_from_stat(stat).expect("fields 14 and 15 are there");
        assert_eq!(
            cpu,
            Duration::from_micros(300 * 1_000_000 / ticks_per_second())
        );
    }

    #[test]
    fn reads_kib_lines_of_status() {
        let status = "Name:\tx\nVmHWM:\t   13516 kB\nVmRSS:\t  9000 kB\n";
        assert_eq!(status_kb(status, "VmHWM"), Some(13_516));
        assert_eq!(status_kb(status, "VmRSS"), Some(9_000));
        assert_eq!(status_kb(status, "VmSwap"), None);
    }

    #[test]
    fn own_process_is_readable() {
        let usage = own().expect("/proc/self is readable on Linux");
        assert!(usage.peak_rss_kb > 0, "{usage:?}");
    }
}
