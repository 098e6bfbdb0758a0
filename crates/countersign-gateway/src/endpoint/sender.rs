//! The sender: approved calls of agents holding a task, and the next rounds of calls whose
//! questions a person answered, sent once each from a task of their own; calls nobody decided in
//! time expire.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use countersign_core::console::gateway::Claim;
use countersign_core::ledger::gated::GatedRecord;

use super::{Link, Shared, WATCH_INTERVAL};

/// How often undecided calls are checked for expiry.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(5);

/// Sends approved calls of agents holding a task (the approval may come from any process), and
/// expires calls nobody decided in time.
pub(super) async fn send_approved(shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let mut wake = shared.console.ledger().subscribe();
    let mut last_expiry = tokio::time::Instant::now() - EXPIRY_INTERVAL;
    let mut sending: HashSet<i64> = HashSet::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<i64>();
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            _ = wake.recv() => {}
            _ = tokio::time::sleep(WATCH_INTERVAL) => {}
        }
        while let Ok(id) = done_rx.try_recv() {
            sending.remove(&id);
        }
        if last_expiry.elapsed() >= EXPIRY_INTERVAL {
            last_expiry = tokio::time::Instant::now();
            if let Err(e) = shared.console.expire_gated().await {
                tracing::warn!("expiring gated calls failed: {e}");
            }
        }
        let approved = match shared.console.approved_task_calls().await {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!("reading approved gated calls failed: {e}");
                continue;
            }
        };
        // Calls whose upstream asked questions (MRTR) that a person answered, in any mode: the
        // next round goes out from here (a held request only watches its row).
        match shared.console.answered_gated_calls().await {
            Ok(answered) => {
                for call in answered {
                    spawn_for_call(&shared, &mut sending, &done_tx, call, Round::Answered);
                }
            }
            Err(e) => tracing::warn!("reading answered gated calls failed: {e}"),
        }
        for call in approved {
            spawn_for_call(&shared, &mut sending, &done_tx, call, Round::Approved);
        }
    }
}

/// Which round of a call the sender sends.
#[derive(Clone, Copy)]
pub(super) enum Round {
    /// An approved call, not yet claimed: claimed, then sent once.
    Approved,
    /// A call whose upstream asked questions that the person answered: the next round.
    Answered,
}

/// Sends `call`'s `round` from a task of its own, so the sender's loop goes on meanwhile, unless
/// a task is already sending that call (`sending`); the task reports the call's id on `done` when
/// it ends, whatever became of it.
pub(super) fn spawn_for_call(
    shared: &Arc<Shared>,
    sending: &mut HashSet<i64>,
    done: &mpsc::UnboundedSender<i64>,
    call: GatedRecord,
    round: Round,
) {
    if !sending.insert(call.id) {
        return;
    }
    let (shared, done) = (shared.clone(), done.clone());
    tokio::spawn(async move {
        match shared.console.server(call.server_id).await {
            Ok(server) => match shared.link(&server).await {
                Ok(link) => match round {
                    Round::Approved => {
                        claim_and_run(&shared, &link, call.id).await;
                    }
                    Round::Answered => {
                        if let Err(e) = shared.console.resend_gated(&call, &link.peer).await {
                            // Taken but not recorded: the row stays `running` without
                            // questions, and the next start calls it outcome_unknown.
                            tracing::error!(task = %call.task_id, "recording a gated call's next round failed: {e}");
                        }
                    }
                },
                Err(e) => tracing::warn!(task = %call.task_id, "no upstream client: {e}"),
            },
            Err(e) => tracing::warn!(task = %call.task_id, "no server: {e}"),
        }
        let _ = done.send(call.id);
    });
}

/// Claims an approved call and sends it once. `None` when it was not ours to send.
pub(super) async fn claim_and_run(shared: &Shared, link: &Link, id: i64) -> Option<GatedRecord> {
    match shared.console.claim_gated(id).await {
        Ok(Claim::Run(call)) => match shared.console.run_gated(&call, &link.peer).await {
            Ok(done) => Some(done),
            Err(e) => {
                // The row stays `running`: the next start calls it outcome_unknown.
                tracing::error!(task = %call.task_id, "recording a gated call's outcome failed: {e}");
                None
            }
        },
        Ok(Claim::Not(call)) => Some(call),
        Err(e) => {
            tracing::error!("claiming gated call #{id} failed: {e}");
            None
        }
    }
}
