//! The two long-lived legacy streams a caller drives: `tasks/result` (the server's questions for
//! a task, then its result) and the session's GET stream (status pushes, requests of its own).
//!
//! Both follow one policy for what the server asks of us: `elicitation/create` goes to the
//! caller, who answers it (or not) in its own time; any other method (`sampling/createMessage`,
//! `roots/list`, unknown ones) is refused at once with a JSON-RPC error and reported, so nothing
//! on either side waits for an answer that will not come. At most
//! [`MAX_SERVER_REQUESTS_PER_STREAM`] requests per stream; a dropped stream is resumed with
//! `Last-Event-ID` after the server's `retry:`, at most [`MAX_RECONNECTS`] times in a row.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::stream::{Fault, Inbound, Incoming};
use super::wire::{related_task_meta, ElicitAction, ServerRequest, Task};
use super::{invalid, LegacyClient, MAX_RECONNECTS, MAX_SERVER_REQUESTS_PER_STREAM};
use crate::error::{Error, Result};
use crate::response::rpc_error;
use crate::wire::ToolResult;

const TASKS_RESULT: &str = "tasks/result";

/// One thing that happened on a `tasks/result` stream.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskResultEvent {
    /// The server asks a person something (`elicitation/create`): answer with
    /// [`TaskResult::answer_elicitation`] or [`TaskResult::respond`]. The server waits.
    Request(ServerRequest),
    /// The server asked for something Countersign does not do; it was already refused with a
    /// JSON-RPC error (-32601). For the timeline.
    Refused(ServerRequest),
    /// A `notifications/tasks/status` that came on this stream.
    Status(Task),
    /// The task's result (`isError` kept): the last event.
    Completed(ToolResult),
}

/// An open `tasks/result` for one task ([`LegacyClient::task_result`]). Dropping it closes the
/// stream; the task goes on, and a new `tasks/result` can be opened later.
#[derive(Debug)]
pub struct TaskResult {
    client: LegacyClient,
    task_id: String,
    /// The id of the `tasks/result` request now open.
    request_id: u64,
    inbound: Inbound,
    idle_timeout: Duration,
    requests: usize,
    reconnects: usize,
    /// The stream now read is a `Last-Event-ID` resumption (a second drop re-sends the request).
    resumed: bool,
    done: bool,
}

impl TaskResult {
    pub(super) async fn open(
        client: LegacyClient,
        task_id: &str,
        idle_timeout: Duration,
    ) -> Result<Self> {
        let (request_id, inbound) = Self::post(&client, task_id).await?;
        Ok(Self {
            client,
            task_id: task_id.into(),
            request_id,
            inbound,
            idle_timeout,
            requests: 0,
            reconnects: 0,
            resumed: false,
            done: false,
        })
    }

    async fn post(client: &LegacyClient, task_id: &str) -> Result<(u64, Inbound)> {
        let id = client.next_id();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": TASKS_RESULT, "params": {"taskId": task_id}});
        match client.post(TASKS_RESULT, &body, true).await? {
            super::session::Posted::Body(inbound, _) => Ok((id, inbound)),
            super::session::Posted::Accepted => {
                Err(invalid(TASKS_RESULT, "202 Accepted in answer to a request"))
            }
        }
    }

    /// The task this stream is for.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The next event; `None` after [`TaskResultEvent::Completed`] or an error. The task's own
    /// failure (a JSON-RPC error as its result) is that error, typed as for any request; a
    /// stream silent for the idle timeout is [`Error::Timeout`]; a server past
    /// [`MAX_SERVER_REQUESTS_PER_STREAM`] is [`Error::InvalidResponse`].
    pub async fn next(&mut self) -> Option<Result<TaskResultEvent>> {
        if self.done {
            return None;
        }
        let item = self.step().await;
        if matches!(item, Err(_) | Ok(TaskResultEvent::Completed(_))) {
            self.done = true;
        }
        Some(item)
    }

