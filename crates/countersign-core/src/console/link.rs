//! Links to a task, `countersign://task/<server>/<task id>`: what "Copy link" in the app and the
//! CLI's `tasks show` print, and what the app opens (the desktop entry hands it the link).
//!
//! `<server>` is a registered server's name or, for a server the reader may not have added yet,
//! its http(s) URL; each part is percent-encoded (`encodeURIComponent`'s set), so names and ids
//! with `/`, spaces or any Unicode survive. The links we make carry the URL (a teammate's ledger
//! names servers its own way); both forms are read. A link comes from anyone (a chat message, a
//! web page), so parsing is strict: bounded length, one shape, valid UTF-8, no control
//! characters, http(s) URLs without credentials, nothing else accepted.

use std::fmt;

/// The scheme the desktop entry registers (`x-scheme-handler/countersign`).
pub const SCHEME: &str = "countersign";

/// Whether a command-line argument is a link for us (the rest is options): the app, the
/// resident and the desktop entry's `%u` use it to tell links from flags.
pub fn is_link(arg: &str) -> bool {
    arg.len() > SCHEME.len()
        && arg.as_bytes()[SCHEME.len()] == b':'
        && arg.is_char_boundary(SCHEME.len())
        && arg[..SCHEME.len()].eq_ignore_ascii_case(SCHEME)
}

/// Longest link read (bytes): a URL and a task id, with room, but never a document.
pub const MAX_LINK_LEN: usize = 4096;

/// Longest task id or server name read from a link (bytes, decoded).
pub const MAX_PART_LEN: usize = 1024;

/// Why a link cannot be opened. The message says which part is wrong, never echoing the link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// Longer than [`MAX_LINK_LEN`].
    #[error("the link is {len} bytes long; at most {max} are read")]
    TooLong {
        /// Its length.
        len: usize,
        /// [`MAX_LINK_LEN`].
        max: usize,
    },
    /// Not a `countersign:` link.
    #[error("not a countersign:// link")]
    Scheme,
    /// A `countersign:` link to something other than a task.
    #[error("countersign:// links open tasks (countersign://task/…); this one does not")]
    Kind,
    /// Not `task/<server>/<task id>`, or with a query or fragment.
    #[error("a task link is countersign://task/<server>/<task id>")]
    Shape,
    /// A part is empty after decoding.
    #[error("the link's {part} is empty")]
    Empty {
        /// Which part.
        part: Part,
    },
    /// A part is longer than [`MAX_PART_LEN`] once decoded.
    #[error("the link's {part} is longer than {max} bytes")]
    PartTooLong {
        /// Which part.
        part: Part,
        /// [`MAX_PART_LEN`].
        max: usize,
    },
    /// Bad percent-encoding or not UTF-8 once decoded.
    #[error("the link's {part} is not valid percent-encoded UTF-8")]
    Encoding {
        /// Which part.
        part: Part,
    },
    /// A control character (newline, escape, NUL, bidi override, …) in a part.
    #[error("the link's {part} holds a control character")]
    Control {
        /// Which part.
        part: Part,
    },
    /// The server is given as a URL that is not http(s), has credentials or does not parse.
    #[error("the link's server URL cannot be used: {reason}")]
    ServerUrl {
        /// Why (from `mcp::check_server_url`, credentials redacted).
        reason: String,
    },
}

/// A part of a link, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The server name or URL.
    Server,
    /// The task id.
    TaskId,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Server => "server",
            Part::TaskId => "task id",
        })
    }
}

/// Which server a link names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkServer {
    /// A registered server's name.
    Name(String),
    /// A server's MCP endpoint (http or https, no credentials).
    Url(String),
}

/// What a link leads to in this ledger ([`Console::open_link`](super::Console::open_link)).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum LinkTarget {
    /// A task the ledger tracks: show it.
    Tracked {
        /// Its ledger row.
        row: i64,
    },
    /// A task of a registered server the ledger does not track: adopt it once the person agrees.
    Adopt {
        /// The server's row.
        server_id: i64,
        /// The server's name.
        server: String,
        /// The task id.
        task_id: String,
    },
    /// A task of a server not added here: the person adds the server first.
    AddServer {
        /// The server's endpoint, as the link gives it.
        url: String,
        /// The task id.
        task_id: String,
    },
}

