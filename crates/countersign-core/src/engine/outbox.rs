//! The outbox: what a person decided (answers, cancels) goes to the server. The loop picks up new
//! items ([`State::scan`]), sends each off the loop ([`State::deliver`]) and records the outcome
//! ([`State::delivered`]).

use std::time::Duration;

use tokio::sync::mpsc;

use super::{spawn_until_committed, State};
use crate::ledger::events::NewEvent;
use crate::ledger::outbox::{self, Delivery, OutboxItem};
use crate::ledger::tasks;
use crate::ledger::{inputs, DeliveryKind, EventKind, Via, WriteCtx};
use crate::mcp::ErrorClass;
use crate::status::FirstCheck;

/// How a delivery ended, reported back to the loop.
pub(super) enum Delivered {
    Acknowledged(OutboxItem),
    Abandoned(OutboxItem, String),
}

impl State {
    /// Picks up what other writers added: servers, tasks to watch, deliveries to make.
    pub(super) async fn scan(&mut self, delivered: &mpsc::UnboundedSender<Delivered>) {
        let signed_in = self.take_sign_ins().await;
        if let Err(e) = self.refresh_links().await {
            tracing::warn!(error = %e, "cannot read servers");
        }
        let after = self.task_cursor;
        match self
            .ledger
            .read_async(move |c| tasks::unfinished_after(c, after))
            .await
        {
            Ok(new) => {
                for record in new {
                    self.track(record, FirstCheck::AfterInterval);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read new tasks"),
        }
        for server_id in signed_in {
            self.resume_server(server_id);
        }
        let after = self.outbox_cursor;
        match self
            .ledger
            .read_async(move |c| outbox::open_after(c, after))
            .await
        {
            Ok(items) => {
                for item in items {
                    self.outbox_cursor = self.outbox_cursor.max(item.id);
                    if self.delivering.insert(item.id) {
                        self.deliver(item, delivered.clone());
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the outbox"),
        }
    }

    pub(super) fn deliver(&self, item: OutboxItem, done: mpsc::UnboundedSender<Delivered>) {
        let ledger = self.ledger.clone();
        let links = self.links.clone();
        tokio::spawn(async move {
            let target = ledger.read_async({
                let task = item.task;
                move |c| tasks::get(c, task)
            });
            let record = match target.await {
                Ok(r) => r,
                Err(e) => {
                    let _ = done.send(Delivered::Abandoned(item, e.to_string()));
                    return;
                }
            };
            let mut failures = 0u32;
            loop {
                let Some(link) = links.get(record.server_id) else {
                    let _ = done.send(Delivered::Abandoned(item, "the server was removed".into()));
                    return;
                };
                let result = match &item.delivery {
                    Delivery::Update { responses } => {
                        link.peer
                            .update_task(&record.task_id, responses.clone())
                            .await
                    }
                    Delivery::Cancel => link.peer.cancel_task(&record.task_id).await,
                };
                match result {
                    Ok(()) => {
                        let _ = done.send(Delivered::Acknowledged(item));
                        return;
                    }
                    Err(e) if e.class() == ErrorClass::Transient => {
                        failures += 1;
                        let wait = crate::scheduler::backoff(
                            Duration::from_secs(1),
                            failures,
                            e.retry_after(),
                        );
                        let (id, task, message, code) =
                            (item.id, item.task, e.to_string(), e.code());
                        let delivery = match item.delivery {
                            Delivery::Update { .. } => DeliveryKind::Update,
                            Delivery::Cancel => DeliveryKind::Cancel,
                        };
                        let first = failures == 1;
                        let _ = ledger
                            .write(move |ctx| {
                                outbox::failed_attempt(ctx.conn, id, &message)?;
                                // On the timeline once per delivery: the outbox row keeps count.
                                if first {
                                    ctx.append(NewEvent {
                                        task: Some(task),
                                        server_id: None,
                                        via: Via::Engine,
                                        kind: EventKind::DeliveryRetrying {
                                            delivery,
                                            code: code.into(),
                                            message,
                                            retry_in_ms: wait.as_millis() as u64,
                                        },
                                    })?;
                                }
                                Ok(())
                            })
                            .await;
                        tokio::time::sleep(wait).await;
                    }
                    Err(e) => {
                        let _ = done.send(Delivered::Abandoned(item, e.to_string()));
                        return;
                    }
                }
            }
        });
    }

    pub(super) fn delivered(&mut self, delivered: Delivered) {
        match delivered {
            Delivered::Acknowledged(item) => {
                self.delivering.remove(&item.id);
                spawn_until_committed(self.ledger.clone(), "record a delivery", move || {
                    let item = item.clone();
                    move |ctx: &mut WriteCtx<'_>| {
                        outbox::acknowledge(ctx.conn, item.id)?;
                        let kind = match &item.delivery {
                            Delivery::Update { responses } => {
                                let keys: Vec<String> = responses.keys().cloned().collect();
                                inputs::mark_delivered(ctx.conn, item.task, &keys)?;
                                EventKind::UpdateAcknowledged { keys }
                            }
                            Delivery::Cancel => EventKind::CancelAcknowledged,
                        };
                        ctx.append(NewEvent {
                            task: Some(item.task),
                            server_id: None,
                            via: Via::Engine,
                            kind,
                        })?;
                        Ok(())
                    }
                });
            }
            Delivered::Abandoned(item, message) => {
                self.delivering.remove(&item.id);
                spawn_until_committed(self.ledger.clone(), "record a delivery", move || {
                    let (item, message) = (item.clone(), message.clone());
                    move |ctx: &mut WriteCtx<'_>| {
                        outbox::abandon(ctx.conn, item.id, &message)?;
                        let kind = match &item.delivery {
                            Delivery::Update { responses } => EventKind::UpdateFailed {
                                keys: responses.keys().cloned().collect(),
                                message,
                            },
                            Delivery::Cancel => EventKind::CancelFailed { message },
                        };
                        ctx.append(NewEvent {
                            task: Some(item.task),
                            server_id: None,
                            via: Via::Engine,
                            kind,
                        })?;
                        Ok(())
                    }
                });
            }
        }
    }
}
