//! Signing in to an OAuth-protected MCP server with tasks that is not ours: the fastmcp peer
//! behind fastmcp's own `InMemoryOAuthProvider` (authorization server on the same origin, dynamic
//! registration, an authorize endpoint that approves at once, token, refresh, revocation).
//!
//! The "browser" is `auth::follow_without_browser`: it GETs the authorization URL without
//! following redirects and delivers the `Location` to our loopback listener, as a person's
//! browser would after approving. Everything else is the code the app and the CLI run.

use std::time::{Duration, Instant};

use countersign_core::auth::{
    follow_without_browser, with_refresh, with_sign_in, Authorizer, ClientConfig, Credentials,
    RegistrationKind, SessionError,
};
use countersign_core::mcp::{CallOutcome, Client, Endpoint, TaskState, ToolCall};
use countersign_tests::peer::FastmcpPeer;
use serde_json::json;

/// Refresh when the token has less than this left (the peer's tokens live 2 s).
const MARGIN: Duration = Duration::from_millis(1_000);
const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(20);

async fn protected_peer() -> FastmcpPeer {
    FastmcpPeer::start_with_env(&[
        ("PEER_OAUTH", "1"),
        ("PEER_TOKEN_SECONDS", "2"),
        ("PEER_STEP_SECONDS", "0.5"),
        ("PEER_POLL_INTERVAL_MS", "100"),
    ])
    .await
}

