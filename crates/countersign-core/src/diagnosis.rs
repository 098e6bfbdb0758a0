//! Why a server could not be added or checked, in one sentence a person can act on: "nothing is
//! listening at 127.0.0.1:9", "that is a web page, not an MCP endpoint", "the server needs
//! sign-in", "no answer within 30 s". The transport's own words stay available as `detail`, for
//! the disclosure under the sentence and for bug reports. The app's server form and the CLI
//! read the same [`Diagnosis`].

use serde::{Deserialize, Serialize};

use crate::mcp;

/// What kind of problem a failed check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Problem {
    /// The connection was refused or the host is unknown: no server runs at that address.
    NothingListening,
    /// Something answered, but with a web page or plain HTTP error, not MCP.
    NotMcp,
    /// The server wants credentials (HTTP 401/403).
    NeedsSignIn,
    /// No answer in time.
    TimedOut,
    /// The TLS handshake failed.
    Tls,
    /// The address is not one Countersign can use (scheme, credentials in it).
    BadAddress,
    /// The server moved (a redirect to another origin).
    Moved,
    /// Anything else the server said.
    Other,
}

/// A failed check, explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    /// The kind of problem, for the UI to branch on.
    pub problem: Problem,
    /// One sentence: what is wrong.
    pub summary: String,
    /// One sentence: what to do.
    pub advice: String,
    /// The technical detail (the transport's or server's own words).
    pub detail: String,
    /// Whether adding the server without a successful check makes sense (it may come up later),
    /// as opposed to an address that will never work as it is.
    pub add_anyway: bool,
}

/// Explains why talking to a server failed; `url` names it in the sentence when known.
pub fn diagnose(url: Option<&str>, error: &mcp::Error) -> Diagnosis {
    let place = url.map(place).unwrap_or_else(|| "The server".to_owned());
    let detail = error.to_string();
    let (problem, summary, advice, add_anyway) = match error {
        mcp::Error::Connect { .. } => (
            Problem::NothingListening,
            format!("Nothing is listening at {place}."),
            "Check that the server is running and that the address and port are right.".to_owned(),
            true,
        ),
        mcp::Error::Timeout { after, .. } => (
            Problem::TimedOut,
            format!("{place} did not answer within {} s.", after.as_secs().max(1)),
            "The server may be busy or unreachable from here; try again, or add it and let Countersign keep trying.".to_owned(),
            true,
        ),
        mcp::Error::Tls { .. } => (
            Problem::Tls,
            format!("The secure connection to {place} failed."),
            "Check the server's certificate, or whether the address should start with http:// instead of https://.".to_owned(),
            false,
        ),
        mcp::Error::Unauthorized { status, .. } => (
            Problem::NeedsSignIn,
            format!("{place} needs sign-in (HTTP {status})."),
            "Paste an access token for this server in the Bearer token field.".to_owned(),
            false,
        ),
        mcp::Error::InvalidUrl { reason, .. } => (
            Problem::BadAddress,
            format!("Countersign cannot use this address: {reason}."),
            "Use an http:// or https:// address without a user name or password in it.".to_owned(),
            false,
        ),
        mcp::Error::Redirected { location, .. } => (
            Problem::Moved,
            format!("{place} sends Countersign elsewhere ({location})."),
            "If the server moved, use its new address.".to_owned(),
            false,
        ),
        mcp::Error::Http { status, body, .. } if looks_like_a_page(body) || matches!(status, 404 | 405 | 501) => (
            Problem::NotMcp,
            format!("{place} is a web page, not an MCP endpoint (HTTP {status})."),
            "Use the server's MCP address, which often ends in /mcp.".to_owned(),
            false,
        ),
        mcp::Error::InvalidResponse { reason, .. } if looks_like_a_page(reason) => (
            Problem::NotMcp,
            format!("{place} is a web page, not an MCP endpoint."),
            "Use the server's MCP address, which often ends in /mcp.".to_owned(),
            false,
        ),
        mcp::Error::Http { status, .. } if *status >= 500 => (
            Problem::Other,
            format!("{place} had an internal error (HTTP {status})."),
            "Try again later; adding it now lets Countersign keep trying.".to_owned(),
            true,
        ),
        e => (
            Problem::Other,
            format!("{place} answered, but not as an MCP Tasks server Countersign can use."),
            "See the details; the server may need an update or a different address.".to_owned(),
            e.class() == mcp::ErrorClass::Transient,
        ),
    };
    Diagnosis {
        problem,
        summary,
        advice,
        detail,
        add_anyway,
    }
}

