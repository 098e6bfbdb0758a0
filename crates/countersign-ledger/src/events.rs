//! The append-only timeline. Every state change the UI must see is an event with a global,
//! increasing id: readers (the CLI's `watch`, the desktop app) follow it with a cursor.

use rusqlite::{params, Connection, OptionalExtension as _, Row};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::tasks::LedgerStatus;
use super::{now_ms, Error, Result};
use crate::decision::Decision;

/// How the fact reached us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// A `tasks/get` poll.
    Poll,
    /// A push notification (`notifications/tasks`).
    Push,
    /// The answer to `tools/call`.
    Call,
    /// A person (CLI or app).
    User,
    /// The engine itself (timeouts, recovery, restarts).
    Engine,
}

impl Via {
    fn as_str(self) -> &'static str {
        match self {
            Self::Poll => "poll",
            Self::Push => "push",
            Self::Call => "call",
            Self::User => "user",
            Self::Engine => "engine",
        }
    }
    fn parse(s: &str) -> Self {
        match s {
            "poll" => Self::Poll,
            "push" => Self::Push,
            "call" => Self::Call,
            "user" => Self::User,
            _ => Self::Engine,
        }
    }
}

/// Declares a closed set of stored words (in events, or in a column by name): an enum that
/// (de)serialises as its snake_case spelling (so stored JSON reads the same as before the
/// enums), with `as_str` and `parse` for the stored spelling and `Display` for text output.
macro_rules! stored_words {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "ts", derive(ts_rs::TS))]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// The stored spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            /// Parses the stored spelling.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use stored_words;

stored_words! {
    /// How a task joined the ledger.
    TaskOrigin {
        /// We made the call that created it.
        Call => "call",
        /// A person added it by id.
        Adopted => "adopted",
    }
}

stored_words! {
    /// How a `tools/call` ended when it created no task.
    CallOutcomeKind {
        /// The tool ran and returned a result.
        Completed => "completed",
        /// The tool ran and returned a result with `isError`.
        ToolError => "tool_error",
        /// The server asked questions first (MRTR).
        InputRequired => "input_required",
        /// The call failed (a JSON-RPC error, a refused handle…).
        Failed => "failed",
    }
}

stored_words! {
    /// A person's answer to a question, as sent (`ElicitResult.action`).
    AnswerAction {
        /// The form was filled in and sent.
        Accept => "accept",
        /// The person said no to the question.
        Decline => "decline",
        /// The person dismissed the question.
        Cancel => "cancel",
    }
}

stored_words! {
    /// What the outbox delivers.
    DeliveryKind {
        /// Answers, with `tasks/update`.
        Update => "update",
        /// A cancel, with `tasks/cancel`.
        Cancel => "cancel",
    }
}

