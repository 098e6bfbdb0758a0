//! Tokens come from the OS keyring in every face: the CLI stores `servers add --token` in the
//! keyring for that server only, and ledger commands (`call`, `watch`) send each server its own
//! token and never one server's token to another. Needs a real, unlocked Secret Service: CI runs
//! it inside the private session (`.ci/with-session.sh`, from `.ci/e2e/run.sh`) with `--ignored`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_core::secrets::Secrets;
use countersign_tests::hostile::{self, Hostile, Reply};
use countersign_tests::ledger_view::wait_for;
use countersign_tests::procs::DataDir;
use serde_json::json;

type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A server that records every request's method and `Authorization` header, and refuses
/// requests without `expected` (when given) as a protected server would.
async fn server(expected: Option<&'static str>, seen: Seen) -> Hostile {
    let record = move |req: &hostile::Request| {
        seen.lock().unwrap_or_else(|e| e.into_inner()).push((
            req.method.clone(),
            req.header("authorization").map(str::to_owned),
        ));
        match expected {
            Some(token)
                if req.header("authorization") != Some(format!("Bearer {token}").as_str()) =>
            {
                Some(Reply::Http {
                    status: 401,
                    headers: vec![("WWW-Authenticate".into(), "Bearer".into())],
                    body: Vec::new(),
                })
            }
            _ => None,
        }
    };
    let discover = record.clone();
    let list = record.clone();
    Hostile::builder()
        .tool("work", move |req| {
            if let Some(refused) = record(req) {
                return refused;
            }
            match req.method.as_str() {
                "tools/call" => Reply::Result(hostile::created(hostile::task(&req.new_task_id(), "working"))),
                _ if req.nth < 1 => Reply::Result(hostile::task(req.task_id().unwrap_or(""), "working")),
                _ => Reply::Result(hostile::completed(req.task_id().unwrap_or(""), "done")),
            }
        })
        .on("server/discover", move |req| {
            discover(req).unwrap_or_else(|| {
                Reply::Result(json!({
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
                    "resultType": "complete",
                }))
            })
        })
        .on("tools/list", move |req| {
            list(req).unwrap_or_else(|| {
                Reply::Result(json!({"tools": [{"name": "work", "inputSchema": {"type": "object"}}], "resultType": "complete"}))
            })
        })
        .start()
        .await
}

fn seen(log: &Seen) -> Vec<(String, Option<String>)> {
    log.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
async fn ledger_commands_send_each_server_its_own_keyring_token_and_no_other() {
    let (seen_a, seen_b): (Seen, Seen) = Default::default();
    let a = server(Some("tok-a"), seen_a.clone()).await;
    let b = server(None, seen_b.clone()).await;
    let dir = DataDir::new("keyring");

    dir.run(&["--token", "tok-a", "servers", "add", "a", &a.url()])
        .await
        .expect_code(0);
    dir.run(&["servers", "add", "b", &b.url()])
        .await
        .expect_code(0);
    // Dropped at once: reading the SQLite files below with `std::fs` while this process has a
    // connection open would release that connection's POSIX locks.
    let id_a = dir.ledger().server_id("a");
    let entry = format!("{id_a}@{}", dir.path().display());
    let stored = Secrets::default()
        .load(&entry)
        .expect("the keyring answers");
    assert_eq!(
        stored.as_ref().map(|t| t.expose().as_str()),
        Some("tok-a"),
        "the token is in the keyring"
    );
    for file in ["ledger.sqlite3", "ledger.sqlite3-wal"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(5).any(|w| w == b"tok-a"),
            "no token in {file}"
        );
    }

    // A `--token` given to a ledger command is not sent anywhere: each server has its own.
    dir.run(&["--token", "leak", "call", "a", "work", "{}", "--no-follow"])
        .await
        .expect_code(0);
    dir.run(&["--token", "leak", "call", "b", "work", "{}", "--no-follow"])
        .await
        .expect_code(0);
    let mut watch = dir.watch().await;
    wait_for(
        "both tasks to complete under `watch`",
        Duration::from_secs(30),
        || {
            let tasks = dir.ledger().tasks();
            (tasks.len() == 2 && tasks.iter().all(|t| t.status == "completed")).then_some(())
        },
    )
    .await;
    watch.kill9().await;

    let a_seen = seen(&seen_a);
    assert!(
        a_seen.iter().any(|(m, _)| m == "tasks/get"),
        "a was polled: {a_seen:?}"
    );
    for (method, auth) in &a_seen {
        assert_eq!(
            auth.as_deref(),
            Some("Bearer tok-a"),
            "{method} to a carries a's own token"
        );
    }
    let b_seen = seen(&seen_b);
    assert!(
        b_seen.iter().any(|(m, _)| m == "tasks/get"),
        "b was polled: {b_seen:?}"
    );
    for (method, auth) in &b_seen {
        assert_eq!(
            auth, &None,
            "{method} to b carries no token (neither a's nor --token's)"
        );
    }

    dir.run(&["servers", "remove", "a"]).await.expect_code(0);
    assert_eq!(
        Secrets::default()
            .load(&entry)
            .expect("the keyring answers")
            .map(|t| t.expose().clone()),
        None,
        "removing the server deletes its token"
    );
}

