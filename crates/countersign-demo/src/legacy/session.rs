//! Sessions: what `initialize` opens and every later request names in `Mcp-Session-Id`.
//!
//! One map from session id to session, read-locked once per request. A session holds what the
//! era keeps per client: the negotiated version and capabilities, its tasks in creation order
//! (for `tasks/list`; the store itself binds each task to its session's serial number), its GET
//! stream, and the server's own requests (questions of its tasks) waiting for the client's
//! response.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use axum::http::HeaderValue;
use rand::RngCore;
use tokio::sync::Notify;

use crate::wire::ClientCaps;

/// Sessions held at once. Beyond that `initialize` is refused: a client that opens sessions
/// in a loop must not grow the server without bound.
pub(crate) const MAX_SESSIONS: usize = 100_000;

/// Every session of the server.
#[derive(Default)]
pub(crate) struct Sessions {
    map: RwLock<HashMap<Arc<str>, Arc<Session>>>,
    /// Serial numbers are the tasks' owners; 0 is no session.
    serials: AtomicU64,
    opened: AtomicU64,
}

impl Sessions {
    /// Opens a session; `None` when [`MAX_SESSIONS`] are open.
    pub(crate) fn open(&self, caps: ClientCaps) -> Option<Arc<Session>> {
        let id = new_session_id();
        let header = HeaderValue::from_str(&id).ok()?;
        let session = Arc::new(Session {
            id: Arc::from(id.as_str()),
            header,
            serial: self.serials.fetch_add(1, Ordering::Relaxed) + 1,
            caps,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            ended: AtomicBool::new(false),
        });
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_SESSIONS {
            return None;
        }
        map.insert(session.id.clone(), session.clone());
        self.opened.fetch_add(1, Ordering::Relaxed);
        Some(session)
    }

    /// The session with this id.
    pub(crate) fn find(&self, id: &str) -> Option<Arc<Session>> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Forgets the session; its streams are ended by the caller.
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<Session>> {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }

    /// Forgets every session (shutdown): their waiting `tasks/result` streams end.
    pub(crate) fn remove_all(&self) -> Vec<Arc<Session>> {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        map.drain().map(|(_, session)| session).collect()
    }

    /// Sessions held now.
    pub(crate) fn len(&self) -> usize {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Sessions opened since start.
    pub(crate) fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }
}

/// 128 random bits in hex, like the SDK's UUIDs: unguessable, since the id is all that
/// stands between a client and another's tasks.
fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A question of a task, sent to the client as a server request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    pub(crate) task_id: String,
    pub(crate) key: String,
}

#[derive(Default)]
struct State {
    /// Task ids in creation order.
    tasks: Vec<String>,
    /// The hub key of the open GET stream.
    stream: Option<u64>,
    /// The server's request ids: its own id space, from 0 as the SDK's.
    next_request: u64,
    asked: HashMap<u64, Question>,
    /// The request id each question was asked under, so a question delivered again (on a new
    /// `tasks/result` stream) keeps its id and a late answer still counts.
    by_key: HashMap<String, u64>,
}

pub(crate) struct Session {
    pub(crate) id: Arc<str>,
    /// `Mcp-Session-Id` as a header value, made once.
    pub(crate) header: HeaderValue,
    /// The owner of its tasks in the store.
    pub(crate) serial: u64,
    /// What the client declared at `initialize`.
    pub(crate) caps: ClientCaps,
    state: Mutex<State>,
    /// Woken when a task of the session may have moved on because of the client (an answer, a
    /// cancel) or the session ended: `tasks/result` streams look again.
    pub(crate) changed: Notify,
    ended: AtomicBool,
}

