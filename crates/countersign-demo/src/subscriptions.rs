//! `subscriptions/listen` with the Tasks extension's `notifications.taskIds`: push task status.
//!
//! The task store is lazy (a task only advances when it is read), so push needs a driver: one
//! pusher task per server keeps a deadline heap of the next self-driven change of every
//! subscribed task (the end of its current `working` step), wakes at the earliest, reads the
//! tasks that are due (which advances them, stamping each change with its scheduled time), and
//! publishes every task whose change count moved past what a subscriber last got. Changes made
//! by requests (`tasks/update`, `tasks/cancel`) mark the task dirty and wake the pusher at once.
//!
//! What a subscriber sees, in order: `notifications/subscriptions/acknowledged` with the subset
//! of the filter this server honours (only task ids it holds; none of the core list-changed
//! filters, since its tool list never changes and it has no prompts or resources), then the
//! current state of every acknowledged task (so a client that subscribes late misses nothing
//! that happened before), then `notifications/tasks` on every change: the full task exactly as
//! `tasks/get` returns it (the `resultType` of the result aside), with
//! `_meta["io.modelcontextprotocol/subscriptionId"]` = the listen request's id. Steps closer
//! together than the pusher can wake merge into one notification of the later state, exactly as
//! two steps between two polls would.
//!
//! A subscriber whose channel is full (it stopped reading) is dropped rather than buffered
//! without bound. On shutdown every stream gets the graceful closing result.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::wire::TASKS_EXTENSION;

/// `_meta` key tying every message on a stream to its listen request.
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// Frames a subscriber may have queued before it counts as stuck and is dropped: room for the
/// current state of every task it asked for, twice, and at least this many.
const CHANNEL_CAPACITY: usize = 1024;

/// What goes down one listen stream.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A JSON-RPC message.
    Message(Value),
    /// The subscription ends gracefully: the closing result, then the end of the body.
    Close,
}

/// The filter of a `subscriptions/listen` request, as far as this server reads it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ListenFilter {
    /// `taskIds`, if present.
    pub(crate) task_ids: Option<Vec<String>>,
}

impl ListenFilter {
    /// Reads `params.notifications`: required, an object; the core fields are type-checked
    /// (and then not honoured), `taskIds` must be an array of strings.
    pub(crate) fn parse(params: Option<&Map<String, Value>>) -> Result<Self> {
        let notifications = params
            .and_then(|params| params.get("notifications"))
            .ok_or_else(|| Error::invalid_params("params.notifications is required"))?
            .as_object()
            .ok_or_else(|| Error::invalid_params("params.notifications must be an object"))?;
        for flag in [
            "toolsListChanged",
            "promptsListChanged",
            "resourcesListChanged",
        ] {
            if notifications.get(flag).is_some_and(|v| !v.is_boolean()) {
                return Err(Error::invalid_params(format!(
                    "notifications.{flag} must be a boolean"
                )));
            }
        }
        let strings = |field: &str| -> Result<Option<Vec<String>>> {
            match notifications.get(field) {
                None => Ok(None),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_owned).ok_or_else(|| {
                            Error::invalid_params(format!(
                                "notifications.{field} must hold strings"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>>>()
                    .map(Some),
                Some(_) => Err(Error::invalid_params(format!(
                    "notifications.{field} must be an array of strings"
                ))),
            }
        };
        strings("resourceSubscriptions")?;
        Ok(Self {
            task_ids: strings("taskIds")?,
        })
    }
}

/// `subscriptions/listen`: checks the filter, acknowledges what this server honours and opens
/// the subscription. Asking for task notifications requires the tasks extension (-32021).
pub(crate) fn listen(
    hub: &Arc<Hub>,
    holds: impl Fn(&str) -> bool,
    id: &Value,
    params: Option<&Map<String, Value>>,
    declared_tasks: bool,
) -> Result<Subscription> {
    let filter = ListenFilter::parse(params)?;
    if filter.task_ids.is_some() && !declared_tasks {
        return Err(Error::MissingCapability {
            detail: format!(
                "task status notifications belong to the tasks extension ({TASKS_EXTENSION}); the \
                 client did not declare it for this request"
            ),
            required: json!({"extensions": {TASKS_EXTENSION: {}}}),
        });
    }
    let mut acknowledged = Map::new();
    let mut tasks = Vec::new();
    if let Some(requested) = &filter.task_ids {
        let mut seen = HashSet::new();
        tasks = requested
            .iter()
            .filter(|task_id| seen.insert(task_id.as_str()) && holds(task_id))
            .cloned()
            .collect();
        acknowledged.insert("taskIds".into(), json!(tasks));
    }
    let ack = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "_meta": {META_SUBSCRIPTION_ID: id},
            "notifications": acknowledged,
        },
    });
    Ok(hub.subscribe(id.clone(), tasks, ack))
}

