//! Configuration of a [`DemoServer`](crate::DemoServer).

use std::fmt;
use std::io;
use std::time::Duration;

/// How replies to JSON-RPC requests are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseMode {
    /// Every reply is `application/json` (what fastmcp does unless a handler streams).
    #[default]
    Json,
    /// Every reply is `text/event-stream`, like rmcp's default. Errors raised before dispatch
    /// (headers, version, capabilities) stay `application/json` with their HTTP status, and
    /// errors raised by a method (such as an unknown task) travel inside the stream with HTTP
    /// 200, exactly as rmcp does.
    Sse,
    /// `text/event-stream` when the request carries a `progressToken` or the tool streams
    /// progress; `application/json` otherwise.
    Mixed,
}

/// Which generation of MCP the server speaks. The tools and what their tasks do are the same in
/// both; the era decides the wire shape and whether there is a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    /// MCP `2026-07-28`: stateless, the Tasks extension (`tasks/get` with the task's payload,
    /// `tasks/update`, `subscriptions/listen`).
    #[default]
    Modern,
    /// MCP `2025-11-25` as the TypeScript SDK 1.x serves it: `initialize` and an
    /// `Mcp-Session-Id`, SEP-1686 Tasks (`params.task`, `tasks/get`, `tasks/list`,
    /// `tasks/cancel`, a blocking `tasks/result` carrying the server's questions), the GET
    /// stream with `notifications/tasks/status`. Also answers `2025-06-18` and `2025-03-26`.
    Legacy,
}

impl Era {
    /// The protocol version that names the era on the command line (`--era`).
    pub fn version(self) -> &'static str {
        match self {
            Self::Modern => "2026-07-28",
            Self::Legacy => "2025-11-25",
        }
    }
}

impl std::str::FromStr for Era {
    type Err = String;

    /// `2026-07-28` (or `modern`) and `2025-11-25` (or `legacy`), the values of `--era`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "2026-07-28" | "modern" => Ok(Self::Modern),
            "2025-11-25" | "legacy" => Ok(Self::Legacy),
            other => Err(format!(
                "unknown era {other:?}: 2026-07-28 (modern) or 2025-11-25 (legacy)"
            )),
        }
    }
}

/// Configuration of the demo server. Every field has a sensible [`Default`].
#[derive(Clone)]
pub struct DemoConfig {
    /// Multiplies every simulated duration: `1.0` is realistic pacing, `0.01` runs 100x faster
    /// (for tests). TTLs and `pollIntervalMs` are real milliseconds and are not scaled, nor is
    /// `bench_job`, whose `duration_ms` argument is exact.
    pub time_scale: f64,
    /// The `pollIntervalMs` advertised on every task (must be positive).
    pub poll_interval_ms: u64,
    /// `ttlMs` of every task; `None` advertises `ttlMs: null` (kept until shutdown).
    pub default_ttl_ms: Option<u64>,
    /// Framing of replies.
    pub response_mode: ResponseMode,
    /// Frame SSE events like fastmcp (`event: message` + CRLF line ends) instead of rmcp's
    /// bare `data:` lines ending in LF.
    pub sse_crlf: bool,
    /// When set, every POST must carry `Authorization: Bearer <token>`; otherwise the server
    /// answers 401 with a `WWW-Authenticate` challenge.
    pub required_token: Option<String>,
    /// Serve `subscriptions/listen` (push task status). Off, the method is unknown (-32601),
    /// as it is on both real peers today, so tests can compare push with polling alone.
    pub push: bool,
    /// How often an idle listen stream carries a `: ping` comment (real time, not scaled).
    /// Also the keep-alive of the legacy era's GET and `tasks/result` streams.
    pub listen_keepalive: Duration,
    /// The protocol generation served. [`Era::Legacy`] ignores `push` (its push is the
    /// session's GET stream) and frames SSE as the TypeScript SDK does, whatever `sse_crlf`.
    pub era: Era,
    /// In the legacy era, serve the session's GET stream. Off, `GET` is answered 405 (a server
    /// that offers none, which the spec allows): clients then learn of changes by polling alone.
    pub legacy_get_stream: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            time_scale: 1.0,
            poll_interval_ms: 1000,
            default_ttl_ms: Some(900_000),
            response_mode: ResponseMode::Json,
            sse_crlf: false,
            required_token: None,
            push: true,
            listen_keepalive: Duration::from_secs(15),
            era: Era::Modern,
            legacy_get_stream: true,
        }
    }
}

impl fmt::Debug for DemoConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemoConfig")
            .field("time_scale", &self.time_scale)
            .field("poll_interval_ms", &self.poll_interval_ms)
            .field("default_ttl_ms", &self.default_ttl_ms)
            .field("response_mode", &self.response_mode)
            .field("sse_crlf", &self.sse_crlf)
            .field(
                "required_token",
                &self.required_token.as_ref().map(|_| "<redacted>"),
            )
            .field("push", &self.push)
            .field("listen_keepalive", &self.listen_keepalive)
            .field("era", &self.era)
            .field("legacy_get_stream", &self.legacy_get_stream)
            .finish()
    }
}

impl DemoConfig {
    /// Rejects values the wire cannot carry (a zero TTL or poll interval) or that would make
    /// the pacing meaningless.
    pub(crate) fn validate(&self) -> io::Result<()> {
        let invalid =
            |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, what.to_owned()));
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return invalid("time_scale must be a positive finite number");
        }
        if self.poll_interval_ms == 0 {
            return invalid("poll_interval_ms must be positive");
        }
        if self.default_ttl_ms == Some(0) {
            return invalid("default_ttl_ms must be positive or None");
        }
        if self.required_token.as_deref() == Some("") {
            return invalid("required_token must not be empty");
        }
        if self.listen_keepalive.is_zero() {
            return invalid("listen_keepalive must be positive");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_the_token() {
        let config = DemoConfig {
            required_token: Some("s3cret".into()),
            ..DemoConfig::default()
        };
        let printed = format!("{config:?}");
        assert!(!printed.contains("s3cret"), "token leaked: {printed}");
        assert!(printed.contains("<redacted>"));
    }

    #[test]
    fn rejects_values_the_wire_cannot_carry() {
        for bad in [
            DemoConfig {
                time_scale: 0.0,
                ..DemoConfig::default()
            },
            DemoConfig {
                time_scale: f64::NAN,
                ..DemoConfig::default()
            },
            DemoConfig {
                poll_interval_ms: 0,
                ..DemoConfig::default()
            },
            DemoConfig {
                default_ttl_ms: Some(0),
                ..DemoConfig::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?} should be rejected");
        }
        assert!(DemoConfig::default().validate().is_ok());
    }

    #[test]
    fn eras_are_named_by_version_or_word() {
        for (text, era) in [
            ("2025-11-25", Era::Legacy),
            ("legacy", Era::Legacy),
            ("2026-07-28", Era::Modern),
            ("modern", Era::Modern),
        ] {
            assert_eq!(text.parse::<Era>(), Ok(era));
        }
        assert!("2025-06-18".parse::<Era>().is_err());
        assert_eq!(Era::Legacy.version(), "2025-11-25");
    }
}
