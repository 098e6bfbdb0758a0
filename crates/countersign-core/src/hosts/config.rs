//! A host's configuration file read: which host it is (by its path, then its shape), the
//! servers it lists, and the parsed document kept so the rewrite changes only what it must.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Entry, Error, Found, Host, ServerSpec};
use crate::sensitive::Sensitive;

/// Prefix of Countersign's agent tokens: an entry carrying one is already behind the gateway.
const AGENT_TOKEN_PREFIX: &str = "csa_";

/// A host's file, parsed.
#[derive(Debug, Clone)]
pub struct HostFile {
    /// Where it is.
    pub path: PathBuf,
    /// Whose it is.
    pub host: Host,
    /// Its text as read (the rewrite and the diff start from it).
    pub text: String,
    /// The servers it lists, in its order.
    pub servers: Vec<Found>,
    pub(crate) document: Document,
}

/// The parsed document, kept for the rewrite.
#[derive(Debug, Clone)]
pub(crate) enum Document {
    /// JSON and its indentation unit.
    Json { value: Value, indent: String },
    /// TOML with its comments and layout.
    Toml(toml_edit::DocumentMut),
}

/// Which host a file belongs to, from its name: `.mcp.json`, `.cursor/mcp.json`,
/// `.vscode/mcp.json`, a `.toml` file (Codex), else any `.json` by its shape.
fn host_by_path(path: &Path) -> Option<Host> {
    let name = path.file_name()?.to_str()?;
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|p| p.to_str());
    match (name, parent) {
        (".mcp.json", _) => Some(Host::ClaudeCode),
        ("mcp.json", Some(".cursor")) => Some(Host::Cursor),
        ("mcp.json", Some(".vscode")) => Some(Host::VsCode),
        _ if name.ends_with(".toml") => Some(Host::Codex),
        _ => None,
    }
}

/// Reads and parses `path`.
pub fn read(path: &Path) -> Result<HostFile, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(path, text)
}

/// Parses `text` as the file at `path`.
pub fn parse(path: &Path, text: String) -> Result<HostFile, Error> {
    let by_path = host_by_path(path);
    if by_path == Some(Host::Codex) {
        let document: toml_edit::DocumentMut =
            text.parse().map_err(|e: toml_edit::TomlError| {
                let (line, column) = e
                    .span()
                    .map(|s| line_column(&text, s.start))
                    .unwrap_or((1, 1));
                Error::Parse {
                    path: path.to_owned(),
                    line,
                    column,
                    message: e.message().to_owned(),
                }
            })?;
        let servers = codex_servers(&document);
        return Ok(HostFile {
            path: path.to_owned(),
            host: Host::Codex,
            text,
            servers,
            document: Document::Toml(document),
        });
    }
    let value: Value = serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let Value::Object(top) = &value else {
        return Err(Error::UnknownFormat {
            path: path.to_owned(),
            why: "expected a JSON object with `mcpServers` or `servers`".into(),
        });
    };
    let host = match by_path {
        Some(host) => host,
        None if top.contains_key("mcpServers") => Host::Stdio,
        None if top.contains_key("servers") => Host::VsCode,
        None => {
            return Err(Error::UnknownFormat {
                path: path.to_owned(),
                why: "not a host configuration Countersign knows (.mcp.json, .cursor/mcp.json, .vscode/mcp.json, Codex's config.toml, or a JSON file with `mcpServers`)".into(),
            })
        }
    };
    let servers = match top.get(host.servers_key()) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(servers)) => servers
            .iter()
            .map(|(name, entry)| Found {
                name: name.clone(),
                entry: json_entry(entry),
            })
            .collect(),
        Some(_) => {
            return Err(Error::UnknownFormat {
                path: path.to_owned(),
                why: format!("`{}` is not an object", host.servers_key()),
            })
        }
    };
    Ok(HostFile {
        path: path.to_owned(),
        host,
        servers,
        document: Document::Json {
            value,
            indent: indent_of(&text),
        },
        text,
    })
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The file's indentation unit: the leading whitespace of its first indented line (two spaces
/// when it has none).
fn indent_of(text: &str) -> String {
    text.lines()
        .map(|l| &l[..l.len() - l.trim_start().len()])
        .find(|ws| !ws.is_empty())
        .unwrap_or("  ")
        .to_owned()
}

fn str_of<'a>(entry: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    entry.get(key).and_then(Value::as_str)
}