/// One open subscription: the receiving end of its frames. Dropping it (the client went away,
/// or the body ended) unsubscribes.
pub(crate) struct Subscription {
    pub(crate) id: Value,
    pub(crate) frames: mpsc::Receiver<Frame>,
    key: u64,
    hub: Arc<Hub>,
}

impl Subscription {
    /// The hub's key for this stream.
    pub(crate) fn key(&self) -> u64 {
        self.key
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.unsubscribe(self.key);
    }
}

/// Who a stream is for, which decides the envelope of what it gets.
enum Audience {
    /// A `subscriptions/listen` request: `notifications/tasks` tagged with its id.
    Listen { request_id: Value },
    /// A legacy session's GET stream: `notifications/tasks/status` with the task as params.
    Session,
}

struct Subscriber {
    audience: Audience,
    tx: mpsc::Sender<Frame>,
    tasks: Vec<String>,
    /// Change count of each task when it was last sent to this subscriber.
    sent: HashMap<String, usize>,
}

#[derive(Default)]
struct State {
    subscribers: HashMap<u64, Subscriber>,
    by_task: HashMap<String, HashSet<u64>>,
    /// Tasks to look at now (changed by a request, or newly subscribed).
    dirty: HashSet<String>,
    /// Next self-driven change per task, with lazy deletion through `scheduled`.
    due: BinaryHeap<Reverse<(Instant, String)>>,
    scheduled: HashMap<String, Instant>,
    closing: bool,
}

/// Every subscription of one server and the work of its pusher.
#[derive(Default)]
pub(crate) struct Hub {
    state: Mutex<State>,
    pub(crate) wake: Notify,
    next_key: AtomicU64,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn subscribe(
        self: &Arc<Self>,
        request_id: Value,
        tasks: Vec<String>,
        ack: Value,
    ) -> Subscription {
        // The first burst is one message per task; the channel must hold it whole.
        let (tx, frames) = mpsc::channel(CHANNEL_CAPACITY.max(tasks.len().saturating_mul(2) + 2));
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        // The channel is new and empty: these cannot fail for lack of room.
        let _ = tx.try_send(Frame::Message(ack));
        let mut state = self.lock();
        if state.closing {
            let _ = tx.try_send(Frame::Close);
        } else {
            for task in &tasks {
                state.by_task.entry(task.clone()).or_default().insert(key);
                state.dirty.insert(task.clone());
            }
            state.subscribers.insert(
                key,
                Subscriber {
                    audience: Audience::Listen {
                        request_id: request_id.clone(),
                    },
                    tx,
                    tasks,
                    sent: HashMap::new(),
                },
            );
        }
        drop(state);
        self.wake.notify_one();
        Subscription {
            id: request_id,
            frames,
            key,
            hub: self.clone(),
        }
    }

