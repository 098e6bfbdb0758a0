//! How the desktop app's two processes are launched: the command-line flags and environment
//! variables the window process (`countersign-desktop`) and the resident (`countersign-resident`)
//! share (the window hands its own `--data-dir`, `--demo` and `--gateway` to the resident it
//! starts, so both must read them alike), and their logging.
//!
//! Each face keeps the flags that are its own (`--page`, `--background`, `--quit`, …) and asks
//! [`Flags::take`] about the rest, so a shared flag is parsed in one place.

use std::path::PathBuf;

/// A command line that cannot be followed: the message says what was wrong, for a person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// What the shared flags and environment ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct Shared {
    /// `--data-dir DIR` / `COUNTERSIGN_DATA_DIR`; default: the platform data directory.
    pub data_dir: PathBuf,
    /// `--demo` / `COUNTERSIGN_DEMO=1` (not `0`): the built-in demo at this speed
    /// (`COUNTERSIGN_DEMO_SPEED`, a finite number above 0; default 1).
    pub demo: Option<f64>,
    /// `--gateway PORT` / `COUNTERSIGN_GATEWAY_PORT`: the local MCP gateway on 127.0.0.1:PORT
    /// (0: any free port) for this run, whatever the setting says.
    pub gateway: Option<u16>,
    /// A `countersign://` link to open (the desktop entry passes it as an argument).
    pub link: Option<String>,
}

/// The shared flags being read: seeded from the environment, then the command line's own.
#[derive(Debug, Default)]
pub struct Flags {
    data_dir: Option<PathBuf>,
    demo: bool,
    gateway: Option<u16>,
    link: Option<String>,
    speed: Option<String>,
}

fn port(value: &str) -> Result<u16, UsageError> {
    value
        .parse::<u16>()
        .map_err(|_| UsageError(format!("--gateway needs a port number, not {value:?}")))
}