/// What happened: past-tense facts with typed payloads. Stored as this JSON, and sent to the
/// window as is (with the `ts` feature, ts-rs writes its TypeScript: the UI's `EventKind`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// A server was registered.
    ServerAdded {
        /// Its name.
        name: String,
        /// Its URL.
        url: String,
    },
    /// A server's URL, token flag or poll floor changed (never the token itself).
    ServerUpdated {
        /// Its name.
        name: String,
        /// Its URL now.
        url: String,
    },
    /// A server described itself again (`server/discover`): capabilities and identity stored.
    ServerDiscovered {
        /// Its name.
        name: String,
        /// Whether it declares the Tasks extension.
        supports_tasks: bool,
    },
    /// A server was removed (its tasks with it).
    ServerRemoved {
        /// Its name.
        name: String,
    },
    /// A `tools/call` is about to be sent (the intent is on disk).
    CallStarted {
        /// The intent id.
        intent: i64,
        /// The tool.
        tool: String,
    },
    /// A call's outcome never reached us (the process died while it was in flight).
    CallOutcomeUnknown {
        /// The intent id.
        intent: i64,
        /// The tool.
        tool: String,
    },
    /// A call finished without creating a task.
    CallFinished {
        /// The intent id.
        intent: i64,
        /// The tool.
        tool: String,
        /// How it ended.
        outcome: CallOutcomeKind,
    },
    /// A task joined the ledger (from a call, or adopted by id).
    TaskCreated {
        /// The server's task id.
        task_id: String,
        /// Its first known status.
        status: LedgerStatus,
        /// The tool, when we made the call.
        tool: Option<String>,
        /// How it joined.
        origin: TaskOrigin,
    },
    /// Status and/or status message changed.
    TaskUpdated {
        /// The new status.
        status: LedgerStatus,
        /// The status before.
        previous_status: LedgerStatus,
        /// The new message.
        status_message: Option<String>,
    },
    /// A question appeared (once per key, ever).
    InputRequested {
        /// The input-request key.
        key: String,
        /// The request, verbatim ({method, params}).
        #[cfg_attr(feature = "ts", ts(type = "unknown"))]
        request: Value,
    },
    /// A person answered (recorded before it is sent).
    InputAnswered {
        /// The key.
        key: String,
        /// What the person chose.
        action: AnswerAction,
        /// The exact response that is sent.
        #[cfg_attr(feature = "ts", ts(type = "unknown"))]
        response: Value,
        /// What the person decided, in their terms (absent in events written before it was
        /// recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "ts", ts(optional))]
        decision: Option<Decision>,
        /// Who answered.
        by: String,
    },
    /// A question vanished from the server's list without an answer.
    InputSuperseded {
        /// The key.
        key: String,
    },
    /// `tasks/update` was acknowledged.
    UpdateAcknowledged {
        /// Keys delivered.
        keys: Vec<String>,
    },
    /// `tasks/update` was refused for good.
    UpdateFailed {
        /// Keys not delivered.
        keys: Vec<String>,
        /// Why.
        message: String,
    },
    /// A person asked to cancel.
    CancelRequested {
        /// Who.
        by: String,
    },
    /// `tasks/cancel` was acknowledged (the task may still complete).
    CancelAcknowledged,
    /// `tasks/cancel` was refused for good.
    CancelFailed {
        /// Why.
        message: String,
    },
    /// Delivering an answer or a cancel failed for a passing reason; it is retried with backoff
    /// until the server acknowledges (recorded on the first failure of each delivery).
    DeliveryRetrying {
        /// What is being delivered.
        delivery: DeliveryKind,
        /// A stable error code (`connect`, `http`, …).
        code: String,
        /// The message.
        message: String,
        /// When the next attempt is due.
        retry_in_ms: u64,
    },
    /// A poll failed; polling backs off.
    PollFailed {
        /// A stable error code (`connect`, `http`, `invalid_response`, …).
        code: String,
        /// The message.
        message: String,
        /// When the next attempt is due.
        retry_in_ms: u64,
    },
    /// Polling works again after failures.
    PollRecovered {
        /// How many polls failed in a row.
        failures: u32,
    },
    /// The task reached a terminal state.
    TaskFinished {
        /// completed, failed or cancelled.
        status: LedgerStatus,
        /// The tool result, when completed.
        #[cfg_attr(feature = "ts", ts(type = "unknown"))]
        result: Option<Value>,
        /// The JSON-RPC error, when failed.
        #[cfg_attr(feature = "ts", ts(type = "unknown"))]
        error: Option<Value>,
    },
    /// The task outlived its `ttlMs`: we stop polling (the server may have discarded it).
    TaskExpired {
        /// The TTL it had.
        ttl_ms: u64,
    },
    /// The server no longer knows the task (-32602): the handle is gone, which is not `failed`.
    TaskLost {
        /// The server's message.
        message: String,
    },
    /// The server sent something we did not take as sent (a bad advisory field ignored or
    /// clamped); what matters of the answer was kept.
    ServerDataIgnored {
        /// What kind of thing: `advisory_field`.
        code: String,
        /// What was sent and what we did, for the timeline.
        message: String,
    },
    /// A server stopped answering.
    ServerUnreachable {
        /// Why.
        message: String,
    },
    /// A server answers again.
    ServerRecovered,
    /// A server refuses its token and it cannot be refreshed: a person must sign in again.
    /// Recorded once on the server (`task` empty) and once on each of its unfinished tasks,
    /// whose polling pauses (they keep their state) until [`EventKind::SignedIn`].
    SignInNeeded {
        /// Why (the refusal or the failed refresh; never a token).
        message: String,
    },
    /// A person signed in to a server (here or in another process): engines reload its token
    /// from the OS keyring and resume polling its tasks.
    SignedIn,
    /// A person signed out of a server: its sign-in left the OS keyring; engines reload (drop)
    /// its token, and its tasks wait for a sign-in once the server refuses them.
    SignedOut,
    /// The engine started and resumed unfinished tasks.
    EngineStarted {
        /// How many unfinished tasks were resumed.
        resumed: usize,
    },
    /// An agent's tool call held by the gateway changed state: recorded, decided, claimed for
    /// sending, answered, expired, withdrawn.
    GatedCallChanged {
        /// Countersign's task id of the call (what the agent and the inbox show).
        task_id: String,
        /// The agent.
        agent: String,
        /// The tool.
        tool: String,
        /// Its state now.
        state: super::gated::GatedState,
    },
    /// The person changed settings (in the app or with `countersign settings set`): the app
    /// applies them (do-not-disturb, sound, start at login, gateway), the engine its poll floor.
    SettingsChanged {
        /// The keys written.
        keys: Vec<String>,
    },
}

