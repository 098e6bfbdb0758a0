//! Tasks: lists and details as faces show them, cancelling, links, and adopting a task created
//! elsewhere.

use serde_json::Value;

use crate::actions;
use crate::ledger::events;
use crate::ledger::inputs;
use crate::ledger::tasks::{self, TaskRecord};
use crate::mcp::{self, TaskState};

/// The most tasks [`Console::adoptable`] lists.
pub const MAX_ADOPTABLE: usize = 1000;

use super::view::{AdoptableTask, AdoptableTasks, EventView, TaskDetail, TaskView};
use super::{link, present, same_endpoint, Console, Error, Result};

impl Console {
    /// Task rows, newest first.
    pub async fn tasks(&self, limit: Option<u32>) -> Result<Vec<TaskView>> {
        let list = self
            .read(move |c| {
                let filter = tasks::Filter {
                    limit: limit.map(|l| l as usize),
                    ..tasks::Filter::default()
                };
                tasks::summaries(c, &filter)
            })
            .await?;
        Ok(list.iter().map(present::task).collect())
    }

    /// The tasks matching `filter`, newest first, as lists show them.
    pub async fn tasks_matching(&self, filter: tasks::Filter) -> Result<Vec<TaskView>> {
        let list = self.read(move |c| tasks::summaries(c, &filter)).await?;
        Ok(list.iter().map(present::task).collect())
    }

    /// One task row.
    pub async fn task(&self, row: i64) -> Result<TaskView> {
        Ok(present::task(
            &self.read(move |c| tasks::summary(c, row)).await?,
        ))
    }

    /// A task by row number, task id or unique prefix (what a person types).
    pub async fn find_task(&self, id: &str) -> Result<TaskRecord> {
        let id = id.to_owned();
        self.read(move |c| tasks::find_one(c, &id)).await
    }

    /// One task with its questions, timeline, arguments and outcome.
    pub async fn task_detail(&self, row: i64) -> Result<TaskDetail> {
        let (summary, record, questions, timeline) = self
            .read(move |c| {
                Ok((
                    tasks::summary(c, row)?,
                    tasks::get(c, row)?,
                    inputs::for_task(c, row)?,
                    events::for_task(c, row)?,
                ))
            })
            .await?;
        let (result, error) = match record.task().map(|t| t.state) {
            Some(TaskState::Completed { result }) => (Some(Value::Object(result.0)), None),
            Some(TaskState::Failed { error }) => (None, serde_json::to_value(error).ok()),
            _ => (None, None),
        };
        Ok(TaskDetail {
            task: present::task(&summary),
            server_url: record.server_url,
            arguments: record.arguments,
            result,
            error,
            inputs: questions.iter().map(present::input).collect(),
            events: timeline
                .iter()
                .map(present::event)
                .collect::<Vec<EventView>>(),
        })
    }

    /// Asks the server to cancel a task (recorded first; the engine delivers).
    pub async fn cancel(&self, row: i64) -> Result<()> {
        actions::cancel(&self.ledger, row, &self.actor).await?;
        self.nudge();
        Ok(())
    }

    /// The link to a tracked task, `countersign://task/<server URL>/<task id>`: the URL rather
    /// than our name for the server, so it opens in a teammate's ledger too.
    pub async fn task_link(&self, row: i64) -> Result<String> {
        let record = self.read(move |c| tasks::get(c, row)).await?;
        Ok(link::TaskLink::to_url(&record.server_url, &record.task_id).to_string())
    }

    /// What opening a `countersign://` link means here: a tracked task to show, a task of a
    /// registered server to adopt (after the person confirms), or a server to add first. Reads
    /// only; nothing is adopted or added without the person.
    pub async fn open_link(&self, text: &str) -> Result<link::LinkTarget> {
        let parsed = link::TaskLink::parse(text)?;
        let server = match &parsed.server {
            link::LinkServer::Name(name) => Some(
                self.server_named(name)
                    .await?
                    .ok_or_else(|| Error::NotFound(format!("server {name:?}")))?,
            ),
            link::LinkServer::Url(url) => self
                .server_records()
                .await?
                .into_iter()
                .find(|s| same_endpoint(&s.url, url)),
        };
        let Some(server) = server else {
            let link::LinkServer::Url(url) = parsed.server else {
                return Err(Error::Invalid("a link without a server".into()));
            };
            return Ok(link::LinkTarget::AddServer {
                url,
                task_id: parsed.task_id,
            });
        };
        let (server_id, task_id) = (server.id, parsed.task_id.clone());
        let row = self
            .read(move |c| tasks::row_of(c, server_id, &task_id))
            .await?;
        Ok(match row {
            Some(row) => link::LinkTarget::Tracked { row },
            None => link::LinkTarget::Adopt {
                server_id,
                server: server.name,
                task_id: parsed.task_id,
            },
        })
    }

    /// The tasks a 2025-11-25 server lists (`tasks/list`, every page up to
    /// [`MAX_ADOPTABLE`]), each marked when it is tracked already. A session sees only its own
    /// tasks, and the note says so; a modern server offers no list (adopt by id).
    pub async fn adoptable(&self, server_id: i64) -> Result<AdoptableTasks> {
        let server = self.server(server_id).await?;
        let peer = self.peer(&server).await?;
        let mcp::Peer::Legacy(legacy) = &peer else {
            return Err(Error::Invalid(format!(
                "{} speaks MCP 2026-07-28, whose Tasks have no list: adopt a task by its id",
                server.name
            )));
        };
        let client = legacy.client().await?;
        let mut listed = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = client.list_tasks(cursor.as_deref()).await?;
            listed.extend(page.tasks);
            cursor = page.next_cursor;
            if cursor.is_none() || listed.len() >= MAX_ADOPTABLE {
                break;
            }
        }
        listed.truncate(MAX_ADOPTABLE);
        let ids: Vec<String> = listed.iter().map(|t| t.task_id.clone()).collect();
        let tracked = self
            .read(move |c| {
                ids.iter()
                    .map(|id| tasks::row_of(c, server_id, id))
                    .collect::<crate::ledger::Result<Vec<_>>>()
            })
            .await?;
        Ok(AdoptableTasks {
            tasks: listed
                .into_iter()
                .zip(tracked)
                .map(|(task, tracked)| AdoptableTask {
                    status: serde_json::to_value(task.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    task_id: task.task_id,
                    status_message: task.status_message,
                    created_at: task.created_at,
                    tracked,
                })
                .collect(),
            note: format!(
                "{} speaks MCP {}: a session sees only its own tasks, so this lists the tasks \
                 Countersign started in its session, not those of other clients",
                server.name,
                server.protocol_version.as_deref().unwrap_or("2025-11-25")
            ),
        })
    }

    /// Starts tracking a task created elsewhere, by its id on a registered server.
    pub async fn adopt(&self, server_id: i64, task_id: &str) -> Result<TaskRecord> {
        let task_id = task_id.trim();
        if task_id.is_empty() {
            return Err(Error::Invalid("a task id is needed".into()));
        }
        let server = self.server(server_id).await?;
        let peer = self.peer(&server).await?;
        let record = actions::adopt(&self.ledger, &peer, &server, task_id, &self.actor).await?;
        self.nudge();
        Ok(record)
    }
}
