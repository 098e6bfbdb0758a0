//! Agent hosts' configuration: what a person pastes into Claude Code, Cursor, VS Code, Codex,
//! Goose or Zed to reach a server through the gateway, and "put my servers behind Countersign":
//! reading a host's existing file, listing its servers, and rewriting it so each entry goes
//! through the gateway. Pure model plus file I/O; registering the servers is the console's
//! (`console/hosts.rs`).
//!
//! - this file: the hosts, each one's entry for a server behind the gateway ([`entry_json`],
//!   [`snippets`]), the servers found in a file ([`ServerSpec`]) and the errors;
//! - [`config`]: a host's file read: which host, its servers (HTTP url and bearer token, or a
//!   stdio command), and the parsed document kept for the rewrite;
//! - [`rewrite`]: the same document with chosen entries pointed at the gateway, every other key
//!   kept (JSON in its own indentation, TOML through `toml_edit` with its comments);
//! - [`file`]: the atomic write, the backup beside the file, undo, and the diff a person sees
//!   (secrets masked).
//!
//! Formats, as each host documents them (shared/spec/protocol-generations.md, Table 2): Claude
//! Code `.mcp.json` `mcpServers.X = {type: "http", url, headers}`; Cursor `.cursor/mcp.json`
//! `mcpServers.X = {url, headers}`; VS Code `.vscode/mcp.json` `servers.X = {type: "http", url,
//! headers}` (and `inputs`); Codex `config.toml` `[mcp_servers.X] url, http_headers`; Goose
//! `config.yaml` `extensions.X = {type: streamable_http, uri, headers, timeout}`; Zed
//! `settings.json` `context_servers.X = {url, headers}`. Hosts that start only stdio servers get
//! `countersign connect X` with the agent's token in `COUNTERSIGN_AGENT_TOKEN`.

pub mod config;
pub mod file;
pub mod rewrite;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{json, Value};

use crate::sensitive::Sensitive;

/// Where the gateway listens when nothing says otherwise: the README's port.
pub const DEFAULT_GATEWAY_URL: &str = "http://127.0.0.1:8788/mcp/";

/// The environment variable `countersign connect` reads the agent's token from.
pub const TOKEN_ENV: &str = "COUNTERSIGN_AGENT_TOKEN";

/// What stands for the agent's token in a preview: the token exists only once the agent is
/// created, when the file is written.
pub const TOKEN_PLACEHOLDER: &str = "<agent token>";

/// An agent host: where its configuration lives and how an entry in it looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Host {
    /// Claude Code: `claude mcp add`, or `.mcp.json` (`mcpServers`, `type: "http"`).
    #[serde(rename = "claude-code")]
    ClaudeCode,
    /// Cursor: `.cursor/mcp.json` (`mcpServers`, `url` + `headers`).
    #[serde(rename = "cursor")]
    Cursor,
    /// VS Code: `.vscode/mcp.json` (`servers`, `type: "http"`).
    #[serde(rename = "vscode")]
    VsCode,
    /// OpenAI Codex CLI: `~/.codex/config.toml` (`[mcp_servers.X]`, `url`, `http_headers`).
    #[serde(rename = "codex")]
    Codex,
    /// Goose: `~/.config/goose/config.yaml` (`extensions`, `type: streamable_http`, `uri`).
    #[serde(rename = "goose")]
    Goose,
    /// Zed: `settings.json` (`context_servers`, `url` + `headers`).
    #[serde(rename = "zed")]
    Zed,
    /// A host that starts only stdio servers (Claude Desktop and other `mcpServers` files):
    /// `countersign connect X`.
    #[serde(rename = "stdio")]
    Stdio,
}

impl Host {
    /// The stable id (the snippets' ids, `--json`, the default agent name of an import).
    pub fn id(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Cursor => "cursor",
            Self::VsCode => "vscode",
            Self::Codex => "codex",
            Self::Goose => "goose",
            Self::Zed => "zed",
            Self::Stdio => "stdio",
        }
    }

    /// The key of the servers' table in this host's file.
    pub fn servers_key(self) -> &'static str {
        match self {
            Self::ClaudeCode | Self::Cursor | Self::Stdio => "mcpServers",
            Self::VsCode => "servers",
            Self::Codex => "mcp_servers",
            Self::Goose => "extensions",
            Self::Zed => "context_servers",
        }
    }
}

