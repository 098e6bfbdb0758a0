//! Building a server's [`Peer`] for its era, the ledger as the legacy sessions' store, and what
//! a legacy peer signals between polls.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::{spawn_until_committed, EngineConfig, State};
use crate::ledger::events::NewEvent;
use crate::ledger::servers::{self, ServerRecord};
use crate::ledger::{EventKind, Ledger, Via};
use crate::mcp::{self, Endpoint, Era, LegacyPeer, LegacySession, Peer, PeerSignal};
use crate::status::Observation;

/// A legacy server's session kept in its ledger row, where every process finds it: the engine
/// after a restart, the CLI calling a tool on the same server.
pub(crate) struct LedgerSessions {
    ledger: Arc<Ledger>,
    server_id: i64,
}

impl mcp::SessionStore for LedgerSessions {
    fn load(&self) -> BoxFuture<'static, Option<LegacySession>> {
        let (ledger, id) = (self.ledger.clone(), self.server_id);
        Box::pin(async move {
            ledger
                .read_async(move |c| servers::get(c, id))
                .await
                .ok()
                .and_then(|s| s.legacy_session)
        })
    }

    fn save(&self, session: LegacySession) -> BoxFuture<'static, Result<(), String>> {
        let (ledger, id) = (self.ledger.clone(), self.server_id);
        Box::pin(async move {
            ledger
                .write(move |ctx| {
                    servers::set_profile(
                        ctx.conn,
                        id,
                        Era::Legacy,
                        &session.protocol_version,
                        Some(&session),
                    )
                })
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// The peer for a server: its era's, with its token. `signals` hears a legacy peer's changes
/// between polls (the engine's); a peer without it is for one action (a call, an adopt).
pub fn make_peer(
    server: &ServerRecord,
    config: &EngineConfig,
    ledger: &Arc<Ledger>,
    signals: Option<mpsc::UnboundedSender<(i64, PeerSignal)>>,
) -> Result<Peer, mcp::Error> {
    let server_id = server.id;
    let sink = |signals: Option<mpsc::UnboundedSender<(i64, PeerSignal)>>| {
        signals.map(|tx| {
            Arc::new(move |signal| {
                let _ = tx.send((server_id, signal));
            }) as mcp::SignalSink
        })
    };
    if let Some(spec) = &server.command {
        // A stdio server is always this era's peer: the process is the session.
        let command = spec.command();
        let mut process = mcp::stdio::StdioServer::new(&server.name, command);
        if !spec.secret_env.is_empty() {
            if let Some(secrets) = &config.env_secrets {
                let (secrets, names) = (secrets.clone(), spec.secret_env.clone());
                process = process.with_secret_env(Arc::new(move || secrets(server_id, &names)));
            }
        }
        return Ok(Peer::Legacy(LegacyPeer::stdio(
            process,
            config.client.clone(),
            Arc::new(LedgerSessions {
                ledger: ledger.clone(),
                server_id,
            }),
            sink(signals),
        )));
    }
    if server.era != Some(Era::Legacy) {
        return super::make_client(server, config).map(Peer::Modern);
    }
    mcp::client::check_server_url(&server.url)?;
    let token = config.tokens.as_ref().and_then(|t| t(server));
    let sink = sink(signals);
    Ok(Peer::Legacy(LegacyPeer::new(
        Endpoint::new(server.url.clone()).with_token(token),
        config.client.clone(),
        Arc::new(LedgerSessions {
            ledger: ledger.clone(),
            server_id,
        }),
        sink,
    )))
}

/// How often a server's era may be probed again after failures that may mean it changed.
const REPROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether a failed poll may mean the server now speaks the other era (it was upgraded or
/// replaced): the answers a server of one era gives to the other's requests. Outages, timeouts,
/// refusals of credentials and forgotten tasks say nothing about the era.
pub(super) fn may_mean_another_era(code: &str) -> bool {
    matches!(
        code,
        "http"
            | "method_not_found"
            | "invalid_params"
            | "rpc"
            | "not_acceptable"
            | "unsupported_version"
            | "header_mismatch"
            | "missing_capability"
    )
}

impl State {
    /// A legacy server's GET stream opened or ended: while it is open its tasks' changes arrive
    /// there, and polling them slows to the safety net; when it ends, their polls resume.
    pub(super) fn legacy_stream(&mut self, server_id: i64, open: bool) {
        let changed = if open {
            self.legacy_pushed.insert(server_id)
        } else {
            self.legacy_pushed.remove(&server_id)
        };
        if !changed {
            return;
        }
        for (row, tracked) in &self.tracked {
            if tracked.server_id == server_id {
                self.poll.cover(*row, open);
            }
        }
    }

    /// Asks the server which era it speaks (at most every [`REPROBE_EVERY`]); a different era
    /// than stored is recorded, and the next scan rebuilds its peer.
    pub(super) fn reprobe(&mut self, server_id: i64) {
        let now = tokio::time::Instant::now();
        if self
            .reprobed
            .get(&server_id)
            .is_some_and(|at| now.saturating_duration_since(*at) < REPROBE_EVERY)
        {
            return;
        }
        self.reprobed.insert(server_id, now);
        let (ledger, config, nudge) =
            (self.ledger.clone(), self.config.clone(), self.nudge.clone());
        tokio::spawn(async move {
            let Ok(server) = ledger.read_async(move |c| servers::get(c, server_id)).await else {
                return;
            };
            if server.is_stdio() {
                return; // each new process is probed as it starts
            }
            let token = config.tokens.as_ref().and_then(|t| t(&server));
            let endpoint = Endpoint::new(server.url.clone()).with_token(token);
            let found = match mcp::era::connect(endpoint, config.client.clone()).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::debug!(server = %server.name, error = %e, "era re-probe failed");
                    return;
                }
            };
            if Some(found.era()) == server.era {
                if let mcp::Connection::Legacy(probe) = &found {
                    let _ = probe.close().await; // the stored session stays in use
                }
                return;
            }
            tracing::info!(server = %server.name, era = ?found.era(), "the server now speaks another era");
            if let Err(e) = crate::actions::record_check(&ledger, server_id, &found).await {
                tracing::warn!(server = %server.name, error = %e, "cannot record the server's new era");
            }
            nudge.notify_one();
        });
    }

    /// A legacy peer's signal: a change to poll for soon, or a server request refused (for the
    /// task's timeline).
    pub(super) fn peer_signal(&mut self, server_id: i64, signal: PeerSignal) {
        let task_id = match &signal {
            PeerSignal::Stream { open } => {
                self.legacy_stream(server_id, *open);
                return;
            }
            PeerSignal::Changed { task_id }
            | PeerSignal::Status { task_id, .. }
            | PeerSignal::Refused { task_id, .. }
            | PeerSignal::Ignored { task_id, .. } => task_id,
        };
        let Some(row) = self
            .tracked
            .iter()
            .find(|(_, t)| t.server_id == server_id && &t.task_id == task_id)
            .map(|(row, _)| *row)
        else {
            return;
        };
        let message = match signal {
            PeerSignal::Changed { .. } => {
                self.poll.poll_soon(row);
                return;
            }
            PeerSignal::Status { task, .. } => {
                self.observe(Observation {
                    task: row,
                    via: Via::Push,
                    outcome: Ok(task),
                });
                return;
            }
            PeerSignal::Stream { .. } => return,
            PeerSignal::Refused { method, .. } => format!(
                "the server asked for {}, which Countersign does not support; refused",
                mcp::text::truncate(&method, 80)
            ),
            PeerSignal::Ignored { message, .. } => message,
        };
        spawn_until_committed(self.ledger.clone(), "record a refused request", move || {
            let message = message.clone();
            move |ctx: &mut crate::ledger::WriteCtx<'_>| {
                ctx.append(NewEvent {
                    task: Some(row),
                    server_id: None,
                    via: Via::Engine,
                    kind: EventKind::ServerDataIgnored {
                        code: "server_request_refused".into(),
                        message,
                    },
                })?;
                Ok(())
            }
        });
    }
}
