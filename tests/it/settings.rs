//! The person's settings through the core's `Console` (what the app's Settings page and
//! `countersign settings` call), on a real ledger file: they survive a restart, a value that
//! cannot be used is refused with an error naming the setting and writes nothing, a change is
//! audited and on the event feed, and the engine holds every server to a new poll floor at
//! once, also when another process (another console on the same data directory) sets it.

use std::time::Duration;

use countersign_core::console::view::{CommandError, ErrorCode};
use countersign_core::console::{self, Console, Setup, Start};
use countersign_core::ledger::{audit, events, EventKind};
use countersign_core::settings::{Day, SettingKey, Settings, SettingsError};
use countersign_tests::hostile::{self, Hostile, Reply};
use countersign_tests::rig::{Rig, TempDir};
use serde_json::json;

async fn open(dir: &std::path::Path) -> Console {
    let mut setup = Setup::new(dir);
    setup.start = Start::WhenNeeded;
    Console::open(setup)
        .await
        .unwrap_or_else(|e| panic!("the console must open on {}: {e}", dir.display()))
}

#[tokio::test]
async fn settings_survive_a_restart_and_a_refused_value_writes_nothing() {
    let dir = TempDir::new("settings");
    let console = open(&dir.0).await;
    assert_eq!(
        console.settings().await.expect("readable"),
        Settings::default(),
        "a new ledger has the defaults"
    );
    let mut wanted = Settings::default();
    wanted.dnd.enabled = true;
    wanted.dnd.from = "21:30".into();
    wanted.dnd.to = "06:45".into();
    wanted.dnd.days = vec![Day::Sun, Day::Mon];
    wanted.sound = false;
    wanted.poll_floor_ms = 1500;
    wanted.gateway.enabled = true;
    wanted.gateway.port = 8719;
    let saved = console
        .set_settings(wanted.clone())
        .await
        .expect("valid settings are saved");
    assert_eq!(
        saved.dnd.days,
        vec![Day::Mon, Day::Sun],
        "days come back sorted"
    );

    let refused = console
        .set_setting("poll_floor_ms", "100")
        .await
        .expect_err("a floor under 250 ms is refused");
    assert!(
        matches!(
            refused,
            console::Error::Settings(SettingsError::FloorTooLow { ms: 100, .. })
        ),
        "{refused:?}"
    );
    let shown = CommandError::from(refused);
    assert_eq!(shown.code, ErrorCode::InvalidInput);
    assert_eq!(
        shown.field,
        Some(SettingKey::PollFloorMs),
        "the window shows the message at the field"
    );
    console.close().await;

    let reopened = open(&dir.0).await;
    assert_eq!(
        reopened.settings().await.expect("readable"),
        saved,
        "what was saved is read back after a restart; the refused floor never was"
    );
    let ledger = reopened.ledger().clone();
    let (trail, feed) = ledger
        .read_async(|c| Ok((audit::list(c)?, events::since(c, 0, 100)?)))
        .await
        .expect("readable");
    let changes: Vec<_> = trail
        .iter()
        .filter(|a| a.action == audit::AuditAction::SettingsChange)
        .collect();
    assert_eq!(changes.len(), 1, "one audit record for one change");
    assert_eq!(changes[0].detail["poll_floor_ms"], json!(1500));
    assert!(
        changes[0].detail.get("start_at_login").is_none(),
        "only the keys that changed are recorded"
    );
    assert!(
        feed.iter().any(|e| matches!(
            &e.kind,
            EventKind::SettingsChanged { keys } if keys.contains(&"gateway.port".to_owned())
        )),
        "the change is on the event feed, for the app to apply"
    );

    // Setting the same values again changes nothing and records nothing.
    reopened.set_settings(saved).await.expect("valid");
    let again = ledger.read_async(audit::list).await.expect("readable");
    assert_eq!(
        again
            .iter()
            .filter(|a| a.action == audit::AuditAction::SettingsChange)
            .count(),
        1
    );
    reopened.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_holds_every_server_to_a_new_poll_floor_set_from_another_process() {
    // A server that asks to be polled as fast as possible (the built-in 250 ms floor applies).
    let server = Hostile::builder()
        .tool("busy", |req| {
            let id = req
                .task_id()
                .map(str::to_owned)
                .unwrap_or_else(|| req.new_task_id());
            let mut task = hostile::task(&id, "working");
            task["pollIntervalMs"] = json!(0);
            match req.method.as_str() {
                "tools/call" => Reply::Result(hostile::created(task)),
                _ => Reply::Result(task),
            }
        })
        .start()
        .await;
    let rig = Rig::start(&server.url(), false).await;
    rig.call("busy", json!({})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = server.count("tasks/get");
    assert!(
        before >= 4,
        "{before} polls in 2 s: at the built-in floor the task is polled about 8 times"
    );

    // Another process (a second console on the same ledger, as `countersign settings set`).
    let other = open(rig.console.data_dir()).await;
    other
        .set_setting("poll_floor_ms", "2000")
        .await
        .expect("a 2 s floor is valid");
    // The engine sees the commit within its change-feed tick; the next interval is the floor's.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let from = server.count("tasks/get");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during = server.count("tasks/get") - from;
    assert!(
        during <= 3,
        "{during} polls in 4 s after a 2 s floor was set: the engine did not take it live"
    );
    assert!(during >= 1, "the task is still polled");
    other.close().await;
    rig.shutdown().await;
}

#[tokio::test]
async fn the_cli_reads_and_sets_settings_through_the_same_checks() {
    use countersign_tests::cli::run;
    let dir = TempDir::new("settings-cli");
    let data = dir.0.display().to_string();
    let got = run(&[
        "--data-dir",
        &data,
        "settings",
        "set",
        "poll_floor_ms",
        "100",
    ])
    .await;
    got.assert_code(64);
    assert!(
        got.stderr.contains("at least 250 ms"),
        "the console's typed error, in words: {got}"
    );
    run(&[
        "--data-dir",
        &data,
        "settings",
        "set",
        "dnd.days",
        "sat,sun",
    ])
    .await
    .assert_code(0);
    let got = run(&["--data-dir", &data, "settings", "get", "dnd.days"]).await;
    got.assert_code(0);
    assert_eq!(got.stdout.trim(), "sat,sun");
    let all = run(&["--data-dir", &data, "--json", "settings"]).await;
    all.assert_code(0);
    assert_eq!(all.json()["dnd"]["days"], json!(["sat", "sun"]));
    assert_eq!(
        all.json()["pollFloorMs"],
        json!(250),
        "the refused floor was not saved"
    );
    // What the CLI saved, the app's console reads.
    let console = open(&dir.0).await;
    assert_eq!(
        console.settings().await.expect("readable").dnd.days,
        vec![Day::Sat, Day::Sun]
    );
    console.close().await;
}