/// How an entry reaches the gateway: its base URL, the agent's token, and for stdio hosts the
/// `countersign` command and the data directory whose running gateway it relays to.
#[derive(Debug, Clone)]
pub struct Route {
    /// The gateway's base URL (`http://127.0.0.1:P/mcp/`).
    pub gateway_url: String,
    /// The agent's bearer token (or [`TOKEN_PLACEHOLDER`] in a preview).
    pub token: Sensitive<String>,
    /// The `countersign` executable for `connect`.
    pub command: String,
    /// The data directory `countersign connect` finds the gateway's URL in, when not the
    /// default.
    pub data_dir: Option<String>,
}

impl Route {
    /// The gateway's URL for `server` (its name percent-encoded as one path segment).
    pub fn server_url(&self, server: &str) -> String {
        let base = &self.gateway_url;
        let slash = if base.ends_with('/') { "" } else { "/" };
        format!("{base}{slash}{}", path_segment(server))
    }

    fn authorization(&self) -> String {
        format!("Bearer {}", self.token.expose())
    }

    fn connect_args(&self, server: &str) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(dir) = &self.data_dir {
            args.extend(["--data-dir".to_owned(), dir.clone()]);
        }
        args.extend(["connect".to_owned(), server.to_owned()]);
        args
    }
}

/// `path` with a leading `~/` (or a lone `~`) as the home directory, as a shell would.
pub fn expand_home(path: &str) -> PathBuf {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    match (path, home) {
        ("~", Some(home)) => PathBuf::from(home),
        (p, Some(home)) if p.starts_with("~/") => PathBuf::from(home).join(&p[2..]),
        (p, _) => PathBuf::from(p),
    }
}

/// `s` percent-encoded as `encodeURIComponent` does, so a name with spaces or slashes stays one
/// path segment.
fn path_segment(s: &str) -> String {
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

/// `s` as one POSIX shell word (quoted only when it needs to be).
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The entry for `server` behind the gateway in a JSON host's file (`None` for Codex and
/// Goose, whose files are not JSON).
pub fn entry_json(host: Host, route: &Route, server: &str) -> Option<Value> {
    let url = route.server_url(server);
    let headers = json!({"Authorization": route.authorization()});
    Some(match host {
        Host::ClaudeCode | Host::VsCode => json!({"type": "http", "url": url, "headers": headers}),
        Host::Cursor | Host::Zed => json!({"url": url, "headers": headers}),
        Host::Stdio => json!({
            "command": route.command,
            "args": route.connect_args(server),
            "env": {TOKEN_ENV: route.token.expose()},
        }),
        Host::Codex | Host::Goose => return None,
    })
}

/// Codex's entry for `server` behind the gateway: `url` and `http_headers`.
pub fn entry_toml(route: &Route, server: &str) -> toml_edit::Table {
    let mut headers = toml_edit::InlineTable::new();
    headers.insert("Authorization", route.authorization().into());
    let mut table = toml_edit::Table::new();
    table.insert("url", toml_edit::value(route.server_url(server)));
    table.insert("http_headers", toml_edit::value(headers));
    table
}

/// What a person pastes for one host.
#[derive(Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Snippet {
    /// The host (stable id: tests, `data-snippet`).
    pub id: Host,
    /// Which host it is for, and where it goes.
    pub label: String,
    /// The text to paste (it carries the agent's token).
    pub text: String,
}

impl std::fmt::Debug for Snippet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snippet")
            .field("id", &self.id)
            .field("text", &"<redacted>")
            .finish()
    }
}

