//! The engine's way to the OAuth sign-ins in the OS keyring ([`engine::SignIns`]): refresh a
//! token a server refused, and read a server's token again after a sign-in in another process.
//!
//! Refreshes are single-flight per server ([`Flights`]): the console's refresher (before
//! expiry) and the engine (on a `401`) share one lock, and each reads the sign-in from the
//! keyring under it, so a refresh token rotated by one is never spent again by the other (the
//! second would be refused and wrongly end the sign-in).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use crate::auth::{self, Authorizer, ClientConfig, Credentials};
use crate::engine::{self, Reauth};
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
        // A static token the server refuses: a person replaces it; no sign-in to renew.
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

/// [`engine::SignIns`] over the OS keyring.
pub(crate) struct KeyringSignIns {
    pub(crate) tokens: Tokens,
    pub(crate) flights: Flights,
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

    fn reload(&self, server_id: i64) -> BoxFuture<'static, ()> {
        let tokens = self.tokens.clone();
        Box::pin(async move { tokens.reload(server_id).await })
    }
}