    /// Opens a legacy session's GET stream over `tasks` (id, change count now): only changes
    /// after those counts are sent, as the TypeScript SDK sends a status notification on each
    /// change and nothing on opening. After shutdown began it is closed at once.
    pub(crate) fn subscribe_session(self: &Arc<Self>, tasks: Vec<(String, usize)>) -> Subscription {
        let (tx, frames) = mpsc::channel(CHANNEL_CAPACITY.max(tasks.len().saturating_mul(2) + 2));
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut state = self.lock();
        if state.closing {
            let _ = tx.try_send(Frame::Close);
        } else {
            let mut sent = HashMap::with_capacity(tasks.len());
            let mut ids = Vec::with_capacity(tasks.len());
            for (task, version) in tasks {
                state.by_task.entry(task.clone()).or_default().insert(key);
                // Looked at once so that its next self-driven change gets scheduled.
                state.dirty.insert(task.clone());
                sent.insert(task.clone(), version);
                ids.push(task);
            }
            state.subscribers.insert(
                key,
                Subscriber {
                    audience: Audience::Session,
                    tx,
                    tasks: ids,
                    sent,
                },
            );
        }
        drop(state);
        self.wake.notify_one();
        Subscription {
            id: Value::Null,
            frames,
            key,
            hub: self.clone(),
        }
    }

    /// Adds a task (at change count `version`) to the stream `key`, if it is still open.
    pub(crate) fn add_task(&self, key: u64, task: &str, version: usize) {
        let mut state = self.lock();
        let State {
            subscribers,
            by_task,
            dirty,
            ..
        } = &mut *state;
        let Some(subscriber) = subscribers.get_mut(&key) else {
            return;
        };
        subscriber.tasks.push(task.to_owned());
        subscriber.sent.insert(task.to_owned(), version);
        by_task.entry(task.to_owned()).or_default().insert(key);
        dirty.insert(task.to_owned());
        drop(state);
        self.wake.notify_one();
    }

    /// Whether the stream `key` is still open.
    pub(crate) fn is_open(&self, key: u64) -> bool {
        self.lock().subscribers.contains_key(&key)
    }

    /// Ends the stream `key` (its session ended): it gets the closing frame.
    pub(crate) fn close(&self, key: u64) {
        let mut state = self.lock();
        if let Some(subscriber) = state.subscribers.get(&key) {
            let _ = subscriber.tx.try_send(Frame::Close);
        }
        remove(&mut state, key);
    }

    fn unsubscribe(&self, key: u64) {
        let mut state = self.lock();
        remove(&mut state, key);
    }

    /// A request changed this task: publish it now.
    pub(crate) fn touched(&self, task_id: &str) {
        let mut state = self.lock();
        if state.by_task.contains_key(task_id) {
            state.dirty.insert(task_id.to_owned());
            drop(state);
            self.wake.notify_one();
        }
    }

    /// Open subscriptions.
    pub(crate) fn len(&self) -> usize {
        self.lock().subscribers.len()
    }

    /// Drops every subscription without a closing result: the streams break.
    pub(crate) fn drop_all(&self) -> usize {
        let mut state = self.lock();
        let keys: Vec<u64> = state.subscribers.keys().copied().collect();
        for key in &keys {
            remove(&mut state, *key);
        }
        keys.len()
    }

    /// Ends every subscription gracefully (a closing result each); with `for_good`, new ones
    /// are closed as soon as they are acknowledged.
    pub(crate) fn close_all(&self, for_good: bool) -> usize {
        let mut state = self.lock();
        state.closing |= for_good;
        let subscribers = std::mem::take(&mut state.subscribers);
        state.by_task.clear();
        let count = subscribers.len();
        for subscriber in subscribers.into_values() {
            // A subscriber too far behind to take the closing frame is simply dropped.
            let _ = subscriber.tx.try_send(Frame::Close);
        }
        count
    }

