//! "Put my servers behind Countersign" from the `countersign` binary: `agents import` of a
//! Claude Code `.mcp.json` that points at the demo server previews, applies (the server
//! registered, the file rewritten through the running gateway with a backup beside it, the new
//! agent's token working there), and undoes (the file as it was, the agent revoked).

use countersign_tests::gateway::{tasks_meta, GatewayRig};
use serde_json::{json, Value};

/// The person's `.mcp.json`: the demo server over HTTP, the real server-everything on stdio, a
/// key of their own; four-space indented, as they wrote it.
fn mcp_json(demo_url: &str) -> String {
    let stdio = countersign_tests::everything::stdio_command();
    let (command, args) = (&stdio[0], &stdio[1..]);
    let args = args
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(",\n                ");
    format!(
        r#"{{
    "mcpServers": {{
        "upstream": {{
            "type": "http",
            "url": "{demo_url}",
            "timeout": 30000
        }},
        "everything": {{
            "command": "{command}",
            "args": [
                {args}
            ]
        }},
        "down": {{
            "type": "http",
            "url": "http://127.0.0.1:9/mcp"
        }}
    }},
    "x-team": {{
        "owner": "me"
    }}
}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_import_puts_a_claude_code_file_behind_the_gateway_and_undoes_it() {
    let mut rig = GatewayRig::start(30).await;
    let project = rig.dir.path().join("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    let file = project.join(".mcp.json");
    let original = mcp_json(&rig.demo.url());
    std::fs::write(&file, &original).expect("write");
    let path = file.display().to_string();
    let backup = project.join(".mcp.json.countersign-backup");

    // Preview: what would be registered and the diff; nothing written, nothing registered.
    let preview = rig.cli(&["--json", "agents", "import", &path]).await;
    preview.assert_code(0);
    let preview = preview.json();
    assert_eq!(preview["host"], "claude-code");
    assert_eq!(preview["applied"], false);
    let items = preview["items"].as_array().expect("items");
    assert_eq!(items[0]["name"], "upstream");
    assert_eq!(items[0]["action"], "register");
    assert_eq!(
        items[0]["server"],
        json!({"transport": "http", "url": rig.demo.url(), "has_token": false})
    );
    assert_eq!(items[1]["name"], "everything");
    assert_eq!(
        items[1]["action"], "register",
        "a stdio server is registered and started by Countersign"
    );
    let gateway_base = rig.url.trim_end_matches("demo").to_owned();
    let diff = preview["diff"].as_str().expect("a diff");
    assert!(
        diff.contains(&format!(
            "+            \"url\": \"{gateway_base}upstream\","
        )),
        "the diff points the entry at the running gateway:\n{diff}"
    );
    assert!(
        diff.contains("Bearer <agent token>"),
        "no token exists before apply:\n{diff}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("file"),
        original,
        "a preview writes nothing"
    );
    assert!(!backup.exists());
    let servers = rig.cli(&["--json", "servers", "list"]).await.json();
    assert!(
        !servers.to_string().contains("\"upstream\""),
        "a preview registers nothing: {servers}"
    );

    // Apply: registered, the file rewritten with a backup, the agent's token in it only.
    let applied = rig
        .cli(&["--json", "agents", "import", &path, "--apply"])
        .await;
    applied.assert_code(0);
    let applied = applied.json();
    assert_eq!(applied["applied"], true, "{applied}");
    assert_eq!(applied["agent"], "claude-code");
    assert_eq!(applied["items"][0]["action"], "registered");
    assert_eq!(applied["items"][1]["action"], "registered", "{applied}");
    assert_eq!(applied["items"][2]["name"], "down");
    assert_eq!(
        applied["items"][2]["action"], "failed",
        "an unreachable server is not registered: {applied}"
    );
    assert_eq!(applied["items"][2]["rewritten"], false);
    assert_eq!(
        std::fs::read_to_string(&backup).expect("a backup"),
        original
    );
    let rewritten = std::fs::read_to_string(&file).expect("file");
    assert!(
        rewritten.contains("\n    \"mcpServers\""),
        "the indentation kept:\n{rewritten}"
    );
    let after: Value = serde_json::from_str(&rewritten).expect("still JSON");
    let entry = &after["mcpServers"]["upstream"];
    assert_eq!(entry["type"], "http");
    assert_eq!(entry["url"], format!("{gateway_base}upstream"));
    assert_eq!(entry["timeout"], 30000, "the entry's own keys kept");
    assert_eq!(
        after["x-team"],
        json!({"owner": "me"}),
        "the file's own keys kept"
    );
    assert_eq!(
        after["mcpServers"]["everything"]["url"],
        format!("{gateway_base}everything"),
        "the stdio entry now goes through the gateway, which starts the server: {rewritten}"
    );
    assert_eq!(
        after["mcpServers"]["down"],
        json!({"type": "http", "url": "http://127.0.0.1:9/mcp"}),
        "a server that could not be registered is left as it was"
    );
    let token = entry["headers"]["Authorization"]
        .as_str()
        .and_then(|a| a.strip_prefix("Bearer "))
        .expect("a bearer token")
        .to_owned();
    assert!(token.starts_with("csa_"), "an agent token: {token}");
    assert!(
        !applied.to_string().contains(&token),
        "the token is in the file, not in the output"
    );
    let servers = rig.cli(&["--json", "servers", "list"]).await.json();
    let upstream = servers
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "upstream"))
        .unwrap_or_else(|| panic!("upstream is registered: {servers}"));
    assert_eq!(upstream["url"], rig.demo.url());

    // The file's entry works: the gateway lets its token through to the imported server.
    rig.url = format!("{gateway_base}upstream");
    let (status, body) = rig
        .rpc(Some(&token), "tools/list", json!({"_meta": tasks_meta()}))
        .await;
    assert_eq!(
        status, 200,
        "the rewritten entry reaches the server through the gateway: {body}"
    );
    assert!(
        body["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{body}"
    );

    // And the stdio server's: the gateway's engine starts it on this first request.
    rig.url = format!("{gateway_base}everything");
    let (status, body) = rig
        .rpc(Some(&token), "tools/list", json!({"_meta": tasks_meta()}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "echo")),
        "server-everything's tools through the gateway: {body}"
    );

    // Importing again is refused: the only copy of the original would be overwritten.
    let again = rig
        .cli(&["--json", "agents", "import", &path, "--apply"])
        .await;
    again.assert_code(64);
    assert!(
        again.stdout.contains("already_imported") || again.stderr.contains("already"),
        "{again:?}"
    );

    // Undo: the file as it was, the agent revoked, the server kept.
    let undone = rig
        .cli(&["--json", "agents", "import", &path, "--undo"])
        .await;
    undone.assert_code(0);
    assert_eq!(undone.json()["agent_revoked"], "claude-code");
    assert_eq!(std::fs::read_to_string(&file).expect("file"), original);
    assert!(!backup.exists(), "the backup is the file again");
    let (revoked, _) = rig
        .rpc(Some(&token), "tools/list", json!({"_meta": tasks_meta()}))
        .await;
    assert_eq!(revoked, 401, "the file's token no longer works");
    let nothing = rig.cli(&["agents", "import", &path, "--undo"]).await;
    nothing.assert_code(64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_import_leaves_a_file_that_does_not_parse_untouched_and_says_where() {
    let rig = GatewayRig::start(30).await;
    let file = rig.dir.path().join(".mcp.json");
    let broken =
        "{\n  \"mcpServers\": {\n    \"x\": { \"url\": \"http://127.0.0.1:9/mcp\", }\n  }\n}\n";
    std::fs::write(&file, broken).expect("write");
    let path = file.display().to_string();
    let run = rig
        .cli(&["--json", "agents", "import", &path, "--apply"])
        .await;
    run.assert_code(64);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(all.contains("line 3"), "the error names the line: {all}");
    assert!(all.contains("parse_error"), "the --json reason: {all}");
    assert_eq!(std::fs::read_to_string(&file).expect("file"), broken);
    assert!(!rig.dir.path().join(".mcp.json.countersign-backup").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_print_config_is_the_stdio_entry_on_this_data_directory() {
    let dir = countersign_tests::procs::DataDir::new("print-config");
    let run = dir.run(&["connect", "demo", "--print-config"]).await;
    run.expect_code(0);
    let entry = &run.json()["mcpServers"]["demo"];
    let data_dir = dir.path().display().to_string();
    assert_eq!(
        entry["args"],
        json!(["--data-dir", data_dir, "connect", "demo"]),
        "the relay finds this data directory's gateway: {entry}"
    );
    assert!(
        entry["command"]
            .as_str()
            .is_some_and(|c| c.ends_with("countersign")),
        "{entry}"
    );
    assert!(entry["env"]["COUNTERSIGN_AGENT_TOKEN"]
        .as_str()
        .is_some_and(|t| t.starts_with('<')));
}