/// One `mcpServers`/`servers` entry of a JSON host.
fn json_entry(entry: &Value) -> Entry {
    let Value::Object(entry) = entry else {
        return Entry::Unsupported("the entry is not an object".into());
    };
    let headers: Vec<(String, String)> = match entry.get("headers") {
        Some(Value::Object(h)) => h
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect(),
        _ => Vec::new(),
    };
    let env: Vec<(String, String)> = match entry.get("env") {
        Some(Value::Object(e)) => e
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), v)
            })
            .collect(),
        _ => Vec::new(),
    };
    let url = str_of(entry, "url").or_else(|| str_of(entry, "serverUrl"));
    let kind = str_of(entry, "type").or_else(|| str_of(entry, "transport"));
    if let Some(url) = url {
        if matches!(kind, Some("sse")) {
            return Entry::Unsupported(
                "it uses the old HTTP+SSE transport, which Countersign does not speak".into(),
            );
        }
        if entry.contains_key("headersHelper") {
            return Entry::Unsupported(
                "its headers come from a `headersHelper` command Countersign cannot run".into(),
            );
        }
        return http(url, &headers);
    }
    if let Some(command) = str_of(entry, "command") {
        let args: Vec<String> = match entry.get("args") {
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        return stdio(command, args, env, str_of(entry, "cwd").map(str::to_owned));
    }
    Entry::Unsupported("it has neither a `url` nor a `command`".into())
}

/// An HTTP entry: a bearer token in `Authorization` goes to the keyring; any other header
/// cannot be carried (Countersign sends only a bearer token upstream).
fn http(url: &str, headers: &[(String, String)]) -> Entry {
    let mut token = None;
    for (name, value) in headers {
        if value.contains("${") || value.contains("{env:") {
            return Entry::Unsupported(format!(
                "its {name} header is a variable the host fills in; add the server with `countersign servers add` and its token"
            ));
        }
        if !name.eq_ignore_ascii_case("authorization") {
            return Entry::Unsupported(format!(
                "it sends a {name} header, and Countersign sends only a bearer token upstream"
            ));
        }
        let Some(bearer) = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
        else {
            return Entry::Unsupported("its Authorization header is not a bearer token".into());
        };
        if bearer.trim().starts_with(AGENT_TOKEN_PREFIX) {
            return Entry::Behind;
        }
        token = Some(Sensitive::new(bearer.trim().to_owned()));
    }
    Entry::Server(ServerSpec::Http {
        url: url.to_owned(),
        token,
    })
}

/// A stdio entry; `countersign connect` is already behind the gateway.
fn stdio(
    command: &str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
) -> Entry {
    let program = Path::new(command)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(command);
    if program == "countersign" && args.iter().any(|a| a == "connect") {
        return Entry::Behind;
    }
    Entry::Server(ServerSpec::Stdio {
        command: command.to_owned(),
        args,
        env: env
            .into_iter()
            .map(|(k, v)| (k, Sensitive::new(v)))
            .collect::<BTreeMap<_, _>>(),
        cwd,
    })
}

/// Codex's `[mcp_servers.X]` tables.
fn codex_servers(doc: &toml_edit::DocumentMut) -> Vec<Found> {
    let Some(servers) = doc.get("mcp_servers").and_then(|i| i.as_table_like()) else {
        return Vec::new();
    };
    servers
        .iter()
        .map(|(name, item)| Found {
            name: name.to_owned(),
            entry: codex_entry(item),
        })
        .collect()
}

fn toml_pairs(item: Option<&toml_edit::Item>) -> Vec<(String, String)> {
    item.and_then(|i| i.as_table_like())
        .map(|t| {
            t.iter()
                .map(|(k, v)| {
                    let v = v
                        .as_str()
                        .map_or_else(|| v.to_string().trim().to_owned(), str::to_owned);
                    (k.to_owned(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn codex_entry(item: &toml_edit::Item) -> Entry {
    let Some(entry) = item.as_table_like() else {
        return Entry::Unsupported("the entry is not a table".into());
    };
    let text = |key: &str| entry.get(key).and_then(|i| i.as_str());
    if let Some(url) = text("url") {
        if let Some(var) = text("bearer_token_env_var") {
            return Entry::Unsupported(format!(
                "its token is read from ${var} when Codex starts; add the server with `countersign servers add` and its token"
            ));
        }
        if entry.get("env_http_headers").is_some() {
            return Entry::Unsupported(
                "its headers are read from environment variables when Codex starts".into(),
            );
        }
        return http(url, &toml_pairs(entry.get("http_headers")));
    }
    if let Some(command) = text("command") {
        let args = entry
            .get("args")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        return stdio(
            command,
            args,
            toml_pairs(entry.get("env")),
            text("cwd").map(str::to_owned),
        );
    }
    Entry::Unsupported("it has neither a `url` nor a `command`".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_from_one() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
    }

    #[test]
    fn the_indent_is_the_files_own() {
        assert_eq!(indent_of("{\n    \"a\": 1\n}"), "    ");
        assert_eq!(indent_of("{\n\t\"a\": 1\n}"), "\t");
        assert_eq!(indent_of("{}"), "  ");
    }
}
