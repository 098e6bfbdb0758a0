//! The MRTR `requestState`: an opaque, integrity-protected blob the client echoes back.
//!
//! The server keeps nothing between MRTR rounds. Everything it needs travels in the state:
//! which tool, a digest of the arguments (so state cannot be replayed on another call), the
//! round number, the question keys that were asked and an expiry. An HMAC-SHA256 under a key
//! minted per server instance makes tampering detectable, as SEP-2322 requires when the state
//! drives business logic.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// How long a `requestState` stays valid.
pub(crate) const STATE_LIFETIME_SECS: i64 = 600;

/// What the server remembers across an MRTR round trip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RequestState {
    /// Tool the state belongs to.
    pub(crate) tool: String,
    /// Hex SHA-256 of the canonical JSON of the call's arguments.
    pub(crate) args: String,
    /// 1 for the answer to the first question round, 2 for the next, ...
    pub(crate) round: u32,
    /// Keys of the `inputRequests` of the round being answered.
    pub(crate) asked: Vec<String>,
    /// Unix time (seconds) after which the state is refused.
    pub(crate) exp: i64,
}

/// Why a `requestState` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StateError {
    /// Not two base64url parts, or the payload is not the expected JSON.
    #[error("requestState is malformed")]
    Malformed,
    /// The MAC does not verify: the state was altered or minted elsewhere.
    #[error("requestState failed integrity verification")]
    Tampered,
    /// The state is older than its lifetime.
    #[error("requestState has expired")]
    Expired,
    /// The state was issued for another tool or other arguments.
    #[error("requestState does not belong to this call")]
    WrongCall,
}

/// Seals and opens request states with a per-server key.
pub(crate) struct StateSealer {
    /// HMAC keyed once at start; cloned per use.
    keyed: HmacSha256,
}

impl StateSealer {
    pub(crate) fn new() -> std::io::Result<Self> {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        let keyed = HmacSha256::new_from_slice(&key)
            .map_err(|error| std::io::Error::other(format!("HMAC key: {error}")))?;
        Ok(Self { keyed })
    }

    fn mac(&self) -> HmacSha256 {
        self.keyed.clone()
    }

    pub(crate) fn seal(&self, state: &RequestState) -> String {
        let payload = serde_json::to_vec(state).unwrap_or_default();
        let mut mac = self.mac();
        mac.update(&payload);
        let tag = mac.finalize().into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// Verifies the MAC, the expiry (against `now_unix`) and that the state belongs to this
    /// tool and these arguments.
    pub(crate) fn open(
        &self,
        token: &str,
        tool: &str,
        args: &Map<String, Value>,
        now_unix: i64,
    ) -> Result<RequestState, StateError> {
        let (payload, tag) = token.split_once('.').ok_or(StateError::Malformed)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| StateError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| StateError::Malformed)?;
        let mut mac = self.mac();
        mac.update(&payload);
        mac.verify_slice(&tag).map_err(|_| StateError::Tampered)?;
        let state: RequestState =
            serde_json::from_slice(&payload).map_err(|_| StateError::Malformed)?;
        if state.exp < now_unix {
            return Err(StateError::Expired);
        }
        if state.tool != tool || state.args != args_digest(args) {
            return Err(StateError::WrongCall);
        }
        Ok(state)
    }
}

/// Hex SHA-256 of the arguments in canonical form (object keys sorted), so a client that
/// re-serializes the arguments in another key order still matches.
pub(crate) fn args_digest(args: &Map<String, Value>) -> String {
    let mut canonical = String::new();
    write_canonical(&Value::Object(args.clone()), &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(value) = map.get(key) {
                    write_canonical(value, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn state(tool: &str, arguments: &Map<String, Value>) -> RequestState {
        RequestState {
            tool: tool.into(),
            args: args_digest(arguments),
            round: 1,
            asked: vec!["user_name".into()],
            exp: 1_000,
        }
    }

    #[test]
    fn round_trips_for_the_same_call() {
        let sealer = StateSealer::new().expect("sealer");
        let arguments = args(json!({"b": 1, "a": [1, {"y": 2, "x": 1}]}));
        let token = sealer.seal(&state("test_tool_with_task", &arguments));
        let reordered = args(json!({"a": [1, {"x": 1, "y": 2}], "b": 1}));
        assert_eq!(
            sealer.open(&token, "test_tool_with_task", &reordered, 999),
            Ok(state("test_tool_with_task", &arguments))
        );
    }

    #[test]
    fn rejects_tampering_expiry_and_replay_on_another_call() {
        let sealer = StateSealer::new().expect("sealer");
        let arguments = args(json!({}));
        let token = sealer.seal(&state("confirm_delete", &arguments));
        let (payload, tag) = token.split_once('.').unwrap_or_default();
        let forged = format!(
            "{}.{tag}",
            URL_SAFE_NO_PAD.encode(
                br#"{"tool":"confirm_delete","args":"00","round":9,"asked":[],"exp":99999}"#,
            )
        );
        assert_eq!(
            sealer.open(&forged, "confirm_delete", &arguments, 0),
            Err(StateError::Tampered)
        );
        assert_eq!(
            sealer.open(
                &format!("{payload}.{payload}"),
                "confirm_delete",
                &arguments,
                0
            ),
            Err(StateError::Tampered)
        );
        assert_eq!(
            sealer.open("garbage", "confirm_delete", &arguments, 0),
            Err(StateError::Malformed)
        );
        assert_eq!(
            sealer.open(&token, "confirm_delete", &arguments, 1_001),
            Err(StateError::Expired)
        );
        assert_eq!(
            sealer.open(&token, "greet", &arguments, 0),
            Err(StateError::WrongCall)
        );
        assert_eq!(
            sealer.open(&token, "confirm_delete", &args(json!({"filename": "x"})), 0),
            Err(StateError::WrongCall)
        );
        assert_eq!(
            StateSealer::new()
                .expect("sealer")
                .open(&token, "confirm_delete", &arguments, 0),
            Err(StateError::Tampered),
            "a state minted by another server instance must not verify"
        );
    }
}
