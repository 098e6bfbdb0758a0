//! A window process started ahead, waiting: the reopen without the window's process start
//! (issue 12).
//!
//! A cold start of `countersign-desktop` spends ~50–60 ms before `main` (exec, mapping ~150
//! GTK/WebKit libraries, their relocations and constructors) on a 2-vCPU machine, before any of
//! the window's own work. So the resident keeps one window process started ahead: run with
//! [`FLAG`], it goes as far as `main`, gives back the pages of its libraries that the kernel can
//! read again from the page cache ([`trim`]), and waits on its stdin, touching nothing: no GTK,
//! no display, no WebKit process. When the person asks for the window, the resident
//! writes the arguments it would have started a process with ([`encode`]) and closes the pipe;
//! the waiting process reads them ([`wait`]) and goes on as if just started with them. When the
//! resident ends (however: a Quit, a crash, `kill -9`), the pipe closes with nothing written and
//! the waiting process ends.
//!
//! What it costs: the waiting process keeps what the relocations wrote (the libraries' GOTs and
//! relocated data) and what the libraries' constructors allocated, ~12 MiB RSS on Debian 12's
//! WebKitGTK 2.50; ~22 MiB where, without a GPU, it also loads the GL driver ahead (src-tauri
//! `rendering.rs`), measured with the whole background footprint (`.ci/e2e/footprint.sh`). Off
//! with `COUNTERSIGN_WINDOW_READY=0` ([`SWITCH`]).

use std::io::Read;

/// The flag the resident starts a waiting window process with (its only argument).
pub const FLAG: &str = "--ready";

/// `COUNTERSIGN_WINDOW_READY=0`: the resident keeps no window process waiting (every Open is a
/// cold start).
pub const SWITCH: &str = "COUNTERSIGN_WINDOW_READY";

/// What a window process is called while it waits (its `comm`, as `ps` and `top` show it); it
/// takes its own name back when asked for the window.
pub const WAITING_NAME: &str = "countersign-rdy";

/// The longest request a waiting process reads (a page and a link are a few hundred bytes).
pub const MAX_REQUEST: usize = 64 * 1024;

/// Whether the resident keeps a window process waiting, given [`SWITCH`]'s value.
pub fn enabled(switch: Option<&str>) -> bool {
    switch.is_none_or(|v| v.trim() != "0")
}

/// A request a waiting window process cannot follow.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    /// More than [`MAX_REQUEST`] bytes.
    #[error("the request for the window is over {MAX_REQUEST} bytes")]
    TooLong,
    /// An argument is not UTF-8.
    #[error("the request for the window has an argument that is not UTF-8")]
    NotUtf8,
    /// Reading the pipe failed.
    #[error("cannot read the request for the window: {0}")]
    Read(String),
}

/// The request: each argument followed by a NUL (no argument of a command line can hold one),
/// then a newline, which marks it complete.
pub fn encode(args: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(args.iter().map(|a| a.len() + 1).sum::<usize>() + 1);
    for arg in args {
        out.extend_from_slice(arg.as_bytes());
        out.push(0);
    }
    out.push(b'\n');
    out
}