    async fn step(&mut self) -> Result<TaskResultEvent> {
        loop {
            let next = tokio::time::timeout(self.idle_timeout, self.inbound.next()).await;
            let message = match next {
                Err(_) => {
                    return Err(Error::Timeout {
                        url: self.client.url().into(),
                        after: self.idle_timeout,
                    })
                }
                Ok(Ok(Some(message))) => message,
                Ok(Ok(None)) | Ok(Err(Fault::Transport(_))) => {
                    self.reopen().await?;
                    continue;
                }
                Ok(Err(fault)) => return Err(self.client.fault(TASKS_RESULT, fault)),
            };
            self.reconnects = 0;
            match message {
                Incoming::Response { id, answer } if id == json!(self.request_id) => {
                    let result = answer
                        .map_err(|error| rpc_error(TASKS_RESULT, Some(&self.task_id), error))?;
                    let Value::Object(result) = result else {
                        return Err(invalid(TASKS_RESULT, "the result must be an object"));
                    };
                    return Ok(TaskResultEvent::Completed(ToolResult(result)));
                }
                Incoming::Response { .. } => {}
                Incoming::Request(request) => {
                    self.requests += 1;
                    if self.requests > MAX_SERVER_REQUESTS_PER_STREAM {
                        self.client.refuse(&request).await;
                        return Err(invalid(
                            TASKS_RESULT,
                            format!(
                                "the server sent more than {MAX_SERVER_REQUESTS_PER_STREAM} requests on one tasks/result stream"
                            ),
                        ));
                    }
                    return Ok(match triage(&self.client, request).await {
                        Ok(request) => TaskResultEvent::Request(request),
                        Err(refused) => TaskResultEvent::Refused(refused),
                    });
                }
                notification => {
                    if let Some(task) = notification.task_status() {
                        if task.task_id == self.task_id {
                            return Ok(TaskResultEvent::Status(task));
                        }
                    }
                }
            }
        }
    }

    /// The stream dropped before the result: resume it from the last event id once, then
    /// re-send `tasks/result` (it returns the same result, and delivers what is still queued).
    async fn reopen(&mut self) -> Result<()> {
        self.reconnects += 1;
        if self.reconnects > MAX_RECONNECTS {
            return Err(self.client.ended_early(TASKS_RESULT));
        }
        tokio::time::sleep(self.inbound.reconnect_delay()).await;
        if !self.resumed {
            if let Some(last) = self.inbound.last_event_id.clone() {
                self.resumed = true;
                if let Some(inbound) = self.client.get(Some(&last)).await? {
                    self.inbound = inbound;
                    return Ok(());
                }
            }
        }
        self.resumed = false;
        let (request_id, inbound) = Self::post(&self.client, &self.task_id).await?;
        self.request_id = request_id;
        self.inbound = inbound;
        Ok(())
    }

    /// Answers an `elicitation/create` of this task (the related-task `_meta` included).
    pub async fn answer_elicitation(
        &self,
        request: &ServerRequest,
        action: &ElicitAction,
    ) -> Result<()> {
        self.client
            .respond(&request.id, action.to_result(Some(&self.task_id)))
            .await
    }

    /// Sends a result for a request of this task's stream; the related-task `_meta` is added.
    pub async fn respond(
        &self,
        request: &ServerRequest,
        mut result: Map<String, Value>,
    ) -> Result<()> {
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let (Value::Object(meta), Value::Object(related)) =
            (meta, related_task_meta(&self.task_id))
        {
            meta.extend(related);
        }
        self.client.respond(&request.id, result).await
    }

    /// Refuses a request with a JSON-RPC error (e.g. a question the person will never answer).
    pub async fn refuse(&self, request: &ServerRequest, code: i64, message: &str) -> Result<()> {
        self.client.respond_error(&request.id, code, message).await
    }
}

