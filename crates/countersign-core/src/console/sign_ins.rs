//! The engine's way to the OAuth sign-ins in the OS keyring ([`engine::SignIns`]): refresh a
//! token a server refused, and read a server's token again after a sign-in in another process.
//!
//! Refreshes are single-flight per server ([`Flights`]): the console's refresher (before
//! expiry) and the engine (on a `401`) share one lock, and each reads the sign-in from the
//! keyring under it, so a refresh token rotated by one is never spent again by the other (the
//! second would be refused and wrongly end the sign-in).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::auth::{self, Authorizer, ClientConfig, Credentials};
use crate::engine::{self, LinkReloader, Reauth};
use crate::secrets::Tokens;
use crate::sensitive::Sensitive;

/// One lock per server around refreshing its token.
#[derive(Clone, Default)]
pub(crate) struct Flights(Arc<Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>>);

impl Flights {
    fn of(&self, server: i64) -> Arc<tokio::sync::Mutex<()>> {
        match self.0.lock() {
            Ok(mut map) => map.entry(server).or_default().clone(),
            // A panic while inserting into the map: refresh without the lock rather than never.
            Err(_) => Arc::default(),
        }
    }
}

/// What a refresh of server `id`'s token gave, with the sign-in kept in the keyring when new.
pub(crate) struct Refreshed {
    pub(crate) reauth: Reauth,
    /// The sign-in now in the keyring, when there is one.
    pub(crate) credentials: Option<Credentials>,
}

/// Refreshes server `id`'s token unless it was replaced since `refused` was sent: under the
/// server's flight lock, from the sign-in in the keyring. The refreshed sign-in goes to the
/// keyring (and the token cache) before this returns.
pub(crate) async fn refresh(
    tokens: &Tokens,
    flights: &Flights,
    id: i64,
    url: &str,
    refused: Option<&Sensitive<String>>,
) -> Refreshed {
    let flight = flights.of(id);
    let _one_at_a_time = flight.lock().await;
    let credentials = match tokens.load_credentials(id).await {
        Ok(Some(credentials)) => credentials,
        // A static token the server refuses: a person replaces it; there is no sign-in to renew.
        Ok(None) if tokens.get(id).is_some() => {
            return Refreshed {
                reauth: Reauth::NotSignedIn,
                credentials: None,
            }
        }
        // Never signed in, or signed out.
        Ok(None) => {
            return Refreshed {
                reauth: Reauth::SignInNeeded(
                    "the server asks for a sign-in and none is kept for it".into(),
                ),
                credentials: None,
            }
        }
        Err(e) => {
            return Refreshed {
                reauth: Reauth::Later(format!("the sign-in cannot be read: {e}")),
                credentials: None,
            }
        }
    };
    if Some(&credentials.tokens.access_token) != refused {
        // Refreshed (or signed in again) since the refused request went out: use that token.
        return Refreshed {
            reauth: Reauth::Token(credentials.tokens.access_token.clone()),
            credentials: Some(credentials),
        };
    }
    let authorizer = match Authorizer::new(url, ClientConfig::default()) {
        Ok(authorizer) => authorizer,
        Err(e) => {
            return Refreshed {
                reauth: Reauth::SignInNeeded(e.to_string()),
                credentials: Some(credentials),
            }
        }
    };
    match authorizer.refresh(&credentials).await {
        Ok(fresh) => {
            if let Err(e) = tokens.store_credentials(id, &fresh).await {
                // The new token still serves this process; the next start signs in again.
                tracing::warn!("a refreshed token could not be kept: {e}");
            }
            Refreshed {
                reauth: Reauth::Token(fresh.tokens.access_token.clone()),
                credentials: Some(fresh),
            }
        }
        // The authorization server is unreachable: not the person's problem yet.
        Err(e @ auth::Error::TokenRequest { .. }) => Refreshed {
            reauth: Reauth::Later(e.to_string()),
            credentials: Some(credentials),
        },
        Err(e) => Refreshed {
            reauth: Reauth::SignInNeeded(e.to_string()),
            credentials: Some(credentials),
        },
    }
}

/// How long to wait before refreshing a token that expires at `expires_at` (Unix seconds): half
/// the time left, but no later than a minute before it expires.
pub(crate) fn refresh_delay(expires_at: u64, now: std::time::SystemTime) -> Duration {
    let now = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let left = (expires_at as f64 - now).max(0.0);
    Duration::from_secs_f64((left - 60.0).max(left / 2.0))
}

