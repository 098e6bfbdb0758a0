//! The command line and environment (the same names as the app's: the app hands its own
//! `--data-dir`, `--demo` and `--gateway` over when it starts the resident). The shared flags are
//! read by [`countersign_desktop_ipc::launch`]; `--quit` and `--background` are the resident's.

use std::path::PathBuf;

use countersign_desktop_ipc::launch::{Flags, UsageError};

use crate::Error;

/// What the command line and environment ask for.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--data-dir DIR` / `COUNTERSIGN_DATA_DIR`; default: the platform data directory.
    pub data_dir: PathBuf,
    /// `--demo` / `COUNTERSIGN_DEMO=1`; `COUNTERSIGN_DEMO_SPEED` speeds the demo up.
    pub demo: Option<f64>,
    /// `--gateway PORT` / `COUNTERSIGN_GATEWAY_PORT`: run the local MCP gateway on
    /// 127.0.0.1:PORT (0: any free port) for this run, whatever the setting says.
    pub gateway: Option<u16>,
    /// A `countersign://` link to open in a window.
    pub link: Option<String>,
    /// `--quit`: ask the resident on this data directory to end (and its windows), then exit.
    pub quit: bool,
}

const USAGE: &str = "usage: countersign-resident [--data-dir DIR] [--demo] [--gateway PORT] [--background] [--quit] [countersign://task/…]";

/// A command line this process cannot follow.
fn usage(message: impl Into<String>) -> Error {
    Error::Usage(UsageError(message.into()))
}

impl Options {
    /// Parses `args` (without the program name) over the environment.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, Error> {
        let mut flags = Flags::from_env()?;
        let mut quit = false;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if flags.take(&arg, &mut args)? {
                continue;
            }
            match arg.as_str() {
                "--quit" => quit = true,
                // How start at login launches it; the resident never opens a window by itself.
                "--background" => {}
                "-h" | "--help" => return Err(usage(USAGE)),
                other => return Err(usage(format!("unknown argument {other:?}; {USAGE}"))),
            }
        }
        let shared = flags.finish();
        Ok(Self {
            data_dir: shared.data_dir,
            demo: shared.demo,
            gateway: shared.gateway,
            link: shared.link,
            quit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, Error> {
        Options::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn the_apps_flags_are_understood_and_anything_else_is_refused() {
        let o = parse(&[
            "--data-dir",
            "/tmp/x",
            "--demo",
            "--gateway",
            "0",
            "--background",
        ])
        .expect("valid");
        assert_eq!(o.data_dir, PathBuf::from("/tmp/x"));
        assert!(o.demo.is_some());
        assert_eq!(o.gateway, Some(0));
        assert!(!o.quit);
        let o =
            parse(&["--data-dir=/tmp/y", "--quit", "countersign://task/demo/t"]).expect("valid");
        assert!(o.quit);
        assert_eq!(o.link.as_deref(), Some("countersign://task/demo/t"));
        assert!(matches!(parse(&["--gateway", "x"]), Err(Error::Usage(_))));
        assert!(matches!(parse(&["--bogus"]), Err(Error::Usage(_))));
    }
}
