//! Bearer tokens: stored, read and deleted only through the OS keyring ([`Secrets`]), and held
//! in memory as [`Sensitive`] for the engine's [`TokenProvider`].
//!
//! The engine builds a server's client synchronously on its own loop, so it must not wait on a
//! D-Bus round trip there: tokens are read from the keyring once at launch (and whenever the user
//! sets one) into this cache, off the async threads. Keyring entries are named
//! `<server row>@<data dir>`, so two ledgers on one machine never share a token.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use countersign_core::engine::TokenProvider;
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::secret::Sensitive;
use countersign_core::secrets::{self, Secrets};

/// The token cache in front of the keyring.
#[derive(Clone)]
pub struct Tokens {
    secrets: Secrets,
    scope: String,
    cache: Arc<RwLock<HashMap<i64, Sensitive<String>>>>,
}

impl Tokens {
    /// Tokens of the ledger in `data_dir`, under the keyring service of `secrets`.
    pub fn new(secrets: Secrets, data_dir: &Path) -> Self {
        Self {
            secrets,
            scope: data_dir.display().to_string(),
            cache: Arc::default(),
        }
    }

    /// The keyring entry's user name for a server (the service is [`Secrets::service`]).
    pub fn entry_name(&self, server: i64) -> String {
        format!("{server}@{}", self.scope)
    }

    /// The keyring service.
    pub fn service(&self) -> &str {
        self.secrets.service()
    }

    /// Reads the tokens of these servers from the keyring into the cache; returns the failures.
    pub async fn load(&self, servers: Vec<i64>) -> Vec<(i64, secrets::Error)> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut failed = Vec::new();
            for id in servers {
                match me.secrets.load(&me.entry_name(id)) {
                    Ok(Some(token)) => me.put(id, Some(token)),
                    Ok(None) => {}
                    Err(e) => failed.push((id, e)),
                }
            }
            failed
        })
        .await
        .unwrap_or_default()
    }

    /// Stores (or replaces) a server's token in the keyring, then in the cache.
    pub async fn store(&self, server: i64, token: Sensitive<String>) -> Result<(), secrets::Error> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            me.secrets.store(&me.entry_name(server), &token)?;
            me.put(server, Some(token));
            Ok(())
        })
        .await
        .unwrap_or_else(|_| {
            Err(secrets::Error::NoKeyring {
                detail: "the keyring task panicked".into(),
            })
        })
    }

    /// Deletes a server's token from the keyring (fine if there was none) and from the cache.
    pub async fn delete(&self, server: i64) -> Result<(), secrets::Error> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            me.secrets.delete(&me.entry_name(server))?;
            me.put(server, None);
            Ok(())
        })
        .await
        .unwrap_or_else(|_| {
            Err(secrets::Error::NoKeyring {
                detail: "the keyring task panicked".into(),
            })
        })
    }

    fn put(&self, server: i64, token: Option<Sensitive<String>>) {
        if let Ok(mut cache) = self.cache.write() {
            match token {
                Some(t) => cache.insert(server, t),
                None => cache.remove(&server),
            };
        }
    }

    /// The cached token of a server.
    pub fn get(&self, server: i64) -> Option<Sensitive<String>> {
        self.cache.read().ok()?.get(&server).cloned()
    }

    /// What the engine asks for a server's token: the cache, never the keyring.
    pub fn provider(&self) -> TokenProvider {
        let me = self.clone();
        Arc::new(move |server: &ServerRecord| {
            if server.has_token {
                me.get(server.id)
            } else {
                None
            }
        })
    }
}