/// The app's half of the story: the desktop shell registers servers through the core's
/// `Console` (its `server_add` and `tool_call` commands are one `Console::add_server` and
/// `Console::call` each). The app's own engine is left out (`Start::WhenNeeded`) so that it
/// cannot finish the tasks first: `countersign watch` on that ledger must poll the protected
/// server with the token the app put in the keyring, and the other server with none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
async fn watch_on_a_ledger_the_app_wrote_polls_each_server_with_its_own_token() {
    use countersign_core::console::view::{SecretText, ServerAddRequest};
    use countersign_core::console::{CallStep, Console, Setup, Start};
    use countersign_core::mcp::ToolCall;
    use countersign_core::sensitive::Sensitive;

    let (seen_a, seen_b): (Seen, Seen) = Default::default();
    let a = server(Some("tok-app"), seen_a.clone()).await;
    let b = server(None, seen_b.clone()).await;
    let dir = DataDir::new("keyring-app");

    let mut setup = Setup::new(dir.path());
    setup.start = Start::WhenNeeded;
    let app = Console::open(setup).await.expect("the app's console opens");
    assert!(!app.runs_engine());
    for (name, url, token) in [("a", a.url(), Some("tok-app")), ("b", b.url(), None)] {
        let server = app
            .add_server(ServerAddRequest {
                name: name.into(),
                url,
                token: token.map(|t| SecretText(Sensitive::new(t.to_owned()))),
                discover: true,
            })
            .await
            .unwrap_or_else(|e| panic!("the app adds {name}: {e}"));
        assert_eq!(server.has_token, token.is_some());
        let step = app
            .call(
                server.id,
                ToolCall::new("work", Some(serde_json::Map::new())),
            )
            .await
            .unwrap_or_else(|e| panic!("the app calls work on {name}: {e}"));
        assert!(
            matches!(step, CallStep::Task(_)),
            "work on {name} creates a task: {step:?}"
        );
    }
    // The app quits with both tasks still working; `watch` takes over the ledger.
    app.close().await;
    let polls_before = |log: &Seen| seen(log).iter().filter(|(m, _)| m == "tasks/get").count();
    let (a_before, b_before) = (polls_before(&seen_a), polls_before(&seen_b));

    let mut watch = dir.watch().await;
    wait_for(
        "both of the app's tasks to complete under `watch`",
        Duration::from_secs(30),
        || {
            let tasks = dir.ledger().tasks();
            (tasks.len() == 2 && tasks.iter().all(|t| t.status == "completed")).then_some(())
        },
    )
    .await;
    watch.kill9().await;

    let a_seen = seen(&seen_a);
    assert!(
        polls_before(&seen_a) > a_before,
        "watch polled a: {a_seen:?}"
    );
    assert!(
        a_seen
            .iter()
            .all(|(_, auth)| auth.as_deref() == Some("Bearer tok-app")),
        "every request to a carries the token the app stored: {a_seen:?}"
    );
    let b_seen = seen(&seen_b);
    assert!(
        polls_before(&seen_b) > b_before,
        "watch polled b: {b_seen:?}"
    );
    assert!(
        b_seen.iter().all(|(_, auth)| auth.is_none()),
        "no request to b carries a token: {b_seen:?}"
    );
    for file in ["ledger.sqlite3", "ledger.sqlite3-wal"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(7).any(|w| w == b"tok-app"),
            "no token in {file}"
        );
    }
    let id_a = dir.ledger().server_id("a");
    Secrets::default()
        .delete(&format!("{id_a}@{}", dir.path().display()))
        .expect("the test cleans its keyring entry");
}

