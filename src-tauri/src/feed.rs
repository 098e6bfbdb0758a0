//! The change feed: follows the ledger's events by cursor (`events.id > cursor`) and fans them
//! out to the webview, desktop notifications and the tray.
//!
//! Reading by cursor rather than only listening to this process's broadcast means writes by other
//! processes (the CLI answering, another engine polling) reach the window too, and a slow webview
//! can never lose an event. The broadcast only wakes the loop early.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use countersign_core::ledger::events::{EventKind, StoredEvent};
use tauri::{AppHandle, Emitter, Manager, Runtime};
use tokio::sync::broadcast::error::RecvError;

use crate::ipc::{event, InputFocusRequested, InputRequestView, InputResponse};
use crate::notify::QuickAnswer;
use crate::Shell;
use countersign_core::console::notifications::{self, Post};
use countersign_core::console::{present, InboxEntry};

/// How often the ledger is checked for other processes' writes.
const POLL_LEDGER: Duration = Duration::from_millis(250);
/// Most events read per batch.
const BATCH: usize = 512;

/// Follows the ledger until the app exits.
pub async fn follow<R: Runtime>(app: AppHandle<R>) {
    let console = Arc::clone(&app.state::<Shell>().console);
    let mut wake = Some(console.subscribe());
    let mut cursor = match console.last_event_id().await {
        Ok(id) => id,
        Err(e) => {
            tracing::error!("the feed cannot read the ledger: {}", e);
            0
        }
    };
    let mut shown: HashSet<(i64, String)> = HashSet::new();
    // Questions that arrived while no app ran are notified now (once: see `refresh_inbox`).
    refresh_inbox(&app, &mut shown, &HashMap::new()).await;
    loop {
        let batch = match console.events_since(cursor, BATCH).await {
            Ok(batch) => batch,
            Err(e) => {
                tracing::warn!("the feed cannot read events: {}", e);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let Some(last) = batch.last() else {
            let woken = async {
                match wake.as_mut() {
                    Some(rx) => rx.recv().await.map(drop),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = woken => if let Err(RecvError::Closed) = r { wake = None },
                _ = tokio::time::sleep(POLL_LEDGER) => {}
            }
            if let Some(rx) = wake.as_mut() {
                while rx.try_recv().is_ok() {}
            }
            continue;
        };
        cursor = last.id;
        publish(&app, &batch, &mut shown).await;
    }
}

/// Emits one batch: every event, the tasks it touched, and the inbox and servers if they changed.
async fn publish<R: Runtime>(
    app: &AppHandle<R>,
    batch: &[StoredEvent],
    shown: &mut HashSet<(i64, String)>,
) {
    let console = Arc::clone(&app.state::<Shell>().console);
    let mut rows = BTreeSet::new();
    let mut inbox_changed = false;
    let mut servers_changed = false;
    let mut answered: HashMap<(i64, String), String> = HashMap::new();
    for e in batch {
        emit(app, event::EVENT_RECORDED, present::event(e));
        if let Some(row) = e.task {
            rows.insert(row);
        }
        match &e.kind {
            EventKind::InputAnswered { key, action, .. } => {
                if let Some(row) = e.task {
                    answered.insert((row, key.clone()), action.as_str().to_owned());
                }
                inbox_changed = true;
            }
            EventKind::InputRequested { .. }
            | EventKind::InputSuperseded { .. }
            | EventKind::TaskCreated { .. }
            | EventKind::TaskFinished { .. }
            | EventKind::TaskExpired { .. }
            | EventKind::TaskLost { .. } => inbox_changed = true,
            EventKind::ServerRemoved { .. } => {
                servers_changed = true;
                inbox_changed = true;
            }
            EventKind::ServerAdded { .. }
            | EventKind::ServerUpdated { .. }
            | EventKind::ServerDiscovered { .. }
            | EventKind::ServerUnreachable { .. }
            | EventKind::ServerRecovered
            | EventKind::SignedIn
            | EventKind::SignedOut => servers_changed = true,
            EventKind::SignInNeeded { .. } => {
                servers_changed = true;
                // Recorded once on the server (and once per task): told once.
                if e.task.is_none() {
                    let shell = app.state::<Shell>();
                    crate::sign_in::notify_needed(
                        shell.notifier.dnd(),
                        e.server.as_deref().unwrap_or("A server"),
                    );
                }
            }
            _ => {}
        }
    }
    for row in rows {
        // A task removed with its server has no row any more: nothing to show.
        if let Ok(task) = console.task(row).await {
            emit(app, event::TASK_UPDATED, task);
        }
    }
    if servers_changed {
        if let Ok(servers) = console.servers().await {
            emit(app, event::SERVERS_CHANGED, servers);
        }
    }
    if inbox_changed {
        refresh_inbox(app, shown, &answered).await;
    }
}

/// Re-reads the inbox, notifies each question not notified yet (marking it in the ledger BEFORE
/// posting, so a restart never shows it again), closes the notifications of questions that left,
/// and updates the webview, tray and title.
async fn refresh_inbox<R: Runtime>(
    app: &AppHandle<R>,
    shown: &mut HashSet<(i64, String)>,
    answered: &HashMap<(i64, String), String>,
) {
    let shell = app.state::<Shell>();
    let console = Arc::clone(&shell.console);
    let entries = match console.inbox_entries().await {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!("cannot read the inbox: {}", e);
            return;
        }
    };
    let now: HashSet<(i64, String)> = entries
        .iter()
        .map(|e| (e.view.task_row, e.view.key.clone()))
        .collect();
    for gone in shown.difference(&now) {
        let outcome = answered.get(gone).map_or("withdrawn", String::as_str);
        shell
            .notifier
            .input_closed(&format!("{}/{}", gone.0, gone.1), outcome);
    }
    *shown = now;
    if console.runs_engine() {
        let untold: Vec<&InboxEntry> = entries.iter().filter(|e| !e.notified).collect();
        let mut fresh = Vec::new();
        if !untold.is_empty() {
            // Marked told BEFORE posting (a restart never repeats one), all in one write.
            match console
                .mark_notified(untold.iter().map(|e| e.input_id).collect())
                .await
            {
                Ok(()) => {
                    // Do-not-disturb and "already on screen" count as told: no burst when DND
                    // ends.
                    let dnd = shell.notifier.dnd();
                    fresh = untold
                        .iter()
                        .filter(|e| !dnd && !on_screen(app, &e.view))
                        .map(|e| e.view.clone())
                        .collect();
                }
                Err(e) => {
                    tracing::warn!("not notifying {} question(s): {}", untold.len(), e)
                }
            }
        }
        // However many arrived at once: a few notifications, or one summary (notify.rs).
        for post in shell.notifier.plan(fresh) {
            match post {
                Post::One(input) => notify(app, &input),
                Post::Summary { count, servers } => {
                    let on_open = app.clone();
                    shell
                        .notifier
                        .questions_summarised(count, servers, move || {
                            crate::show_main_window(&on_open)
                        });
                    tracing::info!("notified: {count} questions in one summary");
                }
            }
        }
    }
    let views: Vec<InputRequestView> = entries.into_iter().map(|e| e.view).collect();
    emit(app, event::INBOX_CHANGED, views);
    crate::refresh_shell_state(app, &shell).await;
}

/// Whether the window is focused and shows this question (or its task).
fn on_screen<R: Runtime>(app: &AppHandle<R>, input: &InputRequestView) -> bool {
    let focused = app
        .get_webview_window("main")
        .is_some_and(|w| w.is_focused().unwrap_or(false) && w.is_visible().unwrap_or(false));
    let view = app
        .state::<Shell>()
        .viewing
        .lock()
        .map(|v| v.clone())
        .unwrap_or_default();
    focused
        && view.task_row == Some(input.task_row)
        && view.key.as_ref().is_none_or(|k| *k == input.key)
}

fn notify<R: Runtime>(app: &AppHandle<R>, input: &InputRequestView) {
    let (on_answer, on_open) = (app.clone(), app.clone());
    let (row, key, key2) = (input.task_row, input.key.clone(), input.key.clone());
    app.state::<Shell>().notifier.input_requested(
        input,
        move |quick| answer_from_notification(&on_answer, row, key, quick),
        move || {
            crate::show_main_window(&on_open);
            emit(
                &on_open,
                event::INPUT_FOCUS_REQUESTED,
                InputFocusRequested {
                    task_row: row,
                    key: key2,
                },
            );
        },
    );
    tracing::info!(
        "notified: {} ({})",
        notifications::summary(input),
        notifications::id_of(input)
    );
}

/// Runs on the notification's thread: the user pressed Approve or Decline.
fn answer_from_notification<R: Runtime>(
    app: &AppHandle<R>,
    row: i64,
    key: String,
    quick: QuickAnswer,
) {
    let response = match quick {
        QuickAnswer::Approve(field) => InputResponse::Accept {
            content: Some(serde_json::Map::from_iter([(
                field,
                serde_json::Value::Bool(true),
            )])),
        },
        QuickAnswer::Decline => InputResponse::Decline,
    };
    let console = Arc::clone(&app.state::<Shell>().console);
    if let Err(e) = tauri::async_runtime::block_on(console.answer(row, &key, &response)) {
        // Typically answered in the window meanwhile; the inbox is the source of truth.
        tracing::info!("notification answer for {key} not applied: {e}");
    }
}

fn emit<R: Runtime, S: serde::Serialize + Clone>(app: &AppHandle<R>, name: &str, payload: S) {
    if let Err(e) = app.emit(name, payload) {
        tracing::warn!("emit {name} failed: {e}");
    }
}