    /// The tasks to look at now: the dirty ones and those whose next change is due.
    pub(crate) fn take_work(&self, now: Instant) -> Vec<String> {
        let mut state = self.lock();
        let mut work: HashSet<String> = std::mem::take(&mut state.dirty);
        while let Some(Reverse((at, _))) = state.due.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, task))) = state.due.pop() else {
                break;
            };
            if state.scheduled.get(&task) == Some(&at) {
                state.scheduled.remove(&task);
                work.insert(task);
            }
        }
        work.retain(|task| state.by_task.contains_key(task));
        work.into_iter().collect()
    }

    pub(crate) fn next_due(&self) -> Option<Instant> {
        let mut state = self.lock();
        loop {
            let (at, task) = match state.due.peek() {
                Some(Reverse((at, task))) => (*at, task.clone()),
                None => return None,
            };
            if state.scheduled.get(&task) == Some(&at) && state.by_task.contains_key(&task) {
                return Some(at);
            }
            state.due.pop();
            if state.scheduled.get(&task) == Some(&at) {
                state.scheduled.remove(&task);
            }
        }
    }

    pub(crate) fn schedule(&self, task: &str, at: Instant) {
        let mut state = self.lock();
        if !state.by_task.contains_key(task) || state.scheduled.get(task) == Some(&at) {
            return;
        }
        state.scheduled.insert(task.to_owned(), at);
        state.due.push(Reverse((at, task.to_owned())));
    }

    /// The task is gone (unknown or expired): nothing more will be published for it.
    pub(crate) fn forget(&self, task: &str) {
        let mut state = self.lock();
        state.scheduled.remove(task);
    }

    /// Sends `view` (a `tasks/get` result at change count `version`) to every subscriber of
    /// `task` that has not had this version. Returns how many notifications were queued.
    pub(crate) fn publish(&self, task: &str, version: usize, view: &Value) -> u64 {
        let mut state = self.lock();
        let Some(keys) = state.by_task.get(task).cloned() else {
            return 0;
        };
        let Value::Object(view) = view else {
            return 0;
        };
        let mut sent = 0;
        let mut stuck = Vec::new();
        for key in keys {
            let Some(subscriber) = state.subscribers.get_mut(&key) else {
                continue;
            };
            if subscriber
                .sent
                .get(task)
                .is_some_and(|seen| *seen >= version)
            {
                continue;
            }
            let message = match &subscriber.audience {
                Audience::Listen { request_id } => {
                    let mut params = view.clone();
                    // The notification carries the task, not the result envelope of tasks/get.
                    params.remove("resultType");
                    params.insert("_meta".into(), json!({META_SUBSCRIPTION_ID: request_id}));
                    json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
                }
                Audience::Session => json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/tasks/status",
                    "params": view,
                }),
            };
            match subscriber.tx.try_send(Frame::Message(message)) {
                Ok(()) => {
                    subscriber.sent.insert(task.to_owned(), version);
                    sent += 1;
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!("a listen stream stopped reading; dropping it");
                    stuck.push(key);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => stuck.push(key),
            }
        }
        for key in stuck {
            remove(&mut state, key);
        }
        sent
    }
}

