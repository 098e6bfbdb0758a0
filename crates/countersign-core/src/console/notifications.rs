//! Desktop notifications for new questions, decided here and posted by the shell: one
//! notification per question, a burst told in one summary ([`arrange`]), what each says (text
//! from [`crate::notice`]: truncated, a link's host first; escaped for daemons that render
//! markup), and which questions one click can answer ([`single_confirmation`]).

use super::view::{InputKind, InputRequestView, InputResponse};
use crate::notice::{form_body, link_body};

/// Most question notifications waiting for a click at once (one thread each).
pub const MAX_LIVE: usize = 4;
/// More new questions than this at once are told in one summary notification.
pub const BURST: usize = 3;
/// Server names listed in a summary's body; the rest are counted.
const SUMMARY_SERVERS: usize = 3;

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

/// An answer given from a notification's buttons.
#[derive(Debug, Clone, PartialEq)]
pub enum QuickAnswer {
    /// Approve: accept with `{field: true}` (the one boolean of [`single_confirmation`]).
    Approve(String),
    /// Decline.
    Decline,
}

impl QuickAnswer {
    /// The answer as the console records it.
    pub fn response(self) -> InputResponse {
        match self {
            QuickAnswer::Approve(field) => InputResponse::Accept {
                content: Some(serde_json::Map::from_iter([(
                    field,
                    serde_json::Value::Bool(true),
                )])),
            },
            QuickAnswer::Decline => InputResponse::Decline,
        }
    }
}

/// What replaces the notification of a question that left the inbox, by how it left (the
/// answer's action, anything else: no longer needed), so no stale Approve button stays on screen.
pub fn closed_text(how: &str) -> &'static str {
    match how {
        "accept" => "Approved",
        "decline" => "Declined",
        "cancel" => "Dismissed",
        _ => "No longer needed",
    }
}

/// The notifier's identity of a question: keys are unique within a task only.
pub fn id_of(input: &InputRequestView) -> String {
    notification_id(input.task_row, &input.key)
}

/// [`id_of`] from a task row and a question key.
pub fn notification_id(task_row: i64, key: &str) -> String {
    format!("{task_row}/{key}")
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
        InputKind::Form { message, .. } => form_body(message),
        InputKind::Url { message, url, .. } => link_body(message, url),
        InputKind::Unsupported { method } => form_body(&format!("Unsupported request: {method}")),
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
    let body = form_body(&format!("From {from}. Open Countersign to answer them."));
    (title, body)
}

/// Server text for a daemon that renders markup: tags become visible characters.
pub fn escape(text: &str) -> String {
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
    crate::decision::confirmation_field(requested_schema)
}

/// Questions as the inbox lists them, for tests here and in the resident's notifier.
#[cfg(any(test, feature = "test-support"))]
pub mod examples {
    use super::{InputKind, InputRequestView};

    /// A form question with `schema`, worded as a deployment approval.
    pub fn form(schema: serde_json::Value) -> InputKind {
        InputKind::Form {
            message: "Approve deployment of 'billing-api'?".into(),
            requested_schema: schema,
        }
    }

    /// Question `key` of task row 1 on `server`, with an empty form.
    pub fn question(server: &str, key: &str) -> InputRequestView {
        InputRequestView {
            task_row: 1,
            key: key.into(),
            task_id: "t".into(),
            server_name: server.into(),
            tool_name: None,
            requested_at_ms: 0,
            expires_at_ms: None,
            request: form(serde_json::json!({})),
        }
    }

    /// `n` questions (`k0`, `k1`, …) from five servers in turn (`a` to `e`).
    pub fn questions(n: usize) -> Vec<InputRequestView> {
        (0..n)
            .map(|i| question(["a", "b", "c", "d", "e"][i % 5], &format!("k{i}")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::examples::{form, questions};
    use super::*;
    use crate::notice::BODY_MAX_CHARS;
    use serde_json::json;

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
