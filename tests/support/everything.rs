//! The official reference server `@modelcontextprotocol/server-everything` 2026.8.31
//! (TypeScript SDK 1.32.2, MCP 2025-11-25 with sessions and SEP-1686 Tasks) on Streamable
//! HTTP, installed pinned by `bash .ci/setup-tools.sh` into `.ci/tools`. Each [`Everything`]
//! is its own process on a free port. The server listens on every interface; tests send it
//! traffic on 127.0.0.1 only.
//!
//! Without Node or the package, starting it fails the test with a message naming
//! `bash .ci/setup-tools.sh`: never a skip.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::peer::repo_root;

/// How to install what these tests need.
pub const SETUP: &str = "bash .ci/setup-tools.sh";

/// server-everything on Streamable HTTP; killed when dropped.
pub struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    /// Starts it on a free loopback port and waits (30 s at most) until it listens.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        Self::start_on(port)
    }

    /// Stops it and starts a new process on the same port: every session and task is gone.
    pub fn restart(mut self) -> Self {
        let port = self.port;
        let _ = self.child.kill();
        let _ = self.child.wait();
        Self::start_on(port)
    }

    fn start_on(port: u16) -> Self {
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/tools/node_modules");
        let script = tools.join("@modelcontextprotocol/server-everything/dist/index.js");
        assert!(
            script.is_file(),
            "server-everything is not installed at {}: run `{SETUP}` from the repository root",
            script.display()
        );
        let pinned_node = tools.join(".bin/node");
        let node = if pinned_node.exists() {
            pinned_node
        } else {
            PathBuf::from("node")
        };
        let child = Command::new(&node)
            .arg(&script)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start Node ({}): {e}; run `{SETUP}` from the repository root",
                    node.display()
                )
            });
        let mut server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("server-everything exited at start ({status}); run `{SETUP}` and check port {port}");
            }
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen on 127.0.0.1:{port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its MCP endpoint on 127.0.0.1.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pinned Node, else the one on `PATH`.
pub fn node() -> PathBuf {
    let pinned = repo_root().join(".ci/tools/node_modules/.bin/node");
    if pinned.exists() {
        pinned
    } else {
        PathBuf::from("node")
    }
}

/// server-everything's stdio command line, as `servers add NAME -- …` takes it.
pub fn stdio_command() -> Vec<String> {
    let script = repo_root()
        .join(".ci/tools/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        script.is_file(),
        "server-everything is not installed at {}: run `{SETUP}`",
        script.display()
    );
    vec![
        node().display().to_string(),
        script.display().to_string(),
        "stdio".into(),
    ]
}

/// `@modelcontextprotocol/server-filesystem` 2026.8.31 (stdio only) serving `root`.
pub fn filesystem_command(root: &Path) -> Vec<String> {
    let script = repo_root()
        .join(".ci/tools/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        script.is_file(),
        "server-filesystem is not installed at {}: run `{SETUP}`",
        script.display()
    );
    vec![
        node().display().to_string(),
        script.display().to_string(),
        root.display().to_string(),
    ]
}

/// The pids of live processes whose environment holds `marker` (`KEY=VALUE`): the servers a
/// test started with `--env`, wherever they are in the process tree.
pub fn processes_marked(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // A zombie has exited already: only its parent's reaping is left.
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            state != Some("Z")
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
                    .unwrap_or(false)
        })
        .collect()
}
