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
    if server.era != Some(Era::Legacy) {
        return super::make_client(server, config).map(Peer::Modern);
    }
    mcp::client::check_server_url(&server.url)?;
    let token = config.tokens.as_ref().and_then(|t| t(server));
    let server_id = server.id;
    let sink = signals.map(|tx| {
        Arc::new(move |signal| {
            let _ = tx.send((server_id, signal));
        }) as mcp::SignalSink
    });
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

impl State {
    /// A legacy peer's signal: a change to poll for soon, or a server request refused (for the
    /// task's timeline).
    pub(super) fn peer_signal(&mut self, server_id: i64, signal: PeerSignal) {
        let task_id = match &signal {
            PeerSignal::Changed { task_id }
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