impl EventKind {
    /// The `kind` tag.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ServerAdded { .. } => "server_added",
            Self::ServerUpdated { .. } => "server_updated",
            Self::ServerDiscovered { .. } => "server_discovered",
            Self::ServerRemoved { .. } => "server_removed",
            Self::CallStarted { .. } => "call_started",
            Self::CallOutcomeUnknown { .. } => "call_outcome_unknown",
            Self::CallFinished { .. } => "call_finished",
            Self::TaskCreated { .. } => "task_created",
            Self::TaskUpdated { .. } => "task_updated",
            Self::InputRequested { .. } => "input_requested",
            Self::InputAnswered { .. } => "input_answered",
            Self::InputSuperseded { .. } => "input_superseded",
            Self::UpdateAcknowledged { .. } => "update_acknowledged",
            Self::UpdateFailed { .. } => "update_failed",
            Self::CancelRequested { .. } => "cancel_requested",
            Self::CancelAcknowledged => "cancel_acknowledged",
            Self::CancelFailed { .. } => "cancel_failed",
            Self::DeliveryRetrying { .. } => "delivery_retrying",
            Self::PollFailed { .. } => "poll_failed",
            Self::PollRecovered { .. } => "poll_recovered",
            Self::TaskFinished { .. } => "task_finished",
            Self::TaskExpired { .. } => "task_expired",
            Self::TaskLost { .. } => "task_lost",
            Self::ServerDataIgnored { .. } => "server_data_ignored",
            Self::ServerUnreachable { .. } => "server_unreachable",
            Self::ServerRecovered => "server_recovered",
            Self::SignInNeeded { .. } => "sign_in_needed",
            Self::SignedIn => "signed_in",
            Self::SignedOut => "signed_out",
            Self::EngineStarted { .. } => "engine_started",
            Self::GatedCallChanged { .. } => "gated_call_changed",
            Self::SettingsChanged { .. } => "settings_changed",
        }
    }
}

/// An event to append.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The task row, if the event is about a task.
    pub task: Option<i64>,
    /// The server row, if any.
    pub server_id: Option<i64>,
    /// How it reached us.
    pub via: Via,
    /// What happened.
    pub kind: EventKind,
}

/// An event as stored, with its cursor id and the names a reader needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    /// The global cursor.
    pub id: i64,
    /// Unix ms.
    pub at: i64,
    /// The task row, if any.
    pub task: Option<i64>,
    /// The server's task id, if any.
    pub task_id: Option<String>,
    /// The server row, if any.
    pub server_id: Option<i64>,
    /// The server name, if any.
    pub server: Option<String>,
    /// How it reached us.
    pub via: Via,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

pub(crate) fn insert(conn: &Connection, event: NewEvent) -> Result<StoredEvent> {
    let at = now_ms();
    let data = serde_json::to_string(&event.kind).map_err(|source| Error::Json {
        what: "events.data",
        source,
    })?;
    // Derive the server from the task when not given, so every task event names its server.
    let server_id = match (event.server_id, event.task) {
        (Some(s), _) => Some(s),
        (None, Some(task)) => conn
            .prepare_cached("SELECT server_id FROM tasks WHERE id = ?1")?
            .query_row([task], |r| r.get(0))
            .optional()?,
        (None, None) => None,
    };
    // Cached statements here and in the other per-observation writes: parsing the SQL again
    // for every change was a visible share of the engine's CPU on busy servers.
    conn.prepare_cached(
        "INSERT INTO events (task, server_id, at, kind, via, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        event.task,
        server_id,
        at,
        event.kind.name(),
        event.via.as_str(),
        data
    ])?;
    let id = conn.last_insert_rowid();
    let (task_id, server) = names(conn, event.task, server_id)?;
    Ok(StoredEvent {
        id,
        at,
        task: event.task,
        task_id,
        server_id,
        server,
        via: event.via,
        kind: event.kind,
    })
}

