//! Desktop notifications for new inbox entries.
//!
//! At most one notification per question, ever: the ledger's `inputs.notified_at` survives
//! restarts (the feed marks it before posting) and this notifier also refuses a second one
//! in-process. Title: server · tool; body: the question (text from [`countersign_core::notice`]:
//! truncated, a link's host first), markup-escaped (it is server text). When the daemon
//! advertises `actions` and the form is a single boolean confirmation, the notification carries
//! Approve/Decline; a click on the body opens the app on that question. Do-not-disturb
//! suppresses new notifications only; the inbox and tray still count.
//!
//! Bounded, whatever a server sends: a notification with buttons needs a thread that waits for
//! the click, so at most [`MAX_LIVE`] question notifications wait at once, and a burst of more
//! than [`BURST`] new questions (or any beyond that limit) is told in one summary notification
//! ("12 new questions"), updated in place while it is on screen, with one waiting thread.

use crate::ipc::{InputKind, InputRequestView};
use countersign_core::notice;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Most question notifications waiting for a click at once (one thread each).
pub const MAX_LIVE: usize = 4;
/// More new questions than this at once are told in one summary notification.
pub const BURST: usize = 3;
/// Server names listed in a summary's body; the rest are counted.
const SUMMARY_SERVERS: usize = 3;

