//! The change feed: fans the core's feed ([`countersign_core::console::feed`]: the ledger's
//! events by cursor, from every process, and what each batch changed) out to the webview, desktop
//! notifications and the tray.

use std::collections::HashMap;
use std::sync::Arc;

use countersign_core::console::feed::{Changes, InboxWatch};
use countersign_core::console::notifications::{self, Post, QuickAnswer};
use countersign_core::console::present;
use countersign_core::console::view::{GatedCallView, GatedDecision};
use countersign_core::notice;
use tauri::{AppHandle, Emitter, Manager, Runtime};

use crate::ipc::{event, InputFocusRequested, InputRequestView};
use crate::Shell;

/// Follows the ledger until the app exits.
pub async fn follow<R: Runtime>(app: AppHandle<R>) {
    let console = Arc::clone(&app.state::<Shell>().console);
    let mut inbox = InboxWatch::default();
    // Questions that arrived while no app ran are notified now (once: see `refresh_inbox`).
    refresh_inbox(&app, &mut inbox, &HashMap::new()).await;
    let mut feed = match console.feed().await {
        Ok(feed) => feed,
        Err(e) => {
            tracing::error!("the window cannot follow the ledger: {e}");
            return;
        }
    };
    tell_early_calls(&app).await;
    loop {
        let changes = feed.next().await;
        publish(&app, changes, &mut inbox).await;
    }
}

/// Agents' calls recorded after this launch but before the feed took its first cursor (the
/// `--demo` agent's, or any agent quick off the mark) reach no batch of the feed: they are told
/// now. Calls from before the launch are not (as for questions, a restart does not notify
/// again); the notifier tells each call once, so one the feed also brings is not told twice.
async fn tell_early_calls<R: Runtime>(app: &AppHandle<R>) {
    let shell = app.state::<Shell>();
    let launched_ms = std::time::SystemTime::now()
        .checked_sub(shell.launch.at.elapsed())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(i64::MAX, |d| {
            i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
        });
    let early: Vec<String> = match shell.console.pending_gated_calls().await {
        Ok(pending) => pending
            .into_iter()
            .filter(|c| c.created_at >= launched_ms)
            .map(|c| c.task_id)
            .collect(),
        Err(e) => {
            tracing::warn!("cannot read the agents' held calls: {e}");
            return;
        }
    };
    if !early.is_empty() {
        refresh_gated(app, &early, &[]).await;
    }
}

/// Emits one batch: every event, the tasks it touched, and the inbox and servers if they changed.
async fn publish<R: Runtime>(app: &AppHandle<R>, changes: Changes, inbox: &mut InboxWatch) {
    let console = Arc::clone(&app.state::<Shell>().console);
    for e in &changes.events {
        emit(app, event::EVENT_RECORDED, present::event(e));
    }
    for &row in &changes.tasks {
        // A task removed with its server has no row any more: nothing to show.
        if let Ok(task) = console.task(row).await {
            emit(app, event::TASK_UPDATED, task);
        }
    }
    for server in &changes.sign_in_needed {
        crate::sign_in::notify_needed(app.state::<Shell>().notifier.holding(), server);
    }
    if changes.servers {
        if let Ok(servers) = console.servers().await {
            emit(app, event::SERVERS_CHANGED, servers);
        }
    }
    if changes.inbox {
        refresh_inbox(app, inbox, &changes.answered).await;
    }
    if changes.gated {
        refresh_gated(app, &changes.gated_waiting, &changes.gated_left).await;
    }
    if changes.settings {
        crate::settings::reload(app).await;
    }
}

/// Agents' calls held by the gateway: closes the notifications of those decided (or withdrawn,
/// expired), tells of the new ones (only the engine's process, as for questions), and updates
/// the window, tray and title.
async fn refresh_gated<R: Runtime>(
    app: &AppHandle<R>,
    waiting: &[String],
    left: &[(String, String)],
) {
    let shell = app.state::<Shell>();
    for (id, how) in left {
        shell.notifier.input_closed(id, how);
    }
    let pending = match shell.console.pending_gated_calls().await {
        Ok(pending) => pending,
        Err(e) => {
            tracing::warn!("cannot read the agents' held calls: {e}");
            return;
        }
    };
    if shell.console.runs_engine() {
        for call in pending.iter().filter(|c| waiting.contains(&c.task_id)) {
            notify_call(app, call);
        }
    }
    emit(app, event::GATED_CHANGED, pending);
    refresh_gated_questions(app, left).await;
    crate::refresh_shell_state(app, &shell).await;
}