/// The configuration for `server` behind the gateway, one snippet per host.
pub fn snippets(route: &Route, server: &str) -> Vec<Snippet> {
    let pretty = |v: Value| serde_json::to_string_pretty(&v).unwrap_or_default();
    let wrap = |host: Host| {
        let entry = entry_json(host, route, server).unwrap_or(Value::Null);
        pretty(json!({host.servers_key(): {server: entry}}))
    };
    let url = route.server_url(server);
    let claude = format!(
        "claude mcp add --transport http {} {} --header {}",
        shell_word(server),
        shell_word(&url),
        shell_word(&format!("Authorization: {}", route.authorization()))
    );
    let mut codex = toml_edit::DocumentMut::new();
    let mut servers = toml_edit::Table::new();
    servers.set_implicit(true);
    servers.insert(server, toml_edit::Item::Table(entry_toml(route, server)));
    codex.insert("mcp_servers", toml_edit::Item::Table(servers));
    // YAML's double-quoted scalars take JSON's string escapes, so any name, URL or token is
    // written exactly.
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let goose = format!(
        "extensions:\n  {name}:\n    enabled: true\n    name: {name}\n    type: streamable_http\n    uri: {url}\n    headers:\n      Authorization: {auth}\n    timeout: 300\n",
        name = q(server),
        url = q(&url),
        auth = q(&route.authorization()),
    );
    let snippet = |id: Host, label: &str, text: String| Snippet {
        id,
        label: label.to_owned(),
        text,
    };
    vec![
        snippet(Host::ClaudeCode, "Claude Code (run in a terminal)", claude),
        snippet(
            Host::Cursor,
            "Cursor (~/.cursor/mcp.json)",
            wrap(Host::Cursor),
        ),
        snippet(
            Host::VsCode,
            "VS Code (.vscode/mcp.json)",
            wrap(Host::VsCode),
        ),
        snippet(
            Host::Codex,
            "Codex (~/.codex/config.toml)",
            codex.to_string(),
        ),
        snippet(Host::Goose, "Goose (~/.config/goose/config.yaml)", goose),
        snippet(Host::Zed, "Zed (settings.json)", wrap(Host::Zed)),
        snippet(
            Host::Stdio,
            "Hosts that only start stdio servers, e.g. Claude Desktop (countersign connect)",
            wrap(Host::Stdio),
        ),
    ]
}

/// A server found in a host's file: how the host reaches it today.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSpec {
    /// Streamable HTTP at `url`, with the bearer token its `Authorization` header carried.
    Http {
        /// The MCP endpoint.
        url: String,
        /// The bearer token, for the keyring only.
        token: Option<Sensitive<String>>,
    },
    /// A process the host starts and speaks to over stdio.
    Stdio {
        /// The executable.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its environment (often API keys: never shown, never stored outside the keyring).
        env: BTreeMap<String, Sensitive<String>>,
        /// Its working directory.
        cwd: Option<String>,
    },
}

/// One entry of a host's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A server Countersign can stand in front of.
    Server(ServerSpec),
    /// Already through Countersign (the gateway's URL, an agent token, `countersign connect`).
    Behind,
    /// An entry Countersign cannot take over as it is, and why (left untouched).
    Unsupported(String),
}

/// A named entry of a host's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its key in the file (the server's name in Countersign too).
    pub name: String,
    /// What it is.
    pub entry: Entry,
}