/// `countersign servers add NAME URL` against an OAuth-protected server that is not ours (the
/// fastmcp peer behind fastmcp's `InMemoryOAuthProvider`): the `401` starts the sign-in, the
/// browser (`$BROWSER`, here a script that follows the authorization redirect into the CLI's
/// loopback listener, as a browser would once the person approved) completes it, the tokens and
/// registration land in the keyring only, the engine polls with the access token, `logout`
/// forgets the tokens but keeps the client (the next `login` is the same client),
/// `logout --forget-client` forgets it too, and `remove` leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
async fn servers_add_signs_in_to_an_oauth_server_and_keeps_the_sign_in_in_the_keyring_only() {
    use countersign_core::auth::Credentials;
    use countersign_tests::peer::FastmcpPeer;

    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_OAUTH", "1"),
        ("PEER_STEP_SECONDS", "0.05"),
        ("PEER_POLL_INTERVAL_MS", "50"),
    ])
    .await;
    let dir = DataDir::new("oauth");
    let browser = dir.path().join("test-browser.sh");
    std::fs::write(
        &browser,
        "#!/bin/sh\nloc=$(curl -s -o /dev/null -w '%{redirect_url}' \"$1\") && curl -s -o /dev/null \"$loc\"\n",
    )
    .expect("write the test browser");
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&browser)
        .status()
        .expect("chmod");
    let browser = browser.display().to_string();

    let added = dir
        .run_with_env(
            &["servers", "add", "p", &peer.url],
            &[("BROWSER", &browser)],
        )
        .await;
    added.expect_code(0);
    assert!(
        added.stderr.contains("127.0.0.1"),
        "the authorization URL and its host are printed: {added}"
    );

    let id = dir.ledger().server_id("p");
    let entry = format!("oauth:{id}@{}", dir.path().display());
    let blob = Secrets::default()
        .load(&entry)
        .expect("the keyring answers")
        .expect("the sign-in is in the keyring");
    let credentials = Credentials::from_keyring_blob(&blob).expect("a readable sign-in");
    let access = credentials.tokens.access_token.expose().clone();
    assert!(credentials.tokens.refresh_token.is_some());
    for file in ["ledger.sqlite3", "ledger.sqlite3-wal"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(access.len()).any(|w| w == access.as_bytes()),
            "no access token in {file}"
        );
    }

    // The engine sends the access token: a call is recorded and polled to its end.
    dir.run(&["call", "p", "long_job", r#"{"steps": 2}"#])
        .await
        .expect_code(0);

    // Logout forgets the tokens and keeps the client registration; login is the same client.
    dir.run(&["servers", "logout", "p"]).await.expect_code(0);
    let kept = Secrets::default()
        .load(&entry)
        .expect("keyring")
        .expect("the registration stays after logout");
    assert!(
        Credentials::from_keyring_blob(&kept).is_err() && !kept.expose().contains(&access),
        "logout forgets the tokens"
    );
    dir.run_with_env(&["servers", "login", "p"], &[("BROWSER", &browser)])
        .await
        .expect_code(0);
    let again = Secrets::default()
        .load(&entry)
        .expect("keyring")
        .expect("signed in again");
    let again = Credentials::from_keyring_blob(&again).expect("a readable sign-in");
    assert_eq!(
        again.registration.client_id, credentials.registration.client_id,
        "login after logout is the same client"
    );
    // `--forget-client` forgets the registration too: the next login is a new client.
    dir.run(&["servers", "logout", "p", "--forget-client"])
        .await
        .expect_code(0);
    assert!(
        Secrets::default().load(&entry).expect("keyring").is_none(),
        "logout --forget-client leaves nothing in the keyring"
    );
    dir.run_with_env(&["servers", "login", "p"], &[("BROWSER", &browser)])
        .await
        .expect_code(0);
    let fresh = Secrets::default()
        .load(&entry)
        .expect("keyring")
        .expect("signed in again");
    let fresh = Credentials::from_keyring_blob(&fresh).expect("a readable sign-in");
    assert_ne!(
        fresh.registration.client_id, credentials.registration.client_id,
        "after --forget-client, login registers a new client"
    );
    dir.run(&["servers", "remove", "p"]).await.expect_code(0);
    assert!(
        Secrets::default().load(&entry).expect("keyring").is_none(),
        "removing the server deletes its sign-in"
    );
}

/// Living with expiry, the app's way (the console and its engine in one process), against
/// fastmcp's own OAuth provider with 2 s tokens: the console refreshes each token before it
/// expires, so a task is polled across several lifetimes without one refused poll (a poll in
/// flight while fastmcp swaps tokens is sent again with the new one); after the authorization
/// server revokes the sign-in, the refresh is refused and the server is "sign-in needed": one
/// event on the server and one on the task, its health says so, polling pauses (no request
/// more) while the task keeps its state; a sign-in in another process (the CLI's
/// `servers login`) resumes it, and the task completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
async fn tokens_are_refreshed_while_a_task_runs_and_after_revocation_it_resumes_on_sign_in() {
    use countersign_core::auth::{follow_without_browser, Credentials};
    use countersign_core::console::view::ServerAddRequest;
    use countersign_core::console::{CallStep, Console, Setup, Start};
    use countersign_core::mcp::ToolCall;
    use countersign_tests::peer::FastmcpPeer;

    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_OAUTH", "1"),
        ("PEER_TOKEN_SECONDS", "2"),
        ("PEER_STEP_SECONDS", "0.5"),
        ("PEER_POLL_INTERVAL_MS", "250"),
    ])
    .await;
    let dir = DataDir::new("oauth-expiry");
    let mut setup = Setup::new(dir.path());
    setup.start = Start::Now;
    let app = Console::open(setup).await.expect("the console opens");
    let server = app
        .add_server(ServerAddRequest {
            name: "p".into(),
            url: peer.url.clone(),
            token: None,
            discover: false,
        })
        .await
        .expect("added");
    let timeout = Duration::from_secs(20);
    app.sign_in(server.id, follow_without_browser, timeout)
        .await
        .unwrap_or_else(|e| panic!("sign-in: {e}"));
    let entry = format!("oauth:{}@{}", server.id, dir.path().display());
    let stored = || {
        let blob = Secrets::default()
            .load(&entry)
            .expect("keyring")
            .expect("signed in");
        Credentials::from_keyring_blob(&blob).expect("readable")
    };
    let first_token = stored().tokens.access_token.expose().clone();
    let step = app
        .call(
            server.id,
            ToolCall::new("long_job", json!({"steps": 30}).as_object().cloned()),
        )
        .await
        .unwrap_or_else(|e| panic!("call: {e}"));
    assert!(matches!(step, CallStep::Task(_)), "{step:?}");

    // Two token lifetimes: the refreshed token keeps the polls going.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let task_id = dir
        .ledger()
        .tasks()
        .into_iter()
        .next()
        .expect("the task")
        .id;
    wait_for(
        "the polls to go through with the refreshed tokens",
        Duration::from_secs(2),
        || {
            dir.ledger()
                .tasks()
                .into_iter()
                .find(|t| t.id == task_id && t.poll_error.is_none())
        },
    )
    .await;
    let unauthorized_after = |after: i64| {
        dir.ledger()
            .events_of("poll_failed")
            .into_iter()
            .find(|e| e.id > after && e.str("code") == Some("unauthorized"))
    };
    let current = stored();
    assert_ne!(
        current.tokens.access_token.expose(),
        &first_token,
        "the token was refreshed and kept in the keyring"
    );
    let task = dir.ledger().tasks().into_iter().next().expect("the task");
    assert_eq!(task.status, "working");
    assert!(
        unauthorized_after(0).is_none(),
        "no poll is refused across refreshes (one in flight during a swap is sent again): {:?}",
        unauthorized_after(0)
    );

    // Revocation at the authorization server (the access token and its refresh token). The
    // app's refresher keeps swapping 2 s tokens, so a pair read from the keyring may be replaced
    // before the revocation lands (the new pair would then stay valid): revoke what the keyring
    // holds until what it holds is a pair already revoked and stays so.
    let base = peer.url.trim_end_matches("/mcp");
    let secret = current
        .registration
        .client_secret
        .as_ref()
        .map(|s| s.expose().clone())
        .unwrap_or_default();
    let before_revocation = dir.ledger().events().last().map_or(0, |e| e.id);
    let http = reqwest::Client::new();
    let mut revoked_tokens = std::collections::HashSet::new();
    for round in 0.. {
        let live = stored();
        let access = live.tokens.access_token.expose().clone();
        if revoked_tokens.contains(&access) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if stored().tokens.access_token.expose() == &access {
                break; // the live pair is revoked and no refresh replaced it
            }
            continue;
        }
        assert!(round < 20, "the tokens kept changing under the revocation");
        let mut tokens = vec![access.clone()];
        if let Some(refresh) = &live.tokens.refresh_token {
            tokens.push(refresh.expose().clone());
        }
        // RFC 7009: 200 also for a token that is no longer valid (one replaced meanwhile).
        for token in &tokens {
            let revoked = http
                .post(format!("{base}/revoke"))
                .form(&[
                    ("token", token.as_str()),
                    ("client_id", live.registration.client_id.as_str()),
                    ("client_secret", secret.as_str()),
                ])
                .send()
                .await
                .expect("revocation");
            assert!(revoked.status().is_success(), "{}", revoked.status());
        }
        revoked_tokens.insert(access);
    }

    let needed = wait_for(
        "the server to be marked sign-in needed after the revocation",
        Duration::from_secs(15),
        || {
            dir.ledger()
                .events_of("sign_in_needed")
                .into_iter()
                .find(|e| e.id > before_revocation && e.task.is_none())
        },
    )
    .await;
    assert_eq!(needed.server_id, Some(server.id));
    let row = dir
        .ledger()
        .tasks()
        .into_iter()
        .find(|t| t.id == task.id)
        .expect("the task");
    assert_eq!(row.status, "working", "a refused token concludes nothing");
    let view = app.server_view(server.id).await.expect("the server view");
    assert_eq!(
        view.health.state,
        countersign_core::console::view::Reachability::SignInNeeded,
        "the server view says a sign-in is needed: {:?}",
        view.health
    );
    // Paused: no request goes to the server while nobody signs in, and nothing more is written.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let engine = app.engine().expect("the app runs the engine");
    let polls_paused = engine.poll_stats().polls;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        engine.poll_stats().polls,
        polls_paused,
        "no poll is sent to a server that needs a sign-in"
    );
    let marks = dir.ledger().events_of("sign_in_needed");
    assert_eq!(
        marks.iter().filter(|e| e.task.is_none()).count(),
        1,
        "one sign_in_needed on the server, not one per poll: {marks:?}"
    );
    assert_eq!(
        marks.iter().filter(|e| e.task == Some(task.id)).count(),
        1,
        "one sign_in_needed on the task's timeline: {marks:?}"
    );
    assert!(
        secret_free(&needed.data.to_string(), &current),
        "no token in the event"
    );

    // The person signs in from the CLI, another process, while the app's engine runs: the app
    // picks the new token up from the keyring and resumes.
    let browser = dir.path().join("test-browser.sh");
    std::fs::write(
        &browser,
        "#!/bin/sh\nloc=$(curl -s -o /dev/null -w '%{redirect_url}' \"$1\") && curl -s -o /dev/null \"$loc\"\n",
    )
    .expect("write the test browser");
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&browser)
        .status()
        .expect("chmod");
    dir.run_with_env(
        &["servers", "login", "p"],
        &[("BROWSER", &browser.display().to_string())],
    )
    .await
    .expect_code(0);
    wait_for(
        "the task to complete after signing in again in another process",
        Duration::from_secs(30),
        || {
            dir.ledger()
                .tasks()
                .into_iter()
                .find(|t| t.id == task.id && t.status == "completed")
        },
    )
    .await;
    let view = app.server_view(server.id).await.expect("the server view");
    assert_ne!(
        view.health.state,
        countersign_core::console::view::Reachability::SignInNeeded
    );
    assert!(view.signed_in);
    // A process started later (an app restart) keeps the stored sign-in fresh too.
    app.close().await;
    let at_close = stored().tokens.access_token.expose().clone();
    let mut setup = Setup::new(dir.path());
    setup.start = Start::Now;
    let app = Console::open(setup).await.expect("the console opens again");
    wait_for(
        "the reopened console to refresh the stored token",
        Duration::from_secs(10),
        || (stored().tokens.access_token.expose() != &at_close).then_some(()),
    )
    .await;
    app.remove_server(server.id).await.expect("removed");
    assert!(
        Secrets::default().load(&entry).expect("keyring").is_none(),
        "removing the server deletes its sign-in"
    );
    app.close().await;
}

