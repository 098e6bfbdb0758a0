//! The gateway's model: what the policy says about an agent's call and what the agent is told.
//! Pure: no console, no endpoint, so the console's gateway actions (`console/gateway.rs`) use it
//! without a cycle. The endpoint agents connect to is `crates/countersign-gateway`.
//!
//! - [`policy`]: which rule applies to a call (agent × server × tool, argument conditions, the
//!   per-server read-only switch) and what it says: allow, ask or deny;
//! - [`outcome`]: what the agent is told, as MCP results with SEP-2848 dispositions in `_meta`;
//! - agent tokens, their digests, Countersign's own task ids and argument digests.
//!
//! The records (agents, rules, gated calls) live in the ledger (`ledger::{agents, rules,
//! gated}`); every action on them is a [`crate::console::Console`] method
//! (`console/gateway.rs`), so the CLI, the app and the endpoint share one path.

pub mod outcome;
pub mod policy;

use rand::RngCore;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::ledger::gated::ToolInfo;
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

/// Longest tool title kept for the person deciding (characters).
const MAX_TITLE_CHARS: usize = 200;
/// Longest tool description kept (characters): enough for any honest description, bounded so a
/// server cannot fill the ledger or the inbox card through it.
const MAX_DESCRIPTION_CHARS: usize = 4000;

/// What a tool definition from `tools/list` says about the tool, bounded: its title, description
/// and the four behaviour hints, each only when it has the schema's type (anything else is as
/// if absent). The server's claims, shown to the person deciding; never a reason to allow.
pub fn tool_info(definition: &Map<String, Value>) -> ToolInfo {
    let text = |v: Option<&Value>, max: usize| {
        v.and_then(Value::as_str)
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(|s| bounded(s, max))
    };
    let annotations = definition.get("annotations").and_then(Value::as_object);
    let hint = |name: &str| {
        annotations
            .and_then(|a| a.get(name))
            .and_then(Value::as_bool)
    };
    ToolInfo {
        title: text(definition.get("title"), MAX_TITLE_CHARS)
            .or_else(|| text(annotations.and_then(|a| a.get("title")), MAX_TITLE_CHARS)),
        description: text(definition.get("description"), MAX_DESCRIPTION_CHARS),
        read_only_hint: hint("readOnlyHint"),
        destructive_hint: hint("destructiveHint"),
        idempotent_hint: hint("idempotentHint"),
        open_world_hint: hint("openWorldHint"),
    }
}

/// `s` cut to at most `max` characters, with "…" when cut.
fn bounded(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((end, _)) => format!("{}…", &s[..end]),
    }
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
    fn tool_info_keeps_the_listed_claims_with_their_types_and_bounds_the_text() {
        let info = tool_info(&object(json!({
            "name": "deploy_service",
            "title": "Deploy service",
            "description": "  Deploys a service.  ",
            "annotations": {"readOnlyHint": false, "destructiveHint": true,
                            "idempotentHint": "yes", "openWorldHint": null},
        })));
        assert_eq!(
            info,
            ToolInfo {
                title: Some("Deploy service".into()),
                description: Some("Deploys a service.".into()),
                read_only_hint: Some(false),
                destructive_hint: Some(true),
                // Not booleans: as if absent (the schema's defaults apply when shown).
                idempotent_hint: None,
                open_world_hint: None,
            }
        );
        let long = tool_info(&object(json!({
            "name": "t",
            "description": "é".repeat(MAX_DESCRIPTION_CHARS + 10),
            "annotations": {"title": "From annotations"},
        })));
        let description = long.description.unwrap_or_default();
        assert_eq!(description.chars().count(), MAX_DESCRIPTION_CHARS + 1);
        assert!(description.ends_with('…'), "a cut description says so");
        assert_eq!(long.title.as_deref(), Some("From annotations"));
        assert_eq!(
            tool_info(&object(json!({"name": "bare"}))),
            ToolInfo::default()
        );
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
