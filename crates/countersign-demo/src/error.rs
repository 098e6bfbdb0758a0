//! The one error type of the request path: every variant is a JSON-RPC error with a code, an
//! HTTP status and (for some) structured `data`.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::PROTOCOL_VERSION;

/// A request the server refuses, as the JSON-RPC error it becomes.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Error {
    /// The body is not JSON (-32700).
    #[error("Parse error: {detail}")]
    Parse {
        /// What the JSON parser said.
        detail: String,
    },
    /// The body is JSON but not a JSON-RPC request this transport accepts (-32600).
    #[error("Invalid request: {detail}")]
    InvalidRequest {
        /// What is wrong with the envelope.
        detail: String,
    },
    /// The method is unknown or was removed (-32601, HTTP 404).
    #[error("Method not found: {method}")]
    MethodNotFound {
        /// The method the client asked for.
        method: String,
    },
    /// `params._meta` is missing or lacks a required key (-32602).
    #[error(
        "Invalid params: params._meta must be an object carrying {}",
        missing.join(" and ")
    )]
    InvalidMeta {
        /// The required `_meta` keys that are absent or of the wrong type.
        missing: Vec<&'static str>,
    },
    /// The params are malformed (-32602).
    #[error("Invalid params: {detail}")]
    InvalidParams {
        /// What is wrong.
        detail: String,
    },
    /// No task with this id, or its TTL has elapsed (-32602).
    #[error("Unknown task: {task_id}")]
    UnknownTask {
        /// The id the client sent.
        task_id: String,
    },
    /// A routing header is missing, malformed or disagrees with the body (-32020).
    #[error("Header mismatch: {detail}")]
    HeaderMismatch {
        /// Which header and why.
        detail: String,
    },
    /// The request needs a client capability that this request did not declare (-32021).
    #[error("Missing required client capability: {detail}")]
    MissingCapability {
        /// Human-readable reason.
        detail: String,
        /// The `ClientCapabilities` object the client must declare.
        required: Value,
    },
    /// The protocol version of the request is not `2026-07-28` (-32022).
    #[error("Unsupported protocol version: {requested}")]
    UnsupportedVersion {
        /// The version the request declared.
        requested: String,
    },
    /// The server itself failed (-32603).
    #[error("Internal error: {detail}")]
    Internal {
        /// What failed.
        detail: String,
    },
}

/// Crate-wide result type of the request path.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn invalid_params(detail: impl Into<String>) -> Self {
        Self::InvalidParams {
            detail: detail.into(),
        }
    }

    pub(crate) fn header(detail: impl Into<String>) -> Self {
        Self::HeaderMismatch {
            detail: detail.into(),
        }
    }

    pub(crate) fn internal(detail: impl Into<String>) -> Self {
        Self::Internal {
            detail: detail.into(),
        }
    }

    /// The JSON-RPC error code.
    pub(crate) fn code(&self) -> i64 {
        match self {
            Self::Parse { .. } => -32700,
            Self::InvalidRequest { .. } => -32600,
            Self::MethodNotFound { .. } => -32601,
            Self::InvalidMeta { .. } | Self::InvalidParams { .. } | Self::UnknownTask { .. } => {
                -32602
            }
            Self::HeaderMismatch { .. } => -32020,
            Self::MissingCapability { .. } => -32021,
            Self::UnsupportedVersion { .. } => -32022,
            Self::Internal { .. } => -32603,
        }
    }

    /// The HTTP status when the error is sent as `application/json`.
    pub(crate) fn http_status(&self) -> StatusCode {
        match self {
            Self::MethodNotFound { .. } => StatusCode::NOT_FOUND,
            Self::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// Whether the error is raised by the transport before a method runs. In
    /// [`ResponseMode::Sse`](crate::ResponseMode::Sse) such errors stay plain JSON with their
    /// HTTP status (as rmcp does), while method-level errors travel inside the stream.
    pub(crate) fn is_transport_level(&self) -> bool {
        !matches!(
            self,
            Self::InvalidParams { .. } | Self::UnknownTask { .. } | Self::Internal { .. }
        )
    }

    pub(crate) fn data(&self) -> Option<Value> {
        match self {
            Self::MethodNotFound { method } => Some(Value::String(method.clone())),
            Self::MissingCapability { required, .. } => {
                Some(json!({ "requiredCapabilities": required }))
            }
            Self::UnsupportedVersion { requested } => Some(json!({
                "supported": [PROTOCOL_VERSION],
                "requested": requested,
            })),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_error_carries_the_required_capabilities() {
        let error = Error::MissingCapability {
            detail: "tool 'deploy_service' runs as a task".into(),
            required: json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        };
        assert_eq!(error.http_status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            serde_json::to_value(error.to_object()).ok(),
            Some(json!({
                "code": -32021,
                "message": "Missing required client capability: tool 'deploy_service' runs as a task",
                "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
            }))
        );
    }

    #[test]
    fn unsupported_version_lists_supported_and_echoes_requested() {
        let error = Error::UnsupportedVersion {
            requested: "2025-11-25".into(),
        };
        assert_eq!(
            serde_json::to_value(error.to_object()).ok(),
            Some(json!({
                "code": -32022,
                "message": "Unsupported protocol version: 2025-11-25",
                "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}
            }))
        );
    }

    #[test]
    fn method_not_found_is_http_404() {
        let error = Error::MethodNotFound {
            method: "tasks/list".into(),
        };
        assert_eq!(error.http_status(), StatusCode::NOT_FOUND);
        assert_eq!(error.code(), -32601);
        assert!(error.is_transport_level());
        assert!(!Error::UnknownTask {
            task_id: "x".into()
        }
        .is_transport_level());
    }

    #[test]
    fn meta_error_names_the_missing_keys() {
        let error = Error::InvalidMeta {
            missing: vec![
                "io.modelcontextprotocol/protocolVersion",
                "io.modelcontextprotocol/clientCapabilities",
            ],
        };
        assert_eq!(
            error.to_string(),
            "Invalid params: params._meta must be an object carrying \
             io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities"
        );
    }
}
