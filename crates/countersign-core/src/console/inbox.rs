//! The inbox: the questions servers asked about tasks, what waits for a person, and answering them.
//! An answer is recorded in one synced transaction; the engine delivers it.

use crate::actions;
use crate::ledger::{self, inputs};

use super::view::{InputRequestView, InputResponse};
use super::{present, Console, Error, Result};

/// A pending question and whether a desktop notification was already shown for it.
pub(super) struct InboxEntry {
    /// What the inbox shows.
    pub view: InputRequestView,
    /// The `inputs` row (for [`Console::mark_notified`]).
    pub input_id: i64,
    /// Set once notified (or deliberately not: do-not-disturb, already on screen).
    pub notified: bool,
}

impl Console {
    /// The inbox with notification bookkeeping.
    pub(super) async fn inbox_entries(&self) -> Result<Vec<InboxEntry>> {
        let items = self.read(inputs::inbox).await?;
        Ok(items
            .iter()
            .map(|item| InboxEntry {
                view: present::inbox_item(item),
                input_id: item.input.id,
                notified: item.input.notified_at.is_some(),
            })
            .collect())
    }

    /// How much waits for a person, one per entry of the window's inbox: the servers'
    /// questions, the agents' calls held for a decision, and the approved calls whose upstream
    /// asks first (the tray's and the window title's count, the same number as the inbox's). A
    /// list that cannot be read counts as empty: the count is a hint, the inbox says the rest.
    pub async fn waiting_count(&self) -> u32 {
        let questions = self.inbox().await.map(|l| l.len()).unwrap_or(0);
        let calls = self
            .pending_gated_calls()
            .await
            .map(|l| l.len())
            .unwrap_or(0);
        let asking = self
            .gated_questions_views()
            .await
            .map(|l| l.len())
            .unwrap_or(0);
        u32::try_from(questions + calls + asking).unwrap_or(u32::MAX)
    }

    /// Every pending question, oldest first.
    pub async fn inbox(&self) -> Result<Vec<InputRequestView>> {
        Ok(self
            .inbox_entries()
            .await?
            .into_iter()
            .map(|e| e.view)
            .collect())
    }

    /// Records that these questions were notified (or deliberately not), so no restart notifies
    /// them: one write for the whole batch, however many questions a server sent at once.
    pub(super) async fn mark_notified(&self, input_ids: Vec<i64>) -> Result<()> {
        self.ledger
            .write(move |ctx| {
                for id in input_ids {
                    inputs::mark_notified(ctx.conn, id)?;
                }
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// The questions of a task still waiting for an answer.
    pub async fn pending_questions(&self, task_row: i64) -> Result<Vec<inputs::InputRecord>> {
        self.read(move |c| {
            Ok(inputs::for_task(c, task_row)?
                .into_iter()
                .filter(|q| q.state == inputs::InputState::Pending)
                .collect())
        })
        .await
    }

    /// Answers a question: recorded (question state, audit, outbox, event) in one synced
    /// transaction, then delivered by the engine.
    pub async fn answer(&self, task_row: i64, key: &str, response: &InputResponse) -> Result<()> {
        let k = key.to_owned();
        let current = self.read(move |c| inputs::get(c, task_row, &k)).await?;
        match current.state {
            inputs::InputState::Pending => {}
            inputs::InputState::Superseded => {
                return Err(Error::AlreadyAnswered(
                    "The server withdrew this question.".into(),
                ))
            }
            _ => {
                return Err(Error::AlreadyAnswered(
                    "This question was already answered.".into(),
                ))
            }
        }
        let response = serde_json::to_value(response)
            .map_err(|e| Error::Invalid(format!("the answer cannot be encoded: {e}")))?;
        actions::answer(&self.ledger, task_row, key, response, &self.actor)
            .await
            .map_err(|e| match e {
                // Answered or withdrawn between our check and the write, or the task ended.
                actions::Error::Ledger(ledger::Error::Conflict(why)) => Error::AlreadyAnswered(why),
                e => e.into(),
            })?;
        self.nudge();
        Ok(())
    }
}