/// Approved calls whose upstream asks questions before running them: the window's list, and
/// one notification per call and round, told when its questions arrive in this batch (its
/// `running` change is in `left`; so a restart does not tell again), closed when they leave.
async fn refresh_gated_questions<R: Runtime>(app: &AppHandle<R>, left: &[(String, String)]) {
    let shell = app.state::<Shell>();
    let asking = match shell.console.gated_questions_views().await {
        Ok(asking) => asking,
        Err(e) => {
            tracing::warn!("cannot read the agents' calls with questions: {e}");
            return;
        }
    };
    let id_of = |task_id: &str| format!("{task_id}/questions");
    for (task_id, how) in left {
        if !asking.iter().any(|a| a.call.task_id == *task_id) {
            shell.notifier.input_closed(&id_of(task_id), how);
        }
    }
    if shell.console.runs_engine() {
        let arrived = asking
            .iter()
            .filter(|a| left.iter().any(|(id, _)| *id == a.call.task_id));
        for asked in arrived {
            let call = &asked.call;
            if shell.notifier.holding() {
                shell
                    .notifier
                    .hold([(id_of(&call.task_id), call.server.clone())]);
                continue;
            }
            let on_open = app.clone();
            let title = format!(
                "{} asks before running {} · {}",
                call.server, call.tool, call.agent
            );
            // The first question's text from the core (plain, truncated, a link's host first;
            // the notifier escapes it); the inbox shows them all.
            let body = asked.questions.first().map_or_else(
                || notice::form_body("Approved; the server asks before running it."),
                |q| notifications::body_text(&q.request, false),
            );
            shell
                .notifier
                .call_asking(&id_of(&call.task_id), title, body, move || {
                    crate::window::open(&on_open, Some(crate::window::Page::Inbox(None)))
                });
            tracing::info!("notified: questions on agent call {}", call.task_id);
        }
    }
    emit(app, event::GATED_QUESTIONS_CHANGED, asking);
}

/// One notification for an agent's call waiting for approval: Approve/Decline decide it.
fn notify_call<R: Runtime>(app: &AppHandle<R>, call: &GatedCallView) {
    let notifier = &app.state::<Shell>().notifier;
    if notifier.holding() {
        notifier.hold([(call.task_id.clone(), call.server.clone())]);
        return;
    }
    let (on_answer, on_open) = (app.clone(), app.clone());
    let id = call.task_id.clone();
    let title = format!(
        "{} wants to run {} · {}",
        call.agent, call.server, call.tool
    );
    // Arguments are the agent's: plain text, truncated; the window shows them whole.
    let body = notice::form_body(&format!("Arguments: {}", call.arguments));
    app.state::<Shell>().notifier.call_waiting(
        &call.task_id,
        title,
        body,
        move |approve| {
            let console = Arc::clone(&on_answer.state::<Shell>().console);
            let decision = GatedDecision {
                approve,
                reason: None,
                always_allow: false,
            };
            if let Err(e) = tauri::async_runtime::block_on(console.decide_gated(&id, decision)) {
                // Decided in the window meanwhile, or withdrawn: the ledger says which.
                tracing::info!("notification decision for {id} not applied: {e}");
            }
        },
        move || crate::window::open(&on_open, Some(crate::window::Page::Inbox(None))),
    );
    tracing::info!("notified: agent call {}", call.task_id);
}

/// Re-reads the inbox ([`countersign_core::console::Console::look_at_inbox`]): closes the
/// notifications of questions that left, posts those not told yet, and updates the webview, tray
/// and title.
async fn refresh_inbox<R: Runtime>(
    app: &AppHandle<R>,
    inbox: &mut InboxWatch,
    answered: &HashMap<(i64, String), String>,
) {
    let shell = app.state::<Shell>();
    let update = match shell.console.look_at_inbox(inbox, answered).await {
        Ok(update) => update,
        Err(e) => {
            tracing::warn!("cannot read the inbox: {}", e);
            return;
        }
    };
    for (id, how) in &update.left {
        shell.notifier.input_closed(id, how);
    }
    // "Already on screen" counts as told. Under do-not-disturb they are held: told in one
    // summary when it ends (crate::settings), never one by one afterwards.
    let holding = shell.notifier.holding();
    let (held, fresh): (Vec<_>, Vec<_>) = update
        .untold
        .into_iter()
        .filter(|input| !on_screen(app, input))
        .partition(|_| holding);
    shell.notifier.hold(
        held.iter()
            .map(|i| (notifications::id_of(i), i.server_name.clone())),
    );
    // However many arrived at once: a few notifications, or one summary (notify.rs).
    for post in shell.notifier.plan(fresh) {
        match post {
            Post::One(input) => notify(app, &input),
            Post::Summary { count, servers } => {
                let on_open = app.clone();
                shell
                    .notifier
                    .questions_summarised(count, servers, move || {
                        crate::window::open(&on_open, Some(crate::window::Page::Inbox(None)))
                    });
                tracing::info!("notified: {count} questions in one summary");
            }
        }
    }
    emit(app, event::INBOX_CHANGED, update.inbox);
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
            let page = crate::window::Page::Inbox(Some((row, key2.clone())));
            crate::window::open(&on_open, Some(page));
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
    let response = quick.response();
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
