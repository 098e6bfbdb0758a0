//! The ledger's records as stored, read through the console: what the CLI prints line by line
//! (timelines, task lists, the inbox, the audit log) and the event cursor it follows. Reads
//! only; every write is an action elsewhere on [`Console`].

use std::time::Duration;

use super::{Console, Result};
use crate::ledger::audit::{self, AuditRecord};
use crate::ledger::events::{self, StoredEvent};
use crate::ledger::inputs::{self, InboxItem, InputRecord};
use crate::ledger::tasks::{self, Filter, TaskRecord};

impl Console {
    /// The newest timeline event's id: a cursor to follow the timeline from.
    pub fn last_event_id(&self) -> Result<i64> {
        Ok(self.ledger.read(events::last_id)?)
    }

    /// Up to `limit` timeline events after `cursor`, written by any process; empty after
    /// `timeout`. Other processes' commits are seen by reading again every `every`.
    pub async fn events_after(
        &self,
        cursor: i64,
        limit: usize,
        every: Duration,
        timeout: Duration,
    ) -> Result<Vec<StoredEvent>> {
        Ok(self
            .ledger
            .events_after(cursor, limit, every, timeout)
            .await?)
    }

    /// The tracked tasks `filter` selects, as stored.
    pub fn task_records(&self, filter: &Filter) -> Result<Vec<TaskRecord>> {
        Ok(self.ledger.read(|c| tasks::list(c, filter))?)
    }

    /// A task's timeline and its questions (answered or not), as stored.
    pub fn task_history(&self, row: i64) -> Result<(Vec<StoredEvent>, Vec<InputRecord>)> {
        Ok(self
            .ledger
            .read(|c| Ok((events::for_task(c, row)?, inputs::for_task(c, row)?)))?)
    }

    /// Every question waiting for a person, oldest first, as stored.
    pub fn inbox_records(&self) -> Result<Vec<InboxItem>> {
        Ok(self.ledger.read(inputs::inbox)?)
    }

    /// Every human decision, oldest first.
    pub fn audit_records(&self) -> Result<Vec<AuditRecord>> {
        Ok(self.ledger.read(audit::list)?)
    }
}
