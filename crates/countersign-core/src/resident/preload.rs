//! The window process's dynamic linking, made cheaper: part of the reopen time (issue 12).
//!
//! WebKitGTK links the flite speech synthesiser, and one of flite's voices,
//! `libflite_cmu_time_awb.so.1`, exports 31,290 symbols that its own data refers to by name.
//! In the window process they were 31,288 of the ~72,000 symbol relocations the dynamic linker
//! resolved before `main`, each looked up through the ~80 libraries ahead of the voice in the
//! lookup scope: 18 ms of the ~70 ms of CPU a start of `countersign-desktop` spent before
//! `main` (median of 15, `perf stat`), and the same again in its web and network processes,
//! which link WebKit too. Preloaded, the voice is first in the scope and each lookup ends
//! there. Nothing else changes: no other library in those processes defines any of the voice's
//! names, so every symbol binds where it did.
//!
//! The resident starts the window process with `LD_PRELOAD` naming the voice as the dynamic
//! linker resolves it for that executable ([`hot_libraries`]), before the person's own
//! `LD_PRELOAD`, and says which entries are ours in [`OURS`]. WebKit's processes inherit the
//! window's environment, so they get it too; every other program the window process starts (the
//! resident again, a browser) gets the environment back as the person had it ([`restore`]).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The libraries worth preloading, by soname: those whose symbols the dynamic linker looks up
/// most, deep in the scope (measured with `LD_DEBUG=bindings`; README, "Measurements").
pub const HOT_LIBRARIES: &[&str] = &["libflite_cmu_time_awb.so.1"];

/// The dynamic linker's preload list.
pub const LD_PRELOAD: &str = "LD_PRELOAD";

/// Which leading entries of `LD_PRELOAD` the resident put there (`:`-separated), so the window
/// process can take them out again for the programs it starts.
pub const OURS: &str = "COUNTERSIGN_PRELOAD";

/// The [`HOT_LIBRARIES`] that `exe` loads, where the dynamic linker finds them for it. Asks the
/// dynamic linker this process runs under (`ld.so --list exe`: it maps the libraries and prints
/// them; nothing of `exe` runs). Empty when anything is off: another dynamic linker, `exe`
/// missing or static, or none of them among its libraries.
pub fn hot_libraries(exe: &Path) -> Vec<PathBuf> {
    let Some(loader) = own_loader() else {
        return Vec::new();
    };
    let listed = Command::new(loader)
        .arg("--list")
        .arg(exe)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match listed {
        Ok(out) if out.status.success() => parse_list(&String::from_utf8_lossy(&out.stdout)),
        _ => Vec::new(),
    }
}

/// The glibc dynamic linker this process was loaded by (`ld-linux*.so*` in its own mappings).
fn own_loader() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            Path::new(path)
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("ld-linux"))
        })
        .map(PathBuf::from)
}

/// The [`HOT_LIBRARIES`] in the dynamic linker's list (`\tsoname => /path (0x…)` lines), in
/// the list's order. A path that `LD_PRELOAD` cannot carry (relative, or with a `:` or a space,
/// its separators) is left out.
pub fn parse_list(list: &str) -> Vec<PathBuf> {
    list.lines()
        .filter_map(|line| {
            let (soname, rest) = line.trim().split_once(" => ")?;
            if !HOT_LIBRARIES.contains(&soname) {
                return None;
            }
            let path = rest.rsplit_once(" (").map_or(rest, |(path, _)| path);
            (path.starts_with('/') && !path.contains([':', ' '])).then(|| PathBuf::from(path))
        })
        .collect()
}

/// `LD_PRELOAD` and [`OURS`] for the window process: `ours` first, then the person's own
/// `theirs`. `None` when there is nothing of ours to add.
pub fn preload_vars(ours: &[PathBuf], theirs: Option<&OsStr>) -> Option<(OsString, OsString)> {
    if ours.is_empty() {
        return None;
    }
    let mut joined = OsString::new();
    for (i, path) in ours.iter().enumerate() {
        if i > 0 {
            joined.push(":");
        }
        joined.push(path);
    }
    let mut preload = joined.clone();
    if let Some(theirs) = theirs.filter(|t| !t.is_empty()) {
        preload.push(":");
        preload.push(theirs);
    }
    Some((preload, joined))
}

/// `LD_PRELOAD` as the person had it: `preload` without the leading `ours`. `None`: unset.
/// A `preload` that no longer starts with `ours` (changed since) is kept as it is.
pub fn restored(preload: Option<&OsStr>, ours: &OsStr) -> Option<OsString> {
    let preload = preload?;
    let (bytes, ours) = (preload.as_bytes(), ours.as_bytes());
    if ours.is_empty() || !bytes.starts_with(ours) {
        return Some(preload.to_owned());
    }
    match &bytes[ours.len()..] {
        [] | [b':' | b' '] => None,
        [b':' | b' ', rest @ ..] => Some(OsStr::from_bytes(rest).to_owned()),
        // `ours` was only the start of a longer entry: not ours.
        _ => Some(preload.to_owned()),
    }
}

