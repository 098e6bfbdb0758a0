//! The change feed: fans the core's feed ([`countersign_core::console::feed`]: the ledger's
//! events by cursor, from every process, and what each batch changed) out to the webview. The
//! notifications and the tray are the resident's (it follows the same feed).

use std::sync::Arc;

use countersign_core::console::feed::Changes;
use countersign_core::console::present;
use tauri::{AppHandle, Emitter, Manager, Runtime};

use crate::ipc::event;
use crate::Shell;

/// Follows the ledger until the window closes.
pub async fn follow<R: Runtime>(app: AppHandle<R>) {
    let console = Arc::clone(&app.state::<Shell>().console);
    let mut feed = match console.feed().await {
        Ok(feed) => feed,
        Err(e) => {
            tracing::error!("the window cannot follow the ledger: {e}");
            return;
        }
    };
    let mut last = Shown::default();
    loop {
        let changes = feed.next().await;
        publish(&app, changes, &mut last).await;
    }
}

/// The inbox and held calls as last sent to the webview. A batch that touches them without
/// changing them (the resident's engine delivering an answer already taken off the list) sends
/// nothing: a list sent again re-renders the question under the person's keys.
#[derive(Default)]
struct Shown {
    inbox: Option<Vec<countersign_core::console::view::InputRequestView>>,
    gated: Option<Vec<countersign_core::console::view::GatedCallView>>,
    asking: Option<Vec<countersign_core::console::view::GatedQuestionsView>>,
}

/// Emits one batch: every event, the tasks it touched, and the inbox, agents' calls and servers
/// if they changed.
async fn publish<R: Runtime>(app: &AppHandle<R>, changes: Changes, last: &mut Shown) {
    let shell = app.state::<Shell>();
    let console = Arc::clone(&shell.console);
    for e in &changes.events {
        emit(app, event::EVENT_RECORDED, present::event(e));
    }
    for &row in &changes.tasks {
        // A task removed with its server has no row any more: nothing to show.
        if let Ok(task) = console.task(row).await {
            emit(app, event::TASK_UPDATED, task);
        }
    }
    if changes.servers {
        if let Ok(mut servers) = console.servers().await {
            crate::resident::fill_stdio_processes(&shell, &mut servers).await;
            emit(app, event::SERVERS_CHANGED, servers);
        }
    }
    // The inbox as it is: the resident marks questions told (`look_at_inbox`), never the window.
    if changes.inbox {
        match console.inbox().await {
            Ok(inbox) if last.inbox.as_ref() != Some(&inbox) => {
                emit(app, event::INBOX_CHANGED, inbox.clone());
                last.inbox = Some(inbox);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot read the inbox: {e}"),
        }
    }
    if changes.gated {
        match console.pending_gated_calls().await {
            Ok(pending) if last.gated.as_ref() != Some(&pending) => {
                emit(app, event::GATED_CHANGED, pending.clone());
                last.gated = Some(pending);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot read the agents' held calls: {e}"),
        }
        // Approved calls whose upstream asks first change with the same events.
        match console.gated_questions_views().await {
            Ok(asking) if last.asking.as_ref() != Some(&asking) => {
                emit(app, event::GATED_QUESTIONS_CHANGED, asking.clone());
                last.asking = Some(asking);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot read the agents' calls with questions: {e}"),
        }
    }
    if changes.inbox || changes.gated {
        crate::refresh_shell_state(app, &shell).await;
    }
}

fn emit<R: Runtime, S: serde::Serialize + Clone>(app: &AppHandle<R>, name: &str, payload: S) {
    if let Err(e) = app.emit(name, payload) {
        tracing::warn!("emit {name} failed: {e}");
    }
}
