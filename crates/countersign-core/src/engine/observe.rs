//! One observation applied: an unchanged poll writes nothing; a change becomes one write (the
//! task's new state, its timeline events and questions), and what the engine knows of the task
//! advances only when that write commits.

use super::sign_in::spawn_reauth;
use super::{Applied, ServerChange, State};
use crate::ledger::events::NewEvent;
use crate::ledger::tasks::{self, LedgerStatus};
use crate::ledger::{now_ms, EventKind, Via};
use crate::mcp::ErrorClass;
use crate::status::Observation;
use crate::tracking::{self, Known};

impl State {
    /// Applies one observation: an unchanged poll writes nothing; a change becomes one write,
    /// and what the engine knows of the task advances only when that write commits.
    pub(super) fn observe(&mut self, observation: Observation) {
        let row = observation.task;
        if let Err(failure) = &observation.outcome {
            if failure.class == ErrorClass::Permanent
                && super::peers::may_mean_another_era(failure.code)
            {
                if let Some(server_id) = self.tracked.get(&row).map(|t| t.server_id) {
                    self.reprobe(server_id);
                }
            }
        }
        let Some(tracked) = self.tracked.get_mut(&row) else {
            return;
        };
        if tracked.writing {
            // One write per task at a time keeps its events in order and each change computed
            // against what is committed; the newest observation waits for the write to end.
            tracked.next = Some(observation);
            return;
        }
        let server_id = tracked.server_id;
        let via = observation.via;
        match &observation.outcome {
            Ok(task) => {
                if task.task_id != tracked.task_id {
                    tracing::warn!(row, "observation for another task id; ignored");
                    return;
                }
                if tracked.is_stale(task) {
                    tracing::debug!(row, via = ?via, "observation older than one already applied; ignored");
                    return;
                }
                let recovered = tracked.failures;
                let server_recovered = self.unreachable.remove(&server_id);
                self.plain_refusals.remove(&server_id);
                if !tracked.known.differs(task) && recovered == 0 && !server_recovered {
                    return; // nothing new: no write
                }
                let before = tracked.known.clone();
                let known = Known::of(task);
                let changed = before != known;
                let finished = task.status().is_terminal();
                let applied = Applied {
                    known: Some(known),
                    ttl_ms: task.ttl_ms,
                    failures: 0,
                    done: finished,
                    server: if server_recovered {
                        ServerChange::Recovered
                    } else {
                        ServerChange::None
                    },
                };
                let task = task.clone();
                // Relaxed: all of this is what the server said, and it says it again if the
                // machine loses the last moments before a crash (see ARCHITECTURE.md).
                let write = self.ledger.write_relaxed(move |ctx| {
                    if server_recovered {
                        ctx.append(NewEvent {
                            task: None,
                            server_id: Some(server_id),
                            via: Via::Engine,
                            kind: EventKind::ServerRecovered,
                        })?;
                    }
                    if recovered > 0 {
                        tasks::set_poll_error(ctx.conn, row, None)?;
                        ctx.append(NewEvent {
                            task: Some(row),
                            server_id: None,
                            via,
                            kind: EventKind::PollRecovered {
                                failures: recovered,
                            },
                        })?;
                    }
                    if changed {
                        tracking::record(ctx, row, Some(&before), &task, via)?;
                    }
                    Ok(())
                });
                if finished {
                    self.unwatch(row); // nothing more to ask; the row goes once this commits
                }
                self.start_write(row, server_id, observation, applied, write);
            }
            Err(failure) => {
                if failure.code == "unauthorized" {
                    if let Some(sign_ins) = &self.config.sign_ins {
                        if self.sign_in_needed.contains(&server_id) {
                            return; // in flight when polling paused: recorded on the server
                        }
                        if !self.plain_refusals.contains(&server_id) {
                            // What the refusal means is known once the refresh ends: a new token
                            // (a refresh raced the poll: nothing to record), a sign-in needed
                            // (recorded then), or a plain refusal (this one recorded then).
                            if self.reauthorizing.insert(server_id) {
                                spawn_reauth(
                                    sign_ins.clone(),
                                    &self.links,
                                    &self.reauthed,
                                    server_id,
                                );
                            }
                            self.held_refusals
                                .entry(server_id)
                                .or_default()
                                .push(observation);
                            return;
                        }
                    }
                }
                // One event per streak, also when the streak began before a restart.
                let first_of_streak = tracked.failures == 0;
                // `>=`: both sides are whole milliseconds (truncated), so a server that forgets the
                // task the instant its TTL ends can be answering within the same millisecond.
                let past_ttl = tracked.expires_at.is_some_and(|at| now_ms() >= at);
                let ttl_ms = tracked.ttl_ms;
                let conclusion = match failure.class {
                    ErrorClass::Lost if past_ttl => Some(LedgerStatus::Expired),
                    ErrorClass::Lost => Some(LedgerStatus::Lost),
                    _ if past_ttl => Some(LedgerStatus::Expired),
                    _ => None,
                };
                let applied = Applied {
                    known: None,
                    ttl_ms: None,
                    failures: failure.failures,
                    done: conclusion.is_some(),
                    server: ServerChange::None,
                };
                if let Some(status) = conclusion {
                    let message = failure.message.clone();
                    let write = self
                        .ledger
                        .write(move |ctx| tracking::conclude(ctx, row, status, ttl_ms, &message));
                    self.unwatch(row);
                    self.start_write(row, server_id, observation, applied, write);
                    return;
                }
                let server_down = failure.code == "connect" && self.unreachable.insert(server_id);
                if !first_of_streak && !server_down {
                    tracked.failures = failure.failures;
                    return;
                }
                let applied = Applied {
                    server: if server_down {
                        ServerChange::Down
                    } else {
                        ServerChange::None
                    },
                    ..applied
                };
                let failure = failure.clone();
                let write = self.ledger.write_relaxed(move |ctx| {
                    if server_down {
                        ctx.append(NewEvent {
                            task: None,
                            server_id: Some(server_id),
                            via: Via::Engine,
                            kind: EventKind::ServerUnreachable {
                                message: failure.message.clone(),
                            },
                        })?;
                    }
                    if first_of_streak {
                        tasks::set_poll_error(ctx.conn, row, Some(&failure.message))?;
                        ctx.append(NewEvent {
                            task: Some(row),
                            server_id: None,
                            via: Via::Poll,
                            kind: EventKind::PollFailed {
                                code: failure.code.into(),
                                message: failure.message,
                                retry_in_ms: failure.retry_in.as_millis() as u64,
                            },
                        })?;
                    }
                    Ok(())
                });
                self.start_write(row, server_id, observation, applied, write);
            }
        }
    }
}