/// Notification state shared by the shell.
#[derive(Default)]
pub struct Notifier {
    dnd: AtomicBool,
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

/// What to post for new questions: see [`arrange`].
#[derive(Debug, Clone, PartialEq)]
pub enum Post {
    /// One notification for this question.
    One(InputRequestView),
    /// One summary for this many questions from these servers.
    Summary {
        /// How many questions.
        count: usize,
        /// Their servers, each once, first seen first.
        servers: Vec<String>,
    },
}

/// Decides how to tell of `fresh` questions while `live` question notifications wait for a
/// click: a burst of more than [`BURST`] becomes one summary; otherwise each gets its own
/// notification while fewer than [`MAX_LIVE`] wait, and the rest share one summary.
pub fn arrange(fresh: Vec<InputRequestView>, live: usize) -> Vec<Post> {
    let room = if fresh.len() > BURST {
        0
    } else {
        MAX_LIVE.saturating_sub(live)
    };
    let mut posts = Vec::new();
    let mut count = 0;
    let mut servers: Vec<String> = Vec::new();
    for (i, input) in fresh.into_iter().enumerate() {
        if i < room {
            posts.push(Post::One(input));
        } else {
            count += 1;
            if !servers.contains(&input.server_name) {
                servers.push(input.server_name);
            }
        }
    }
    if count > 0 {
        posts.push(Post::Summary { count, servers });
    }
    posts
}

/// Decrements the live count when a question notification's thread ends, however it ends.
struct LiveGuard(Arc<Notifier>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a notification action should do to the input.
#[derive(Debug, Clone, PartialEq)]
pub enum QuickAnswer {
    /// Accept with `{field: true}`.
    Approve(String),
    /// Decline.
    Decline,
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

    /// Whether Approve/Decline buttons can be offered.
    pub fn actions_supported(&self) -> bool {
        self.capabilities().iter().any(|c| c == "actions")
    }

    /// Claims `key` for a notification; false if it already had one (or DND is on).
    fn claim(&self, key: &str) -> bool {
        if self.dnd() {
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
        self.live.fetch_add(1, Ordering::Relaxed);
        let guard = LiveGuard(Arc::clone(self));
        let (me, input) = (Arc::clone(self), input.clone());
        let spawned = std::thread::Builder::new()
            .name("notify".into())
            .spawn(move || {
                let _guard = guard;
                me.post(&input, on_answer, on_open);
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot spawn notification thread: {e}");
        }
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
        let markup = self
            .capabilities()
            .iter()
            .any(|c| c == "body-markup" || c == "body-hyperlinks");
        let posting = self.summary_posting.lock();
        // Read under the posting lock: the latest count, and the id of the summary on screen.
        let Some((title, body, replace)) = self.summary.lock().ok().map(|s| {
            let (title, body) = summary_text(s.count, &s.servers);
            (title, body, s.daemon_id)
        }) else {
            return;
        };
        let body = if markup { escape(&body) } else { body };
        let mut n = notify_rust::Notification::new();
        n.appname("Countersign")
            .summary(&title)
            .body(&body)
            .hint(notify_rust::Hint::Category("im.received".into()))
            .timeout(notify_rust::Timeout::Never)
            .action("default", "Open in Countersign");
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
        // dunst parses markup while advertising only "body-hyperlinks": either cap means tags in
        // server text would be interpreted (links, bold), so escape them.
        let markup = self
            .capabilities()
            .iter()
            .any(|c| c == "body-markup" || c == "body-hyperlinks");
        let quick = self
            .actions_supported()
            .then(|| single_confirmation(&input.request))
            .flatten();
        let body = body_text(&input.request, markup);
        // The summary is plain text by the notification spec (dunst shows entities literally).
        let title = summary(input);
        let mut n = notify_rust::Notification::new();
        n.appname("Countersign")
            .summary(&title)
            .body(&body)
            .hint(notify_rust::Hint::Category("im.received".into()))
            .timeout(notify_rust::Timeout::Never)
            .action("default", "Open in Countersign");
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
            let body = match outcome {
                "accept" => "Approved",
                "decline" => "Declined",
                "cancel" => "Dismissed",
                _ => "No longer needed",
            };
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

/// The notifier's identity of a question: keys are unique within a task only.
pub fn id_of(input: &InputRequestView) -> String {
    format!("{}/{}", input.task_row, input.key)
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

/// "server · tool" (adopted tasks have no known tool).
pub fn summary(input: &InputRequestView) -> String {
    let tool = input.tool_name.as_deref().unwrap_or("adopted task");
    format!("{} · {}", input.server_name, tool)
}

/// The question's text from the core (truncated; a link's host first, in punycode, without
/// userinfo), escaped when the daemon renders markup.
pub fn body_text(kind: &InputKind, markup: bool) -> String {
    let text = match kind {
        InputKind::Form { message, .. } => notice::form_body(message),
        InputKind::Url { message, url, .. } => notice::link_body(message, url),
        InputKind::Unsupported { method } => {
            notice::form_body(&format!("Unsupported request: {method}"))
        }
    };
    if markup {
        escape(&text)
    } else {
        text
    }
}

/// The summary's title and body (plain text; escaped for markup daemons when posted).
pub fn summary_text(count: usize, servers: &[String]) -> (String, String) {
    let title = format!("Countersign · {count} new questions");
    let mut named: Vec<&str> = servers
        .iter()
        .take(SUMMARY_SERVERS)
        .map(String::as_str)
        .collect();
    let more = servers.len().saturating_sub(SUMMARY_SERVERS);
    let more_text = format!("{more} more");
    if more > 0 {
        named.push(&more_text);
    }
    let from = match named.as_slice() {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    let body = notice::form_body(&format!("From {from}. Open Countersign to answer them."));
    (title, body)
}

/// Server text for a daemon that renders markup: tags become visible characters.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The property name when the form is a single boolean confirmation: exactly one required
/// property, a boolean, and every other property optional (it is then left out).
pub fn single_confirmation(kind: &InputKind) -> Option<String> {
    let InputKind::Form {
        requested_schema, ..
    } = kind
    else {
        return None;
    };
    let props = requested_schema.get("properties")?.as_object()?;
    let required: Vec<&str> = requested_schema
        .get("required")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let [only] = required.as_slice() else {
        return None;
    };
    let prop = props.get(*only)?;
    (prop.get("type")?.as_str()? == "boolean").then(|| (*only).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> InputKind {
        InputKind::Form {
            message: "Approve deployment of 'billing-api'?".into(),
            requested_schema: schema,
        }
    }

    #[test]
    fn the_fastmcp_deploy_prompt_is_a_single_confirmation() {
        // Captured from fastmcp 4.1.4 (shared/wire/fastmcp/16_tasks_get_input_required.txt).
        let k = form(json!({"type":"object","properties":{
            "approve":{"type":"boolean","title":"Approve"},"reason":{"type":"string"}},"required":["approve"]}));
        assert_eq!(single_confirmation(&k), Some("approve".into()));
    }

    #[test]
    fn forms_with_more_required_fields_get_no_quick_actions() {
        let k = form(json!({"type":"object","properties":{
            "approve":{"type":"boolean"},"reason":{"type":"string"}},"required":["approve","reason"]}));
        assert_eq!(
            single_confirmation(&k),
            None,
            "a required reason must be typed in the app"
        );
        let k =
            form(json!({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}));
        assert_eq!(single_confirmation(&k), None);
        let url = InputKind::Url {
            message: "m".into(),
            url: "https://x".into(),
            elicitation_id: None,
        };
        assert_eq!(
            single_confirmation(&url),
            None,
            "URL consent is never a one-click approval"
        );
    }

    #[test]
    fn body_is_truncated_and_escaped_for_markup_daemons() {
        let long = InputKind::Form {
            message: format!("<a href='x'>click</a> {}", "é".repeat(400)),
            requested_schema: json!({}),
        };
        let b = body_text(&long, true);
        assert!(
            b.starts_with("&lt;a href='x'&gt;click&lt;/a&gt;"),
            "server text must not become markup: {b}"
        );
        assert!(b.ends_with('…'));
        assert!(body_text(&long, false).chars().count() == notice::BODY_MAX_CHARS + 1);
    }

    #[test]
    fn url_body_shows_the_full_host_first() {
        let k = InputKind::Url {
            message: "Sign in".into(),
            url: "https://login.example.com:8443/a?b".into(),
            elicitation_id: None,
        };
        assert_eq!(
            body_text(&k, false),
            "Link to login.example.com:8443\nSign in"
        );
    }

    #[test]
    fn url_body_keeps_the_punycode_host_whole_under_a_long_message_without_userinfo() {
        let k = InputKind::Url {
            message: "<b>Sign in</b> ".repeat(40),
            url: "https://good.com@b\u{fc}cher.example/login".into(),
            elicitation_id: None,
        };
        let b = body_text(&k, true);
        assert!(
            b.starts_with("Link to xn--bcher-kva.example\n&lt;b&gt;Sign in"),
            "host first, punycode, markup escaped: {b}"
        );
        assert!(!b.contains("good.com"), "userinfo is never shown: {b}");
        assert!(b.ends_with('…'));
    }

    fn question(server: &str, key: &str) -> InputRequestView {
        InputRequestView {
            task_row: 1,
            key: key.into(),
            task_id: "t".into(),
            server_name: server.into(),
            tool_name: None,
            requested_at_ms: 0,
            expires_at_ms: None,
            request: form(json!({})),
        }
    }

    fn questions(n: usize) -> Vec<InputRequestView> {
        (0..n)
            .map(|i| question(["a", "b", "c", "d", "e"][i % 5], &format!("k{i}")))
            .collect()
    }

    #[test]
    fn a_burst_of_questions_becomes_one_summary() {
        let posts = arrange(questions(10_000), 0);
        assert_eq!(
            posts,
            vec![Post::Summary {
                count: 10_000,
                servers: vec!["a".into(), "b".into(), "c".into(), "d".into(), "e".into()]
            }],
            "10,000 new questions are one notification, not 10,000"
        );
    }

    #[test]
    fn a_few_questions_get_their_own_notifications() {
        let posts = arrange(questions(BURST), 0);
        assert_eq!(posts.len(), BURST);
        assert!(posts.iter().all(|p| matches!(p, Post::One(_))));
    }

    #[test]
    fn questions_beyond_the_live_limit_share_a_summary() {
        let posts = arrange(questions(2), MAX_LIVE - 1);
        assert!(
            matches!(&posts[0], Post::One(q) if q.key == "k0"),
            "{posts:?}"
        );
        assert_eq!(
            posts[1],
            Post::Summary {
                count: 1,
                servers: vec!["b".into()]
            }
        );
        assert_eq!(posts.len(), 2);
        let posts = arrange(questions(1), MAX_LIVE);
        assert!(
            matches!(posts.as_slice(), [Post::Summary { count: 1, .. }]),
            "no thread beyond the limit: {posts:?}"
        );
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

    #[test]
    fn the_summary_names_a_few_servers_and_counts_the_rest() {
        let servers: Vec<String> = ["ci", "deploy", "data", "ops", "infra"]
            .map(String::from)
            .to_vec();
        let (title, body) = summary_text(12, &servers);
        assert_eq!(title, "Countersign · 12 new questions");
        assert_eq!(
            body,
            "From ci, deploy, data and 2 more. Open Countersign to answer them."
        );
        let (_, body) = summary_text(2, &servers[..1]);
        assert_eq!(body, "From ci. Open Countersign to answer them.");
    }
}