/// `host:port` of a URL for a sentence (the URL itself when it has no host we can read).
fn place(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => match (u.host_str(), u.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => url.to_owned(),
        },
        Err(_) => url.to_owned(),
    }
}

/// Whether a body is HTML rather than JSON or an event stream.
fn looks_like_a_page(body: &str) -> bool {
    let start = body.trim_start().to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html") || start.contains("<body")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::Duration;

    /// A one-shot HTTP server on 127.0.0.1 answering every request with `response`.
    fn serve(response: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for stream in listener.incoming().take(4) {
                let Ok(mut s) = stream else { continue };
                let mut buf = [0u8; 8192];
                let _ = s.read(&mut buf);
                let _ = s.write_all(response.as_bytes());
            }
        });
        format!("http://{addr}/mcp")
    }

    async fn check(url: &str, timeout: Duration) -> mcp::Error {
        let options = mcp::ClientOptions {
            request_timeout: timeout,
            ..mcp::ClientOptions::default()
        };
        let client = mcp::Client::with_options(mcp::Endpoint::new(url.to_owned()), options, None)
            .expect("client");
        client.discover().await.expect_err("the check must fail")
    }

    #[tokio::test]
    async fn a_closed_port_is_nothing_listening_and_may_be_added_anyway() {
        // Bind and drop: the port is free, so the connection is refused.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let d = diagnose(Some(&url), &check(&url, Duration::from_secs(5)).await);
        assert_eq!(d.problem, Problem::NothingListening, "{d:?}");
        assert_eq!(
            d.summary,
            format!("Nothing is listening at 127.0.0.1:{port}.")
        );
        assert!(d.add_anyway, "a server that is down now may come up later");
        assert!(!d.detail.is_empty(), "the transport's words stay available");
    }

    #[tokio::test]
    async fn an_html_page_is_not_an_mcp_endpoint_and_is_not_added_anyway() {
        let url = serve("HTTP/1.1 501 Not Implemented\r\ncontent-type: text/html\r\ncontent-length: 58\r\nconnection: close\r\n\r\n<!DOCTYPE html><html><body>Unsupported method</body></html>");
        let d = diagnose(Some(&url), &check(&url, Duration::from_secs(5)).await);
        assert_eq!(d.problem, Problem::NotMcp, "{d:?}");
        assert!(
            d.summary.contains("web page, not an MCP endpoint"),
            "{}",
            d.summary
        );
        assert!(!d.summary.contains("<html"), "no page in the sentence");
        assert!(!d.add_anyway);
    }

    #[tokio::test]
    async fn a_401_needs_sign_in() {
        let url = serve("HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        let d = diagnose(Some(&url), &check(&url, Duration::from_secs(5)).await);
        assert_eq!(d.problem, Problem::NeedsSignIn, "{d:?}");
        assert!(
            d.summary.ends_with("needs sign-in (HTTP 401)."),
            "{}",
            d.summary
        );
        assert!(d.advice.contains("token"));
    }

    #[tokio::test]
    async fn a_server_that_never_answers_timed_out_after_the_limit() {
        // Accepts and reads, never answers.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        std::thread::spawn(move || {
            let held: Vec<_> = listener.incoming().take(2).collect();
            std::thread::sleep(Duration::from_secs(5));
            drop(held);
        });
        let d = diagnose(Some(&url), &check(&url, Duration::from_secs(1)).await);
        assert_eq!(d.problem, Problem::TimedOut, "{d:?}");
        assert!(
            d.summary.ends_with("did not answer within 1 s."),
            "{}",
            d.summary
        );
        assert!(d.add_anyway);
    }
}
