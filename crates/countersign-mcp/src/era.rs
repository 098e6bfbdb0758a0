//! Which generation of MCP a server speaks, found the way the 2026-07-28 specification's
//! versioning section prescribes for Streamable HTTP: a modern request first
//! (`server/discover`); a recognised modern error means a modern server (-32022 is retried
//! with a mutual version by the modern client, never a reason to fall back; -32020 and -32021
//! are modern too); a 4xx, or a JSON-RPC error that is not a modern one, means a legacy server,
//! which is then initialized. 401/403 stay authorization errors, 5xx and network failures stay
//! errors: neither says anything about the era.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{Client, ClientOptions, Endpoint};
use crate::error::{Error, Result};
use crate::legacy::LegacyClient;
use crate::wire::Discovery;

/// A server's generation of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    /// 2026-07-28 and later: stateless, every request carries its version.
    Modern,
    /// 2025-11-25 and earlier: `initialize` and a session.
    Legacy,
}

/// What the era detection found, for display and storage: the era, the version in use and
/// what the server declared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerProfile {
    /// The era.
    pub era: Era,
    /// The protocol version in use with this server.
    pub protocol_version: String,
    /// The server's capabilities, verbatim.
    pub capabilities: Value,
    /// The server's name and version (`serverInfo`), verbatim, when it sent them.
    pub server_info: Option<Value>,
}

/// A connected client of either era.
#[derive(Debug, Clone)]
pub enum Connection {
    /// A modern server, with what `server/discover` said.
    Modern {
        /// The client.
        client: Client,
        /// The discovery result.
        discovery: Discovery,
    },
    /// A legacy server, with a session just initialized.
    Legacy(LegacyClient),
}

impl Connection {
    /// The era of the server.
    pub fn era(&self) -> Era {
        match self {
            Self::Modern { .. } => Era::Modern,
            Self::Legacy(_) => Era::Legacy,
        }
    }

    /// The era, the version in use, and what the server declared.
    pub fn profile(&self) -> ServerProfile {
        match self {
            Self::Modern { client, discovery } => ServerProfile {
                era: Era::Modern,
                protocol_version: client.protocol_version(),
                capabilities: Value::Object(discovery.capabilities.clone()),
                server_info: discovery.server_info.clone(),
            },
            Self::Legacy(client) => {
                let session = client.session();
                ServerProfile {
                    era: Era::Legacy,
                    protocol_version: session.protocol_version,
                    capabilities: session.server_capabilities,
                    server_info: Some(session.server_info).filter(|v| !v.is_null()),
                }
            }
        }
    }
}

/// Connects to a server of either era: `server/discover` first, then, if the answer says the
/// server is not modern ([`means_legacy`]), `initialize`. Errors of the probe that say nothing
/// about the era (authorization, 5xx, network, a modern server's refusal) are returned as they
/// are; when the fallback fails too, its error is returned (the probe's is logged).
pub async fn connect(endpoint: Endpoint, options: ClientOptions) -> Result<Connection> {
    let client = Client::with_options(endpoint.clone(), options.clone(), None)?;
    match client.discover().await {
        Ok(discovery) => Ok(Connection::Modern { client, discovery }),
        Err(probe) if means_legacy(&probe) => {
            tracing::debug!(error = %probe, "server/discover refused as a legacy server would; initializing");
            LegacyClient::connect(endpoint, options)
                .await
                .map(Connection::Legacy)
        }
        Err(other) => Err(other),
    }
}

/// [`connect`] through a modern client already made for the server (its token, its options):
/// its `server/discover` first, then `initialize` with the same endpoint and current token.
pub async fn check(client: &Client) -> Result<Connection> {
    match client.discover().await {
        Ok(discovery) => Ok(Connection::Modern {
            client: client.clone(),
            discovery,
        }),
        Err(probe) if means_legacy(&probe) => {
            tracing::debug!(error = %probe, "server/discover refused as a legacy server would; initializing");
            LegacyClient::connect(client.endpoint(), client.options().clone())
                .await
                .map(Connection::Legacy)
        }
        Err(other) => Err(other),
    }
}

/// Whether the answer to a modern request says the server is of the legacy era: a 4xx without
/// a modern error body (a session required, not initialized, 404, 405), or a JSON-RPC error
/// that is not one of the modern ones (-32020, -32021, -32022) nor an internal error. Never for
/// 401/403 (the OAuth flow handles those), 408/429, 5xx, transport failures or malformed
/// answers.
pub fn means_legacy(error: &Error) -> bool {
    match error {
        Error::Http { status, .. } => {
            (400..500).contains(status) && !matches!(status, 401 | 403 | 408 | 429)
        }
        Error::MethodNotFound { .. } | Error::InvalidParams { .. } => true,
        Error::Rpc { error, .. } => error.code != -32603,
        Error::NotAcceptable { .. } | Error::SessionExpired { .. } => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::RpcError;

    fn rpc(code: i64, message: &str) -> Error {
        Error::Rpc {
            method: "server/discover".into(),
            error: RpcError {
                code,
                message: message.into(),
                data: None,
            },
        }
    }

    fn http(status: u16) -> Error {
        Error::Http {
            status,
            method: "server/discover".into(),
            body: String::new(),
            retry_after: None,
        }
    }

    #[test]
    fn a_non_modern_refusal_means_a_legacy_server() {
        // server-everything's answer: 400 with -32000 "Bad Request: Server not initialized".
        assert!(means_legacy(&rpc(
            -32000,
            "Bad Request: Server not initialized"
        )));
        assert!(means_legacy(&rpc(-32001, "Session not found")));
        assert!(means_legacy(&http(400)));
        assert!(means_legacy(&http(404)));
        assert!(means_legacy(&http(405)));
        assert!(means_legacy(&Error::MethodNotFound {
            method: "server/discover".into()
        }));
    }

    #[test]
    fn modern_errors_auth_and_outages_are_not_a_reason_to_fall_back() {
        for error in [
            Error::UnsupportedVersion {
                requested: "2026-07-28".into(),
                supported: vec!["2027-01-01".into()],
            },
            Error::HeaderMismatch {
                method: "server/discover".into(),
                message: "m".into(),
            },
            Error::MissingCapability {
                method: "server/discover".into(),
                required: Value::Null,
                message: "m".into(),
            },
            Error::Unauthorized {
                status: 401,
                method: "server/discover".into(),
                www_authenticate: None,
            },
            http(401),
            http(403),
            http(429),
            http(500),
            http(503),
            rpc(-32603, "Internal error"),
            Error::Connect {
                url: "u".into(),
                message: "refused".into(),
            },
            Error::Timeout {
                url: "u".into(),
                after: std::time::Duration::from_secs(1),
            },
        ] {
            assert!(!means_legacy(&error), "{error:?} must not read as legacy");
        }
    }

    #[test]
    fn the_era_prints_in_lower_case() {
        assert_eq!(serde_json::to_value(Era::Legacy).expect("prints"), "legacy");
        assert_eq!(serde_json::to_value(Era::Modern).expect("prints"), "modern");
    }
}