/// Whether `text` holds none of a sign-in's secrets.
fn secret_free(text: &str, credentials: &countersign_core::auth::Credentials) -> bool {
    let mut secrets = vec![credentials.tokens.access_token.expose().clone()];
    if let Some(refresh) = &credentials.tokens.refresh_token {
        secrets.push(refresh.expose().clone());
    }
    secrets.iter().all(|s| !text.contains(s.as_str()))
}

/// The app's own Sign out while a task runs, then its own Sign in: the refused poll makes the
/// server "sign-in needed" once (polling paused), and the sign-in in the same process resumes
/// polling. Signing out keeps the client registration, so the new sign-in is the same client to
/// the server; fastmcp keeps tasks per client, so the task resumes and completes (with a new
/// client it would be gone: `lost`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
async fn signing_out_while_a_task_runs_pauses_its_polling_and_signing_in_again_in_the_app_resumes_it(
) {
    use countersign_core::auth::follow_without_browser;
    use countersign_core::auth::Credentials;
    use countersign_core::console::view::ServerAddRequest;
    use countersign_core::console::{CallStep, Console, Setup, Start};
    use countersign_core::mcp::ToolCall;
    use countersign_tests::peer::FastmcpPeer;

    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_OAUTH", "1"),
        ("PEER_STEP_SECONDS", "0.2"),
        ("PEER_POLL_INTERVAL_MS", "200"),
    ])
    .await;
    let dir = DataDir::new("oauth-sign-out");
    let mut setup = Setup::new(dir.path());
    setup.start = Start::Now;
    let app = Console::open(setup).await.expect("the console opens");
    let server = app
        .add_server_signing_in(
            ServerAddRequest {
                name: "p".into(),
                url: peer.url.clone(),
                token: None,
                discover: true,
            },
            Default::default(),
            follow_without_browser,
            Duration::from_secs(20),
        )
        .await
        .unwrap_or_else(|e| panic!("add and sign in: {e}"));
    let step = app
        .call(
            server.id,
            ToolCall::new("long_job", json!({"steps": 40}).as_object().cloned()),
        )
        .await
        .unwrap_or_else(|e| panic!("call: {e}"));
    let CallStep::Task(task) = step else {
        panic!("a task: {step:?}")
    };
    let entry = format!("oauth:{}@{}", server.id, dir.path().display());
    let client_id = |what: &str| {
        let blob = Secrets::default()
            .load(&entry)
            .expect("keyring")
            .unwrap_or_else(|| panic!("{what}: a sign-in in the keyring"));
        countersign_core::auth::store::registration_from_keyring_blob(&blob)
            .expect("a readable registration")
            .client_id
    };
    let first_client = client_id("signed in");
    app.sign_out(server.id).await.expect("signed out");
    let kept = Secrets::default()
        .load(&entry)
        .expect("keyring")
        .expect("the registration stays after sign-out");
    assert!(
        Credentials::from_keyring_blob(&kept).is_err(),
        "sign-out leaves no token in the keyring"
    );
    wait_for(
        "sign-in needed on the task",
        Duration::from_secs(10),
        || {
            dir.ledger()
                .events_of("sign_in_needed")
                .into_iter()
                .find(|e| e.task == Some(task.id))
        },
    )
    .await;
    app.sign_in(server.id, follow_without_browser, Duration::from_secs(20))
        .await
        .unwrap_or_else(|e| panic!("sign in again: {e}"));
    assert_eq!(
        client_id("signed in again"),
        first_client,
        "signing in after signing out is the same client"
    );
    let marks = dir.ledger().events_of("sign_in_needed");
    assert_eq!(
        marks.len(),
        2,
        "once on the server, once on the task: {marks:?}"
    );
    let polled = wait_for(
        "the task to be polled again after signing in again in the app",
        Duration::from_secs(30),
        || {
            dir.ledger()
                .tasks()
                .into_iter()
                .find(|t| t.id == task.id && t.status != "working")
        },
    )
    .await;
    assert_eq!(
        polled.status, "completed",
        "the same client finds its task again and it completes: {polled:?}"
    );
    app.remove_server(server.id).await.expect("removed");
    app.close().await;
}

