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
