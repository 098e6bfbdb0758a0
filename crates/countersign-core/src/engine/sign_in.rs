//! Sign-ins on the loop: a refused token is refreshed off the loop; a server that needs a person
//! to sign in again pauses its polling until they do, and resumes after.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{spawn_until_committed, Reauth, SignIns, State};
use crate::ledger::events::NewEvent;
use crate::ledger::{EventKind, Via, WriteCtx};
use crate::status::{FirstCheck, Links, Watch};

impl State {
    /// A refresh started on a refused token ended.
    pub(super) fn reauthed(&mut self, server_id: i64, outcome: Reauth) {
        self.reauthorizing.remove(&server_id);
        let held = self.held_refusals.remove(&server_id).unwrap_or_default();
        let plain = matches!(outcome, Reauth::Later(_) | Reauth::NotSignedIn);
        match outcome {
            Reauth::Token(token) => {
                self.plain_refusals.remove(&server_id);
                // On the live client at once (its clones in flight share it); clients built
                // later read it from the provider, which the refresh updated.
                if let Some(link) = self.links.get(server_id) {
                    link.peer.set_bearer_token(Some(token));
                }
            }
            Reauth::Later(why) => {
                tracing::info!(server_id, %why, "cannot refresh a refused token now; polls back off");
                self.plain_refusals.insert(server_id);
            }
            Reauth::NotSignedIn => {
                self.plain_refusals.insert(server_id);
            }
            Reauth::SignInNeeded(message) => self.pause_server(server_id, message),
        }
        if plain {
            // Recorded now as the refusals they are (`plain_refusals` holds the server).
            for observation in held {
                self.observe(observation);
            }
        }
    }

    /// A person must sign in to `server_id` again: one `sign_in_needed` on the server and one on
    /// each of its unfinished tasks, whose polling pauses (they keep their state). Once only:
    /// until a `signed_in`, nothing more is sent to the server or written about it.
    pub(super) fn pause_server(&mut self, server_id: i64, message: String) {
        if !self.sign_in_needed.insert(server_id) {
            return;
        }
        let mut tasks: Vec<i64> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.server_id == server_id)
            .map(|(row, _)| *row)
            .collect();
        tasks.sort_unstable();
        for row in &tasks {
            self.unwatch(*row);
        }
        tracing::warn!(server_id, paused = tasks.len(), %message, "a sign-in is needed; polling paused");
        spawn_until_committed(self.ledger.clone(), "record a needed sign-in", move || {
            let (tasks, message) = (tasks.clone(), message.clone());
            move |ctx: &mut WriteCtx<'_>| {
                ctx.append(NewEvent {
                    task: None,
                    server_id: Some(server_id),
                    via: Via::Engine,
                    kind: EventKind::SignInNeeded {
                        message: message.clone(),
                    },
                })?;
                for row in tasks {
                    ctx.append(NewEvent {
                        task: Some(row),
                        server_id: Some(server_id),
                        via: Via::Engine,
                        kind: EventKind::SignInNeeded {
                            message: message.clone(),
                        },
                    })?;
                }
                Ok(())
            }
        });
    }

    /// Servers signed in to since the last scan (here or in another process, seen as
    /// `signed_in` events): their tokens are read from the keyring again (also after a
    /// `signed_out`) and their clients rebuilt on this scan.
    pub(super) async fn take_sign_ins(&mut self) -> Vec<i64> {
        let Some(sign_ins) = self.config.sign_ins.clone() else {
            return Vec::new();
        };
        let cursor = self.signed_in_cursor;
        let read = self
            .ledger
            .read_async(move |c| {
                // Up to the newest event: the next scan starts there, whatever kinds came.
                let last = crate::ledger::events::last_id(c)?;
                Ok((
                    last,
                    crate::ledger::events::sign_ins_between(c, cursor, last)?,
                ))
            })
            .await;
        let (last, found) = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read sign-ins");
                return Vec::new();
            }
        };
        self.signed_in_cursor = last.max(cursor);
        // The last word per server counts (signed in, then out again: out).
        let mut latest: Vec<(i64, bool)> = Vec::new();
        for (server, signed_in) in found {
            latest.retain(|(s, _)| *s != server);
            latest.push((server, signed_in));
        }
        for &(server, _) in &latest {
            let url = self
                .links
                .get(server)
                .map(|link| link.peer.url().to_owned())
                .unwrap_or_default();
            sign_ins.reload(server, url).await;
        }
        if !latest.is_empty() {
            self.reload_links
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        latest
            .into_iter()
            .filter(|(_, signed_in)| *signed_in)
            .map(|(server, _)| server)
            .collect()
    }

    /// A person signed in to `server_id`: its paused tasks are polled again (spread over one
    /// interval).
    pub(super) fn resume_server(&mut self, server_id: i64) {
        if !self.sign_in_needed.remove(&server_id) {
            return;
        }
        let watches: Vec<Watch> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.server_id == server_id)
            .map(|(row, t)| Watch {
                task: *row,
                server_id,
                task_id: t.task_id.clone(),
                poll_interval_ms: None,
                first: FirstCheck::Spread,
            })
            .collect();
        tracing::info!(
            server_id,
            resumed = watches.len(),
            "signed in again; polling resumed"
        );
        for watch in watches {
            for source in &self.sources {
                source.watch(watch.clone());
            }
        }
    }
}

/// Asks the sign-ins to refresh server `server_id`'s refused token, off the loop; the outcome
/// comes back through `done`.
pub(super) fn spawn_reauth(
    sign_ins: Arc<dyn SignIns>,
    links: &Links,
    done: &mpsc::UnboundedSender<(i64, Reauth)>,
    server_id: i64,
) {
    let Some(link) = links.get(server_id) else {
        let _ = done.send((server_id, Reauth::Later("the server has no client".into())));
        return;
    };
    let refused = link.peer.bearer_token();
    let url = link.peer.url().to_owned();
    let done = done.clone();
    tokio::spawn(async move {
        let outcome = sign_ins.refresh(server_id, url, refused).await;
        let _ = done.send((server_id, outcome));
    });
}
