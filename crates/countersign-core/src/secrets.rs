//! Bearer tokens in the OS keyring: the Secret Service on Linux (gnome-keyring, KWallet),
//! Keychain on macOS, Credential Manager on Windows, through the `keyring` crate (4.x, `v1` API).
//!
//! One entry per server for its static token, and one for its OAuth sign-in (tokens, expiry,
//! client registration as one JSON blob): service = [`Secrets::service`], user = the server id. Tokens live only
//! there (never in the ledger, logs or IPC) and leave this module wrapped in [`Sensitive`].
//!
//! Every call blocks on the platform store (a D-Bus round trip on Linux): from async code, call
//! it inside `tokio::task::spawn_blocking`. The platform store is chosen once per process, on
//! first use.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use serde::Serialize;

use crate::auth::{Credentials, Registration};
use crate::engine::TokenProvider;
use crate::ledger::servers::ServerRecord;
use crate::sensitive::Sensitive;

/// A server's current OAuth sign-in, as a window shows it: who (where the server says) and when
/// the access token expires. Read from the keyring blob's non-secret parts; no token.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SignInInfo {
    /// Who is signed in, where the authorization server said (its OpenID `id_token`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub account: Option<String>,
    /// When the access token expires (Unix ms), if the server said.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub expires_at_ms: Option<i64>,
    /// Whether it renews by itself before then (a refresh token is held).
    pub renews: bool,
}

/// The keyring service name the app uses (its bundle identifier).
pub const DEFAULT_SERVICE: &str = "dev.countersign.app";

/// Why a keyring operation failed. No variant carries token bytes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No credential store could be opened on this machine (e.g. no Secret Service on the bus).
    #[error("no OS keyring is available: {detail}")]
    NoKeyring {
        /// The platform's explanation.
        detail: String,
    },
    /// The store exists but refused access (locked, or the user denied the prompt).
    #[error("the OS keyring refused access: {detail}")]
    Locked {
        /// The platform's explanation.
        detail: String,
    },
    /// The server id cannot name a keyring entry (empty, or too long for the platform).
    #[error("server id {server_id:?} cannot be used as a keyring entry: {reason}")]
    InvalidServerId {
        /// The offending id.
        server_id: String,
        /// Why the platform refused it.
        reason: String,
    },
    /// An empty token was given; store nothing rather than an unusable credential.
    #[error("refusing to store an empty token for server {server_id}")]
    EmptyToken {
        /// The server.
        server_id: String,
    },
    /// What is stored for this server is not a UTF-8 token (written by something else).
    #[error("the keyring entry for server {server_id} does not hold a text token")]
    NotAToken {
        /// The server.
        server_id: String,
    },
    /// Several entries match this server (written by something else with our attributes).
    #[error("{count} keyring entries match server {server_id}")]
    Ambiguous {
        /// The server.
        server_id: String,
        /// How many matched.
        count: usize,
    },
    /// Any other failure of the platform store.
    #[error("OS keyring failure for server {server_id}: {detail}")]
    Platform {
        /// The server.
        server_id: String,
        /// The platform's explanation.
        detail: String,
    },
}

/// Result of a keyring operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Bearer tokens of MCP servers, one keyring entry each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secrets {
    service: String,
}

impl Default for Secrets {
    fn default() -> Self {
        Self::new(DEFAULT_SERVICE)
    }
}

impl Secrets {
    /// Tokens under `service` (tests use their own, so they never touch the app's entries).
    pub fn new(service: impl Into<String>) -> Self {
        Self {
            service: service.into(),
        }
    }

    /// The keyring service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// Stores (or replaces) the token of `server_id`.
    pub fn store(&self, server_id: &str, token: &Sensitive<String>) -> Result<()> {
        if token.expose().is_empty() {
            return Err(Error::EmptyToken {
                server_id: server_id.to_owned(),
            });
        }
        self.entry(server_id)?
            .set_password(token.expose())
            .map_err(|e| classify(server_id, e))
    }