/// The arguments in `bytes`, everything the pipe held. `None` when it holds no complete request
/// (nothing written: the resident ended; a request cut short: it ended while writing): the
/// window is not wanted.
pub fn decode(bytes: &[u8]) -> Result<Option<Vec<String>>, RequestError> {
    let Some(body) = bytes.strip_suffix(b"\n") else {
        return Ok(None);
    };
    if body.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let Some(args) = body.strip_suffix(&[0]) else {
        return Ok(None);
    };
    args.split(|&b| b == 0)
        .map(|arg| {
            std::str::from_utf8(arg)
                .map(str::to_owned)
                .map_err(|_| RequestError::NotUtf8)
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Waits for the request on `pipe` until it closes; see [`decode`].
pub fn wait(pipe: impl Read) -> Result<Option<Vec<String>>, RequestError> {
    let mut bytes = Vec::new();
    pipe.take(MAX_REQUEST as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| RequestError::Read(e.to_string()))?;
    if bytes.len() > MAX_REQUEST {
        return Err(RequestError::TooLong);
    }
    decode(&bytes)
}

/// Waits as a window process started ahead: gives back the pages the page cache holds
/// ([`trim`]), goes by [`WAITING_NAME`], and reads the request on stdin ([`wait`]); takes its own
/// name back before it returns.
pub fn wait_for_request() -> Result<Option<Vec<String>>, RequestError> {
    trim();
    let own = rename(WAITING_NAME);
    let asked = wait(std::io::stdin().lock());
    if let Some(own) = own {
        rename(&own);
    }
    asked
}

/// Names the calling thread `name` (at most 15 bytes are kept); its name before, when it can be
/// read.
#[cfg(target_os = "linux")]
pub fn rename(name: &str) -> Option<String> {
    let mut before = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into the buffer given.
    let got = unsafe { libc::prctl(libc::PR_GET_NAME, before.as_mut_ptr()) } == 0;
    let mut name: Vec<u8> = name.bytes().filter(|&b| b != 0).take(15).collect();
    name.push(0);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes; `name` is one.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
    got.then(|| {
        let end = before.iter().position(|&b| b == 0).unwrap_or(before.len());
        String::from_utf8_lossy(&before[..end]).into_owned()
    })
}

/// Elsewhere: no name to change.
#[cfg(not(target_os = "linux"))]
pub fn rename(_name: &str) -> Option<String> {
    None
}

/// The code files a waiting process runs that are gone from the disk since it started
/// (`/proc/PID/maps` marks them ` (deleted)`): an upgrade replaced the executable or a library
/// (WebKit's, say) while it waited. Such a process would pair the old library with the new
/// WebKit helper processes it starts, so it is not handed a request: a cold start takes the
/// Open. Only executable mappings count (a deleted shared-memory file is no upgrade).
pub fn replaced_on_disk(maps: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in maps.lines() {
        let mut fields = line.splitn(6, char::is_whitespace);
        let (Some(_range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let path = fields.nth(3).unwrap_or("").trim_start();
        let Some(file) = path.strip_suffix(" (deleted)") else {
            continue;
        };
        let executable = perms.as_bytes().get(2) == Some(&b'x');
        let code_file = executable && file.starts_with('/') && !file.starts_with("/memfd:");
        if code_file && !out.iter().any(|f| f == file) {
            out.push(file.to_owned());
        }
    }
    out
}

/// What [`trim`] gave back.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Trimmed {
    /// Mappings given back.
    pub mappings: usize,
    /// Their resident bytes before.
    pub bytes: u64,
}

/// One mapping of `/proc/PID/smaps` that can be given back: mapped from a file, read-only,
/// resident, and holding no page of its own (what it maps is the file's, in the page cache). A
/// writable mapping is never one: a page written between reading smaps and giving the mapping
/// back would be lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Droppable {
    /// Its first address.
    pub start: usize,
    /// Its length in bytes.
    pub len: usize,
    /// Its resident bytes.
    pub rss: u64,
}

/// The mappings of `smaps` (the text of `/proc/PID/smaps`) that [`trim`] gives back.
pub fn droppable(smaps: &str) -> Vec<Droppable> {
    let mut out = Vec::new();
    // The mapping being read: (start, end, from a file), its Rss and Anonymous so far.
    let mut current: Option<(usize, usize, bool)> = None;
    let (mut rss, mut anonymous) = (None::<u64>, None::<u64>);
    let mut finish =
        |current: Option<(usize, usize, bool)>, rss: Option<u64>, anon: Option<u64>| {
            if let (Some((start, end, true)), Some(rss), Some(0)) = (current, rss, anon) {
                if rss > 0 && end > start {
                    out.push(Droppable {
                        start,
                        len: end - start,
                        rss,
                    });
                }
            }
        };
    for line in smaps.lines() {
        if let Some(header) = mapping_header(line) {
            finish(current, rss, anonymous);
            current = Some(header);
            (rss, anonymous) = (None, None);
        } else if let Some(kb) = field_kb(line, "Rss:") {
            rss = Some(kb * 1024);
        } else if let Some(kb) = field_kb(line, "Anonymous:") {
            anonymous = Some(kb);
        }
    }
    finish(current, rss, anonymous);
    out
}

/// `start-end perms offset dev inode [path]`: (start, end, mapped read-only from a file).
fn mapping_header(line: &str) -> Option<(usize, usize, bool)> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    if perms.len() != 4 {
        return None;
    }
    let writable = perms.as_bytes()[1] == b'w';
    let _offset = fields.next()?;
    let _dev = fields.next()?;
    let inode: u64 = fields.next()?.parse().ok()?;
    let path = fields.next().unwrap_or("");
    Some((start, end, !writable && inode != 0 && path.starts_with('/')))
}

/// `name   N kB`: N.
fn field_kb(line: &str, name: &str) -> Option<u64> {
    let rest = line.strip_prefix(name)?;
    rest.trim().strip_suffix("kB")?.trim().parse().ok()
}

/// Gives back the resident pages of this process's file mappings that hold nothing of its own
/// ([`droppable`]): the kernel unmaps them (`MADV_DONTNEED`), they stay in the page cache, and a
/// later touch maps them again without reading the disk. Pages a relocation or a constructor
/// wrote are this process's and stay. Only for a process about to wait: it makes the next touch
/// of each page a (minor) fault.
#[cfg(target_os = "linux")]
pub fn trim() -> Trimmed {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return Trimmed::default();
    };
    let mut trimmed = Trimmed::default();
    for m in droppable(&smaps) {
        // SAFETY: the range is a whole mapping of this process, read from its own smaps just
        // now; nothing maps or unmaps beside this thread meanwhile (the only other threads a
        // waiting process has are the GL driver's idle workers, when it was loaded ahead:
        // src-tauri rendering.rs). MADV_DONTNEED on a read-only file mapping that holds no
        // private page changes no content: the next access maps the same file page again.
        let done =
            unsafe { libc::madvise(m.start as *mut libc::c_void, m.len, libc::MADV_DONTNEED) };
        if done == 0 {
            trimmed.mappings += 1;
            trimmed.bytes += m.rss;
        }
    }
    trimmed
}

/// Elsewhere: nothing to give back.
#[cfg(not(target_os = "linux"))]
pub fn trim() -> Trimmed {
    Trimmed::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_replaced_on_disk_is_found_and_nothing_else_is() {
        let maps = "\
55d0c0a00000-55d0c0b00000 r-xp 00001000 08:01 131 /usr/bin/countersign-desktop
7f10a0000000-7f10a2000000 r-xp 00200000 08:01 262 /usr/lib/x86_64-linux-gnu/libwebkit2gtk-4.1.so.0.17.3 (deleted)
7f10a2000000-7f10a2100000 r--p 02200000 08:01 262 /usr/lib/x86_64-linux-gnu/libwebkit2gtk-4.1.so.0.17.3 (deleted)
7f10a3000000-7f10a3100000 r-xp 00000000 08:01 263 /usr/lib/x86_64-linux-gnu/libwebkit2gtk-4.1.so.0.17.3 (deleted)
7f10a4000000-7f10a4100000 rw-s 00000000 00:01 12 /memfd:mesa-shader (deleted)
7f10a5000000-7f10a5100000 r-xs 00000000 00:01 13 /memfd:jit (deleted)
7f10a6000000-7f10a6100000 rw-s 00000000 00:19 14 /dev/shm/scratch (deleted)
7f10a7000000-7f10a7100000 rw-p 00000000 00:00 0 
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
";
        assert_eq!(
            replaced_on_disk(maps),
            ["/usr/lib/x86_64-linux-gnu/libwebkit2gtk-4.1.so.0.17.3"]
        );
        assert!(replaced_on_disk(
            "55d0c0a00000-55d0c0b00000 r-xp 00001000 08:01 131 /usr/bin/a b\n"
        )
        .is_empty());
        assert!(replaced_on_disk("").is_empty());
    }

    #[test]
    fn the_code_of_a_running_process_replaced_on_disk_is_seen_in_its_maps() {
        // A real process running a copy of `sleep` that is then deleted, as an upgrade leaves it.
        let dir = std::env::temp_dir().join(format!("countersign-upgrade-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let copy = dir.join("sleep");
        std::fs::copy("/bin/sleep", &copy).expect("a copy of sleep");
        let mut child = std::process::Command::new(&copy)
            .arg("30")
            .spawn()
            .expect("runs");
        let maps = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
        let mut seen = String::new();
        for _ in 0..200 {
            seen = maps(child.id());
            if seen.contains(copy.to_str().expect("utf-8")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            replaced_on_disk(&seen).is_empty(),
            "nothing replaced yet: {seen}"
        );
        std::fs::remove_file(&copy).expect("deleted");
        let after = replaced_on_disk(&maps(child.id()));
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(after, [copy.to_str().expect("utf-8")]);
    }

    #[test]
    fn a_request_round_trips_and_anything_short_of_one_is_no_request() {
        let args: Vec<String> = [
            "--data-dir",
            "/home/ada/Countersign data",
            "--asked-at=1764900000000",
            "--page",
            r#"{"page":"task","row":7}"#,
            "countersign://task/ci/42",
        ]
        .map(String::from)
        .into();
        let bytes = encode(&args);
        assert_eq!(decode(&bytes), Ok(Some(args.clone())));
        assert_eq!(wait(&bytes[..]), Ok(Some(args)));
        assert_eq!(
            decode(&encode(&[])),
            Ok(Some(vec![])),
            "no arguments at all"
        );
        assert_eq!(
            decode(&encode(&[String::new()])),
            Ok(Some(vec![String::new()])),
            "an empty argument is one"
        );
        // The resident ended without writing, or while writing.
        assert_eq!(decode(b""), Ok(None));
        assert_eq!(decode(b"--data-dir\0/tm"), Ok(None));
        assert_eq!(
            decode(b"--data-dir\0/tmp\n"),
            Ok(None),
            "the last argument unterminated"
        );
        assert_eq!(decode(b"--page\0\xff\0\n"), Err(RequestError::NotUtf8));
        let long = vec![b'a'; MAX_REQUEST + 1];
        assert_eq!(wait(&long[..]), Err(RequestError::TooLong));
    }

    #[test]
    fn the_switch_is_on_unless_it_says_0() {
        assert!(enabled(None));
        assert!(enabled(Some("1")));
        assert!(enabled(Some("")));
        assert!(!enabled(Some("0")));
        assert!(!enabled(Some(" 0\n")));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_takes_a_name_and_gives_the_old_one_back() {
        std::thread::Builder::new()
            .name("ready-test".into())
            .spawn(|| {
                assert_eq!(rename(WAITING_NAME).as_deref(), Some("ready-test"));
                let comm = |tid: i32| {
                    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).expect("comm")
                };
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                assert_eq!(comm(tid).trim_end(), WAITING_NAME);
                assert_eq!(rename("ready-test").as_deref(), Some(WAITING_NAME));
                assert_eq!(comm(tid).trim_end(), "ready-test");
                rename("a name far longer than fifteen bytes");
                assert_eq!(
                    comm(tid).trim_end(),
                    "a name far long",
                    "the kernel keeps 15 bytes"
                );
            })
            .expect("thread")
            .join()
            .expect("the test thread");
    }

    const SMAPS: &str = "\
55d0c0a00000-55d0c0a20000 r--p 00000000 fe:01 1311 /usr/bin/countersign-desktop
Size:                128 kB
Rss:                  64 kB
Anonymous:             0 kB
55d0c0a20000-55d0c0a30000 r--p 00020000 fe:01 1311 /usr/bin/countersign-desktop
Size:                 64 kB
Rss:                  64 kB
Anonymous:            64 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                 512 kB
Anonymous:           512 kB
7f0000100000-7f0000200000 r-xp 00000000 fe:01 2002 /usr/lib/x86_64-linux-gnu/libwebkit2gtk-4.1.so.0.18.6 (deleted)
Size:               1024 kB
Rss:                 256 kB
Anonymous:             0 kB
7f0000180000-7f0000190000 rw-p 00080000 fe:01 2002 /usr/lib/x86_64-linux-gnu/libwebkit2gtk-4.1.so.0.18.6 (deleted)
Size:                 64 kB
Rss:                   8 kB
Anonymous:             0 kB
7f0000200000-7f0000210000 r--p 00000000 fe:01 2003 /usr/lib/locale/C.utf8/LC_CTYPE
Size:                 64 kB
Rss:                   0 kB
Anonymous:             0 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  16 kB
Anonymous:            16 kB
7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   4 kB
Anonymous:             0 kB
";

    #[test]
    fn only_resident_read_only_file_mappings_with_no_page_of_their_own_are_given_back() {
        assert_eq!(
            droppable(SMAPS),
            [
                Droppable {
                    start: 0x55d0c0a00000,
                    len: 0x20000,
                    rss: 64 * 1024
                },
                Droppable {
                    start: 0x7f0000100000,
                    len: 0x100000,
                    rss: 256 * 1024
                },
            ]
        );
        assert!(droppable("").is_empty());
        assert!(droppable("not smaps\nRss: 4 kB\n").is_empty());
    }

    /// A real file mapping of this process: its read pages are given back and read again
    /// unchanged; a private mapping that was written keeps what was written.
    #[cfg(target_os = "linux")]
    #[test]
    fn trimming_gives_back_read_pages_and_keeps_written_ones() {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!("countersign-ready-{}", std::process::id()));
        let pages = 16;
        let page = 4096;
        let content: Vec<u8> = (0..pages * page).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        let map = |prot| {
            // SAFETY: a fresh private mapping of a file this test owns, unmapped below.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    content.len(),
                    prot,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED, "mmap");
            p.cast::<u8>()
        };
        let read = map(libc::PROT_READ);
        let written = map(libc::PROT_READ | libc::PROT_WRITE);
        // SAFETY: both mappings are content.len() bytes long and live until the munmaps below.
        let (read_view, written_view) = unsafe {
            (
                std::slice::from_raw_parts(read, content.len()),
                std::slice::from_raw_parts_mut(written, content.len()),
            )
        };
        let sum: u64 = read_view.iter().step_by(page).map(|&b| u64::from(b)).sum();
        assert_eq!(
            sum,
            content
                .iter()
                .step_by(page)
                .map(|&b| u64::from(b))
                .sum::<u64>()
        );
        written_view[page] = 0xAA;
        let rss_of = |addr: *mut u8| {
            let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
            let start = format!("{:x}-", addr as usize);
            let block = smaps
                .split_inclusive('\n')
                .skip_while(|l| !l.starts_with(&start))
                .take_while({
                    let mut first = true;
                    move |l| std::mem::take(&mut first) || mapping_header(l).is_none()
                })
                .collect::<String>();
            block
                .lines()
                .find_map(|l| field_kb(l, "Rss:"))
                .expect("the mapping in smaps")
        };
        assert!(rss_of(read) >= 4, "read pages are resident");
        let trimmed = trim();
        assert!(
            trimmed.mappings >= 1 && trimmed.bytes >= 4096,
            "{trimmed:?}"
        );
        assert_eq!(rss_of(read), 0, "the read mapping was given back");
        assert_eq!(
            read_view,
            &content[..],
            "and reads the file again, unchanged"
        );
        assert_eq!(written_view[page], 0xAA, "a written page is kept");
        assert_eq!(written_view[0], content[0]);
        // SAFETY: the two mappings made above, not used after this.
        unsafe {
            libc::munmap(read.cast(), content.len());
            libc::munmap(written.cast(), content.len());
        }
        let _ = std::fs::remove_file(&path);
    }
}
