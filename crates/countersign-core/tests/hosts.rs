//! A host's real configuration file read, rewritten through the gateway, written with its
//! backup and undone: one sample per format (`tests/hosts/`), each result parsed again with a
//! real parser.

use std::path::{Path, PathBuf};

use countersign_core::hosts::{self, config, file, rewrite, Entry, Error, Host, Route, ServerSpec};
use countersign_core::sensitive::Sensitive;
use serde_json::{json, Value};

const TOKEN: &str = "csa_0011223344556677";
const GATEWAY: &str = "http://127.0.0.1:8788/mcp/";

fn temp_dir(label: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!(
        "countersign-{label}-{}-{nanos:x}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// The sample `sample` copied to `relative` in a fresh directory (hosts are told by path).
fn placed(sample: &str, relative: &str) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/hosts")
            .join(sample),
    )
    .expect("the sample is there");
    let path = temp_dir("hosts").join(relative);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(&path, text).expect("written");
    path
}

fn route() -> Route {
    Route {
        gateway_url: GATEWAY.into(),
        token: Sensitive::new(TOKEN.into()),
        command: "countersign".into(),
        data_dir: None,
    }
}

fn entry<'a>(file: &'a config::HostFile, name: &str) -> &'a Entry {
    &file
        .servers
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("{name} is listed"))
        .entry
}

