//! stdio servers on the console: registering one (its secret values to the OS keyring), checking
//! it, and the engine's process of it as the server page shows it.

use crate::actions;
use crate::ledger::servers::{ServerRecord, StdioSpec};
use crate::mcp;
use crate::mcp::stdio::StdioServer;

use super::view::{StdioAddRequest, StdioProcessView};
use super::{Console, Error, Result};

impl Console {
    /// Registers a stdio server. With `discover`, the process is started first and asked what
    /// it is (the stdio era probe, then `initialize`); one that does not answer is not added.
    /// Secret values go to the OS keyring only; when it cannot keep them, the server is not
    /// added.
    pub async fn add_stdio_server(&self, request: StdioAddRequest) -> Result<ServerRecord> {
        let name = request.name.trim().to_owned();
        if name.is_empty() {
            return Err(Error::Invalid("a server needs a name".into()));
        }
        if self.server_named(&name).await?.is_some() {
            return Err(Error::Invalid(format!(
                "a server named {name:?} already exists"
            )));
        }
        let spec = StdioSpec {
            program: request.program.trim().to_owned(),
            args: request.args,
            env: request.env.into_iter().collect(),
            secret_env: request.secret_env.iter().map(|(k, _)| k.clone()).collect(),
            cwd: request.cwd.filter(|c| !c.trim().is_empty()),
        };
        if spec.program.is_empty() {
            return Err(Error::Invalid(
                "a stdio server needs a command to run".into(),
            ));
        }
        if let Some(cwd) = &spec.cwd {
            if !std::path::Path::new(cwd).is_dir() {
                return Err(Error::Invalid(format!("{cwd} is not a directory")));
            }
        }
        let secrets: Vec<(String, mcp::sensitive::Sensitive<String>)> = request
            .secret_env
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        let found = if request.discover {
            Some(
                self.unless_cancelled(self.probe_stdio(&name, &spec, &secrets))
                    .await??,
            )
        } else {
            None
        };
        let record =
            actions::add_stdio_server(&self.ledger, &name, &spec, found.as_ref(), &self.actor)
                .await?;
        if !secrets.is_empty() {
            if let Err(e) = self.tokens.store_env(record.id, secrets).await {
                if let Err(undo) =
                    actions::remove_server(&self.ledger, record.id, &self.actor).await
                {
                    self.warn(&format!(
                        "server {name} stays registered without its secret environment: {undo}"
                    ));
                }
                return Err(e.into());
            }
        }
        self.nudge();
        Ok(record)
    }

    /// Starts the command once, asks it what it is, and stops it.
    async fn probe_stdio(
        &self,
        name: &str,
        spec: &StdioSpec,
        secrets: &[(String, mcp::sensitive::Sensitive<String>)],
    ) -> Result<mcp::Connection> {
        let mut command = spec.command();
        command.env.extend(secrets.iter().cloned());
        let server = StdioServer::new(name, command);
        let connected = server.connect(self.config.client.clone()).await;
        let log = server.log();
        server.stop().await;
        match connected {
            Ok(client) => Ok(mcp::Connection::Legacy(client)),
            Err(e) => {
                // A process that ended before answering: say that, not the session's words.
                let e = match e {
                    mcp::Error::SessionExpired { url, message, .. } => {
                        mcp::Error::Transport { url, message }
                    }
                    other => other,
                };
                // What the process said on stderr is usually the reason: the last lines of it.
                let said: Vec<&String> = log
                    .iter()
                    .filter(|l| !l.starts_with("[countersign]"))
                    .rev()
                    .take(3)
                    .collect();
                if said.is_empty() {
                    return Err(e.into());
                }
                let said: Vec<&str> = said.into_iter().rev().map(String::as_str).collect();
                Err(Error::Invalid(format!(
                    "{e}; it said: {}",
                    said.join(" | ")
                )))
            }
        }
    }

    /// A stdio server's check: the engine's process when the engine runs here, else one
    /// started for the check.
    pub(super) async fn check_stdio(
        &self,
        server: &ServerRecord,
    ) -> Result<mcp::Result<mcp::Connection>> {
        let peer = self.peer(server).await?;
        let mcp::Peer::Legacy(peer) = peer else {
            return Err(Error::Invalid(format!(
                "{} is not a stdio server",
                server.name
            )));
        };
        Ok(peer.client().await.map(mcp::Connection::Legacy))
    }

    /// The engine's process of a stdio server, when the engine runs in this process.
    pub fn stdio_process(&self, server: &ServerRecord) -> Option<StdioProcessView> {
        let engine = self.engine()?;
        let mcp::Peer::Legacy(peer) = engine.peer_for(server).ok()? else {
            return None;
        };
        let process: &StdioServer = peer.stdio_server()?;
        let status = process.status();
        Some(StdioProcessView {
            pid: status.pid,
            starts: status.starts,
            recent_exits: status.recent_exits,
            last_exit: status.last_exit,
            crash_loop: status.crash_loop,
            log: process.log(),
        })
    }
}