/// Revokes the access token (and, at fastmcp, its refresh token with it) at the peer's
/// RFC 7009 endpoint, authenticating as the registered client.
async fn revoke(peer: &FastmcpPeer, credentials: &Credentials) {
    let base = peer.url.trim_end_matches("/mcp");
    let registration = &credentials.registration;
    let secret = registration
        .client_secret
        .as_ref()
        .map(|s| s.expose().clone())
        .unwrap_or_default();
    let response = reqwest::Client::new()
        .post(format!("{base}/revoke"))
        .form(&[
            ("token", credentials.tokens.access_token.expose().as_str()),
            ("client_id", registration.client_id.as_str()),
            ("client_secret", secret.as_str()),
        ])
        .send()
        .await
        .expect("revocation request");
    assert!(
        response.status().is_success(),
        "revocation refused: HTTP {}",
        response.status()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signs_in_polls_a_task_across_refreshes_and_resumes_after_revocation_and_sign_in() {
    let peer = protected_peer().await;
    let client = Client::new(Endpoint::new(&peer.url)).expect("client");
    let authorizer = Authorizer::new(&peer.url, ClientConfig::default()).expect("authorizer");

    // Without a token the peer answers 401; discovery, dynamic registration, the browser step
    // and the token request happen inside, then the call is retried with the token.
    let mut signed_in = None;
    let tools = with_sign_in(
        &client,
        &authorizer,
        &mut signed_in,
        || client.list_tools(),
        follow_without_browser,
        SIGN_IN_TIMEOUT,
    )
    .await
    .unwrap_or_else(|e| panic!("sign-in failed: {e}\n{}", peer.stderr_log()));
    assert!(tools.tools.iter().any(|t| t.name == "long_job"));
    let mut credentials = signed_in.expect("signed in");
    assert_eq!(credentials.registration.kind, RegistrationKind::Dynamic);
    assert!(
        credentials.tokens.refresh_token.is_some(),
        "fastmcp issues refresh tokens"
    );
    assert!(credentials.tokens.expires_at.is_some());
    assert_eq!(
        credentials.resource, peer.url,
        "the RFC 8707 resource is the PRM's"
    );

    let call = ToolCall::new("long_job", json!({"steps": 16}).as_object().cloned());
    let mut slot = Some(credentials.clone());
    let outcome = with_sign_in(
        &client,
        &authorizer,
        &mut slot,
        || client.call_tool(&call),
        follow_without_browser,
        SIGN_IN_TIMEOUT,
    )
    .await
    .expect("long_job");
    credentials = slot.expect("still signed in");
    let CallOutcome::Task(task) = outcome else {
        panic!("long_job must create a task, got {outcome:?}");
    };

    // Poll for 3.5 s across at least one expiry of the 2 s tokens: each poll refreshes first
    // when the token is about to expire, and no poll fails or sees another task.
    let mut tokens_seen = vec![credentials.tokens.access_token.expose().clone()];
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(3_500) {
        let polled = with_refresh(&client, &authorizer, &mut credentials, MARGIN, || {
            client.get_task(&task.task_id)
        })
        .await
        .unwrap_or_else(|e| panic!("poll across refresh failed: {e}"));
        assert_eq!(polled.task_id, task.task_id);
        assert!(
            matches!(polled.state, TaskState::Working),
            "long_job is still running: {:?}",
            polled.state
        );
        let token = credentials.tokens.access_token.expose().clone();
        if tokens_seen.last() != Some(&token) {
            tokens_seen.push(token);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        tokens_seen.len() >= 2,
        "the 2 s token must have been refreshed while polling ({} token(s) used)",
        tokens_seen.len()
    );

    // Revocation: the token and its refresh token are dead, so a background poll cannot
    // recover by itself and says a person must sign in, without any secret in the message.
    revoke(&peer, &credentials).await;
    let refused = with_refresh(&client, &authorizer, &mut credentials, MARGIN, || {
        client.get_task(&task.task_id)
    })
    .await
    .expect_err("a revoked token cannot poll");
    let SessionError::SignInNeeded { .. } = &refused else {
        panic!("expected sign-in needed, got {refused}");
    };
    let message = refused.to_string();
    for token in &tokens_seen {
        assert!(
            !message.contains(token.as_str()),
            "a token leaked: {message}"
        );
    }

    // Sign in again (same registration), and the task resumes where it is, to its end.
    let mut slot = Some(credentials.clone());
    let resumed = with_sign_in(
        &client,
        &authorizer,
        &mut slot,
        || client.get_task(&task.task_id),
        follow_without_browser,
        SIGN_IN_TIMEOUT,
    )
    .await
    .unwrap_or_else(|e| panic!("sign-in after revocation failed: {e}"));
    assert_eq!(resumed.task_id, task.task_id);
    let again = slot.expect("signed in again");
    assert_eq!(
        again.registration.client_id, credentials.registration.client_id,
        "signing in again reuses the registration"
    );
    credentials = again;
    let deadline = Instant::now() + Duration::from_secs(30);
    let finished = loop {
        let polled = with_refresh(&client, &authorizer, &mut credentials, MARGIN, || {
            client.get_task(&task.task_id)
        })
        .await
        .unwrap_or_else(|e| panic!("poll after sign-in failed: {e}"));
        if !matches!(polled.state, TaskState::Working) {
            break polled;
        }
        assert!(Instant::now() < deadline, "long_job never finished");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let TaskState::Completed { result } = &finished.state else {
        panic!("long_job must complete, got {:?}", finished.state);
    };
    assert!(!result.is_error(), "long_job completes without error");
}

/// A pre-registered client (the person registered Countersign with the authorization server
/// themselves: an id, a secret, one exact redirect URI, port included, as fastmcp and many real
/// servers require): the sign-in listens on that fixed port, sends that redirect URI, registers
/// nothing, authenticates with the secret, and a task runs to its end with the token. A sign-in
/// on any other port is refused by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_registered_client_signs_in_on_its_fixed_redirect_port_and_runs_a_task() {
    use countersign_core::auth::PreRegistered;
    use countersign_core::sensitive::Sensitive;

    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        probe.local_addr().expect("its address").port()
    };
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let client_json = json!({
        "client_id": "countersign-by-hand",
        "client_secret": "by-hand-secret",
        "redirect_uri": redirect_uri,
    })
    .to_string();
    let peer = FastmcpPeer::start_with_env(&[
        ("PEER_OAUTH", "1"),
        ("PEER_OAUTH_CLIENT", &client_json),
        ("PEER_STEP_SECONDS", "0.05"),
        ("PEER_POLL_INTERVAL_MS", "100"),
    ])
    .await;
    let pre_registered = |redirect_port| ClientConfig {
        pre_registered: Some(PreRegistered {
            issuer: None,
            client_id: "countersign-by-hand".into(),
            client_secret: Some(Sensitive::new("by-hand-secret".into())),
        }),
        redirect_port,
        ..ClientConfig::default()
    };

    // Any free port (the default): the server refuses the redirect URI, nothing is signed in.
    let client = Client::new(Endpoint::new(&peer.url)).expect("client");
    let authorizer = Authorizer::new(&peer.url, pre_registered(None)).expect("authorizer");
    let mut refused = None;
    let outcome = with_sign_in(
        &client,
        &authorizer,
        &mut refused,
        || client.list_tools(),
        follow_without_browser,
        Duration::from_secs(5),
    )
    .await;
    assert!(
        outcome.is_err() && refused.is_none(),
        "a random loopback port is not the registered redirect URI"
    );

    // The fixed port: signed in as the pre-registered client.
    let client = Client::new(Endpoint::new(&peer.url)).expect("client");
    let authorizer = Authorizer::new(&peer.url, pre_registered(Some(port))).expect("authorizer");
    let mut signed_in = None;
    let call = ToolCall::new("long_job", json!({"steps": 3}).as_object().cloned());
    let outcome = with_sign_in(
        &client,
        &authorizer,
        &mut signed_in,
        || client.call_tool(&call),
        follow_without_browser,
        SIGN_IN_TIMEOUT,
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "sign-in as the pre-registered client: {e}\n{}",
            peer.stderr_log()
        )
    });
    let credentials = signed_in.expect("signed in");
    assert_eq!(
        credentials.registration.kind,
        RegistrationKind::PreRegistered
    );
    assert_eq!(credentials.registration.client_id, "countersign-by-hand");
    assert_eq!(
        credentials.registration.redirect_uri.as_deref(),
        Some(redirect_uri.as_str()),
        "the fixed redirect URI is kept with the client, for signing in again"
    );
    let CallOutcome::Task(task) = outcome else {
        panic!("long_job must create a task, got {outcome:?}");
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let finished = loop {
        let polled = client
            .get_task(&task.task_id)
            .await
            .unwrap_or_else(|e| panic!("poll with the pre-registered client's token: {e}"));
        if !matches!(polled.state, TaskState::Working) {
            break polled;
        }
        assert!(Instant::now() < deadline, "long_job never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        matches!(finished.state, TaskState::Completed { .. }),
        "{:?}",
        finished.state
    );
}