fn http_url(e: &Entry) -> (&str, Option<&str>) {
    match e {
        Entry::Server(ServerSpec::Http { url, token }) => {
            (url.as_str(), token.as_ref().map(|t| t.expose().as_str()))
        }
        other => panic!("expected an HTTP server, got {other:?}"),
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn claude_codes_mcp_json_is_read_and_rewritten_keeping_every_other_key() {
    let path = placed("claude-code.mcp.json", ".mcp.json");
    let file = config::read(&path).expect("parses");
    assert_eq!(file.host, Host::ClaudeCode);
    assert_eq!(
        http_url(entry(&file, "docs")),
        ("https://docs.example.com/mcp", Some("docs-s3cr3t-token"))
    );
    match entry(&file, "files") {
        Entry::Server(ServerSpec::Stdio {
            command, args, env, ..
        }) => {
            assert_eq!(command, "npx");
            assert_eq!(args.len(), 3);
            assert_eq!(env["GITHUB_TOKEN"].expose(), "ghp_verysecretvalue");
        }
        other => panic!("files is a stdio server: {other:?}"),
    }
    assert!(
        matches!(entry(&file, "legacy-sse"), Entry::Unsupported(_)),
        "SSE is not ours to take"
    );
    assert_eq!(
        entry(&file, "already"),
        &Entry::Behind,
        "an agent token means it is ours already"
    );

    let text = rewrite::rewrite(&file, &names(&["docs"]), &route());
    assert!(
        text.contains("\n    \"mcpServers\""),
        "four-space indentation kept:\n{text}"
    );
    assert!(text.ends_with("}\n"), "the trailing newline kept");
    assert!(
        text.contains(
            r#""args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/src"],"#
        ),
        "an entry not rewritten stays byte for byte, its inline array too:\n{text}"
    );
    let docs_at = file.text.find("\"docs\"").expect("docs");
    let files_at = file.text.find("\"files\"").expect("files");
    assert_eq!(
        &text[..docs_at],
        &file.text[..docs_at],
        "before the entry, nothing changes"
    );
    assert!(
        text.ends_with(&file.text[files_at - 8..]),
        "after the entry, nothing changes:\n{text}"
    );
    let before: Value = serde_json::from_str(&file.text).expect("JSON");
    let after: Value = serde_json::from_str(&text).expect("the rewrite is JSON");
    assert_eq!(
        after["mcpServers"]["docs"],
        json!({"type": "http", "url": "http://127.0.0.1:8788/mcp/docs",
               "headers": {"Authorization": format!("Bearer {TOKEN}")}, "timeout": 30000}),
        "the gateway's entry, and the entry's own `timeout` kept"
    );
    for kept in ["files", "legacy-sse", "already"] {
        assert_eq!(
            after["mcpServers"][kept], before["mcpServers"][kept],
            "{kept} untouched"
        );
    }
    assert_eq!(after["x-team-note"], "kept as it is");
    let keys: Vec<_> = after["mcpServers"]
        .as_object()
        .expect("object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        ["docs", "files", "legacy-sse", "already"],
        "order kept"
    );
}

#[test]
fn cursors_mcp_json_keeps_auto_approve_and_refuses_a_header_it_cannot_carry() {
    let path = placed("cursor.mcp.json", ".cursor/mcp.json");
    let file = config::read(&path).expect("parses");
    assert_eq!(file.host, Host::Cursor);
    assert_eq!(http_url(entry(&file, "linear")).1, Some("lin_abcdef123456"));
    match entry(&file, "custom-header") {
        Entry::Unsupported(why) => assert!(why.contains("X-Api-Key"), "{why}"),
        other => panic!("an X-Api-Key header cannot be carried: {other:?}"),
    }
    let after: Value =
        serde_json::from_str(&rewrite::rewrite(&file, &names(&["linear"]), &route()))
            .expect("JSON");
    assert_eq!(
        after["mcpServers"]["linear"],
        json!({"url": "http://127.0.0.1:8788/mcp/linear",
               "headers": {"Authorization": format!("Bearer {TOKEN}")},
               "autoApprove": ["list_issues"]}),
        "Cursor's shape has no `type`"
    );
}

#[test]
fn vscodes_mcp_json_keeps_inputs_tabs_and_dev_and_leaves_prompted_tokens() {
    let path = placed("vscode.mcp.json", ".vscode/mcp.json");
    let file = config::read(&path).expect("parses");
    assert_eq!(file.host, Host::VsCode);
    assert_eq!(
        http_url(entry(&file, "tasks")),
        ("https://tasks.example.com/mcp", Some("tasks-token-0001"))
    );
    assert!(
        matches!(entry(&file, "prompted"), Entry::Unsupported(why) if why.contains("variable")),
        "a ${{input:…}} token is VS Code's to fill in"
    );
    match entry(&file, "local") {
        Entry::Server(ServerSpec::Stdio { command, cwd, .. }) => {
            assert_eq!(command, "uvx");
            assert_eq!(cwd.as_deref(), Some("${workspaceFolder}"));
        }
        other => panic!("local is stdio: {other:?}"),
    }
    let text = rewrite::rewrite(&file, &names(&["tasks"]), &route());
    assert!(
        text.contains("\n\t\"servers\""),
        "tab indentation kept:\n{text}"
    );
    let before: Value = serde_json::from_str(&file.text).expect("JSON");
    let after: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(after["inputs"], before["inputs"], "inputs kept");
    assert_eq!(
        after["servers"]["tasks"]["type"], "http",
        "VS Code needs type http"
    );
    assert_eq!(
        after["servers"]["tasks"]["url"],
        "http://127.0.0.1:8788/mcp/tasks"
    );
    assert_eq!(
        after["servers"]["tasks"]["dev"],
        json!({"watch": "src/**/*.ts"})
    );
    assert_eq!(after["servers"]["prompted"], before["servers"]["prompted"]);
}

#[test]
fn codexs_config_toml_is_edited_in_place_with_its_comments() {
    let path = placed("codex.config.toml", "config.toml");
    let file = config::read(&path).expect("parses");
    assert_eq!(file.host, Host::Codex);
    assert_eq!(
        http_url(entry(&file, "docs")),
        ("https://docs.example.com/mcp", Some("docs-s3cr3t-token"))
    );
    assert!(matches!(
        entry(&file, "fs"),
        Entry::Server(ServerSpec::Stdio { .. })
    ));
    assert!(
        matches!(entry(&file, "gh"), Entry::Unsupported(why) if why.contains("GH_TOKEN")),
        "a token read from the environment is not ours to read"
    );
    let text = rewrite::rewrite(&file, &names(&["docs"]), &route());
    for comment in [
        "# Codex settings (hand-written).",
        "# The docs server, over HTTP.",
        "# seconds",
    ] {
        assert!(text.contains(comment), "comment {comment:?} kept:\n{text}");
    }
    assert!(
        text.contains("[mcp_servers.docs]\n# The docs server, over HTTP.\nurl = \"http://127.0.0.1:8788/mcp/docs\"\nhttp_headers = "),
        "the gateway's keys where the old ones were, under their comment:\n{text}"
    );
    let doc: toml::Table = toml::from_str(&text).expect("the rewrite is TOML");
    let docs = &doc["mcp_servers"]["docs"];
    assert_eq!(docs["url"].as_str(), Some("http://127.0.0.1:8788/mcp/docs"));
    assert_eq!(
        docs["http_headers"]["Authorization"].as_str(),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(
        docs["startup_timeout_sec"].as_integer(),
        Some(20),
        "options kept"
    );
    assert_eq!(doc["model"].as_str(), Some("gpt-5"));
    assert_eq!(
        doc["profiles"]["fast"]["model"].as_str(),
        Some("gpt-5-mini")
    );
    let before: toml::Table = toml::from_str(&file.text).expect("TOML");
    assert_eq!(doc["mcp_servers"]["fs"], before["mcp_servers"]["fs"]);
    assert_eq!(doc["mcp_servers"]["gh"], before["mcp_servers"]["gh"]);
}

#[test]
fn a_file_that_does_not_parse_is_a_typed_error_with_its_place() {
    let path = placed("malformed.json", ".mcp.json");
    match config::read(&path) {
        Err(Error::Parse { line, column, .. }) => assert_eq!((line, column), (3, 47)),
        other => panic!("a trailing comma is a parse error: {other:?}"),
    }
    let path = placed("malformed.toml", "config.toml");
    match config::read(&path) {
        Err(Error::Parse { line, .. }) => assert_eq!(line, 3, "the duplicate key's line"),
        other => panic!("a duplicate key is a parse error: {other:?}"),
    }
    let other = placed("cursor.mcp.json", "settings.json");
    std::fs::write(&other, "{\"theme\": \"dark\"}").expect("write");
    assert!(matches!(
        config::read(&other),
        Err(Error::UnknownFormat { .. })
    ));
}

#[test]
fn a_json_file_with_mcp_servers_elsewhere_gets_countersign_connect() {
    let path = placed("cursor.mcp.json", "claude_desktop_config.json");
    let file = config::read(&path).expect("parses");
    assert_eq!(file.host, Host::Stdio);
    let after: Value =
        serde_json::from_str(&rewrite::rewrite(&file, &names(&["linear"]), &route()))
            .expect("JSON");
    assert_eq!(
        after["mcpServers"]["linear"],
        json!({"command": "countersign", "args": ["connect", "linear"],
               "env": {hosts::TOKEN_ENV: TOKEN}, "autoApprove": ["list_issues"]})
    );
    let again = config::parse(
        &path,
        rewrite::rewrite(&file, &names(&["linear"]), &route()),
    )
    .expect("parses");
    assert_eq!(
        entry(&again, "linear"),
        &Entry::Behind,
        "a rewrite is recognised as ours"
    );
}

#[test]
fn writing_keeps_a_backup_and_undo_restores_it_exactly() {
    let path = placed("codex.config.toml", "config.toml");
    let original = std::fs::read_to_string(&path).expect("read");
    let file = config::read(&path).expect("parses");
    let text = rewrite::rewrite(&file, &names(&["docs"]), &route());
    let backup = file::write(&file, &text, Some("codex")).expect("written");
    assert_eq!(backup, file::backup_path(&path));
    assert_eq!(std::fs::read_to_string(&backup).expect("backup"), original);
    assert_eq!(std::fs::read_to_string(&path).expect("file"), text);
    assert!(
        matches!(
            file::write(&file, &text, None),
            Err(Error::AlreadyImported { .. })
        ),
        "a second import would overwrite the original's only copy"
    );
    let restored = file::undo(&path).expect("undone");
    assert_eq!(restored.agent.as_deref(), Some("codex"));
    assert_eq!(std::fs::read_to_string(&path).expect("file"), original);
    assert!(!backup.exists(), "the backup is the file again");
    assert!(matches!(
        file::undo(&path),
        Err(Error::NothingToUndo { .. })
    ));
}

#[test]
fn undo_refuses_when_the_file_changed_after_countersign_wrote_it() {
    let path = placed("claude-code.mcp.json", ".mcp.json");
    let file = config::read(&path).expect("parses");
    let text = rewrite::rewrite(&file, &names(&["docs"]), &route());
    file::write(&file, &text, None).expect("written");
    let edited = text.replace("\"timeout\": 30000", "\"timeout\": 60000");
    std::fs::write(&path, &edited).expect("the person edits it");
    match file::undo(&path) {
        Err(e @ Error::ChangedSince { .. }) => {
            assert!(
                e.to_string().contains("countersign-backup"),
                "says where the original is: {e}"
            )
        }
        other => panic!("undo must not lose the person's edit: {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(&path).expect("file"),
        edited,
        "left as the person left it"
    );
}

#[test]
fn writing_refuses_a_file_that_changed_since_it_was_read() {
    let path = placed("cursor.mcp.json", ".cursor/mcp.json");
    let file = config::read(&path).expect("parses");
    std::fs::write(&path, "{\"mcpServers\": {}}\n").expect("changed meanwhile");
    let text = rewrite::rewrite(&file, &names(&["linear"]), &route());
    assert!(matches!(
        file::write(&file, &text, None),
        Err(Error::Raced { .. })
    ));
    assert!(!file::backup_path(&path).exists(), "nothing written");
}

#[test]
fn the_diff_shows_the_change_and_masks_every_secret() {
    let path = placed("claude-code.mcp.json", ".mcp.json");
    let file = config::read(&path).expect("parses");
    let text = rewrite::rewrite(&file, &names(&["docs"]), &route());
    let diff = file::diff(&path, &file.text, &text, &file::secrets_of(&file));
    assert!(
        diff.contains("+            \"url\": \"http://127.0.0.1:8788/mcp/docs\","),
        "{diff}"
    );
    assert!(
        diff.contains("-            \"url\": \"https://docs.example.com/mcp\","),
        "{diff}"
    );
    for secret in ["docs-s3cr3t-token", TOKEN, "ghp_verysecretvalue"] {
        assert!(!diff.contains(secret), "{secret} masked:\n{diff}");
    }
}

#[test]
fn an_inline_codex_entry_is_rewritten_too() {
    let path = temp_dir("hosts").join("config.toml");
    std::fs::write(
        &path,
        "[mcp_servers]\n# inline\ndocs = { url = \"https://docs.example.com/mcp\", tool_timeout_sec = 5 }\n",
    )
    .expect("write");
    let file = config::read(&path).expect("parses");
    assert_eq!(
        http_url(entry(&file, "docs")).0,
        "https://docs.example.com/mcp"
    );
    let text = rewrite::rewrite(&file, &names(&["docs"]), &route());
    assert!(text.contains("# inline"), "{text}");
    let doc: toml::Table = toml::from_str(&text).expect("TOML");
    let docs = &doc["mcp_servers"]["docs"];
    assert_eq!(docs["url"].as_str(), Some("http://127.0.0.1:8788/mcp/docs"));
    assert_eq!(docs["tool_timeout_sec"].as_integer(), Some(5));
    assert!(docs["http_headers"]["Authorization"]
        .as_str()
        .is_some_and(|a| a.ends_with(TOKEN)));
}

#[cfg(unix)]
#[test]
fn a_symlinked_file_stays_a_link_through_write_and_undo() {
    let real = placed("cursor.mcp.json", "dotfiles/cursor-mcp.json");
    let original = std::fs::read_to_string(&real).expect("read");
    let dir = real
        .parent()
        .and_then(Path::parent)
        .expect("dir")
        .join(".cursor");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let link = dir.join("mcp.json");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let file = config::read(&link).expect("parses");
    assert_eq!(
        file.host,
        Host::Cursor,
        "the host is told by the path given"
    );
    let text = rewrite::rewrite(&file, &names(&["linear"]), &route());
    file::write(&file, &text, None).expect("written");
    assert!(
        link.symlink_metadata()
            .expect("meta")
            .file_type()
            .is_symlink(),
        "still a link"
    );
    assert_eq!(
        std::fs::read_to_string(&real).expect("target"),
        text,
        "its target changed"
    );
    file::undo(&link).expect("undone");
    assert!(
        link.symlink_metadata()
            .expect("meta")
            .file_type()
            .is_symlink(),
        "still a link after undo"
    );
    assert_eq!(std::fs::read_to_string(&real).expect("target"), original);
    assert!(!file::backup_path(&link).exists());
}
