//! The poll fast path: `tasks/get` read as text first, and parsed only when it changed.

use super::*;

/// A keyed 64-bit hash of a `tasks/get` result's text (see [`Client::poll_task`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest(u64);

impl Digest {
    pub(crate) fn of(text: &str) -> Self {
        use std::hash::BuildHasher as _;
        // SipHash with keys drawn once per process: what a server sends cannot be chosen to
        // collide with its previous answer.
        static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
        Self(KEYS.get_or_init(std::hash::RandomState::new).hash_one(text))
    }
}

/// What one poll found (see [`Client::poll_task`]).
#[derive(Debug)]
pub enum Polled {
    /// The result's text is the same as the last one's.
    Unchanged,
    /// A different result, and its digest for the next poll.
    Changed(Task, Digest),
}

impl Client {
    /// `tasks/get` for a poller that remembers the last answer's [`Digest`]: when the result's
    /// text is the same, says so without reading it further (no `Value` tree, no task to
    /// compare downstream). The digest is keyed per process, so a server cannot aim for a
    /// collision.
    pub async fn poll_task(&self, task_id: &str, last: Option<Digest>) -> Result<Polled> {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(task_id.into()));
        let result = self
            .request_raw("tasks/get", params, Some(task_id), Vec::new())
            .await?;
        let digest = Digest::of(result.get());
        if last == Some(digest) {
            return Ok(Polled::Unchanged);
        }
        let value = to_value(&result).map_err(|reason| invalid("tasks/get", reason))?;
        let task = interpret_task_result(task_id, &value)
            .map_err(|reason| invalid("tasks/get", reason))?;
        Ok(Polled::Changed(task, digest))
    }
}
