//! The command line and environment: where the ledger is, whether to run the demo. The flags the
//! resident shares are read by [`countersign_desktop_ipc::launch`]; `--page`, `--background`
//! and `--asked-at` are the window's.

use std::path::PathBuf;
use std::time::Instant;

pub use countersign_desktop_ipc::launch::unix_ms;
use countersign_desktop_ipc::launch::{Flags, UsageError};
use countersign_desktop_ipc::Page;

use crate::Error;

/// What the command line and environment ask for.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--data-dir DIR` / `COUNTERSIGN_DATA_DIR`; default: the platform data directory.
    pub data_dir: PathBuf,
    /// `--demo` / `COUNTERSIGN_DEMO=1`; `COUNTERSIGN_DEMO_SPEED` speeds the demo up.
    pub demo: Option<f64>,
    /// A `countersign://` link to open (the desktop entry passes it as the argument).
    pub link: Option<String>,
    /// `--gateway PORT` / `COUNTERSIGN_GATEWAY_PORT`: run the local MCP gateway on
    /// 127.0.0.1:PORT (0: any free port), so agents' calls wait for approval in this app.
    pub gateway: Option<u16>,
    /// `--background`: only make sure the resident runs (tray, engine, notifications), no
    /// window.
    pub background: bool,
    /// `--page JSON`: the page to open (the resident passes it: a notification's question).
    pub page: Option<Page>,
    /// `--asked-at=UNIX_MS`: when the resident was asked for this window (the reopen time).
    pub asked_at: Option<u128>,
    /// The resident's executable, to start it and to start it again after a crash:
    /// `COUNTERSIGN_RESIDENT`, else `countersign-resident` beside this executable. Read once
    /// here, so nothing sets the environment while threads run.
    pub resident: PathBuf,
}

/// Reads `--page`'s value.
pub fn page(json: &str) -> Result<Page, Error> {
    serde_json::from_str(json).map_err(|e| usage(format!("--page: not a page: {e}")))
}

/// A command line this process cannot follow.
fn usage(message: impl Into<String>) -> Error {
    Error::Usage(UsageError(message.into()))
}

impl Options {
    /// Parses `args` (without the program name) over the environment.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, Error> {
        let mut flags = Flags::from_env()?;
        let mut background = false;
        let mut page_asked = None;
        let mut asked_at = None;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if flags.take(&arg, &mut args)? {
                continue;
            }
            match arg.as_str() {
                "--background" => background = true,
                "--page" => {
                    let json = args
                        .next()
                        .ok_or_else(|| usage("--page needs a page"))?;
                    page_asked = Some(page(&json)?);
                }
                other if other.starts_with("--asked-at=") => {
                    let ms = &other["--asked-at=".len()..];
                    asked_at = Some(ms.parse::<u128>().map_err(|_| {
                        usage(format!("--asked-at needs unix milliseconds, not {ms:?}"))
                    })?);
                }
                "-h" | "--help" => return Err(usage(
                    "usage: countersign-desktop [--data-dir DIR] [--demo] [--gateway PORT] [--background] [--page JSON] [countersign://task/…]",
                )),
                other => return Err(usage(format!("unknown argument {other:?}"))),
            }
        }
        let shared = flags.finish();
        Ok(Self {
            data_dir: shared.data_dir,
            demo: shared.demo,
            link: shared.link,
            gateway: shared.gateway,
            background,
            page: page_asked,
            asked_at,
            resident: crate::resident::resident_exe(),
        })
    }
}

/// When the process started, to report the time to first paint.
#[derive(Debug, Clone, Copy)]
pub struct Launch {
    /// Monotonic start.
    pub at: Instant,
    /// The same moment in unix milliseconds: lines the resident's request and the webview's
    /// timestamps up with this process's phases (the cold-start budget).
    pub wall_ms: u128,
    /// When the resident was asked for this window (unix ms), if it started it.
    pub asked_at_ms: Option<u128>,
}

impl Launch {
    /// Now.
    pub fn now() -> Self {
        Self {
            at: Instant::now(),
            wall_ms: unix_ms(),
            asked_at_ms: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, Error> {
        Options::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn data_dir_and_demo_come_from_the_command_line() {
        let o = parse(&["--data-dir", "/tmp/x", "--demo"]).expect("valid");
        assert_eq!(o.data_dir, PathBuf::from("/tmp/x"));
        assert!(o.demo.is_some());
        assert_eq!(
            parse(&["--data-dir=/tmp/y"]).expect("valid").data_dir,
            PathBuf::from("/tmp/y")
        );
        assert!(matches!(parse(&["--data-dir"]), Err(Error::Usage(_))));
        assert!(matches!(parse(&["--bogus"]), Err(Error::Usage(_))));
        let with_link = parse(&["--data-dir", "/tmp/x", "countersign://task/demo/t"]);
        assert_eq!(
            with_link.expect("valid").link.as_deref(),
            Some("countersign://task/demo/t")
        );
        let from_resident = parse(&[
            "--page",
            r#"{"page":"inbox","question":[3,"k"]}"#,
            "--asked-at=1700000000000",
        ])
        .expect("valid");
        assert_eq!(
            from_resident.page,
            Some(Page::Inbox {
                question: Some((3, "k".into()))
            })
        );
        assert_eq!(from_resident.asked_at, Some(1_700_000_000_000));
        assert!(matches!(
            parse(&["--page", "alert(1)"]),
            Err(Error::Usage(_))
        ));
    }
}