/// Starts `command` (the window process) with the hot libraries `ours` preloaded.
pub fn apply(command: &mut Command, ours: &[PathBuf]) {
    let theirs = std::env::var_os(LD_PRELOAD);
    if let Some((preload, joined)) = preload_vars(ours, theirs.as_deref()) {
        command.env(LD_PRELOAD, preload).env(OURS, joined);
    }
}

/// Gives `command` the environment without this process's preload (when the resident gave it
/// one): for every program the window process starts other than WebKit's own processes.
pub fn restore(command: &mut Command) {
    let Some(ours) = std::env::var_os(OURS) else {
        return;
    };
    command.env_remove(OURS);
    match restored(std::env::var_os(LD_PRELOAD).as_deref(), &ours) {
        Some(theirs) => command.env(LD_PRELOAD, theirs),
        None => command.env_remove(LD_PRELOAD),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "\tlinux-vdso.so.1 (0x00007ffc6b1f2000)
\tlibgdk-3.so.0 => /lib/x86_64-linux-gnu/libgdk-3.so.0 (0x00007f0a1c000000)
\tlibflite_cmu_time_awb.so.1 => /lib/x86_64-linux-gnu/libflite_cmu_time_awb.so.1 (0x00007f0a10000000)
\tlibflite.so.1 => /lib/x86_64-linux-gnu/libflite.so.1 (0x00007f0a0f000000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0a1d000000)
";

    #[test]
    fn the_hot_libraries_come_from_the_dynamic_linkers_list() {
        assert_eq!(
            parse_list(LIST),
            vec![PathBuf::from(
                "/lib/x86_64-linux-gnu/libflite_cmu_time_awb.so.1"
            )]
        );
        assert!(parse_list("\tlibgdk-3.so.0 => /lib/libgdk-3.so.0 (0x1)\n").is_empty());
        // Not found, or a path LD_PRELOAD would split: not preloaded.
        for line in [
            "\tlibflite_cmu_time_awb.so.1 => not found",
            "\tlibflite_cmu_time_awb.so.1 => /opt/my libs/libflite_cmu_time_awb.so.1 (0x1)",
            "\tlibflite_cmu_time_awb.so.1 => /opt/a:b/libflite_cmu_time_awb.so.1 (0x1)",
        ] {
            assert!(parse_list(line).is_empty(), "{line}");
        }
    }

    #[test]
    fn ours_go_first_and_the_persons_own_preload_comes_back_unchanged() {
        let ours = [PathBuf::from("/lib/hot.so.1")];
        assert_eq!(preload_vars(&[], Some(OsStr::new("/x.so"))), None);
        let (alone, joined) = preload_vars(&ours, None).expect("vars");
        assert_eq!(
            (alone.as_os_str(), joined.as_os_str()),
            (OsStr::new("/lib/hot.so.1"), OsStr::new("/lib/hot.so.1"))
        );
        assert_eq!(restored(Some(&alone), &joined), None);

        let (both, joined) =
            preload_vars(&ours, Some(OsStr::new("/home/p/theirs.so"))).expect("vars");
        assert_eq!(both, "/lib/hot.so.1:/home/p/theirs.so");
        assert_eq!(
            restored(Some(&both), &joined).as_deref(),
            Some(OsStr::new("/home/p/theirs.so"))
        );

        // Changed since, or only a prefix of another entry: left as it is.
        for kept in ["/other.so", "/lib/hot.so.10", "/lib/hot.so.1x:/y.so"] {
            assert_eq!(
                restored(Some(OsStr::new(kept)), &joined).as_deref(),
                Some(OsStr::new(kept))
            );
        }
        assert_eq!(restored(None, &joined), None);
    }

    #[test]
    fn the_window_executable_is_listed_without_running_it() {
        // This test's own executable: dynamically linked, so the dynamic linker lists its
        // libraries (none of them hot) and exits 0 without running a test again.
        let exe = std::env::current_exe().expect("test executable");
        let loader = own_loader().expect("a glibc dynamic linker");
        let out = Command::new(&loader)
            .arg("--list")
            .arg(&exe)
            .output()
            .expect("ld.so --list");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("libc.so"));
        assert!(hot_libraries(&exe).is_empty());
        assert!(hot_libraries(Path::new("/nonexistent/countersign-desktop")).is_empty());
    }
}