impl Session {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a new task; if a GET stream is open, `follow` adds the task to it (under the
    /// session's lock, so a stream opening meanwhile cannot miss the task).
    pub(crate) fn add_task(&self, task_id: String, follow: impl FnOnce(u64, &str)) {
        let mut state = self.lock();
        if let Some(key) = state.stream {
            follow(key, &task_id);
        }
        state.tasks.push(task_id);
    }

    /// Up to `limit` task ids from `start`, and where the next page starts; `None` when `start`
    /// is past the end.
    pub(crate) fn tasks_page(
        &self,
        start: usize,
        limit: usize,
    ) -> Option<(Vec<String>, Option<usize>)> {
        let state = self.lock();
        if start > state.tasks.len() {
            return None;
        }
        let end = start.saturating_add(limit).min(state.tasks.len());
        let page = state.tasks[start..end].to_vec();
        Some((page, (end < state.tasks.len()).then_some(end)))
    }

    /// Opens the GET stream with `open` (given the session's task ids), unless one is open
    /// (`is_open` says whether the recorded one still is). `None`: one is already open.
    pub(crate) fn open_stream<S>(
        &self,
        is_open: impl Fn(u64) -> bool,
        open: impl FnOnce(&[String]) -> (u64, S),
    ) -> Option<S> {
        let mut state = self.lock();
        if state.stream.is_some_and(&is_open) {
            return None;
        }
        let (key, stream) = open(&state.tasks);
        state.stream = Some(key);
        Some(stream)
    }

    /// The request id to ask `key` of `task_id` under: the one it was asked under, or a new one.
    pub(crate) fn ask(&self, task_id: &str, key: &str) -> u64 {
        let mut state = self.lock();
        if let Some(id) = state.by_key.get(key) {
            return *id;
        }
        let id = state.next_request;
        state.next_request += 1;
        state.by_key.insert(key.to_owned(), id);
        state.asked.insert(
            id,
            Question {
                task_id: task_id.to_owned(),
                key: key.to_owned(),
            },
        );
        id
    }

    /// The question a client's response answers; it is no longer waiting.
    pub(crate) fn answered(&self, request_id: u64) -> Option<Question> {
        let mut state = self.lock();
        let question = state.asked.remove(&request_id)?;
        state.by_key.remove(&question.key);
        Some(question)
    }

    /// Forgets the questions of a task that ended.
    pub(crate) fn forget_questions(&self, task_id: &str) {
        let mut state = self.lock();
        let State { asked, by_key, .. } = &mut *state;
        asked.retain(|_, question| {
            let keep = question.task_id != task_id;
            if !keep {
                by_key.remove(&question.key);
            }
            keep
        });
    }

    /// Ends the session: waiting streams stop. Returns the GET stream's key, if any.
    pub(crate) fn end(&self) -> Option<u64> {
        self.ended.store(true, Ordering::Release);
        self.changed.notify_waiters();
        self.lock().stream.take()
    }

    pub(crate) fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_have_distinct_unguessable_ids_and_serials() {
        let sessions = Sessions::default();
        let a = sessions.open(ClientCaps::default());
        let b = sessions.open(ClientCaps::default());
        let (Some(a), Some(b)) = (a, b) else {
            panic!("two sessions open")
        };
        assert_ne!(a.id, b.id);
        assert_eq!(a.id.len(), 32);
        assert!(a.serial > 0 && b.serial > 0 && a.serial != b.serial);
        assert!(sessions.find(&a.id).is_some());
        assert!(sessions.find("nope").is_none());
        assert!(sessions.remove(&a.id).is_some());
        assert!(sessions.find(&a.id).is_none());
        assert_eq!((sessions.len(), sessions.opened()), (1, 2));
    }

    #[test]
    fn a_question_keeps_its_id_until_answered() {
        let sessions = Sessions::default();
        let Some(session) = sessions.open(ClientCaps::default()) else {
            panic!("a session opens")
        };
        let first = session.ask("t", "t:confirm-1");
        assert_eq!(
            session.ask("t", "t:confirm-1"),
            first,
            "asked again, same id"
        );
        let second = session.ask("t", "t:other-2");
        assert_ne!(first, second);
        assert_eq!(
            session.answered(first),
            Some(Question {
                task_id: "t".into(),
                key: "t:confirm-1".into()
            })
        );
        assert_eq!(session.answered(first), None, "answered once");
        assert_ne!(session.ask("t", "t:confirm-1"), first, "asked anew, new id");
        session.forget_questions("t");
        assert_eq!(session.answered(second), None);
    }

    #[test]
    fn pages_of_tasks_end_with_no_cursor() {
        let sessions = Sessions::default();
        let Some(session) = sessions.open(ClientCaps::default()) else {
            panic!("a session opens")
        };
        for n in 0..5 {
            session.add_task(format!("t{n}"), |_, _| panic!("no stream is open"));
        }
        assert_eq!(
            session.tasks_page(0, 2),
            Some((vec!["t0".into(), "t1".into()], Some(2)))
        );
        assert_eq!(session.tasks_page(4, 2), Some((vec!["t4".into()], None)));
        assert_eq!(session.tasks_page(5, 2), Some((vec![], None)));
        assert_eq!(session.tasks_page(6, 2), None);
    }
}
