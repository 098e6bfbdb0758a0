//! The change feed ([`countersign_core::console::feed`]: the ledger's events by cursor, from
//! every process) turned into desktop notifications and the tray's count. The window process
//! follows the same feed for its views; only the resident notifies, so a question is told once
//! whether or not a window is open.

use std::collections::HashMap;
use std::sync::Arc;

use countersign_core::console::feed::{Changes, InboxWatch};
use countersign_core::console::notifications::{self, Post, QuickAnswer};
use countersign_core::console::view::{GatedCallView, GatedDecision, InputRequestView};
use countersign_core::notice;
use countersign_desktop_ipc::Page;

use crate::Resident;

/// Follows the ledger until the resident ends.
pub async fn follow(resident: Arc<Resident>) {
    let mut inbox = InboxWatch::default();
    // Questions that arrived while nothing ran are notified now (once: see `refresh_inbox`).
    refresh_inbox(&resident, &mut inbox, &HashMap::new()).await;
    let mut feed = match resident.console.feed().await {
        Ok(feed) => feed,
        Err(e) => {
            tracing::error!("the resident cannot follow the ledger: {e}");
            return;
        }
    };
    tell_early_calls(&resident).await;
    loop {
        let changes = feed.next().await;
        publish(&resident, changes, &mut inbox).await;
    }
}

/// Agents' calls recorded after this launch but before the feed took its first cursor (the
/// `--demo` agent's, or any agent quick off the mark) reach no batch of the feed: they are told
/// now. Calls from before the launch are not (as for questions, a restart does not notify
/// again); the notifier tells each call once, so one the feed also brings is not told twice.
async fn tell_early_calls(resident: &Arc<Resident>) {
    let launched_ms = std::time::SystemTime::now()
        .checked_sub(resident.launched.elapsed())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(i64::MAX, |d| {
            i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
        });
    let early: Vec<String> = match resident.console.pending_gated_calls().await {
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
        refresh_gated(resident, &early, &[]).await;
    }
}

/// One batch: notifications for what it brought, the settings if they changed, the tray.
async fn publish(resident: &Arc<Resident>, changes: Changes, inbox: &mut InboxWatch) {
    for server in &changes.sign_in_needed {
        crate::notify::sign_in_needed(resident.notifier.holding(), server);
    }
    if changes.inbox {
        refresh_inbox(resident, inbox, &changes.answered).await;
    }
    if changes.gated {
        refresh_gated(resident, &changes.gated_waiting, &changes.gated_left).await;
    }
    if changes.settings {
        crate::settings::reload(resident).await;
    }
    if changes.inbox || changes.gated || changes.settings {
        resident.refresh().await;
    }
}

/// Agents' calls held by the gateway: closes the notifications of those decided (or withdrawn,
/// expired) and tells of the new ones (only when this process runs the engine, as for
/// questions).
async fn refresh_gated(resident: &Arc<Resident>, waiting: &[String], left: &[(String, String)]) {
    for (id, how) in left {
        resident.notifier.input_closed(id, how);
    }
    let pending = match resident.console.pending_gated_calls().await {
        Ok(pending) => pending,
        Err(e) => {
            tracing::warn!("cannot read the agents' held calls: {e}");
            return;
        }
    };
    if resident.console.runs_engine() {
        for call in pending.iter().filter(|c| waiting.contains(&c.task_id)) {
            notify_call(resident, call);
        }
    }
    notify_questions(resident, left).await;
}

/// Approved calls whose upstream asks questions before running them: one notification per call
/// and round, told when its questions arrive in this batch (its `running` change is in `left`,
/// so a restart does not tell again), closed when they leave (answered, withdrawn, expired).
async fn notify_questions(resident: &Arc<Resident>, left: &[(String, String)]) {
    let asking = match resident.console.gated_questions_views().await {
        Ok(asking) => asking,
        Err(e) => {
            tracing::warn!("cannot read the agents' calls with questions: {e}");
            return;
        }
    };
    let notifier = &resident.notifier;
    let id_of = |task_id: &str| format!("{task_id}/questions");
    for (task_id, how) in left {
        if !asking.iter().any(|a| a.call.task_id == *task_id) {
            notifier.input_closed(&id_of(task_id), how);
        }
    }
    if !resident.console.runs_engine() {
        return;
    }
    let arrived = asking
        .iter()
        .filter(|a| left.iter().any(|(id, _)| *id == a.call.task_id));
    for asked in arrived {
        let call = &asked.call;
        let title = format!(
            "{} asks before running {} · {}",
            call.server, call.tool, call.agent
        );
        // The first question's text from the core (plain, truncated, a link's host first; the
        // notifier escapes it); the inbox shows them all. No buttons: the answers need its form.
        let body = asked.questions.first().map_or_else(
            || notice::form_body("Approved; the server asks before running it."),
            |q| notifications::body_text(&q.request, false),
        );
        tell_call(resident, id_of(&call.task_id), call, title, body, None);
    }
}

