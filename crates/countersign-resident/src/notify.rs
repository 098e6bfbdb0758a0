//! Desktop notifications for new inbox entries.
//!
//! At most one notification per question, ever: the ledger's `inputs.notified_at` survives
//! restarts (the feed marks it before posting) and this notifier also refuses a second one
//! in-process. Title: server · tool; body: the question (text from [`countersign_core::notice`]:
//! truncated, a link's host first), markup-escaped (it is server text). When the daemon
//! advertises `actions` and the form is a single boolean confirmation, the notification carries
//! Approve/Decline; a click on the body opens the app on that question. Do-not-disturb (the
//! toggle, or the schedule in Settings while it is on) holds new notifications: the inbox and
//! tray still count, and when it ends one summary tells of what arrived and still waits
//! ([`Notifier::take_held`], posted by `crate::settings`). The sound setting asks the daemon
//! for the desktop's message sound, or for silence.
//!
//! Bounded, whatever a server sends: a notification with buttons needs a thread that waits for
//! the click, so at most [`MAX_LIVE`] question notifications wait at once, and a burst of more
//! than [`BURST`] new questions (or any beyond that limit) is told in one summary notification
//! ("12 new questions"), updated in place while it is on screen, with one waiting thread.

use countersign_core::console::notifications::{
    arrange, body_text, closed_text, escape, id_of, single_confirmation, summary, summary_text,
    Post, QuickAnswer,
};
use countersign_core::console::view::InputRequestView;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Notification state shared by the shell.
#[derive(Default)]
pub struct Notifier {
    dnd: AtomicBool,
    /// The do-not-disturb schedule holds notifications now (as of its last check).
    scheduled: AtomicBool,
    /// The sound setting is off.
    quiet: AtomicBool,
    /// Questions and agents' calls that arrived while notifications were held: (id, server).
    held: Mutex<Vec<(String, String)>>,
    /// "task row/key" → (daemon id, 0 while being posted or told in a summary; summary), for
    /// questions still in the inbox.
    shown: Mutex<HashMap<String, (u32, String)>>,
    caps: OnceLock<Vec<String>>,
    /// Question notifications whose thread still waits for a click.
    live: AtomicUsize,
    summary: Mutex<SummaryState>,
    /// Held while the summary is shown or replaced, so two posts cannot both see "none on
    /// screen yet" and put up two summaries.
    summary_posting: Mutex<()>,
}

/// The summary notification, when one is on screen.
#[derive(Default)]
struct SummaryState {
    /// The daemon's id of the summary on screen (0: none).
    daemon_id: u32,
    /// Questions it tells of.
    count: usize,
    /// Server names it tells of, first seen first.
    servers: Vec<String>,
    /// Whether a thread waits for its click (then updates replace it in place).
    waiting: bool,
}

/// What Approve (`true`) or Decline (`false`) on an agent's call's notification does.
pub type Decide = Box<dyn FnOnce(bool) + Send>;

