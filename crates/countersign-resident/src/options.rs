//! The command line and environment (the same names as the app's: the app hands its own
//! `--data-dir`, `--demo` and `--gateway` over when it starts the resident).

use std::path::PathBuf;

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

impl Options {
    /// Parses `args` (without the program name) over the environment.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, Error> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut data_dir = env("COUNTERSIGN_DATA_DIR").map(PathBuf::from);
        let mut demo = env("COUNTERSIGN_DEMO").is_some_and(|v| v != "0");
        let port = |v: &str| {
            v.parse::<u16>()
                .map_err(|_| Error::Usage(format!("--gateway needs a port number, not {v:?}")))
        };
        let mut gateway = env("COUNTERSIGN_GATEWAY_PORT")
            .map(|v| port(&v))
            .transpose()?;
        let mut link = None;
        let mut quit = false;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--demo" => demo = true,
                "--quit" => quit = true,
                // How start at login launches it; the resident never opens a window by itself.
                "--background" => {}
                "--data-dir" => {
                    let dir = args
                        .next()
                        .ok_or_else(|| Error::Usage("--data-dir needs a directory".into()))?;
                    data_dir = Some(PathBuf::from(dir));
                }
                "--gateway" => {
                    let value = args
                        .next()
                        .ok_or_else(|| Error::Usage("--gateway needs a port (0: any)".into()))?;
                    gateway = Some(port(&value)?);
                }
                other if other.starts_with("--gateway=") => {
                    gateway = Some(port(&other["--gateway=".len()..])?)
                }
                other if other.starts_with("--data-dir=") => {
                    data_dir = Some(PathBuf::from(&other["--data-dir=".len()..]))
                }
                "-h" | "--help" => return Err(Error::Usage(USAGE.into())),
                other if countersign_core::console::link::is_link(other) => {
                    link = Some(other.to_owned())
                }
                other => return Err(Error::Usage(format!("unknown argument {other:?}; {USAGE}"))),
            }
        }
        let speed = env("COUNTERSIGN_DEMO_SPEED")
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(1.0);
        Ok(Self {
            data_dir: data_dir.unwrap_or_else(countersign_core::ledger::default_data_dir),
            demo: demo.then_some(speed),
            gateway,
            link,
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