/// One notification for an agent's call waiting for approval: Approve/Decline decide it.
fn notify_call(resident: &Arc<Resident>, call: &GatedCallView) {
    let on_answer = Arc::clone(resident);
    let id = call.task_id.clone();
    let decide = Box::new(move |approve| {
        let decision = GatedDecision {
            approve,
            reason: None,
            always_allow: false,
        };
        let console = Arc::clone(&on_answer.console);
        if let Err(e) = on_answer
            .runtime
            .block_on(console.decide_gated(&id, decision))
        {
            // Decided in the window meanwhile, or withdrawn: the ledger says which.
            tracing::info!("notification decision for {id} not applied: {e}");
        }
    });
    let title = format!(
        "{} wants to run {} · {}",
        call.agent, call.server, call.tool
    );
    // Arguments are the agent's: plain text, truncated; the window shows them whole.
    let body = notice::form_body(&format!("Arguments: {}", call.arguments));
    tell_call(
        resident,
        call.task_id.clone(),
        call,
        title,
        body,
        Some(decide),
    );
}

/// Tells of an agent's `call` (as `id` to the notifier), or keeps it for the summary while
/// notifications are held. A click on the body opens the inbox on that call's card.
fn tell_call(
    resident: &Arc<Resident>,
    id: String,
    call: &GatedCallView,
    title: String,
    body: String,
    decide: Option<crate::notify::Decide>,
) {
    let notifier = &resident.notifier;
    if notifier.holding() {
        notifier.hold([(id, call.server.clone())]);
        return;
    }
    let on_open = Arc::clone(resident);
    let page = Page::GatedCall {
        task_id: call.task_id.clone(),
    };
    notifier.agent_call(&id, title, body, decide, move || {
        on_open.open(Some(page), None)
    });
    tracing::info!("notified: agent call {id}");
}

/// Re-reads the inbox ([`countersign_core::console::Console::look_at_inbox`]): closes the
/// notifications of questions that left, posts those not told yet.
async fn refresh_inbox(
    resident: &Arc<Resident>,
    inbox: &mut InboxWatch,
    answered: &HashMap<(i64, String), String>,
) {
    let update = match resident.console.look_at_inbox(inbox, answered).await {
        Ok(update) => update,
        Err(e) => {
            tracing::warn!("cannot read the inbox: {}", e);
            return;
        }
    };
    let notifier = &resident.notifier;
    for (id, how) in &update.left {
        notifier.input_closed(id, how);
    }
    // "Already on screen" counts as told. Under do-not-disturb they are held: told in one
    // summary when it ends (crate::settings), never one by one afterwards.
    let holding = notifier.holding();
    let (held, fresh): (Vec<_>, Vec<_>) = update
        .untold
        .into_iter()
        .filter(|input| !resident.on_screen(input.task_row, &input.key))
        .partition(|_| holding);
    notifier.hold(
        held.iter()
            .map(|i| (notifications::id_of(i), i.server_name.clone())),
    );
    // However many arrived at once: a few notifications, or one summary (notify.rs).
    for post in notifier.plan(fresh) {
        match post {
            Post::One(input) => notify(resident, &input),
            Post::Summary { count, servers } => {
                let on_open = Arc::clone(resident);
                notifier.questions_summarised(count, servers, move || {
                    on_open.open(Some(Page::Inbox { question: None }), None)
                });
                tracing::info!("notified: {count} questions in one summary");
            }
        }
    }
}

fn notify(resident: &Arc<Resident>, input: &InputRequestView) {
    let (on_answer, on_open) = (Arc::clone(resident), Arc::clone(resident));
    let (row, key, key2) = (input.task_row, input.key.clone(), input.key.clone());
    resident.notifier.input_requested(
        input,
        move |quick| answer_from_notification(&on_answer, row, key, quick),
        move || {
            on_open.open(
                Some(Page::Inbox {
                    question: Some((row, key2)),
                }),
                None,
            )
        },
    );
    tracing::info!(
        "notified: {} ({})",
        notifications::summary(input),
        notifications::id_of(input)
    );
}

/// Runs on the notification's thread: the person pressed Approve or Decline.
fn answer_from_notification(resident: &Resident, row: i64, key: String, quick: QuickAnswer) {
    let response = quick.response();
    let console = Arc::clone(&resident.console);
    if let Err(e) = resident
        .runtime
        .block_on(console.answer(row, &key, &response))
    {
        // Typically answered in the window meanwhile; the inbox is the source of truth.
        tracing::info!("notification answer for {key} not applied: {e}");
    }
}