/// Decrements the live count when a question notification's thread ends, however it ends.
struct LiveGuard(Arc<Notifier>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Notifier {
    /// Do-not-disturb on or off.
    pub fn set_dnd(&self, on: bool) {
        self.dnd.store(on, Ordering::Relaxed);
    }

    /// Whether do-not-disturb is on.
    pub fn dnd(&self) -> bool {
        self.dnd.load(Ordering::Relaxed)
    }

    /// Records whether the do-not-disturb schedule holds notifications now.
    pub fn set_scheduled(&self, on: bool) {
        self.scheduled.store(on, Ordering::Relaxed);
    }

    /// Whether the do-not-disturb schedule holds notifications now.
    pub fn scheduled(&self) -> bool {
        self.scheduled.load(Ordering::Relaxed)
    }

    /// Whether new notifications are held (do-not-disturb, by hand or by the schedule).
    pub fn holding(&self) -> bool {
        self.dnd() || self.scheduled()
    }

    /// The sound setting.
    pub fn set_sound(&self, on: bool) {
        self.quiet.store(!on, Ordering::Relaxed);
    }

    /// Whether notifications play the desktop's message sound.
    pub fn sound(&self) -> bool {
        !self.quiet.load(Ordering::Relaxed)
    }

    /// Keeps `(id, server)` of what arrived while notifications are held, for the summary when
    /// they are no longer held. Bounded: past [`MAX_HELD`] only the count matters, and the
    /// summary re-reads what still waits.
    pub fn hold(&self, items: impl IntoIterator<Item = (String, String)>) {
        if let Ok(mut held) = self.held.lock() {
            for item in items {
                if held.len() >= MAX_HELD {
                    break;
                }
                if !held.iter().any(|(id, _)| *id == item.0) {
                    held.push(item);
                }
            }
        }
    }

    /// What was held (emptied).
    pub fn take_held(&self) -> Vec<(String, String)> {
        self.held
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default()
    }

    /// The daemon's capabilities, asked once (blocking D-Bus call; empty when no daemon).
    pub fn capabilities(&self) -> &[String] {
        self.caps.get_or_init(|| {
            #[cfg(target_os = "linux")]
            {
                notify_rust::get_capabilities().unwrap_or_default()
            }
            #[cfg(not(target_os = "linux"))]
            {
                Vec::new()
            }
        })
    }

    /// Whether the daemon interprets markup in bodies. dunst parses markup while advertising only
    /// "body-hyperlinks": either cap means tags in server text would be interpreted (links,
    /// bold), so they are escaped.
    #[cfg(target_os = "linux")]
    fn renders_markup(&self) -> bool {
        self.capabilities()
            .iter()
            .any(|c| c == "body-markup" || c == "body-hyperlinks")
    }

    /// Whether Approve/Decline buttons can be offered, as far as known without asking the
    /// daemon (false until [`Notifier::actions_supported`] has asked once): for state replies,
    /// which must never wait on the daemon.
    pub fn actions_known(&self) -> bool {
        self.caps
            .get()
            .is_some_and(|caps| caps.iter().any(|c| c == "actions"))
    }

    /// Whether Approve/Decline buttons can be offered.
    pub fn actions_supported(&self) -> bool {
        self.capabilities().iter().any(|c| c == "actions")
    }

    /// Claims `key` for a notification; false if it already had one (or notifications are held).
    fn claim(&self, key: &str) -> bool {
        if self.holding() {
            return false;
        }
        match self.shown.lock() {
            Ok(mut shown) if !shown.contains_key(key) => {
                shown.insert(key.to_owned(), (0, String::new()));
                true
            }
            _ => false,
        }
    }

    fn remember(&self, key: &str, id: u32, summary: String) {
        if let Ok(mut shown) = self.shown.lock() {
            shown.insert(key.to_owned(), (id, summary));
        }
    }

    /// Claims each of `fresh` (dropping those already told or all under do-not-disturb) and
    /// arranges how to tell of the rest ([`arrange`]): what the feed then posts.
    pub fn plan(&self, fresh: Vec<InputRequestView>) -> Vec<Post> {
        let fresh: Vec<InputRequestView> = fresh
            .into_iter()
            .filter(|i| self.claim(&id_of(i)))
            .collect();
        if fresh.is_empty() {
            return Vec::new();
        }
        arrange(fresh, self.live.load(Ordering::Relaxed))
    }

    /// Posts the notification for a new input (claimed by [`Notifier::plan`]), on its own
    /// thread (the wait for a click blocks). `on_answer` is called with the user's quick answer;
    /// `on_open` when the body is clicked.
    pub fn input_requested(
        self: &Arc<Self>,
        input: &InputRequestView,
        on_answer: impl FnOnce(QuickAnswer) + Send + 'static,
        on_open: impl FnOnce() + Send + 'static,
    ) {
        let input = input.clone();
        self.spawn_live("notify", move |me| me.post(&input, on_answer, on_open));
    }

    /// Posts the notification for an agent's call, on its own thread (`id`: the notifier's
    /// identity for it, claimed once until [`Notifier::input_closed`]). A call waiting for
    /// approval passes `decide`: Approve/Decline, when the daemon offers actions, call it with
    /// `true` or `false`. An approved call whose upstream asks questions passes `None`: the
    /// answers need the inbox's form. A click on the body calls `on_open`. Nothing while
    /// notifications are held (the feed keeps those calls for the summary); at most
    /// [`MAX_LIVE`](countersign_core::console::notifications::MAX_LIVE) wait for a click at once,
    /// beyond that the call is only in the inbox.
    pub fn agent_call(
        self: &Arc<Self>,
        id: &str,
        title: String,
        body: String,
        decide: Option<Decide>,
        on_open: impl FnOnce() + Send + 'static,
    ) {
        if !self.claim(id)
            || self.live.load(Ordering::Relaxed)
                >= countersign_core::console::notifications::MAX_LIVE
        {
            return;
        }
        let id = id.to_owned();
        self.spawn_live("notify-call", move |me| {
            me.post_call(&id, title, body, decide, on_open)
        });
    }

    /// Runs `post` on a thread of its own (its wait for a click blocks), counted among the live
    /// notifications until it ends, however it ends.
    fn spawn_live(self: &Arc<Self>, name: &str, post: impl FnOnce(&Notifier) + Send + 'static) {
        self.live.fetch_add(1, Ordering::Relaxed);
        let (guard, me) = (LiveGuard(Arc::clone(self)), Arc::clone(self));
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _guard = guard;
                post(&me);
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot spawn notification thread: {e}");
        }
    }

    #[cfg(target_os = "linux")]
    fn post_call(
        &self,
        id: &str,
        title: String,
        body: String,
        decide: Option<Decide>,
        on_open: impl FnOnce(),
    ) {
        let body = if self.renders_markup() {
            escape(&body)
        } else {
            body
        };
        let mut n = question_notification(&title, &body, self.sound());
        let decide = decide.filter(|_| self.actions_supported());
        if decide.is_some() {
            n.action("approve", "Approve").action("decline", "Decline");
        }
        let handle = match n.show() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("notification for {id} not shown: {e}");
                return;
            }
        };
        self.remember(id, handle.id(), title);
        handle.wait_for_action(|action| match (action, decide) {
            ("approve", Some(decide)) => decide(true),
            ("decline", Some(decide)) => decide(false),
            ("default", _) => on_open(),
            _ => {}
        });
    }

    #[cfg(not(target_os = "linux"))]
    fn post_call(
        &self,
        _id: &str,
        _title: String,
        _body: String,
        _decide: Option<Decide>,
        _on_open: impl FnOnce(),
    ) {
    }

    /// Tells of `count` more questions from `servers` in the one summary notification: replaced
    /// in place while it is on screen (its waiting thread still serves the click), posted anew
    /// otherwise. `on_open` is called when it is clicked.
    pub fn questions_summarised(
        self: &Arc<Self>,
        count: usize,
        servers: Vec<String>,
        on_open: impl FnOnce() + Send + 'static,
    ) {
        let Ok(mut state) = self.summary.lock() else {
            return;
        };
        state.count += count;
        for s in servers {
            if !state.servers.contains(&s) {
                state.servers.push(s);
            }
        }
        // One thread waits for the summary's click; an update only replaces the text (its
        // thread ends as soon as the daemon took it).
        let wait = !state.waiting;
        state.waiting = true;
        drop(state);
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("notify-summary".into())
            .spawn(move || me.post_summary(wait, on_open));
        if let Err(e) = spawned {
            tracing::warn!("cannot spawn notification thread: {e}");
            if wait {
                self.summary_closed();
            }
        }
    }

    #[cfg(target_os = "linux")]
    fn post_summary(&self, wait: bool, on_open: impl FnOnce()) {
        let markup = self.renders_markup();
        let posting = self.summary_posting.lock();
        // Read under the posting lock: the latest count, and the id of the summary on screen.
        let Some((title, body, replace)) = self.summary.lock().ok().map(|s| {
            let (title, body) = summary_text(s.count, &s.servers);
            (title, body, s.daemon_id)
        }) else {
            return;
        };
        let body = if markup { escape(&body) } else { body };
        let mut n = question_notification(&title, &body, self.sound());
        if replace != 0 {
            n.id(replace);
        }
        let handle = match n.show() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("summary notification not shown: {e}");
                drop(posting);
                if wait {
                    self.summary_closed();
                }
                return;
            }
        };
        if let Ok(mut state) = self.summary.lock() {
            state.daemon_id = handle.id();
        }
        drop(posting);
        if !wait {
            return; // the summary's first thread still waits on this id
        }
        handle.wait_for_action(|action| {
            if action == "default" {
                on_open();
            }
        });
        self.summary_closed();
    }

    #[cfg(not(target_os = "linux"))]
    fn post_summary(&self, wait: bool, _on_open: impl FnOnce()) {
        if wait {
            self.summary_closed();
        }
    }

    /// The summary left the screen: the next questions start a new one.
    fn summary_closed(&self) {
        if let Ok(mut state) = self.summary.lock() {
            *state = SummaryState::default();
        }
    }

    #[cfg(target_os = "linux")]
    fn post(
        &self,
        input: &InputRequestView,
        on_answer: impl FnOnce(QuickAnswer),
        on_open: impl FnOnce(),
    ) {
        let markup = self.renders_markup();
        let quick = self
            .actions_supported()
            .then(|| single_confirmation(&input.request))
            .flatten();
        let body = body_text(&input.request, markup);
        // The summary is plain text by the notification spec (dunst shows entities literally).
        let title = summary(input);
        let mut n = question_notification(&title, &body, self.sound());
        if quick.is_some() {
            n.action("approve", "Approve").action("decline", "Decline");
        }
        let handle = match n.show() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("notification for {} not shown: {e}", id_of(input));
                return;
            }
        };
        self.remember(&id_of(input), handle.id(), title);
        handle.wait_for_action(|action| match (action, quick) {
            ("approve", Some(field)) => on_answer(QuickAnswer::Approve(field)),
            ("decline", Some(_)) => on_answer(QuickAnswer::Decline),
            ("default", _) => on_open(),
            _ => {}
        });
    }

    #[cfg(not(target_os = "linux"))]
    fn post(
        &self,
        _input: &InputRequestView,
        _on_answer: impl FnOnce(QuickAnswer),
        _on_open: impl FnOnce(),
    ) {
    }

    /// Replaces the notification of a question that left the inbox (`outcome`: accept, decline,
    /// cancel, or anything else for "no longer needed") by a short-lived note, so no stale
    /// Approve button stays on screen.
    pub fn input_closed(&self, id: &str, outcome: &str) {
        // Forgotten once closed: the map holds only questions still in the inbox.
        let Some((daemon_id, title)) = self.shown.lock().ok().and_then(|mut s| s.remove(id)) else {
            return;
        };
        if daemon_id == 0 {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            let body = closed_text(outcome);
            let result = notify_rust::Notification::new()
                .id(daemon_id)
                .appname("Countersign")
                .summary(&title)
                .body(body)
                .timeout(notify_rust::Timeout::Milliseconds(4000))
                .show();
            if let Err(e) = result {
                tracing::debug!("could not replace notification {daemon_id}: {e}");
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = title;
    }
}

impl Notifier {
    /// At exit: the notifications still on screen would offer buttons nobody listens to any
    /// more; replace each with a short note (the question stays in the inbox).
    pub fn withdraw_all(&self) {
        let mut shown: Vec<(u32, String)> = self
            .shown
            .lock()
            .map(|s| s.values().filter(|(id, _)| *id != 0).cloned().collect())
            .unwrap_or_default();
        if let Ok(summary) = self.summary.lock() {
            if summary.daemon_id != 0 {
                shown.push((
                    summary.daemon_id,
                    summary_text(summary.count, &summary.servers).0,
                ));
            }
        }
        #[cfg(target_os = "linux")]
        for (id, title) in shown {
            let _ = notify_rust::Notification::new()
                .id(id)
                .appname("Countersign")
                .summary(&title)
                .body("Countersign was closed: the question waits in its inbox.")
                .timeout(notify_rust::Timeout::Milliseconds(3000))
                .show();
        }
        #[cfg(not(target_os = "linux"))]
        let _ = shown;
    }
}

/// Tells the person once that `server` needs them to sign in again (the engine records the
/// need once per refusal, so this is called once). Do-not-disturb keeps it off the screen; the
/// Servers view and the inbox banner still say it.
pub fn sign_in_needed(held: bool, server: &str) {
    if held {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let summary = format!("{server}: sign in again");
        // Off the feed's task: the daemon round trip must not hold up the feed.
        std::thread::spawn(move || {
            let result = notify_rust::Notification::new()
                .appname("Countersign")
                .summary(&summary)
                .body("Its tasks wait until you sign in (Servers → Sign in).")
                .show();
            if let Err(e) = result {
                tracing::warn!("the sign-in notification was not shown: {e}");
            }
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = server;
}

/// A notification about questions: stays until acted on, and its body opens the app. With
/// `sound`, the freedesktop sound theme's message sound; without, the daemon is asked for
/// silence (`suppress-sound`), so a daemon that plays a sound of its own stays quiet too.
#[cfg(target_os = "linux")]
fn question_notification(title: &str, body: &str, sound: bool) -> notify_rust::Notification {
    let mut n = notify_rust::Notification::new();
    n.appname("Countersign")
        .summary(title)
        .body(body)
        .hint(notify_rust::Hint::Category("im.received".into()))
        .timeout(notify_rust::Timeout::Never)
        .action("default", "Open in Countersign");
    if sound {
        n.hint(notify_rust::Hint::SoundName("message-new-instant".into()));
    } else {
        n.hint(notify_rust::Hint::SuppressSound(true));
    }
    n
}

/// Most questions remembered while notifications are held (the summary re-reads the inbox).
pub const MAX_HELD: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use countersign_core::console::notifications::examples::questions;

    #[test]
    fn while_held_nothing_is_claimed_and_what_arrived_is_kept_once_for_the_summary() {
        let notifier = Notifier::default();
        notifier.set_scheduled(true);
        assert!(notifier.holding(), "the schedule holds like the toggle");
        assert!(
            notifier.plan(questions(3)).is_empty(),
            "no notification while held"
        );
        notifier.hold([("1/k0".to_owned(), "a".to_owned())]);
        notifier.hold([("1/k0".to_owned(), "a".to_owned())]);
        assert_eq!(notifier.take_held().len(), 1, "each question once");
        assert!(notifier.take_held().is_empty(), "taken once");
        notifier.set_scheduled(false);
        assert_eq!(
            notifier.plan(questions(2)).len(),
            2,
            "questions not claimed while held are told afterwards"
        );
        assert!(notifier.sound(), "sound is on by default");
    }

    #[test]
    fn a_question_is_told_once_even_when_planned_twice() {
        let notifier = Notifier::default();
        assert_eq!(notifier.plan(questions(2)).len(), 2);
        assert!(
            notifier.plan(questions(2)).is_empty(),
            "claimed questions are not told again"
        );
        notifier.input_closed("1/k0", "accept");
        assert!(
            !notifier
                .shown
                .lock()
                .map(|s| s.contains_key("1/k0"))
                .unwrap_or(true),
            "a closed question leaves the in-process map"
        );
    }
}
