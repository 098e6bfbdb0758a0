//! What a person is told about a question outside the app's window: the text of a desktop
//! notification, and the host a URL elicitation leads to.
//!
//! All of it is server text, shown where the app's own safeguards (the form, the full URL on
//! screen) are absent, so the one fact a person needs to judge a link, its host, comes first,
//! whole, and in the form that cannot imitate another host: ASCII (punycode for international
//! names), without userinfo (`https://good.com@evil.com/` leads to `evil.com`).
//! How many notifications to post, and what each says, is [`crate::console::notifications`].

/// Longest notification body, in characters: daemons truncate differently (or not at all), so we
/// decide what is cut.
pub const BODY_MAX_CHARS: usize = 180;

/// Where a link leads, as a person should read it: the host in ASCII (international names in
/// punycode, as `url` serialises them), with its port when it is not the scheme's default, never
/// the userinfo. `None` for anything that is not an absolute http(s) URL with a host: such a
/// link is refused anyway.
pub fn link_host(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return None;
    }
    let host = parsed.host_str()?;
    Some(match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// The body of a notification for a form question: its message, truncated.
pub fn form_body(message: &str) -> String {
    truncate(message, BODY_MAX_CHARS)
}

/// The body of a notification for a URL question: the host on the first line, whole, then the
/// message truncated to what is left of [`BODY_MAX_CHARS`], so no message can push the host out
/// of sight. A link without a readable http(s) host says so instead of showing one.
pub fn link_body(message: &str, url: &str) -> String {
    let first = match link_host(url) {
        Some(host) => format!("Link to {host}"),
        None => "Link that cannot be opened (not an http(s) URL)".to_owned(),
    };
    let room = BODY_MAX_CHARS.saturating_sub(first.chars().count() + 1);
    format!("{first}\n{}", truncate(message, room))
}

pub use countersign_mcp::text::truncate;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_never_includes_userinfo() {
        assert_eq!(
            link_host("https://good.com@evil.com/login").as_deref(),
            Some("evil.com")
        );
        assert_eq!(
            link_host("https://user:pass@evil.com:8443/x").as_deref(),
            Some("evil.com:8443")
        );
    }

    #[test]
    fn international_hosts_are_shown_in_punycode() {
        // Cyrillic "а" (U+0430) in place of the Latin "a": looks like apple.com, is not.
        assert_eq!(
            link_host("https://\u{430}pple.com/").as_deref(),
            Some("xn--pple-43d.com")
        );
        assert_eq!(
            link_host("https://bücher.example/").as_deref(),
            Some("xn--bcher-kva.example")
        );
    }

    #[test]
    fn default_ports_are_left_out_and_others_kept() {
        assert_eq!(
            link_host("https://example.com:443/").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            link_host("http://127.0.0.1:8765/cb").as_deref(),
            Some("127.0.0.1:8765")
        );
    }

    #[test]
    fn only_http_links_with_a_host_have_one() {
        assert_eq!(link_host("javascript:alert(1)"), None);
        assert_eq!(link_host("file:///etc/passwd"), None);
        assert_eq!(link_host("not a url"), None);
    }

    #[test]
    fn a_long_message_cannot_push_the_host_out_of_the_body() {
        let body = link_body(&"Sign in ".repeat(100), "https://good.com@evil.com/x");
        assert!(
            body.starts_with("Link to evil.com\n"),
            "the host comes first, without userinfo: {body}"
        );
        assert_eq!(
            body.chars().count(),
            BODY_MAX_CHARS + 1,
            "the cut adds one …"
        );
        assert!(body.ends_with('…'));
        assert!(!body.contains("good.com"), "{body}");
    }

    #[test]
    fn a_host_longer_than_the_body_limit_is_still_shown_whole() {
        let host = format!(
            "{}.example",
            "a".repeat(60) + "." + &"b".repeat(60) + "." + &"c".repeat(60)
        );
        let body = link_body("Sign in", &format!("https://{host}/"));
        assert!(body.starts_with(&format!("Link to {host}\n")), "{body}");
    }

    #[test]
    fn an_unreadable_link_says_so_instead_of_a_host() {
        let body = link_body("Open this", "javascript:alert(1)");
        assert_eq!(
            body,
            "Link that cannot be opened (not an http(s) URL)\nOpen this"
        );
    }

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate("ééé", 2), "éé…");
        assert_eq!(truncate("ééé", 3), "ééé");
        assert_eq!(
            form_body(&"x".repeat(BODY_MAX_CHARS)),
            "x".repeat(BODY_MAX_CHARS)
        );
    }
}