impl Flags {
    /// The environment's values (a variable set to the empty string counts as unset).
    pub fn from_env() -> Result<Self, UsageError> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// As [`Flags::from_env`], from `var` (the tests' environment).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, UsageError> {
        let var = |k: &str| var(k).filter(|v| !v.is_empty());
        Ok(Self {
            data_dir: var("COUNTERSIGN_DATA_DIR").map(PathBuf::from),
            demo: var("COUNTERSIGN_DEMO").is_some_and(|v| v != "0"),
            gateway: var("COUNTERSIGN_GATEWAY_PORT")
                .map(|v| port(&v))
                .transpose()?,
            link: None,
            speed: var("COUNTERSIGN_DEMO_SPEED"),
        })
    }

    /// Reads `arg` (taking its value from `rest` when it has one) if it is a shared flag or a
    /// `countersign://` link: `Ok(true)`; `Ok(false)` when it is not one (the face's own, or
    /// unknown).
    pub fn take(
        &mut self,
        arg: &str,
        rest: &mut impl Iterator<Item = String>,
    ) -> Result<bool, UsageError> {
        match arg {
            "--demo" => self.demo = true,
            "--data-dir" => {
                let dir = rest
                    .next()
                    .ok_or_else(|| UsageError("--data-dir needs a directory".into()))?;
                self.data_dir = Some(PathBuf::from(dir));
            }
            "--gateway" => {
                let value = rest
                    .next()
                    .ok_or_else(|| UsageError("--gateway needs a port (0: any)".into()))?;
                self.gateway = Some(port(&value)?);
            }
            other => {
                if let Some(value) = other.strip_prefix("--gateway=") {
                    self.gateway = Some(port(value)?);
                } else if let Some(dir) = other.strip_prefix("--data-dir=") {
                    self.data_dir = Some(PathBuf::from(dir));
                } else if countersign_core::console::link::is_link(other) {
                    self.link = Some(other.to_owned());
                } else {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// What was asked for, with the defaults.
    pub fn finish(self) -> Shared {
        let speed = self
            .speed
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(1.0);
        Shared {
            data_dir: self
                .data_dir
                .unwrap_or_else(countersign_core::ledger::default_data_dir),
            demo: self.demo.then_some(speed),
            gateway: self.gateway,
            link: self.link,
        }
    }
}

/// Now, in unix milliseconds (0 if the clock is before 1970): how the two processes line up the
/// reopen time (the resident's `--asked-at`, the window's launch and first paint).
pub fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// The executable of the app's other process: `$var` when set and not empty (the tests), else
/// `name` beside this executable (how the package installs both, and how cargo builds both),
/// else `name` as the `PATH` finds it.
pub fn sibling_exe(var: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The AppImage this process runs from (`$APPIMAGE`, which its runtime sets), when it does. Its
/// files live in a mount or an extracted copy that ends with the process that opened it, so what
/// must outlive it (the window started again later, the start-at-login entry) starts the
/// AppImage itself, whose AppRun starts the window (`.ci/appimage/AppRun`).
pub fn appimage() -> Option<PathBuf> {
    std::env::var_os("APPIMAGE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

/// Logs to stderr at `RUST_LOG`'s level (`trace`, `debug`, `info`, `error`; warnings by
/// default), for both processes. Nothing logged ever holds a token (tokens only exist as
/// `Sensitive`, whose `Debug` is `<redacted>`).
pub fn init_logging() {
    let level = match std::env::var("RUST_LOG").as_deref() {
        Ok("trace") => tracing::Level::TRACE,
        Ok("debug") => tracing::Level::DEBUG,
        Ok("info") => tracing::Level::INFO,
        Ok("error") => tracing::Level::ERROR,
        _ => tracing::Level::WARN,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)], args: &[&str]) -> Result<(Shared, Vec<String>), UsageError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut flags = Flags::from_vars(|k| {
            vars.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.clone())
        })?;
        let mut rest = args.iter().map(|s| s.to_string());
        let mut theirs = Vec::new();
        while let Some(arg) = rest.next() {
            if !flags.take(&arg, &mut rest)? {
                theirs.push(arg);
            }
        }
        Ok((flags.finish(), theirs))
    }

    #[test]
    fn shared_flags_are_read_and_the_faces_own_are_left_to_them() {
        let args = [
            "countersign://task/ci/42",
            "--quit",
            "--gateway",
            "8788",
            "--data-dir",
            "/srv/ledger",
            "--demo",
        ];
        let (shared, theirs) = parse(&[], &args).expect("valid");
        assert_eq!(
            shared,
            Shared {
                data_dir: PathBuf::from("/srv/ledger"),
                demo: Some(1.0),
                gateway: Some(8788),
                link: Some("countersign://task/ci/42".into()),
            }
        );
        assert_eq!(theirs, ["--quit"], "a face's own flag is its to read");
        let (shared, _) = parse(&[], &["--gateway=0", "--data-dir=/srv/b"]).expect("valid");
        assert_eq!(
            (shared.data_dir, shared.gateway),
            ("/srv/b".into(), Some(0))
        );
        assert!(shared.demo.is_none());
    }

    #[test]
    fn a_flag_without_its_value_or_a_bad_port_is_a_usage_error() {
        assert_eq!(
            parse(&[], &["--data-dir"]).map(|_| ()),
            Err(UsageError("--data-dir needs a directory".into()))
        );
        assert!(parse(&[], &["--gateway"]).is_err());
        assert_eq!(
            parse(&[], &["--gateway", "x"]).map(|_| ()),
            Err(UsageError(
                "--gateway needs a port number, not \"x\"".into()
            ))
        );
        assert!(parse(&[], &["--gateway=70000"]).is_err());
        assert!(parse(&[("COUNTERSIGN_GATEWAY_PORT", "no")], &[]).is_err());
    }

    #[test]
    fn the_environment_seeds_what_the_command_line_may_override() {
        let env = [
            ("COUNTERSIGN_DATA_DIR", "/env/dir"),
            ("COUNTERSIGN_DEMO", "1"),
            ("COUNTERSIGN_DEMO_SPEED", "10"),
            ("COUNTERSIGN_GATEWAY_PORT", "9000"),
        ];
        let (shared, _) = parse(&env, &[]).expect("valid");
        assert_eq!(shared.data_dir, PathBuf::from("/env/dir"));
        assert_eq!(shared.demo, Some(10.0));
        assert_eq!(shared.gateway, Some(9000));
        let (shared, _) = parse(&env, &["--data-dir", "/cli", "--gateway", "1"]).expect("valid");
        assert_eq!(shared.data_dir, PathBuf::from("/cli"));
        assert_eq!(shared.gateway, Some(1));
        let (shared, _) = parse(
            &[
                ("COUNTERSIGN_DEMO", "0"),
                ("COUNTERSIGN_DATA_DIR", ""),
                ("COUNTERSIGN_DEMO_SPEED", "-3"),
            ],
            &["--demo"],
        )
        .expect("valid");
        assert_eq!(shared.demo, Some(1.0), "a bad speed is the default");
        assert_eq!(
            shared.data_dir,
            countersign_core::ledger::default_data_dir(),
            "an empty variable counts as unset"
        );
    }
}