/// Why a host's file could not be read, rewritten or restored.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is not valid JSON or TOML: it is left untouched.
    #[error("{} does not parse at line {line}, column {column}: {message}; it was left untouched", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's words.
        message: String,
    },
    /// Not a file of a host Countersign knows.
    #[error("{}: {why}", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// What was expected.
        why: String,
    },
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A backup from an earlier import is there: undo it first, or it would be overwritten.
    #[error("{} was already put behind Countersign (its original is in {}); undo that first", path.display(), backup.display())]
    AlreadyImported {
        /// The file.
        path: PathBuf,
        /// The backup.
        backup: PathBuf,
    },
    /// Nothing to undo: no backup beside the file.
    #[error("{} has no backup from Countersign to restore", path.display())]
    NothingToUndo {
        /// The file.
        path: PathBuf,
    },
    /// The file changed after Countersign wrote it: undoing would lose those changes.
    #[error("{} changed after Countersign rewrote it; not restoring over those changes (the original is in {})", path.display(), backup.display())]
    ChangedSince {
        /// The file.
        path: PathBuf,
        /// The backup, for the person to restore by hand.
        backup: PathBuf,
    },
    /// The file changed between the preview and writing it.
    #[error("{} changed while it was being rewritten; nothing was written", path.display())]
    Raced {
        /// The file.
        path: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "csa_0123abcd";

    fn route(data_dir: Option<&str>) -> Route {
        Route {
            gateway_url: "http://127.0.0.1:41234/mcp/".into(),
            token: Sensitive::new(TOKEN.into()),
            command: "countersign".into(),
            data_dir: data_dir.map(str::to_owned),
        }
    }

    fn by(id: Host, server: &str) -> String {
        snippets(&route(Some("/home/me/.local/share/countersign")), server)
            .into_iter()
            .find(|s| s.id == id)
            .map(|s| s.text)
            .unwrap_or_default()
    }

    fn json_of(id: Host) -> Value {
        serde_json::from_str(&by(id, "demo")).expect("the snippet is JSON")
    }

    const URL: &str = "http://127.0.0.1:41234/mcp/demo";
    const AUTH: &str = "Bearer csa_0123abcd";

    #[test]
    fn claude_code_gets_its_mcp_add_line_with_the_header() {
        assert_eq!(
            by(Host::ClaudeCode, "demo"),
            format!("claude mcp add --transport http demo {URL} --header 'Authorization: {AUTH}'")
        );
    }

    #[test]
    fn cursor_gets_mcp_servers_with_url_and_headers() {
        assert_eq!(
            json_of(Host::Cursor),
            json!({"mcpServers": {"demo": {"url": URL, "headers": {"Authorization": AUTH}}}})
        );
    }

    #[test]
    fn vscode_gets_servers_with_type_http() {
        assert_eq!(
            json_of(Host::VsCode),
            json!({"servers": {"demo": {"type": "http", "url": URL, "headers": {"Authorization": AUTH}}}})
        );
    }

    #[test]
    fn zed_gets_context_servers_with_url_and_headers() {
        assert_eq!(
            json_of(Host::Zed),
            json!({"context_servers": {"demo": {"url": URL, "headers": {"Authorization": AUTH}}}})
        );
    }

    #[test]
    fn codex_gets_an_mcp_servers_table_with_url_and_http_headers() {
        let text = by(Host::Codex, "demo");
        assert!(text.starts_with("[mcp_servers.demo]"), "{text}");
        let doc: toml::Table = toml::from_str(&text).expect("the snippet is TOML");
        let demo = &doc["mcp_servers"]["demo"];
        assert_eq!(demo["url"].as_str(), Some(URL));
        assert_eq!(demo["http_headers"]["Authorization"].as_str(), Some(AUTH));
        // A name Codex's table key must quote stays one key.
        let odd = by(Host::Codex, "my.server");
        let doc: toml::Table = toml::from_str(&odd).expect("TOML");
        assert!(doc["mcp_servers"].get("my.server").is_some(), "{odd}");
    }

    #[test]
    fn goose_gets_a_streamable_http_extension() {
        let text = by(Host::Goose, "demo");
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("the snippet is YAML");
        let demo = &doc["extensions"]["demo"];
        assert_eq!(demo["type"].as_str(), Some("streamable_http"));
        assert_eq!(demo["name"].as_str(), Some("demo"));
        assert_eq!(demo["uri"].as_str(), Some(URL));
        assert_eq!(demo["enabled"].as_bool(), Some(true));
        assert_eq!(demo["headers"]["Authorization"].as_str(), Some(AUTH));
        assert_eq!(demo["timeout"].as_u64(), Some(300));
        // Quotes, colons and `#` in a name survive YAML.
        let odd = by(Host::Goose, "it's: #1");
        let doc: serde_yaml::Value = serde_yaml::from_str(&odd).expect("YAML");
        assert_eq!(
            doc["extensions"]["it's: #1"]["name"].as_str(),
            Some("it's: #1")
        );
    }

    #[test]
    fn stdio_hosts_get_countersign_connect_on_this_data_directory() {
        assert_eq!(
            json_of(Host::Stdio),
            json!({"mcpServers": {"demo": {
                "command": "countersign",
                "args": ["--data-dir", "/home/me/.local/share/countersign", "connect", "demo"],
                "env": {TOKEN_ENV: TOKEN},
            }}})
        );
    }

    #[test]
    fn every_host_has_one_snippet() {
        let ids: Vec<_> = snippets(&route(None), "demo")
            .iter()
            .map(|s| s.id.id())
            .collect();
        assert_eq!(
            ids,
            [
                "claude-code",
                "cursor",
                "vscode",
                "codex",
                "goose",
                "zed",
                "stdio"
            ]
        );
    }

    #[test]
    fn quotes_what_a_shell_would_split_and_encodes_the_name_in_the_url() {
        assert_eq!(shell_word("plain-name"), "plain-name");
        assert_eq!(shell_word("it's $HOME"), r"'it'\''s $HOME'");
        assert_eq!(
            snippets(&route(None), "my server")[0].text,
            format!("claude mcp add --transport http 'my server' http://127.0.0.1:41234/mcp/my%20server --header 'Authorization: {AUTH}'")
        );
        let cursor = by(Host::Cursor, "a/b");
        let v: Value = serde_json::from_str(&cursor).expect("JSON");
        assert_eq!(
            v["mcpServers"]["a/b"]["url"],
            "http://127.0.0.1:41234/mcp/a%2Fb"
        );
    }

    #[test]
    fn a_snippet_debug_never_shows_the_token() {
        let s = format!("{:?}", snippets(&route(None), "demo"));
        assert!(!s.contains(TOKEN), "{s}");
    }
}
