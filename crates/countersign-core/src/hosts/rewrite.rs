//! A host's file with chosen entries pointed at the gateway. Only those entries' transport keys
//! change (url, headers, command, args, env…); every other key of the entry and of the file
//! stays, in its order. JSON is written back in the file's own indentation; TOML is edited in
//! place by `toml_edit`, so its comments and layout stay.

use serde_json::Value;

use super::config::{Document, HostFile};
use super::{entry_json, entry_toml, Route};

/// The keys that say how a JSON host reaches a server: replaced by the gateway's.
const JSON_TRANSPORT_KEYS: &[&str] = &[
    "type",
    "transport",
    "url",
    "serverUrl",
    "headers",
    "headersHelper",
    "oauth",
    "command",
    "args",
    "env",
    "envFile",
    "cwd",
];

/// The keys that say how Codex reaches a server.
const TOML_TRANSPORT_KEYS: &[&str] = &[
    "url",
    "bearer_token_env_var",
    "http_headers",
    "env_http_headers",
    "command",
    "args",
    "env",
    "env_vars",
    "cwd",
];

/// `file`'s text with the entries named in `names` going through the gateway on `route`.
pub fn rewrite(file: &HostFile, names: &[String], route: &Route) -> String {
    match &file.document {
        Document::Json {
            value,
            indent,
            trailing_newline,
        } => {
            let mut value = value.clone();
            if let Some(Value::Object(servers)) = value.get_mut(file.host.servers_key()) {
                for name in names {
                    let Some(Value::Object(entry)) = servers.get_mut(name.as_str()) else {
                        continue;
                    };
                    let Some(Value::Object(ours)) = entry_json(file.host, route, name) else {
                        continue;
                    };
                    let mut next = ours;
                    for (k, v) in std::mem::take(entry) {
                        if !JSON_TRANSPORT_KEYS.contains(&k.as_str()) {
                            next.insert(k, v);
                        }
                    }
                    *entry = next;
                }
            }
            let mut text = to_json(&value, indent);
            if *trailing_newline {
                text.push('\n');
            }
            text
        }
        Document::Toml(doc) => {
            let mut doc = doc.clone();
            if let Some(servers) = doc
                .get_mut("mcp_servers")
                .and_then(|i| i.as_table_like_mut())
            {
                for name in names {
                    let Some(entry) = servers.get_mut(name).and_then(|i| i.as_table_like_mut())
                    else {
                        continue;
                    };
                    // Removed and inserted rather than rebuilt, so the comments on the keys
                    // that stay (held by those keys) stay too; ours go after them. A comment
                    // above a removed key (usually about the server) moves to our first key.
                    let mut comment = None;
                    for key in TOML_TRANSPORT_KEYS {
                        if comment.is_none() {
                            comment = entry
                                .key(key)
                                .and_then(|k| k.leaf_decor().prefix().cloned());
                        }
                        entry.remove(key);
                    }
                    for (k, v) in entry_toml(route, name).iter() {
                        entry.insert(k, v.clone());
                    }
                    if let (Some(prefix), Some(mut url)) = (comment, entry.key_mut("url")) {
                        url.leaf_decor_mut().set_prefix(prefix);
                    }
                }
            }
            doc.to_string()
        }
    }
}

/// `value` pretty-printed with `indent` as the unit.
fn to_json(value: &Value, indent: &str) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    match value.serialize(&mut ser) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        // Serialising a `Value` to memory cannot fail; keep the compact form if it ever does.
        Err(_) => value.to_string(),
    }
}