/// One refresher per signed-in server, for as long as this process runs an engine: each token is
/// refreshed before it expires (some authorization servers end the whole sign-in when an expired
/// token is presented, so waiting for a `401` is not enough). Started at sign-in, at engine
/// start for the sign-ins in the keyring, and when a sign-in in another process is seen.
#[derive(Clone)]
pub(crate) struct Refreshers {
    tasks: Arc<Mutex<HashMap<i64, tokio::task::JoinHandle<()>>>>,
    /// This process's engine, once it runs (no engine: nothing polls, nothing to keep fresh).
    reloader: Arc<OnceLock<LinkReloader>>,
    warn: Option<super::Warn>,
}

impl Refreshers {
    pub(crate) fn new(warn: Option<super::Warn>) -> Self {
        Self {
            tasks: Arc::default(),
            reloader: Arc::default(),
            warn,
        }
    }

    pub(crate) fn set_reloader(&self, reloader: LinkReloader) {
        let _ = self.reloader.set(reloader);
    }

    /// Refreshes server `id`'s token before it expires; when a refresh is refused, warns that a
    /// person must sign in again (the engine records it on its next refused poll) and stops. A
    /// refresher already running for the server is replaced.
    pub(crate) fn keep_fresh(
        &self,
        id: i64,
        url: String,
        mut credentials: Credentials,
        tokens: Tokens,
        flights: Flights,
    ) {
        let Some(reloader) = self.reloader.get().cloned() else {
            return;
        };
        let warn = self.warn.clone();
        let task = tokio::spawn(async move {
            loop {
                let (Some(expires_at), Some(_)) = (
                    credentials.tokens.expires_at,
                    &credentials.tokens.refresh_token,
                ) else {
                    return;
                };
                tokio::time::sleep(refresh_delay(expires_at, std::time::SystemTime::now())).await;
                // Through the server's flight: the engine may be refreshing after a 401.
                let refreshed = refresh(
                    &tokens,
                    &flights,
                    id,
                    &url,
                    Some(&credentials.tokens.access_token),
                )
                .await;
                match refreshed.reauth {
                    Reauth::Token(token) => {
                        reloader.set_token(id, token);
                        // Clients built later take the token from the cache, which storing
                        // updated.
                        reloader.reload();
                        if let Some(fresh) = refreshed.credentials {
                            credentials = fresh;
                        }
                    }
                    // The authorization server is unreachable: try again shortly.
                    Reauth::Later(_) => tokio::time::sleep(Duration::from_secs(30)).await,
                    Reauth::SignInNeeded(why) => {
                        let message = format!("{url} needs you to sign in again ({why})");
                        tracing::warn!("{message}");
                        if let Some(warn) = &warn {
                            warn(&message);
                        }
                        return;
                    }
                    Reauth::NotSignedIn => return,
                }
            }
        });
        if let Ok(mut tasks) = self.tasks.lock() {
            if let Some(old) = tasks.insert(id, task) {
                old.abort();
            }
        }
    }

    pub(crate) fn stop(&self, id: i64) {
        if let Some(old) = self.tasks.lock().ok().and_then(|mut t| t.remove(&id)) {
            old.abort();
        }
    }

    pub(crate) fn stop_all(&self) {
        if let Ok(mut tasks) = self.tasks.lock() {
            for (_, task) in tasks.drain() {
                task.abort();
            }
        }
    }
}

/// [`engine::SignIns`] over the OS keyring.
pub(crate) struct KeyringSignIns {
    pub(crate) tokens: Tokens,
    pub(crate) flights: Flights,
    pub(crate) refreshers: Refreshers,
}

impl engine::SignIns for KeyringSignIns {
    fn refresh(
        &self,
        server_id: i64,
        url: String,
        refused: Option<Sensitive<String>>,
    ) -> BoxFuture<'static, Reauth> {
        let (tokens, flights) = (self.tokens.clone(), self.flights.clone());
        Box::pin(async move {
            refresh(&tokens, &flights, server_id, &url, refused.as_ref())
                .await
                .reauth
        })
    }

    fn reload(&self, server_id: i64, url: String) -> BoxFuture<'static, ()> {
        let (tokens, flights, refreshers) = (
            self.tokens.clone(),
            self.flights.clone(),
            self.refreshers.clone(),
        );
        Box::pin(async move {
            tokens.reload(server_id).await;
            // Signed in elsewhere: this process's engine polls with the token, so this process
            // keeps it fresh; signed out: nothing to keep.
            match tokens.load_credentials(server_id).await {
                Ok(Some(credentials)) => {
                    refreshers.keep_fresh(server_id, url, credentials, tokens.clone(), flights)
                }
                Ok(None) => refreshers.stop(server_id),
                Err(e) => tracing::warn!(server_id, "a sign-in cannot be read: {e}"),
            }
        })
    }
}
