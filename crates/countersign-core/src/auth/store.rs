//! A server's sign-in as one keyring blob: the JSON written and read here goes only to and from
//! the OS keyring ([`crate::secrets::Tokens::store_credentials`]), wrapped in [`Sensitive`] on
//! both sides. This is the one place where tokens and client secrets are turned into text.

use serde::{Deserialize, Serialize};

use super::flow::{Credentials, Registration, RegistrationKind, TokenAuth, TokenSet};
use crate::sensitive::Sensitive;

/// The version of the blob's shape; another version reads as "sign in again".
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    resource: String,
    token_endpoint: String,
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
    token_auth: String,
    registration: String,
    redirect_uri: Option<String>,
    access_token: String,
    refresh_token: Option<String>,
    expires_at: Option<u64>,
    scopes: Vec<String>,
}

/// Why a stored sign-in could not be read (never its content).
#[derive(Debug, thiserror::Error)]
#[error("the stored sign-in is unreadable ({reason}): sign in again")]
pub struct Unreadable {
    /// What is wrong, without any of the stored values.
    pub reason: &'static str,
}

impl Credentials {
    /// The keyring blob.
    pub fn to_keyring_blob(&self) -> Sensitive<String> {
        let r = &self.registration;
        let stored = Stored {
            version: VERSION,
            resource: self.resource.clone(),
            token_endpoint: self.token_endpoint.clone(),
            issuer: r.issuer.clone(),
            client_id: r.client_id.clone(),
            client_secret: r.client_secret.as_ref().map(|s| s.expose().clone()),
            token_auth: r.token_auth.as_str().into(),
            registration: match r.kind {
                RegistrationKind::PreRegistered => "pre_registered",
                RegistrationKind::MetadataDocument => "metadata_document",
                RegistrationKind::Dynamic => "dynamic",
            }
            .into(),
            redirect_uri: r.redirect_uri.clone(),
            access_token: self.tokens.access_token.expose().clone(),
            refresh_token: self
                .tokens
                .refresh_token
                .as_ref()
                .map(|t| t.expose().clone()),
            expires_at: self.tokens.expires_at,
            scopes: self.tokens.scopes.clone(),
        };
        // A struct of strings and numbers always serialises.
        Sensitive::new(serde_json::to_string(&stored).unwrap_or_default())
    }

    /// Reads a keyring blob written by [`Credentials::to_keyring_blob`].
    pub fn from_keyring_blob(blob: &Sensitive<String>) -> Result<Self, Unreadable> {
        let stored: Stored = serde_json::from_str(blob.expose()).map_err(|_| Unreadable {
            reason: "not a sign-in record",
        })?;
        if stored.version != VERSION {
            return Err(Unreadable {
                reason: "written by another version",
            });
        }
        let token_auth = TokenAuth::parse(&stored.token_auth).ok_or(Unreadable {
            reason: "unknown token endpoint authentication",
        })?;
        let kind = match stored.registration.as_str() {
            "pre_registered" => RegistrationKind::PreRegistered,
            "metadata_document" => RegistrationKind::MetadataDocument,
            "dynamic" => RegistrationKind::Dynamic,
            _ => {
                return Err(Unreadable {
                    reason: "unknown registration kind",
                })
            }
        };
        Ok(Self {
            resource: stored.resource,
            token_endpoint: stored.token_endpoint,
            registration: Registration {
                issuer: stored.issuer,
                client_id: stored.client_id,
                client_secret: stored.client_secret.map(Sensitive::new),
                token_auth,
                kind,
                redirect_uri: stored.redirect_uri,
            },
            tokens: TokenSet {
                access_token: Sensitive::new(stored.access_token),
                refresh_token: stored.refresh_token.map(Sensitive::new),
                expires_at: stored.expires_at,
                scopes: stored.scopes,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed_in() -> Credentials {
        Credentials {
            resource: "https://mcp.example.com/mcp".into(),
            token_endpoint: "https://as.example.com/token".into(),
            registration: Registration {
                issuer: "https://as.example.com".into(),
                client_id: "client-1".into(),
                client_secret: Some(Sensitive::new("secret-1".into())),
                token_auth: TokenAuth::ClientSecretPost,
                kind: RegistrationKind::Dynamic,
                redirect_uri: Some("http://127.0.0.1:4711/callback".into()),
            },
            tokens: TokenSet {
                access_token: Sensitive::new("access-1".into()),
                refresh_token: Some(Sensitive::new("refresh-1".into())),
                expires_at: Some(1_900_000_000),
                scopes: vec!["mcp:basic".into(), "offline_access".into()],
            },
        }
    }

    #[test]
    fn a_sign_in_round_trips_through_its_keyring_blob() {
        let blob = signed_in().to_keyring_blob();
        let back = Credentials::from_keyring_blob(&blob).expect("readable");
        assert_eq!(back.to_keyring_blob().expose(), blob.expose());
        assert_eq!(
            back.tokens
                .refresh_token
                .map(|t| t.expose().clone())
                .as_deref(),
            Some("refresh-1")
        );
        assert_eq!(back.registration.token_auth, TokenAuth::ClientSecretPost);
    }

    #[test]
    fn debug_output_and_read_errors_never_show_tokens_or_secrets() {
        let credentials = signed_in();
        let debug = format!("{credentials:?} {:?}", credentials.to_keyring_blob());
        for secret in ["access-1", "refresh-1", "secret-1"] {
            assert!(!debug.contains(secret), "{secret} leaked into {debug}");
        }
        let bad = Sensitive::new(r#"{"version":1,"access_token":"access-1"}"#.to_owned());
        let error = Credentials::from_keyring_blob(&bad).expect_err("incomplete blob");
        assert!(!format!("{error} {error:?}").contains("access-1"));
    }
}