/// A parsed `countersign://task/<server>/<task id>` link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLink {
    /// The server.
    pub server: LinkServer,
    /// The task id on that server.
    pub task_id: String,
}

impl TaskLink {
    /// A link to `task_id` on the server at `url` (the form we hand out).
    pub fn to_url(url: &str, task_id: &str) -> Self {
        Self {
            server: LinkServer::Url(url.to_owned()),
            task_id: task_id.to_owned(),
        }
    }

    /// Reads a link, strictly (see the module docs).
    pub fn parse(link: &str) -> Result<Self, LinkError> {
        if link.len() > MAX_LINK_LEN {
            return Err(LinkError::TooLong {
                len: link.len(),
                max: MAX_LINK_LEN,
            });
        }
        let (scheme, rest) = link.split_once(':').ok_or(LinkError::Scheme)?;
        if !scheme.eq_ignore_ascii_case(SCHEME) {
            return Err(LinkError::Scheme);
        }
        let rest = rest.strip_prefix("//").ok_or(LinkError::Shape)?;
        if rest.contains(['?', '#']) {
            return Err(LinkError::Shape);
        }
        let mut parts = rest.split('/');
        let (Some(kind), Some(server), Some(task_id), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(if rest.starts_with("task/") || rest == "task" {
                LinkError::Shape
            } else {
                LinkError::Kind
            });
        };
        if !kind.eq_ignore_ascii_case("task") {
            return Err(LinkError::Kind);
        }
        let server = decode(server, Part::Server)?;
        let task_id = decode(task_id, Part::TaskId)?;
        let server = if has_http_scheme(&server) {
            crate::mcp::check_server_url(&server).map_err(|e| LinkError::ServerUrl {
                reason: e.to_string(),
            })?;
            LinkServer::Url(server)
        } else {
            LinkServer::Name(server)
        };
        Ok(Self { server, task_id })
    }
}

impl fmt::Display for TaskLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let server = match &self.server {
            LinkServer::Name(name) => name,
            LinkServer::Url(url) => url,
        };
        write!(
            f,
            "{SCHEME}://task/{}/{}",
            encode(server),
            encode(&self.task_id)
        )
    }
}

fn has_http_scheme(s: &str) -> bool {
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// `encodeURIComponent`: all but `A-Z a-z 0-9 - _ . ! ~ * ' ( )` as `%XX` of the UTF-8 bytes.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(s: &str, part: Part) -> Result<String, LinkError> {
    let mut bytes = Vec::with_capacity(s.len());
    let mut input = s.bytes();
    while let Some(b) = input.next() {
        if b == b'%' {
            let hex = [input.next(), input.next()];
            let [Some(h), Some(l)] = hex else {
                return Err(LinkError::Encoding { part });
            };
            let digit = |c: u8| char::from(c).to_digit(16);
            let (Some(h), Some(l)) = (digit(h), digit(l)) else {
                return Err(LinkError::Encoding { part });
            };
            // Two hex digits: at most 0xFF.
            bytes.push(u8::try_from(h * 16 + l).map_err(|_| LinkError::Encoding { part })?);
        } else {
            bytes.push(b);
        }
    }
    let text = String::from_utf8(bytes).map_err(|_| LinkError::Encoding { part })?;
    if text.trim().is_empty() {
        return Err(LinkError::Empty { part });
    }
    if text.len() > MAX_PART_LEN {
        return Err(LinkError::PartTooLong {
            part,
            max: MAX_PART_LEN,
        });
    }
    if text.chars().any(is_control) {
        return Err(LinkError::Control { part });
    }
    Ok(text)
}