    /// The token of `server_id`, or `None` if none is stored.
    pub fn load(&self, server_id: &str) -> Result<Option<Sensitive<String>>> {
        match self.entry(server_id)?.get_password() {
            Ok(token) => Ok(Some(Sensitive::new(token))),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(classify(server_id, e)),
        }
    }

    /// Forgets the token of `server_id`; succeeds if there was none.
    pub fn delete(&self, server_id: &str) -> Result<()> {
        match self.entry(server_id)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(classify(server_id, e)),
        }
    }

    fn entry(&self, server_id: &str) -> Result<keyring::Entry> {
        if server_id.is_empty() {
            return Err(Error::InvalidServerId {
                server_id: String::new(),
                reason: "empty".into(),
            });
        }
        keyring::Entry::new(&self.service, server_id).map_err(|e| match e {
            keyring::Error::NoDefaultStore => Error::NoKeyring {
                detail: store_failure(),
            },
            e => classify(server_id, e),
        })
    }
}

/// Why the platform store could not be initialised (it is set up once, on first use).
fn store_failure() -> String {
    match keyring::Entry::store_status() {
        Err(e) => e.to_string(),
        Ok(()) => "no default credential store".into(),
    }
}

fn panicked() -> Error {
    Error::NoKeyring {
        detail: "the keyring task panicked".into(),
    }
}

/// Maps a keyring error to ours, dropping any payload that could hold secret bytes.
fn classify(server_id: &str, e: keyring::Error) -> Error {
    let server_id = server_id.to_owned();
    match e {
        keyring::Error::NoStorageAccess(p) => Error::Locked {
            detail: p.to_string(),
        },
        keyring::Error::NoDefaultStore => Error::NoKeyring {
            detail: store_failure(),
        },
        keyring::Error::BadEncoding(_) | keyring::Error::BadDataFormat(..) => {
            Error::NotAToken { server_id }
        }
        keyring::Error::TooLong(attr, limit) => Error::InvalidServerId {
            server_id,
            reason: format!("{attr} is longer than {limit}"),
        },
        keyring::Error::Invalid(attr, reason) => Error::InvalidServerId {
            server_id,
            reason: format!("{attr}: {reason}"),
        },
        keyring::Error::Ambiguous(entries) => Error::Ambiguous {
            server_id,
            count: entries.len(),
        },
        keyring::Error::PlatformFailure(p) => Error::Platform {
            server_id,
            detail: p.to_string(),
        },
        other => Error::Platform {
            server_id,
            detail: other.to_string(),
        },
    }
}

/// The tokens of one ledger's servers: stored, read and deleted only through the OS keyring
/// ([`Secrets`]), and held in memory as [`Sensitive`] for the engine's
/// [`TokenProvider`](crate::engine::TokenProvider). Every face (the app, the CLI, the tests)
/// uses this one type, so a server's token is found under the same keyring entry whoever stored
/// it, and goes to that server only.
///
/// The engine builds a server's client synchronously on its own loop, so it must not wait on a
/// D-Bus round trip there: tokens are read from the keyring once at start (and whenever one is
/// set) into this cache, off the async threads. Keyring entries are named
/// `<server row>@<data dir>`, so two ledgers on one machine never share a token.
#[derive(Clone)]
pub struct Tokens {
    secrets: Secrets,
    scope: String,
    cache: Arc<RwLock<HashMap<i64, Sensitive<String>>>>,
    /// The non-secret parts of each server's OAuth sign-in (who, expiry), kept next to the
    /// access token whenever it is read or stored, so a window can show them without a keyring
    /// round trip per listing.
    infos: Arc<RwLock<HashMap<i64, SignInInfo>>>,
}

/// What a window may know of a sign-in: who and until when, nothing secret.
fn info_of(credentials: &Credentials) -> SignInInfo {
    SignInInfo {
        account: credentials.tokens.account.clone(),
        expires_at_ms: credentials
            .tokens
            .expires_at
            .and_then(|at| i64::try_from(at).ok())
            .and_then(|at| at.checked_mul(1000)),
        renews: credentials.tokens.refresh_token.is_some(),
    }
}

