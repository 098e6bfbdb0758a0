//! A server of either era as the engine follows its tasks: [`Peer::poll_task`],
//! [`Peer::update_task`] (answers), [`Peer::cancel_task`].
//!
//! The modern era is [`Client`] itself. The legacy era is [`LegacyPeer`], which shows a SEP-1686
//! task as the modern [`crate::Task`] the engine already tracks, so the ledger, the inbox and
//! every face treat both alike:
//! - `tasks/get` gives the status; a finished task's result or error comes from `tasks/result`;
//! - the questions of an `input_required` task arrive on a `tasks/result` stream the peer keeps
//!   open, and appear as `inputRequests` keyed by the server's request id;
//! - an answer is sent as the JSON-RPC response to that request;
//! - the session is kept in a [`SessionStore`] (the ledger) and renewed when the server ends it;
//!   a task of an ended session is [`Error::SessionEnded`].

mod legacy;

use serde_json::{Map, Value};

use crate::client::{Client, Digest, Polled, ToolCall};
use crate::era::Era;
use crate::error::Result;
use crate::sensitive::Sensitive;
use crate::wire::{CallOutcome, Task};

pub use legacy::{LegacyPeer, PeerSignal, SessionStore, SignalSink};

/// A server as the engine reaches it. Cheap to clone; clones share connections and state.
#[derive(Debug, Clone)]
pub enum Peer {
    /// MCP 2026-07-28.
    Modern(Client),
    /// MCP 2025-11-25 and earlier, with a session.
    Legacy(LegacyPeer),
}

impl Peer {
    /// The endpoint URL.
    pub fn url(&self) -> &str {
        match self {
            Self::Modern(client) => client.url(),
            Self::Legacy(peer) => peer.url(),
        }
    }

    /// The era it speaks.
    pub fn era(&self) -> Era {
        match self {
            Self::Modern(_) => Era::Modern,
            Self::Legacy(_) => Era::Legacy,
        }
    }

    /// The modern client, for what only that era offers (`subscriptions/listen`).
    pub fn modern(&self) -> Option<&Client> {
        match self {
            Self::Modern(client) => Some(client),
            Self::Legacy(_) => None,
        }
    }

    /// Replaces the bearer token sent from now on.
    pub fn set_bearer_token(&self, token: Option<Sensitive<String>>) {
        match self {
            Self::Modern(client) => client.set_bearer_token(token),
            Self::Legacy(peer) => peer.set_bearer_token(token),
        }
    }

    /// The bearer token sent now.
    pub fn bearer_token(&self) -> Option<Sensitive<String>> {
        match self {
            Self::Modern(client) => client.bearer_token(),
            Self::Legacy(peer) => peer.bearer_token(),
        }
    }

    /// Any request with `params` as an agent sent them, the result verbatim: the gateway's
    /// pass-through ([`Client::forward`]; a legacy server gets it within its session).
    pub async fn forward(&self, method: &str, params: Map<String, Value>) -> Result<Value> {
        match self {
            Self::Modern(client) => client.forward(method, params).await,
            Self::Legacy(peer) => peer.forward(method, params).await,
        }
    }

    /// The task's state as a modern [`crate::Task`], or [`Polled::Unchanged`] when it is the
    /// same as the answer `last` digested.
    pub async fn poll_task(&self, task_id: &str, last: Option<Digest>) -> Result<Polled> {
        match self {
            Self::Modern(client) => client.poll_task(task_id, last).await,
            Self::Legacy(peer) => peer.poll_task(task_id, last).await,
        }
    }

    /// `tools/call` (a legacy server's task tools are called as tasks). A modern client mirrors
    /// the arguments its last `tools/list` named into headers: list first where that matters.
    pub async fn call_tool(&self, call: &ToolCall) -> Result<CallOutcome> {
        match self {
            Self::Modern(client) => client.call_tool(call).await,
            Self::Legacy(peer) => peer.call_tool(call).await,
        }
    }

    /// The task's full state now (`tasks/get`, and for a finished legacy task its result).
    pub async fn get_task(&self, task_id: &str) -> Result<Task> {
        match self {
            Self::Modern(client) => client.get_task(task_id).await,
            Self::Legacy(peer) => match peer.poll_task(task_id, None).await? {
                Polled::Changed(task, _) => Ok(task),
                Polled::Unchanged => unreachable_unchanged(task_id),
            },
        }
    }

    /// Delivers a person's answers, keyed as the task's `inputRequests` were.
    pub async fn update_task(&self, task_id: &str, responses: Map<String, Value>) -> Result<()> {
        match self {
            Self::Modern(client) => client.update_task(task_id, responses).await,
            Self::Legacy(peer) => peer.update_task(task_id, responses).await,
        }
    }

    /// Cancels the task. A legacy task that had already finished is not an error: the next
    /// poll shows how it ended.
    pub async fn cancel_task(&self, task_id: &str) -> Result<()> {
        match self {
            Self::Modern(client) => client.cancel_task(task_id).await,
            Self::Legacy(peer) => peer.cancel_task(task_id).await,
        }
    }
}

impl From<&Client> for Peer {
    fn from(client: &Client) -> Self {
        Self::Modern(client.clone())
    }
}

impl From<&Peer> for Peer {
    fn from(peer: &Peer) -> Self {
        peer.clone()
    }
}

/// A poll without a previous digest always reports a change; should that ever not hold, the
/// caller gets an error rather than a panic.
fn unreachable_unchanged(task_id: &str) -> Result<Task> {
    Err(crate::error::Error::InvalidResponse {
        method: "tasks/get".into(),
        reason: format!("no state for task {task_id}"),
    })
}