/// C0/C1 controls, and the format characters that reorder or hide text (bidi overrides and
/// isolates, zero-width), which would let a link show one id and mean another.
fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(server: &str, task: &str) -> TaskLink {
        TaskLink {
            server: LinkServer::Name(server.into()),
            task_id: task.into(),
        }
    }

    #[test]
    fn a_link_round_trips_through_its_text() {
        for link in [
            TaskLink::to_url("https://mcp.example.com/mcp?x=1", "task/1 é#?"),
            TaskLink::to_url("http://127.0.0.1:8080/", "abc"),
            name("ci server", "8f0c-…"),
        ] {
            let text = link.to_string();
            assert!(text.starts_with("countersign://task/"), "{text}");
            assert_eq!(TaskLink::parse(&text), Ok(link), "{text}");
        }
        assert_eq!(
            TaskLink::to_url("https://h.example/mcp", "t 1").to_string(),
            "countersign://task/https%3A%2F%2Fh.example%2Fmcp/t%201"
        );
    }

    #[test]
    fn a_server_that_looks_like_a_url_is_one_and_anything_else_is_a_name() {
        assert_eq!(
            TaskLink::parse("countersign://task/HTTPS%3A%2F%2Fh.example%2Fmcp/t").map(|l| l.server),
            Ok(LinkServer::Url("HTTPS://h.example/mcp".into()))
        );
        assert_eq!(
            TaskLink::parse("COUNTERSIGN://TASK/demo/t"),
            Ok(name("demo", "t"))
        );
    }

    #[test]
    fn hostile_links_are_refused_with_the_part_named() {
        let cases: &[(&str, LinkError)] = &[
            ("https://task/demo/t", LinkError::Scheme),
            ("countersign", LinkError::Scheme),
            ("countersign:task/demo/t", LinkError::Shape),
            ("countersign://server/demo/t", LinkError::Kind),
            ("countersign://task/demo", LinkError::Shape),
            ("countersign://task/demo/t/extra", LinkError::Shape),
            ("countersign://task/demo/t?adopt=1", LinkError::Shape),
            ("countersign://task/demo/t#x", LinkError::Shape),
            (
                "countersign://task//t",
                LinkError::Empty { part: Part::Server },
            ),
            (
                "countersign://task/demo/%20",
                LinkError::Empty { part: Part::TaskId },
            ),
            (
                "countersign://task/demo/%zz",
                LinkError::Encoding { part: Part::TaskId },
            ),
            (
                "countersign://task/demo/%4",
                LinkError::Encoding { part: Part::TaskId },
            ),
            (
                "countersign://task/demo/%C3%28",
                LinkError::Encoding { part: Part::TaskId },
            ),
            (
                "countersign://task/demo/a%0Ab",
                LinkError::Control { part: Part::TaskId },
            ),
            (
                "countersign://task/demo/a%00",
                LinkError::Control { part: Part::TaskId },
            ),
            (
                "countersign://task/de%1Bmo/t",
                LinkError::Control { part: Part::Server },
            ),
            (
                "countersign://task/demo/%E2%80%AEcba",
                LinkError::Control { part: Part::TaskId },
            ),
        ];
        for (link, want) in cases {
            assert_eq!(TaskLink::parse(link).as_ref(), Err(want), "{link}");
        }
        // Credentials in a server URL are refused, and the message does not repeat them.
        let err = TaskLink::parse("countersign://task/https%3A%2F%2Fuser%3Asecret%40h.example/t")
            .expect_err("credentials");
        assert!(matches!(err, LinkError::ServerUrl { .. }), "{err:?}");
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(matches!(
            TaskLink::parse("countersign://task/http%3A%2F%2F/t"),
            Err(LinkError::ServerUrl { .. })
        ));
    }

    #[test]
    fn size_is_bounded_before_anything_is_decoded() {
        let long = format!("countersign://task/demo/{}", "a".repeat(MAX_LINK_LEN));
        assert_eq!(
            TaskLink::parse(&long),
            Err(LinkError::TooLong {
                len: long.len(),
                max: MAX_LINK_LEN
            })
        );
        let part = format!("countersign://task/demo/{}", "a".repeat(MAX_PART_LEN + 1));
        assert_eq!(
            TaskLink::parse(&part),
            Err(LinkError::PartTooLong {
                part: Part::TaskId,
                max: MAX_PART_LEN
            })
        );
        // Multi-byte text at the limit is fine.
        let id = "é".repeat(MAX_PART_LEN / 2);
        assert_eq!(
            TaskLink::parse(&name("demo", &id).to_string()),
            Ok(name("demo", &id))
        );
    }
}