/// A server with a static token (no OAuth sign-in) that refuses a poll: the engine first asks
/// whether a refresh can help (it cannot: there is no sign-in to refresh), and then records that
/// very refusal as `poll_failed [unauthorized]`, so the first refusal of a streak is on the
/// timeline (not only the second); the next poll goes through and the task completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
async fn a_static_tokens_first_refused_poll_is_recorded() {
    use countersign_core::console::view::{SecretText, ServerAddRequest};
    use countersign_core::console::{CallStep, Console, Setup, Start};
    use countersign_core::mcp::ToolCall;
    use countersign_core::sensitive::Sensitive;
    use countersign_demo::{DemoConfig, DemoServer, Fault};

    let demo = DemoServer::start(
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        DemoConfig {
            time_scale: 0.01,
            poll_interval_ms: 100,
            push: false,
            ..DemoConfig::default()
        },
    )
    .await
    .expect("the demo server starts");
    let dir = DataDir::new("static-refused");
    let mut setup = Setup::new(dir.path());
    setup.start = Start::Now;
    let app = Console::open(setup).await.expect("the console opens");
    let server = app
        .add_server(ServerAddRequest {
            name: "demo".into(),
            url: demo.url(),
            token: Some(SecretText(Sensitive::new("static-token-1".into()))),
            discover: true,
        })
        .await
        .unwrap_or_else(|e| panic!("added: {e}"));
    // The task's very first poll is refused.
    demo.inject_for("tasks/get", Fault::Status(401), 1);
    let step = app
        .call(
            server.id,
            ToolCall::new(
                "bench_job",
                json!({"duration_ms": 1500}).as_object().cloned(),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("call: {e}"));
    let CallStep::Task(task) = step else {
        panic!("a task: {step:?}")
    };
    wait_for(
        "the task to complete after the refused poll",
        Duration::from_secs(20),
        || {
            dir.ledger()
                .tasks()
                .into_iter()
                .find(|t| t.id == task.id && t.status == "completed")
        },
    )
    .await;
    let refused: Vec<_> = dir
        .ledger()
        .events_of("poll_failed")
        .into_iter()
        .filter(|e| e.task == Some(task.id))
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "the one refused poll is recorded once: {refused:?}"
    );
    assert_eq!(refused[0].str("code"), Some("unauthorized"), "{refused:?}");
    assert!(
        dir.ledger().events_of("sign_in_needed").is_empty(),
        "a static token is not an OAuth sign-in: nothing asks to sign in"
    );
    assert!(
        !refused[0].data.to_string().contains("static-token-1"),
        "no token in the event"
    );
    app.remove_server(server.id).await.expect("removed");
    app.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
async fn a_stdio_servers_secret_environment_reaches_its_process_and_lives_only_in_the_keyring() {
    let dir = DataDir::new("stdio-secret");
    let secret = format!("stdio-secret-{}", std::process::id());
    let mut args = vec![
        "servers",
        "add",
        "everything",
        "--env",
        "PLAIN_SETTING=visible",
        "--env-secret",
        "COUNTERSIGN_TEST_SECRET",
        "--",
    ];
    let command = countersign_tests::everything::stdio_command();
    args.extend(command.iter().map(String::as_str));
    dir.run_with_env(&args, &[("COUNTERSIGN_TEST_SECRET", &secret)])
        .await
        .expect_code(0);

    let id = dir.ledger().server_id("everything");
    let entry = format!("env:{id}@{}", dir.path().display());
    let stored = Secrets::default()
        .load(&entry)
        .expect("the keyring answers");
    assert!(
        stored.is_some_and(|blob| blob.expose().contains(&secret)),
        "the value is in the keyring"
    );
    for file in ["ledger.sqlite3", "ledger.sqlite3-wal"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "no secret in {file}"
        );
    }
    // server-everything's get-env prints its environment: the process got both variables.
    let got = dir.run(&["call", "everything", "get-env", "{}"]).await;
    got.expect_code(0);
    assert!(
        got.stdout.contains(&secret),
        "the secret reached the process"
    );
    assert!(got.stdout.contains("visible"));
    let listed = dir.run(&["servers", "list", "--json"]).await;
    assert!(
        !listed.stdout.contains(&secret),
        "never shown: {}",
        listed.stdout
    );

    dir.run(&["servers", "remove", "everything"])
        .await
        .expect_code(0);
    assert!(
        Secrets::default()
            .load(&entry)
            .expect("the keyring answers")
            .is_none(),
        "removed with its server"
    );
}