fn names(
    conn: &Connection,
    task: Option<i64>,
    server_id: Option<i64>,
) -> Result<(Option<String>, Option<String>)> {
    let task_id = match task {
        Some(t) => conn
            .prepare_cached("SELECT task_id FROM tasks WHERE id = ?1")?
            .query_row([t], |r| r.get(0))
            .optional()?,
        None => None,
    };
    let server = match server_id {
        Some(s) => conn
            .prepare_cached("SELECT name FROM servers WHERE id = ?1")?
            .query_row([s], |r| r.get(0))
            .optional()?,
        None => None,
    };
    Ok((task_id, server))
}

const SELECT: &str = "SELECT e.id, e.at, e.task, t.task_id, e.server_id, s.name, e.via, e.data
     FROM events e LEFT JOIN tasks t ON t.id = e.task LEFT JOIN servers s ON s.id = e.server_id";

type RawEvent = (StoredEvent, std::result::Result<EventKind, String>);

fn from_row(row: &Row<'_>) -> rusqlite::Result<RawEvent> {
    let data: String = row.get(7)?;
    let via: String = row.get(6)?;
    let kind = serde_json::from_str::<EventKind>(&data).map_err(|e| e.to_string());
    Ok((
        StoredEvent {
            id: row.get(0)?,
            at: row.get(1)?,
            task: row.get(2)?,
            task_id: row.get(3)?,
            server_id: row.get(4)?,
            server: row.get(5)?,
            via: Via::parse(&via),
            kind: EventKind::ServerRecovered, // replaced below
        },
        kind,
    ))
}

fn collect(rows: impl Iterator<Item = rusqlite::Result<RawEvent>>) -> Result<Vec<StoredEvent>> {
    let mut out = Vec::new();
    for row in rows {
        let (mut event, kind) = row?;
        match kind {
            Ok(kind) => {
                event.kind = kind;
                out.push(event);
            }
            // A row written by a newer build: keep reading the rest, say so.
            Err(reason) => {
                tracing::warn!(id = event.id, %reason, "skipping an event this build cannot read")
            }
        }
    }
    Ok(out)
}

/// The timeline of one task, oldest first.
pub fn for_task(conn: &Connection, task: i64) -> Result<Vec<StoredEvent>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT} WHERE e.task = ?1 ORDER BY e.id"))?;
    let rows = stmt.query_map([task], from_row)?;
    collect(rows)
}

/// The `gated_call_changed` events of one gated call (by Countersign's task id), oldest first
/// (index `events_gated_task`).
pub fn for_gated_call(conn: &Connection, task_id: &str) -> Result<Vec<StoredEvent>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE e.kind = 'gated_call_changed' AND json_extract(e.data, '$.task_id') = ?1
         ORDER BY e.id"
    ))?;
    let rows = stmt.query_map([task_id], from_row)?;
    collect(rows)
}

/// Every event after `cursor`, oldest first, at most `limit`.
pub fn since(conn: &Connection, cursor: i64, limit: usize) -> Result<Vec<StoredEvent>> {
    let mut stmt =
        conn.prepare_cached(&format!("{SELECT} WHERE e.id > ?1 ORDER BY e.id LIMIT ?2"))?;
    let rows = stmt.query_map(params![cursor, limit as i64], from_row)?;
    collect(rows)
}

/// The id of the newest event (0 when empty).
pub fn last_id(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("SELECT COALESCE(MAX(id), 0) FROM events", [], |r| r.get(0))?)
}

/// What the engine last concluded about a server's reachability.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerReachability {
    /// The server row.
    pub server_id: i64,
    /// False after `server_unreachable`, true after `server_recovered`.
    pub reachable: bool,
    /// The failure, when unreachable.
    pub message: Option<String>,
    /// When (Unix ms).
    pub at: i64,
}

/// The latest `server_unreachable`/`server_recovered` event of every server that has one.
pub fn reachability(conn: &Connection) -> Result<Vec<ServerReachability>> {
    let latest = latest_per_server(conn, "'server_unreachable', 'server_recovered'")?;
    Ok(latest
        .into_iter()
        .map(|(server_id, at, kind)| {
            let (reachable, message) = match kind {
                Some(EventKind::ServerUnreachable { message }) => (false, Some(message)),
                _ => (true, None),
            };
            ServerReachability {
                server_id,
                reachable,
                message,
                at,
            }
        })
        .collect())
}