/// A question for the caller (`Ok`), or refused here (`Err`, for the timeline).
async fn triage(
    client: &LegacyClient,
    request: ServerRequest,
) -> std::result::Result<ServerRequest, ServerRequest> {
    if request.method == ServerRequest::ELICITATION {
        Ok(request)
    } else {
        client.refuse(&request).await;
        Err(request)
    }
}

/// One thing that came on the session's GET stream.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// A `notifications/tasks/status`: the task's state (deduplicate by `lastUpdatedAt`).
    TaskStatus(Task),
    /// Another notification.
    Notification {
        /// Its method.
        method: String,
        /// Its params.
        params: Option<Value>,
    },
    /// A server request for the caller (`elicitation/create`): answer with
    /// [`LegacyClient::respond`].
    Request(ServerRequest),
    /// A server request refused at once (-32601), for the timeline.
    Refused(ServerRequest),
}

/// The session's GET stream ([`LegacyClient::open_stream`]). Resumed with `Last-Event-ID` when
/// it drops; dropping it closes it.
#[derive(Debug)]
pub struct SessionStream {
    client: LegacyClient,
    inbound: Inbound,
    idle_timeout: Duration,
    requests: usize,
    reconnects: usize,
    ended: bool,
}

impl SessionStream {
    pub(super) async fn open(client: LegacyClient, idle_timeout: Duration) -> Result<Option<Self>> {
        Ok(client.get(None).await?.map(|inbound| Self {
            client,
            inbound,
            idle_timeout,
            requests: 0,
            reconnects: 0,
            ended: false,
        }))
    }

    /// The next event; `None` once the stream is over (the server closed it for good, or an
    /// error was returned). Silence past the idle timeout is [`Error::Timeout`]; the session
    /// gone is [`Error::SessionExpired`].
    pub async fn next(&mut self) -> Option<Result<SessionEvent>> {
        if self.ended {
            return None;
        }
        let item = self.step().await;
        match item {
            Ok(Some(event)) => Some(Ok(event)),
            Ok(None) => {
                self.ended = true;
                None
            }
            Err(e) => {
                self.ended = true;
                Some(Err(e))
            }
        }
    }

    async fn step(&mut self) -> Result<Option<SessionEvent>> {
        loop {
            let next = tokio::time::timeout(self.idle_timeout, self.inbound.next()).await;
            let message = match next {
                Err(_) => {
                    return Err(Error::Timeout {
                        url: self.client.url().into(),
                        after: self.idle_timeout,
                    })
                }
                Ok(Ok(Some(message))) => message,
                Ok(Ok(None)) | Ok(Err(Fault::Transport(_))) => {
                    self.reconnects += 1;
                    if self.reconnects > MAX_RECONNECTS {
                        return Err(self.client.ended_early("GET"));
                    }
                    tokio::time::sleep(self.inbound.reconnect_delay()).await;
                    let last = self.inbound.last_event_id.clone();
                    match self.client.get(last.as_deref()).await? {
                        Some(inbound) => self.inbound = inbound,
                        None => return Ok(None),
                    }
                    continue;
                }
                Ok(Err(fault)) => return Err(self.client.fault("GET", fault)),
            };
            self.reconnects = 0;
            match message {
                Incoming::Request(request) => {
                    self.requests += 1;
                    if self.requests > MAX_SERVER_REQUESTS_PER_STREAM {
                        self.client.refuse(&request).await;
                        return Err(invalid(
                            "GET",
                            format!("the server sent more than {MAX_SERVER_REQUESTS_PER_STREAM} requests on the GET stream"),
                        ));
                    }
                    return Ok(Some(match triage(&self.client, request).await {
                        Ok(request) => SessionEvent::Request(request),
                        Err(refused) => SessionEvent::Refused(refused),
                    }));
                }
                Incoming::Response { .. } => {}
                notification => {
                    if let Some(task) = notification.task_status() {
                        return Ok(Some(SessionEvent::TaskStatus(task)));
                    }
                    if let Incoming::Notification { method, params } = notification {
                        return Ok(Some(SessionEvent::Notification { method, params }));
                    }
                }
            }
        }
    }
}