/// `agents import --apply`: a bearer token a host's file gave its server goes to the keyring as
/// that server's token (discovery carried it), and to no ledger file and no output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
async fn agents_import_keeps_a_files_bearer_token_in_the_keyring_only() {
    const SECRET: &str = "tok-imported-secret";
    let seen: Seen = Default::default();
    let upstream = server(Some(SECRET), seen.clone()).await;
    let dir = DataDir::new("keyring-import");
    let file = dir.path().join(".mcp.json");
    std::fs::write(
        &file,
        format!(
            "{{\n  \"mcpServers\": {{\n    \"imp\": {{\n      \"type\": \"http\",\n      \"url\": \"{}\",\n      \"headers\": {{ \"Authorization\": \"Bearer {SECRET}\" }}\n    }}\n  }}\n}}\n",
            upstream.url()
        ),
    )
    .expect("write");
    let path = file.display().to_string();
    let preview = dir.run(&["agents", "import", &path]).await;
    preview.expect_code(0);
    let applied = dir
        .run(&["--json", "agents", "import", &path, "--apply"])
        .await;
    applied.expect_code(0);
    assert_eq!(
        applied.json()["items"][0]["action"],
        "registered",
        "{applied}"
    );
    for out in [
        &preview.stdout,
        &preview.stderr,
        &applied.stdout,
        &applied.stderr,
    ] {
        assert!(
            !out.contains(SECRET),
            "the file's token is never printed: {out}"
        );
    }
    assert!(
        seen.lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|(m, auth)| m == "server/discover"
                && auth.as_deref() == Some(&format!("Bearer {SECRET}"))),
        "discovery carried the file's token"
    );
    let id = dir.ledger().server_id("imp");
    let entry = format!("{id}@{}", dir.path().display());
    assert_eq!(
        Secrets::default()
            .load(&entry)
            .expect("the keyring answers")
            .map(|t| t.expose().clone())
            .as_deref(),
        Some(SECRET),
        "the token is the server's, in the keyring"
    );
    for name in ["ledger.sqlite3", "ledger.sqlite3-wal"] {
        let bytes = std::fs::read(dir.path().join(name)).unwrap_or_default();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "no token in {name}"
        );
    }
    dir.run(&["agents", "import", &path, "--undo"])
        .await
        .expect_code(0);
    dir.run(&["servers", "remove", "imp"]).await.expect_code(0);
    assert!(
        Secrets::default().load(&entry).expect("keyring").is_none(),
        "the test leaves no keyring entry"
    );
}