impl Tokens {
    /// Tokens of the ledger in `data_dir`, under the keyring service of `secrets`.
    pub fn new(secrets: Secrets, data_dir: &Path) -> Self {
        Self {
            secrets,
            scope: data_dir.display().to_string(),
            cache: Arc::default(),
            infos: Arc::default(),
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

    /// The keyring entry's user name for a server's OAuth sign-in (tokens, refresh token,
    /// expiry, client registration: one JSON blob, [`Credentials::to_keyring_blob`]).
    pub fn sign_in_entry_name(&self, server: i64) -> String {
        format!("oauth:{server}@{}", self.scope)
    }

    /// Stores (or replaces) a server's OAuth sign-in in the keyring.
    pub async fn store_credentials(&self, server: i64, credentials: &Credentials) -> Result<()> {
        let me = self.clone();
        let blob = credentials.to_keyring_blob();
        let access = credentials.tokens.access_token.clone();
        let info = info_of(credentials);
        tokio::task::spawn_blocking(move || {
            me.secrets.store(&me.sign_in_entry_name(server), &blob)?;
            // The engine's provider reads the cache: the access token is this server's token.
            me.put(server, Some(access));
            me.note(server, Some(info));
            Ok(())
        })
        .await
        .unwrap_or_else(|_| Err(panicked()))
    }

    /// A server's OAuth sign-in, or `None` if it has none (an unreadable one, written by another
    /// version, also reads as none: the person signs in again).
    pub async fn load_credentials(&self, server: i64) -> Result<Option<Credentials>> {
        let me = self.clone();
        let blob =
            tokio::task::spawn_blocking(move || me.secrets.load(&me.sign_in_entry_name(server)))
                .await
                .unwrap_or_else(|_| Err(panicked()))?;
        Ok(blob.and_then(|b| Credentials::from_keyring_blob(&b).ok()))
    }

    /// Forgets a server's OAuth sign-in and its client registration (removing the server, or
    /// "forget this client"); succeeds if there was none.
    pub async fn delete_credentials(&self, server: i64) -> Result<()> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            me.secrets.delete(&me.sign_in_entry_name(server))?;
            me.put(server, None);
            me.note(server, None);
            Ok(())
        })
        .await
        .unwrap_or_else(|_| Err(panicked()))
    }

    /// Signs a server out: its tokens leave the keyring and the cache, its client registration
    /// stays (see [`crate::auth::SignedOut`]), so the next sign-in is the same client. Succeeds
    /// if there was no sign-in; an unreadable one is deleted whole.
    pub async fn delete_tokens(&self, server: i64) -> Result<()> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let entry = me.sign_in_entry_name(server);
            if let Some(blob) = me.secrets.load(&entry)? {
                match Credentials::from_keyring_blob(&blob) {
                    Ok(credentials) => me
                        .secrets
                        .store(&entry, &credentials.signed_out().to_keyring_blob())?,
                    // Already signed out: the registration stays as it is.
                    Err(_) if crate::auth::store::registration_from_keyring_blob(&blob).is_ok() => {
                    }
                    Err(_) => me.secrets.delete(&entry)?,
                }
            }
            me.put(server, None);
            me.note(server, None);
            Ok(())
        })
        .await
        .unwrap_or_else(|_| Err(panicked()))
    }

    /// The client registration a server's sign-in uses or, signed out, kept; `None` if there
    /// is none (or it is unreadable: the next sign-in registers anew).
    pub async fn load_registration(&self, server: i64) -> Result<Option<Registration>> {
        let me = self.clone();
        let blob =
            tokio::task::spawn_blocking(move || me.secrets.load(&me.sign_in_entry_name(server)))
                .await
                .unwrap_or_else(|_| Err(panicked()))?;
        Ok(blob.and_then(|b| crate::auth::store::registration_from_keyring_blob(&b).ok()))
    }

    /// Reads the tokens of these servers from the keyring into the cache; returns the failures.
    pub async fn load(&self, servers: Vec<i64>) -> Vec<(i64, Error)> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut failed = Vec::new();
            for id in servers {
                match me.secrets.load(&me.entry_name(id)) {
                    Ok(Some(token)) => me.put(id, Some(token)),
                    // No static token: an OAuth sign-in's access token, if there is one.
                    Ok(None) => match me.secrets.load(&me.sign_in_entry_name(id)) {
                        Ok(Some(blob)) => {
                            if let Ok(credentials) = Credentials::from_keyring_blob(&blob) {
                                me.note(id, Some(info_of(&credentials)));
                                me.put(id, Some(credentials.tokens.access_token));
                            }
                        }
                        Ok(None) => {}
                        Err(e) => failed.push((id, e)),
                    },
                    Err(e) => failed.push((id, e)),
                }
            }
            failed
        })
        .await
        .unwrap_or_default()
    }

    /// Reads one server's token from the keyring into the cache again (another process signed
    /// in or out): its static token, else its sign-in's access token, else none. A keyring that
    /// cannot be read leaves the cache as it was.
    pub async fn reload(&self, server: i64) {
        let me = self.clone();
        let read = tokio::task::spawn_blocking(move || {
            if let Some(token) = me.secrets.load(&me.entry_name(server))? {
                return Ok((Some(token), None));
            }
            let credentials = me
                .secrets
                .load(&me.sign_in_entry_name(server))?
                .and_then(|blob| Credentials::from_keyring_blob(&blob).ok());
            Ok::<_, Error>((
                credentials.as_ref().map(|c| c.tokens.access_token.clone()),
                credentials.as_ref().map(info_of),
            ))
        })
        .await
        .unwrap_or_else(|_| Err(panicked()));
        match read {
            Ok((token, info)) => {
                self.put(server, token);
                self.note(server, info);
            }
            Err(e) => tracing::warn!(
                server,
                "a token cannot be read again from the OS keyring: {e}"
            ),
        }
    }

    /// Stores (or replaces) a server's token in the keyring, then in the cache.
    pub async fn store(&self, server: i64, token: Sensitive<String>) -> Result<()> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            me.secrets.store(&me.entry_name(server), &token)?;
            me.put(server, Some(token));
            Ok(())
        })
        .await
        .unwrap_or_else(|_| {
            Err(Error::NoKeyring {
                detail: "the keyring task panicked".into(),
            })
        })
    }

    /// Deletes a server's token from the keyring (fine if there was none) and from the cache.
    pub async fn delete(&self, server: i64) -> Result<()> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            me.secrets.delete(&me.entry_name(server))?;
            me.put(server, None);
            Ok(())
        })
        .await
        .unwrap_or_else(|_| {
            Err(Error::NoKeyring {
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

    fn note(&self, server: i64, info: Option<SignInInfo>) {
        if let Ok(mut infos) = self.infos.write() {
            match info {
                Some(i) => infos.insert(server, i),
                None => infos.remove(&server),
            };
        }
    }

    /// Who is signed in to a server and until when, as last read from or stored in the keyring
    /// by this process; `None` without an OAuth sign-in.
    pub fn sign_in_info(&self, server: i64) -> Option<SignInInfo> {
        self.infos.read().ok()?.get(&server).cloned()
    }

    /// The cached token of a server.
    pub fn get(&self, server: i64) -> Option<Sensitive<String>> {
        self.cache.read().ok()?.get(&server).cloned()
    }

    /// The keyring entry's user name for a stdio server's secret environment (one JSON object
    /// of name → value).
    pub fn env_entry_name(&self, server: i64) -> String {
        format!("env:{server}@{}", self.scope)
    }

    /// Stores (replaces) a stdio server's secret environment values in the keyring.
    pub async fn store_env(
        &self,
        server: i64,
        values: Vec<(String, Sensitive<String>)>,
    ) -> Result<()> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let map: serde_json::Map<String, serde_json::Value> = values
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::String(v.expose().clone())))
                .collect();
            let blob = Sensitive::new(serde_json::Value::Object(map).to_string());
            me.secrets.store(&me.env_entry_name(server), &blob)
        })
        .await
        .unwrap_or_else(|_| Err(panicked()))
    }

    /// Forgets a stdio server's secret environment (fine if it had none).
    pub async fn delete_env(&self, server: i64) -> Result<()> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.secrets.delete(&me.env_entry_name(server)))
            .await
            .unwrap_or_else(|_| Err(panicked()))
    }

    /// What the engine asks for a stdio server's secret environment as a process starts: the
    /// keyring, read then (a blocking call; the engine runs it off its threads). A name with no
    /// stored value is an error that names it, never its value.
    pub fn env_provider(&self) -> crate::engine::EnvSecrets {
        let me = self.clone();
        Arc::new(move |server: i64, names: &[String]| {
            let blob = me
                .secrets
                .load(&me.env_entry_name(server))
                .map_err(|e| e.to_string())?;
            let map: serde_json::Map<String, serde_json::Value> = match blob {
                Some(blob) => serde_json::from_str(blob.expose())
                    .map_err(|_| "the stored secret environment is unreadable".to_owned())?,
                None => serde_json::Map::new(),
            };
            names
                .iter()
                .map(|name| match map.get(name).and_then(|v| v.as_str()) {
                    Some(value) => Ok((name.clone(), Sensitive::new(value.to_owned()))),
                    None => Err(format!("no value for {name} in the OS keyring")),
                })
                .collect()
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A service name of its own, so runs never see each other's (or the app's) entries.
    fn scratch() -> Secrets {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Secrets::new(format!(
            "dev.countersign.test.{}.{nanos}",
            std::process::id()
        ))
    }

    #[test]
    fn errors_never_carry_token_bytes() {
        let e = classify("s1", keyring::Error::BadEncoding(b"hunter2".to_vec()));
        assert!(
            !format!("{e} {e:?}").contains("hunter2"),
            "a keyring error leaked the stored bytes: {e:?}"
        );
    }

    #[test]
    fn empty_ids_and_tokens_are_refused_before_the_keyring() {
        let s = scratch();
        assert!(matches!(s.load(""), Err(Error::InvalidServerId { .. })));
        assert!(matches!(
            s.store("s1", &Sensitive::new(String::new())),
            Err(Error::EmptyToken { .. })
        ));
    }

    /// Runs against the real Secret Service of the session (gnome-keyring in CI):
    /// `.ci/with-session.sh cargo test -p countersign-core secrets -- --ignored`.
    #[test]
    #[ignore = "needs an unlocked Secret Service: run inside .ci/with-session.sh with --ignored"]
    fn round_trips_tokens_through_the_session_keyring() {
        let s = scratch();
        let other = scratch();
        assert!(
            s.load("fastmcp").expect("keyring reachable").is_none(),
            "a fresh service has no token"
        );

        s.store("fastmcp", &Sensitive::new("tok-1".to_owned()))
            .expect("store");
        assert_eq!(
            s.load("fastmcp")
                .expect("load")
                .map(|t| t.expose().clone())
                .as_deref(),
            Some("tok-1")
        );
        assert!(
            other.load("fastmcp").expect("load other").is_none(),
            "entries are scoped by service"
        );

        // What the app stored is a real Secret Service item, visible to other clients.
        let looked_up = std::process::Command::new("secret-tool")
            .args(["lookup", "service", s.service(), "username", "fastmcp"])
            .output()
            .expect("secret-tool (libsecret-tools) is installed by .ci/setup-desktop.sh");
        assert_eq!(
            String::from_utf8_lossy(&looked_up.stdout),
            "tok-1",
            "secret-tool must see the same item"
        );

        s.store("fastmcp", &Sensitive::new("tok-2 ünïcode".to_owned()))
            .expect("replace");
        assert_eq!(
            s.load("fastmcp")
                .expect("load")
                .map(|t| t.expose().clone())
                .as_deref(),
            Some("tok-2 ünïcode"),
            "store replaces"
        );

        s.delete("fastmcp").expect("delete");
        assert!(s.load("fastmcp").expect("load after delete").is_none());
        s.delete("fastmcp").expect("deleting twice is fine");
    }
}
