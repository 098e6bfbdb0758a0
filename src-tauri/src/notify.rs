//! Desktop notifications for new inbox entries.
//!
//! One notification per question, ever: the ledger's `inputs.notified_at` survives restarts (the
//! feed marks it before posting) and this notifier also refuses a second one in-process. Title:
//! server · tool; body: the question, truncated, markup-escaped (it is server text). When the
//! daemon advertises `actions` and the form is a single boolean confirmation, the notification
//! carries Approve/Decline; a click on the body opens the app on that question. Do-not-disturb
//! suppresses new notifications only; the inbox and tray still count.

use crate::ipc::{InputKind, InputRequestView};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Longest body we send; daemons truncate differently, so we decide.
const BODY_MAX_CHARS: usize = 180;

/// Notification state shared by the shell.
#[derive(Default)]
pub struct Notifier {
    dnd: AtomicBool,
    /// "task row/key" → (daemon id, 0 while being posted; summary).
    shown: Mutex<HashMap<String, (u32, String)>>,
    caps: OnceLock<Vec<String>>,
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

    /// Posts the notification for a new input, on its own thread (the wait for a click blocks).
    /// `on_answer` is called with the user's quick answer; `on_open` when the body is clicked.
    pub fn input_requested(
        self: &Arc<Self>,
        input: &InputRequestView,
        on_answer: impl FnOnce(QuickAnswer) + Send + 'static,
        on_open: impl FnOnce() + Send + 'static,
    ) {
        if !self.claim(&id_of(input)) {
            return;
        }
        let (me, input) = (Arc::clone(self), input.clone());
        let spawned = std::thread::Builder::new()
            .name("notify".into())
            .spawn(move || {
                me.post(&input, on_answer, on_open);
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot spawn notification thread: {e}");
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
        let Some((daemon_id, title)) = self.shown.lock().ok().and_then(|s| s.get(id).cloned())
        else {
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
        let shown: Vec<(u32, String)> = self
            .shown
            .lock()
            .map(|s| s.values().filter(|(id, _)| *id != 0).cloned().collect())
            .unwrap_or_default();
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

/// The question, truncated on a character boundary, escaped when the daemon renders markup.
pub fn body_text(kind: &InputKind, markup: bool) -> String {
    let raw = match kind {
        InputKind::Form { message, .. } => message.clone(),
        InputKind::Url { message, url, .. } => format!("{message}\n{}", host_of(url)),
        InputKind::Unsupported { method } => format!("Unsupported request: {method}"),
    };
    let mut text: String = raw.chars().take(BODY_MAX_CHARS).collect();
    if raw.chars().count() > BODY_MAX_CHARS {
        text.push('…');
    }
    if markup {
        text = escape(&text);
    }
    text
}

/// Server text for a daemon that renders markup: tags become visible characters.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
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
        assert!(body_text(&long, false).chars().count() == BODY_MAX_CHARS + 1);
    }

    #[test]
    fn url_body_shows_the_full_host() {
        let k = InputKind::Url {
            message: "Sign in".into(),
            url: "https://login.example.com:8443/a?b".into(),
            elicitation_id: None,
        };
        assert_eq!(body_text(&k, false), "Sign in\nlogin.example.com:8443");
    }
}
