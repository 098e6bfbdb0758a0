//! A server's sign-in as one keyring blob: the JSON written and read here goes only to and from
//! the OS keyring ([`crate::secrets::Tokens::store_credentials`]), wrapped in [`Sensitive`] on
//! both sides. This is the one place where tokens and client secrets are turned into text.
//!
//! A blob holds either a whole sign-in ([`Credentials`]) or, after a sign-out, only the client
//! registration ([`SignedOut`]): the next sign-in is then the same client to the authorization
//! server (servers such as fastmcp keep tasks per client, so a new client would lose them).

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
    /// `None` once signed out: the registration is kept, the tokens are gone.
    access_token: Option<String>,
    refresh_token: Option<String>,
    expires_at: Option<u64>,
    scopes: Vec<String>,
    /// Who signed in (display only); absent in blobs of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    account: Option<String>,
}

/// Why a stored sign-in could not be read (never its content).
#[derive(Debug, thiserror::Error)]
#[error("the stored sign-in is unreadable ({reason}): sign in again")]
pub struct Unreadable {
    /// What is wrong, without any of the stored values.
    pub reason: &'static str,
}

/// What is left of a sign-in after signing out: the client registration at its authorization
/// server (its secret included, so it too lives only in the keyring), no token.
#[derive(Debug, Clone)]
pub struct SignedOut {
    /// The RFC 8707 resource the registration was used for.
    pub resource: String,
    /// The token endpoint of the issuer.
    pub token_endpoint: String,
    /// The client registration, reused by the next sign-in at the same issuer.
    pub registration: Registration,
}

impl SignedOut {
    /// The keyring blob: the registration without any token.
    pub fn to_keyring_blob(&self) -> Sensitive<String> {
        blob(
            &self.resource,
            &self.token_endpoint,
            &self.registration,
            None,
        )
    }
}

impl Credentials {
    /// The keyring blob.
    pub fn to_keyring_blob(&self) -> Sensitive<String> {
        blob(
            &self.resource,
            &self.token_endpoint,
            &self.registration,
            Some(&self.tokens),
        )
    }

    /// Reads a keyring blob written by [`Credentials::to_keyring_blob`]; a signed-out blob
    /// ([`SignedOut::to_keyring_blob`]) is no sign-in ([`Unreadable`]).
    pub fn from_keyring_blob(blob: &Sensitive<String>) -> Result<Self, Unreadable> {
        let (stored, registration) = read(blob)?;
        let access_token = stored.access_token.ok_or(Unreadable {
            reason: "signed out",
        })?;
        Ok(Self {
            resource: stored.resource,
            token_endpoint: stored.token_endpoint,
            registration,
            tokens: TokenSet {
                access_token: Sensitive::new(access_token),
                refresh_token: stored.refresh_token.map(Sensitive::new),
                expires_at: stored.expires_at,
                scopes: stored.scopes,
                account: stored.account,
            },
        })
    }

    /// The sign-in without its tokens: what signing out keeps.
    pub fn signed_out(&self) -> SignedOut {
        SignedOut {
            resource: self.resource.clone(),
            token_endpoint: self.token_endpoint.clone(),
            registration: self.registration.clone(),
        }
    }
}

/// The client registration of any blob, signed in or out.
pub fn registration_from_keyring_blob(
    blob: &Sensitive<String>,
) -> Result<Registration, Unreadable> {
    read(blob).map(|(_, registration)| registration)
}

fn blob(
    resource: &str,
    token_endpoint: &str,
    r: &Registration,
    tokens: Option<&TokenSet>,
) -> Sensitive<String> {
    let stored = Stored {
        version: VERSION,
        resource: resource.to_owned(),
        token_endpoint: token_endpoint.to_owned(),
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
        access_token: tokens.map(|t| t.access_token.expose().clone()),
        refresh_token: tokens
            .and_then(|t| t.refresh_token.as_ref())
            .map(|t| t.expose().clone()),
        expires_at: tokens.and_then(|t| t.expires_at),
        scopes: tokens.map(|t| t.scopes.clone()).unwrap_or_default(),
        account: tokens.and_then(|t| t.account.clone()),
    };
    // A struct of strings and numbers always serialises.
    Sensitive::new(serde_json::to_string(&stored).unwrap_or_default())
}

fn read(blob: &Sensitive<String>) -> Result<(Stored, Registration), Unreadable> {
    let mut stored: Stored = serde_json::from_str(blob.expose()).map_err(|_| Unreadable {
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
    let registration = Registration {
        issuer: std::mem::take(&mut stored.issuer),
        client_id: std::mem::take(&mut stored.client_id),
        client_secret: stored.client_secret.take().map(Sensitive::new),
        token_auth,
        kind,
        redirect_uri: stored.redirect_uri.take(),
    };
    Ok((stored, registration))
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
                account: Some("ada@example.com".into()),
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
    fn a_signed_out_blob_keeps_the_registration_and_no_token() {
        let credentials = signed_in();
        let blob = credentials.signed_out().to_keyring_blob();
        for token in ["access-1", "refresh-1"] {
            assert!(!blob.expose().contains(token), "{token} survived sign-out");
        }
        assert!(
            Credentials::from_keyring_blob(&blob).is_err(),
            "a signed-out blob is no sign-in"
        );
        let registration = registration_from_keyring_blob(&blob).expect("the registration");
        assert_eq!(registration.client_id, "client-1");
        assert_eq!(
            registration
                .client_secret
                .map(|s| s.expose().clone())
                .as_deref(),
            Some("secret-1")
        );
        assert_eq!(
            registration.redirect_uri.as_deref(),
            Some("http://127.0.0.1:4711/callback")
        );
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