fn remove(state: &mut State, key: u64) {
    let Some(subscriber) = state.subscribers.remove(&key) else {
        return;
    };
    for task in &subscriber.tasks {
        if let Some(keys) = state.by_task.get_mut(task) {
            keys.remove(&key);
            if keys.is_empty() {
                state.by_task.remove(task);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_requires_notifications_and_checks_types() {
        let parse = |params: Value| ListenFilter::parse(params.as_object());
        assert_eq!(
            parse(json!({"notifications": {"taskIds": ["a", "b"], "toolsListChanged": true}})).ok(),
            Some(ListenFilter {
                task_ids: Some(vec!["a".into(), "b".into()])
            })
        );
        assert_eq!(
            parse(json!({"notifications": {}})).ok(),
            Some(ListenFilter::default())
        );
        for bad in [
            json!({}),
            json!({"notifications": []}),
            json!({"notifications": {"taskIds": "a"}}),
            json!({"notifications": {"taskIds": [1]}}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": {}}}),
        ] {
            assert!(
                matches!(parse(bad.clone()), Err(Error::InvalidParams { .. })),
                "{bad} must be invalid params"
            );
        }
    }

    #[tokio::test]
    async fn publishes_each_version_once_per_subscriber_and_tags_it() {
        let hub = Arc::new(Hub::default());
        let mut sub = hub.subscribe(json!("listen-1"), vec!["t".into()], json!({"ack": true}));
        assert!(
            matches!(sub.frames.try_recv(), Ok(Frame::Message(m)) if m == json!({"ack": true}))
        );
        assert_eq!(
            hub.take_work(Instant::now()),
            vec!["t".to_owned()],
            "a new subscription looks at its tasks at once"
        );
        let view = json!({"taskId": "t", "status": "working", "resultType": "complete"});
        assert_eq!(hub.publish("t", 1, &view), 1);
        assert_eq!(
            hub.publish("t", 1, &view),
            0,
            "the same version is not sent twice"
        );
        match sub.frames.try_recv() {
            Ok(Frame::Message(m)) => assert_eq!(
                m,
                json!({"jsonrpc": "2.0", "method": "notifications/tasks",
                       "params": {"taskId": "t", "status": "working",
                                  "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}}})
            ),
            other => panic!("a notification expected, got {other:?}"),
        }
        assert_eq!(
            hub.publish("other", 1, &view),
            0,
            "nobody listens to other tasks"
        );
        assert_eq!(hub.len(), 1);
        drop(sub);
        assert_eq!(hub.len(), 0, "dropping the stream unsubscribes");
    }

    #[tokio::test]
    async fn a_session_stream_gets_status_notifications_past_its_seeds_only() {
        let hub = Arc::new(Hub::default());
        let mut sub = hub.subscribe_session(vec![("t".into(), 2)]);
        let view = json!({"taskId": "t", "status": "working"});
        assert_eq!(hub.publish("t", 2, &view), 0, "what it had at opening");
        assert_eq!(hub.publish("t", 3, &view), 1);
        match sub.frames.try_recv() {
            Ok(Frame::Message(m)) => assert_eq!(
                m,
                json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                       "params": {"taskId": "t", "status": "working"}})
            ),
            other => panic!("a notification expected, got {other:?}"),
        }
        hub.add_task(sub.key(), "u", 1);
        assert_eq!(
            hub.publish("u", 1, &view),
            0,
            "a new task's first state is its handle"
        );
        assert_eq!(hub.publish("u", 2, &view), 1);
        assert!(hub.is_open(sub.key()));
        hub.close(sub.key());
        assert!(!hub.is_open(sub.key()));
        assert!(matches!(sub.frames.try_recv(), Ok(Frame::Message(_))));
        assert!(matches!(sub.frames.try_recv(), Ok(Frame::Close)));
    }

    #[tokio::test]
    async fn closing_sends_the_close_frame_and_dropping_breaks_the_stream() {
        let hub = Arc::new(Hub::default());
        let mut graceful = hub.subscribe(json!(1), vec![], json!({}));
        let _ = graceful.frames.try_recv();
        assert_eq!(hub.close_all(false), 1);
        assert!(matches!(graceful.frames.try_recv(), Ok(Frame::Close)));
        let mut abrupt = hub.subscribe(json!(2), vec![], json!({}));
        let _ = abrupt.frames.try_recv();
        assert_eq!(hub.drop_all(), 1);
        assert!(matches!(
            abrupt.frames.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn due_tasks_come_back_at_their_deadline_only_while_subscribed() {
        let hub = Arc::new(Hub::default());
        let sub = hub.subscribe(json!(1), vec!["t".into()], json!({}));
        let _ = hub.take_work(Instant::now());
        let at = Instant::now() + std::time::Duration::from_millis(500);
        hub.schedule("t", at);
        hub.schedule("t", at);
        assert_eq!(hub.next_due(), Some(at));
        assert!(hub.take_work(Instant::now()).is_empty());
        assert_eq!(
            hub.take_work(at),
            vec!["t".to_owned()],
            "due once, however often scheduled"
        );
        assert_eq!(hub.next_due(), None);
        hub.schedule("t", at + std::time::Duration::from_secs(1));
        drop(sub);
        assert_eq!(hub.next_due(), None, "nobody listens any more");
    }
}