/// For every server that has one, its latest server-level event (no task) among `kinds` (a
/// fixed SQL list of kind names): (server row, when, the event; `None` when it cannot be read).
fn latest_per_server(
    conn: &Connection,
    kinds: &'static str,
) -> Result<Vec<(i64, i64, Option<EventKind>)>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT e.server_id, e.at, e.data FROM events e
         WHERE e.id IN (SELECT MAX(id) FROM events
                        WHERE kind IN ({kinds})
                          AND server_id IS NOT NULL AND task IS NULL
                        GROUP BY server_id)"
    ))?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, String>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (server_id, at, data) = row?;
        out.push((server_id, at, serde_json::from_str::<EventKind>(&data).ok()));
    }
    Ok(out)
}

/// Where a server's OAuth sign-in stands, by its latest server-level `sign_in_needed`,
/// `signed_in` or `signed_out` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignInState {
    /// The server row.
    pub server_id: i64,
    /// Signed in (`signed_in` last).
    pub signed_in: bool,
    /// Why a sign-in is needed (`sign_in_needed` or `signed_out` last); `None` after
    /// `signed_in`.
    pub needed: Option<String>,
    /// When (Unix ms).
    pub at: i64,
}

/// The latest server-level sign-in event of every server that has one.
pub fn sign_in_states(conn: &Connection) -> Result<Vec<SignInState>> {
    let latest = latest_per_server(conn, "'sign_in_needed', 'signed_in', 'signed_out'")?;
    Ok(latest
        .into_iter()
        .map(|(server_id, at, kind)| {
            let (signed_in, needed) = match kind {
                Some(EventKind::SignInNeeded { message }) => (false, Some(message)),
                Some(EventKind::SignedIn) => (true, None),
                // Signed out on purpose: the server still asks for a sign-in to poll its tasks.
                _ => (false, Some("signed out".to_owned())),
            };
            SignInState {
                server_id,
                signed_in,
                needed,
                at,
            }
        })
        .collect())
}

/// `signed_in`/`signed_out` events with `cursor < id <= upto`, as (server row, signed in),
/// oldest first: what an engine reacts to by reloading that server's token.
pub fn sign_ins_between(conn: &Connection, cursor: i64, upto: i64) -> Result<Vec<(i64, bool)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT server_id, kind = 'signed_in' FROM events
         WHERE id > ?1 AND id <= ?2 AND kind IN ('signed_in', 'signed_out')
           AND server_id IS NOT NULL AND task IS NULL
         ORDER BY id",
    )?;
    let rows = stmt.query_map([cursor, upto], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_payloads_are_stored_with_the_same_spelling_as_before() {
        let cases = [
            (
                EventKind::TaskUpdated {
                    status: LedgerStatus::InputRequired,
                    previous_status: LedgerStatus::Working,
                    status_message: None,
                },
                json!({"kind": "task_updated", "status": "input_required", "previous_status": "working", "status_message": null}),
            ),
            (
                EventKind::TaskCreated {
                    task_id: "t".into(),
                    status: LedgerStatus::Working,
                    tool: None,
                    origin: TaskOrigin::Adopted,
                },
                json!({"kind": "task_created", "task_id": "t", "status": "working", "tool": null, "origin": "adopted"}),
            ),
            (
                EventKind::CallFinished {
                    intent: 1,
                    tool: "x".into(),
                    outcome: CallOutcomeKind::ToolError,
                },
                json!({"kind": "call_finished", "intent": 1, "tool": "x", "outcome": "tool_error"}),
            ),
            (
                EventKind::InputAnswered {
                    key: "k".into(),
                    action: AnswerAction::Decline,
                    response: json!({"action": "decline"}),
                    decision: Some(Decision::Declined),
                    by: "me".into(),
                },
                json!({"kind": "input_answered", "key": "k", "action": "decline", "response": {"action": "decline"}, "decision": "declined", "by": "me"}),
            ),
            (
                EventKind::DeliveryRetrying {
                    delivery: DeliveryKind::Cancel,
                    code: "connect".into(),
                    message: "down".into(),
                    retry_in_ms: 5,
                },
                json!({"kind": "delivery_retrying", "delivery": "cancel", "code": "connect", "message": "down", "retry_in_ms": 5}),
            ),
        ];
        for (kind, stored) in cases {
            assert_eq!(serde_json::to_value(&kind).expect("serialises"), stored);
            let read: EventKind =
                serde_json::from_value(stored).expect("rows written before the enums still read");
            assert_eq!(read, kind);
        }
    }

    #[test]
    fn an_unknown_stored_status_is_an_error_not_a_guess() {
        let stored =
            json!({"kind": "task_finished", "status": "paused", "result": null, "error": null});
        assert!(
            serde_json::from_value::<EventKind>(stored).is_err(),
            "an unknown status must not read as `working` (the app) or `cancelled` (the CLI)"
        );
    }
}
