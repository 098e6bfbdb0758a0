//! `cargo xtask`: the developer entry points, one place to find them.
//!
//! Why an xtask rather than a justfile or a Makefile: it needs nothing but the Rust toolchain
//! every contributor already has (no `just` to install, no make dialects), it runs the same on
//! every OS cargo runs on, and it is plain Rust that the rest of the workspace can read. It only
//! dispatches: the real work lives in the scripts under `.ci/` (which CI runs too) and in cargo.
//!
//! - `dev`: the desktop app against the Vite dev server, with hot reload of the UI;
//! - `demo`: set up this machine and launch the app against the built-in demo server;
//! - `check`: the cheap checks (format, lints as errors, the UI's type check), under a minute warm;
//! - `test`: set up this machine and run the whole test suite (what CI runs); `test --quick`
//!   stops after the unit, integration and UI unit tests (no conformance, bundles or window);
//! - `bench [ARGS…]`: the benchmark (`--quick` for the short mode CI runs);
//! - `bless`: regenerate the committed TypeScript bindings (`ui/src/bindings/`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: cargo xtask <dev | demo | check | test [--quick] | bench [ARGS…] | bless>

  dev     the desktop app with the UI served by Vite (hot reload); Ctrl-C stops both
  demo    set up this machine, then launch the app against the built-in demo server
  check   format, lints as errors and the UI's type check (under a minute warm)
  test    set up this machine, then run the whole test suite (what CI runs); --quick stops
          after the unit, integration and UI unit tests
  bench   the benchmark; `cargo xtask bench --quick` is the short mode CI runs
  bless   regenerate ui/src/bindings/ from the Rust types (after changing an IPC type)";

/// Where the Vite dev server listens (`devUrl` in tauri.conf.json).
const DEV_PORT: u16 = 5173;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let task = args.next();
    let rest: Vec<String> = args.collect();
    let root = root();
    let result = match task.as_deref() {
        Some("check") => run(Command::new("bash").arg(".ci/check").args(&rest), &root),
        Some("test") => run(Command::new("bash").arg(".ci/test").args(&rest), &root),
        Some("demo") => run(Command::new("bash").arg(".ci/demo").args(&rest), &root),
        Some("bench") => run(Command::new("bash").arg(".ci/bench.sh").args(&rest), &root),
        Some("bless") => run(
            Command::new(cargo())
                .args(["test", "-p", "countersign-desktop", "--lib", "bindings"])
                .env("COUNTERSIGN_BLESS", "1"),
            &root,
        ),
        Some("dev") => dev(&root, &rest),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(64);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (this crate's parent directory).
fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Runs `command` in `dir` and fails unless it exits 0.
fn run(command: &mut Command, dir: &Path) -> Result<(), String> {
    let status = command
        .current_dir(dir)
        .status()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed ({status})"))
    }
}

/// The app loads `devUrl` when built without the `custom-protocol` feature: start Vite (which
/// reloads the UI on every save), wait until it answers, then run the app; stop Vite with it.
fn dev(root: &Path, args: &[String]) -> Result<(), String> {
    let ui = root.join("ui");
    if !ui.join("node_modules").exists() {
        run(Command::new("npm").arg("ci"), &ui)?;
    }
    let mut vite = Vite(
        Command::new("npm")
            .args(["run", "dev"]) // port 5173, strict: ui/vite.config.ts
            .current_dir(&ui)
            .spawn()
            .map_err(|e| format!("cannot start the Vite dev server: {e}"))?,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", DEV_PORT)).is_err() {
        if Instant::now() > deadline {
            return Err(format!(
                "the Vite dev server did not listen on port {DEV_PORT} within 60 s"
            ));
        }
        if let Ok(Some(status)) = vite.0.try_wait() {
            return Err(format!("the Vite dev server exited ({status})"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let result = run(
        Command::new(cargo())
            .args(["run", "-p", "countersign-desktop", "--"])
            .args(args),
        root,
    );
    vite.stop();
    result
}

/// The dev server, stopped when `dev` returns (or panics).
struct Vite(Child);

impl Vite {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Vite {
    fn drop(&mut self) {
        self.stop();
    }
}
