//! The local MCP gateway: agents connect to Countersign instead of to an upstream server, and
//! every tool call passes the policy first.
//!
//! - [`policy`]: which rule applies to a call (agent × server × tool, argument conditions, the
//!   per-server read-only switch) and what it says: allow, ask or deny;
//! - [`outcome`]: what the agent is told, as MCP results with SEP-2848 dispositions in `_meta`;
//! - [`endpoint`]: the Streamable HTTP endpoint on 127.0.0.1 (`/mcp/<server-name>`), both
//!   protocol generations, bearer token per agent;
//! - [`relay`]: `countersign connect`, a stdio MCP server relaying to the running gateway;
//! - [`demo_agent`]: the first-launch demo's agent, calling demo tools through the gateway.
//!
//! The records (agents, rules, gated calls) live in the ledger (`ledger::{agents, rules,
//! gated}`); every action on them is a [`crate::console::Console`] method
//! (`console/gateway.rs`), so the CLI, the app and the endpoint share one path.

pub mod demo_agent;
pub mod endpoint;
pub mod outcome;
pub mod policy;
pub mod relay;

use rand::RngCore;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::sensitive::Sensitive;

/// Prefix of Countersign's own task ids, so `tasks/*` for them are answered from the ledger and
/// every other task id is the upstream's.
pub const TASK_PREFIX: &str = "csg-";

/// Prefix of agent tokens (recognisable in a leaked config, and never a valid task id).
const TOKEN_PREFIX: &str = "csa_";

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex(&buf)
}

/// A new agent token: 256 random bits.
pub fn new_token() -> Sensitive<String> {
    Sensitive::new(format!("{TOKEN_PREFIX}{}", random_hex(32)))
}

/// The stored form of a token: hex SHA-256. A plain digest suffices because the token carries
/// 256 random bits (nothing to guess), and it lets the endpoint find the agent in one lookup.
pub fn token_digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// A new id for Countersign's own task.
pub fn new_task_id() -> String {
    format!("{TASK_PREFIX}{}", random_hex(16))
}

/// Hex SHA-256 of the arguments in canonical form (object keys sorted at every level, no
/// whitespace), so the same arguments in another key order bind to the same approval.
pub fn args_digest(arguments: &Map<String, Value>) -> String {
    let mut text = String::new();
    canonical(&Value::Object(arguments.clone()), &mut text);
    hex(&Sha256::digest(text.as_bytes()))
}

/// `value` as canonical JSON text (sorted keys; scalars as serde_json writes them).
pub fn canonical_text(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    text
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
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

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn the_digest_ignores_key_order_at_every_level() {
        let a = object(json!({"b": 1, "a": {"y": [1, {"q": 2, "p": 3}], "x": "s"}}));
        let b = object(json!({"a": {"x": "s", "y": [1, {"p": 3, "q": 2}]}, "b": 1}));
        assert_eq!(args_digest(&a), args_digest(&b));
    }

    #[test]
    fn the_digest_tells_different_arguments_apart() {
        let a = object(json!({"environment": "staging"}));
        let b = object(json!({"environment": "production"}));
        let c = object(json!({"environment": ["staging"]}));
        assert_ne!(args_digest(&a), args_digest(&b));
        assert_ne!(args_digest(&a), args_digest(&c));
    }

    #[test]
    fn tokens_are_random_and_only_their_digest_is_comparable() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.expose().len(), TOKEN_PREFIX.len() + 64);
        assert_eq!(token_digest(a.expose()), token_digest(a.expose()));
        assert_ne!(token_digest(a.expose()), token_digest(b.expose()));
        assert!(!token_digest(a.expose()).contains(a.expose().as_str()));
    }
}
