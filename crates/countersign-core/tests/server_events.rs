//! Server changes are timeline events, so every face in every process sees them through the
//! event cursor (the app's window refreshes its server list from them; `watch` prints them).

use countersign_core::actions;
use countersign_core::ledger::events::{self, EventKind};
use countersign_core::ledger::Ledger;
use countersign_core::mcp::Discovery;
use serde_json::{json, Map, Value};

fn temp_dir(label: &str) -> std::path::PathBuf {
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

#[tokio::test]
async fn updating_and_rediscovering_a_server_are_events_another_process_can_follow() {
    let dir = temp_dir("server-events");
    let ledger = Ledger::open(&dir).expect("opens");
    let added = actions::add_server(&ledger, "ci", "http://127.0.0.1:9/mcp", false, None, "me")
        .await
        .expect("added");
    let cursor = ledger.read(events::last_id).expect("readable");

    actions::update_server(
        &ledger,
        added.id,
        "http://127.0.0.1:10/mcp",
        false,
        500,
        "me",
    )
    .await
    .expect("updated");
    let capabilities: Map<String, Value> =
        serde_json::from_value(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}))
            .expect("an object");
    let discovery = Discovery {
        supported_versions: vec!["2026-07-28".into()],
        capabilities,
        instructions: None,
        server_info: Some(json!({"name": "ci-server", "version": "1"})),
        raw: Map::new(),
    };
    actions::record_discovery(&ledger, added.id, &discovery)
        .await
        .expect("recorded");

    // Read as another process would: a second ledger handle on the same file, by cursor.
    drop(ledger);
    let other = Ledger::open(&dir).expect("opens again");
    let after: Vec<EventKind> = other
        .read(move |c| events::since(c, cursor, 100))
        .expect("readable")
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        after,
        vec![
            EventKind::ServerUpdated {
                name: "ci".into(),
                url: "http://127.0.0.1:10/mcp".into(),
            },
            EventKind::ServerDiscovered {
                name: "ci".into(),
                supports_tasks: true,
            },
        ]
    );
    drop(other);
    let _ = std::fs::remove_dir_all(&dir);
}
