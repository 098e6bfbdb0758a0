//! A host's file with chosen entries pointed at the gateway. Only those entries' transport keys
//! change (url, headers, command, args, env…); every other key of the entry and of the file
//! stays, in its order. In JSON only the bytes of those entries are replaced (the new entry in
//! the file's own indentation), so the rest of the file stays byte for byte; TOML is edited in
//! place by `toml_edit`, so its comments and layout stay.

use std::collections::HashMap;

use serde_json::value::RawValue;
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
        Document::Json { value, indent } => {
            let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
            let spans = entry_spans(&file.text, file.host.servers_key());
            let servers = value
                .get(file.host.servers_key())
                .and_then(Value::as_object);
            for name in names {
                let (Some(Value::Object(entry)), Some(span)) = (
                    servers.and_then(|s| s.get(name.as_str())),
                    spans.get(name.as_str()),
                ) else {
                    continue;
                };
                let Some(Value::Object(mut next)) = entry_json(file.host, route, name) else {
                    continue;
                };
                for (k, v) in entry {
                    if !JSON_TRANSPORT_KEYS.contains(&k.as_str()) {
                        next.insert(k.clone(), v.clone());
                    }
                }
                let next = Value::Object(next);
                let old = &file.text[span.clone()];
                let text = if old.contains('\n') {
                    // Indented as the entry's own line is, in the file's unit.
                    let line_start = file.text[..span.start].rfind('\n').map_or(0, |i| i + 1);
                    let margin: String = file.text[line_start..span.start]
                        .chars()
                        .take_while(|c| c.is_whitespace())
                        .collect();
                    to_json(&next, indent).replace('\n', &format!("\n{margin}"))
                } else {
                    next.to_string()
                };
                edits.push((span.clone(), text));
            }
            // From the end, so the earlier spans stay where they were.
            edits.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
            let mut text = file.text.clone();
            for (span, replacement) in edits {
                text.replace_range(span, &replacement);
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
                    match servers.get_mut(name) {
                        Some(toml_edit::Item::Table(entry)) => point_table(entry, route, name),
                        Some(item) => {
                            if let Some(entry) = item.as_table_like_mut() {
                                point_table_like(entry, route, name);
                            }
                        }
                        None => {}
                    }
                }
            }
            doc.to_string()
        }
    }
}

/// Points a `[mcp_servers.X]` table at the gateway in place: our keys where its first transport
/// key was (with the comment above that key), every other key where it was, with its comments.
fn point_table(entry: &mut toml_edit::Table, route: &Route, name: &str) {
    let keys: Vec<String> = entry.iter().map(|(k, _)| k.to_owned()).collect();
    let taken: Vec<(toml_edit::Key, toml_edit::Item)> =
        keys.iter().filter_map(|k| entry.remove_entry(k)).collect();
    let ours = entry_toml(route, name);
    let mut placed = false;
    for (key, item) in taken {
        if !TOML_TRANSPORT_KEYS.contains(&key.get()) {
            entry.insert_formatted(&key, item);
            continue;
        }
        if placed {
            continue;
        }
        placed = true;
        let comment = key.leaf_decor().prefix().cloned();
        for (k, v) in ours.iter() {
            entry.insert(k, v.clone());
        }
        if let (Some(prefix), Some(mut url)) = (comment, entry.key_mut("url")) {
            url.leaf_decor_mut().set_prefix(prefix);
        }
    }
    if !placed {
        for (k, v) in ours.iter() {
            entry.insert(k, v.clone());
        }
    }
}

/// [`point_table`] for an inline or dotted entry: its transport keys removed, ours after the rest.
fn point_table_like(entry: &mut dyn toml_edit::TableLike, route: &Route, name: &str) {
    for key in TOML_TRANSPORT_KEYS {
        entry.remove(key);
    }
    for (k, v) in entry_toml(route, name).iter() {
        entry.insert(k, v.clone());
    }
}

/// Where each entry of the servers' object sits in `text`, byte for byte, so a rewrite replaces
/// those bytes only and the rest of the file (its spacing, its inline arrays) stays as written.
fn entry_spans(text: &str, key: &str) -> HashMap<String, std::ops::Range<usize>> {
    let span = |raw: &RawValue| {
        let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        start..start + raw.get().len()
    };
    let Ok(top) = serde_json::from_str::<HashMap<String, &RawValue>>(text) else {
        return HashMap::new();
    };
    let Some(servers) = top.get(key) else {
        return HashMap::new();
    };
    let Ok(entries) = serde_json::from_str::<HashMap<String, &RawValue>>(servers.get()) else {
        return HashMap::new();
    };
    entries.into_iter().map(|(k, raw)| (k, span(raw))).collect()
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
