//! The authorization code flow for one MCP server: client registration, the authorization
//! request, the callback, the token and refresh requests.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oauth2::basic::{
    BasicClient, BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet,
    EndpointSet, ExtraTokenFields, HttpClientError, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RefreshToken, RequestTokenError, Scope, StandardRevocableToken,
    StandardTokenResponse, TokenResponse, TokenUrl,
};
use serde_json::{json, Value};

use super::challenge::Challenge;
use super::discovery::{self, Discovered};
use super::loopback::{Callback, Loopback};
use super::{Error, Result};
use crate::sensitive::Sensitive;

/// How many refusals (`403 insufficient_scope`, or `401` right after signing in) one operation
/// takes before it fails: a sign-in follows each but the last, so a server that keeps asking for
/// more scope sends the person to the browser at most this many times, not for ever.
pub const MAX_STEP_UP_ATTEMPTS: usize = 3;

/// The scope that asks for a refresh token, requested only where the server lists it.
const OFFLINE_ACCESS: &str = "offline_access";

/// The longest lifetime we believe of a token (`expires_in`): a number from a server meets time
/// only clamped.
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(366 * 24 * 3600);

/// A client the person registered with the authorization server themselves.
#[derive(Debug, Clone)]
pub struct PreRegistered {
    /// The issuer it was registered with; another issuer cannot use it. `None`: the issuer the
    /// server's metadata names (the person registered it for this one server).
    pub issuer: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client secret, for confidential clients.
    pub client_secret: Option<Sensitive<String>>,
}

/// Who Countersign is to authorization servers.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `client_name` in registrations.
    pub client_name: String,
    /// The URL of our client ID metadata document, used where the server supports them.
    pub metadata_document_url: Option<String>,
    /// A client the person registered themselves, used first.
    pub pre_registered: Option<PreRegistered>,
    /// A fixed loopback port for the redirect URI (`http://127.0.0.1:{port}/callback`), for
    /// authorization servers that match a registered redirect URI exactly, port included
    /// (RFC 8252 §7.3 says they should accept any port; many do not). `None`: any free port.
    pub redirect_port: Option<u16>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            client_name: "Countersign".into(),
            metadata_document_url: None,
            pre_registered: None,
            redirect_port: None,
        }
    }
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenAuth {
    /// A public client: `client_id` in the body.
    None,
    /// HTTP Basic with the URL-encoded id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the body.
    ClientSecretPost,
}

impl TokenAuth {
    /// The RFC 7591 name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::ClientSecretBasic => "client_secret_basic",
            Self::ClientSecretPost => "client_secret_post",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Self> {
        match name {
            "none" => Some(Self::None),
            "client_secret_basic" => Some(Self::ClientSecretBasic),
            "client_secret_post" => Some(Self::ClientSecretPost),
            _ => None,
        }
    }
}

/// Where a client id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrationKind {
    /// The person gave it.
    PreRegistered,
    /// Our client ID metadata document URL (portable across authorization servers).
    MetadataDocument,
    /// Dynamic client registration (RFC 7591).
    Dynamic,
}

/// How a sign-in will identify Countersign to the authorization server (decided before the
/// browser opens, see [`Authorizer::registration_plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrationPlan {
    /// The client id the person gave.
    PreRegistered,
    /// The registration of an earlier sign-in at the same authorization server, kept.
    Kept,
    /// Our client ID metadata document.
    MetadataDocument,
    /// A new dynamic client registration (RFC 7591).
    Dynamic,
}

/// A client id at one authorization server.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The authorization server it belongs to.
    pub issuer: String,
    /// The client id.
    pub client_id: String,
    /// The client secret, if the server issued or the person gave one.
    pub client_secret: Option<Sensitive<String>>,
    /// How to authenticate at the token endpoint.
    pub token_auth: TokenAuth,
    /// Where it came from.
    pub kind: RegistrationKind,
    /// The redirect URI registered (dynamic registrations only: they are bound to it).
    pub redirect_uri: Option<String>,
}

/// Tokens from one token response.
#[derive(Debug, Clone)]
pub struct TokenSet {
    /// The access token, sent only to the MCP server it was issued for.
    pub access_token: Sensitive<String>,
    /// The refresh token, if the server issued one.
    pub refresh_token: Option<Sensitive<String>>,
    /// When the access token expires (seconds since the Unix epoch), if the server said.
    pub expires_at: Option<u64>,
    /// The scopes granted (or requested, when the server did not say).
    pub scopes: Vec<String>,
    /// Who signed in, where the server said (its OpenID `id_token`); shown, never trusted.
    pub account: Option<String>,
}

impl TokenSet {
    /// The token expires within `margin` of `now` (a token without an expiry never does).
    pub fn expires_within(&self, now: SystemTime, margin: Duration) -> bool {
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        self.expires_at
            .is_some_and(|at| at <= now.saturating_add(margin.as_secs()))
    }
}

/// A signed-in server: what refreshing needs, and the tokens.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The RFC 8707 resource (the protected resource metadata's `resource`, as spelled there).
    pub resource: String,
    /// The token endpoint of the issuer.
    pub token_endpoint: String,
    /// The client registration.
    pub registration: Registration,
    /// The tokens.
    pub tokens: TokenSet,
}

/// An authorization request sent to the browser, waiting for its callback.
#[derive(Debug)]
pub struct PendingAuthorization {
    /// The URL to open.
    pub url: String,
    /// The `state` sent.
    pub state: String,
    /// The issuer the person was sent to, for the RFC 9207 check.
    pub issuer: String,
    /// The redirect URI sent (the token request repeats it).
    pub redirect_uri: String,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    verifier: PkceCodeVerifier,
}

/// Signs in to one MCP server.
#[derive(Debug, Clone)]
pub struct Authorizer {
    http: reqwest::Client,
    server: String,
    config: ClientConfig,
    /// A registration kept from an earlier sign-in (after a sign-out), reused where
    /// [`Authorizer::sign_in`] has no current credentials to take it from.
    remembered: Option<Registration>,
}

/// The token response's one field beyond RFC 6749 we read: an OpenID Connect `id_token`, for
/// the name of who signed in.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct IdTokenField {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id_token: Option<String>,
}

impl ExtraTokenFields for IdTokenField {}

type TokenAnswer = StandardTokenResponse<IdTokenField, BasicTokenType>;

type TokenClient = oauth2::Client<
    BasicErrorResponse,
    TokenAnswer,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

impl Authorizer {
    /// An authorizer for the MCP server at `server`.
    pub fn new(server: impl Into<String>, config: ClientConfig) -> Result<Self> {
        let server = server.into();
        // No redirects at all: metadata, registration and token requests go exactly where the
        // metadata says, and a redirect cannot carry a code, verifier or secret elsewhere.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| Error::Transport {
                url: server.clone(),
                message: e.to_string(),
            })?;
        Ok(Self {
            http,
            server,
            config,
            remembered: None,
        })
    }

    /// This authorizer, reusing `registration` when it signs in without current credentials
    /// (the server was signed out): same issuer (and, for a dynamic registration, the same
    /// redirect URI) → same client, so the server sees the same client again.
    pub fn remembering(mut self, registration: Option<Registration>) -> Self {
        self.remembered = registration;
        self
    }

    /// The MCP server URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Discovery from a challenge (see [`discovery::discover`]), refusing servers without PKCE.
    pub async fn discover(&self, challenge: &Challenge) -> Result<Discovered> {
        let found = discovery::discover(&self.http, &self.server, challenge).await?;
        if !found.server.supports_s256() {
            return Err(Error::NoPkce {
                issuer: found.issuer,
            });
        }
        Ok(found)
    }

    /// How [`Authorizer::register`] would get a client id for the discovered issuer, decided
    /// without sending anything (what a person is shown before the browser opens): the same
    /// order and the same refusals as registering.
    pub fn registration_plan(
        &self,
        found: &Discovered,
        previous: Option<&Registration>,
    ) -> Result<RegistrationPlan> {
        let issuer = &found.issuer;
        if let Some(pre) = &self.config.pre_registered {
            if let Some(configured) = pre.issuer.as_ref().filter(|c| *c != issuer) {
                return Err(Error::PreRegisteredElsewhere {
                    configured: configured.clone(),
                    issuer: issuer.clone(),
                });
            }
            if pre.client_secret.is_some() {
                pick_secret_auth(found)?;
            }
            return Ok(RegistrationPlan::PreRegistered);
        }
        if previous
            .or(self.remembered.as_ref())
            .is_some_and(|r| &r.issuer == issuer)
        {
            return Ok(RegistrationPlan::Kept);
        }
        if self.config.metadata_document_url.is_some()
            && found.server.client_id_metadata_document_supported
        {
            return Ok(RegistrationPlan::MetadataDocument);
        }
        if found.server.registration_endpoint.is_some() {
            return Ok(RegistrationPlan::Dynamic);
        }
        Err(Error::NeedsClientId {
            issuer: issuer.clone(),
        })
    }

    /// A client id for the discovered issuer, in the spec's order: the pre-registered client
    /// (for this issuer only), our client ID metadata document where supported, dynamic
    /// registration as a native app, else [`Error::NeedsClientId`]. `previous` is reused when
    /// it belongs to this issuer (and, for a dynamic one, to this redirect URI): a new
    /// authorization server means a new registration and none of the old one is sent there.
    pub async fn register(
        &self,
        found: &Discovered,
        redirect_uri: &str,
        previous: Option<&Registration>,
    ) -> Result<Registration> {
        let issuer = &found.issuer;
        if let Some(pre) = &self.config.pre_registered {
            if let Some(configured) = pre.issuer.as_ref().filter(|c| *c != issuer) {
                return Err(Error::PreRegisteredElsewhere {
                    configured: configured.clone(),
                    issuer: issuer.clone(),
                });
            }
            let token_auth = if pre.client_secret.is_some() {
                pick_secret_auth(found)?
            } else {
                TokenAuth::None
            };
            return Ok(Registration {
                issuer: issuer.clone(),
                client_id: pre.client_id.clone(),
                client_secret: pre.client_secret.clone(),
                token_auth,
                kind: RegistrationKind::PreRegistered,
                // A fixed port is part of the client's registration: later sign-ins (signing
                // in again from a banner, without the person's options) bind it again.
                redirect_uri: self.config.redirect_port.map(|_| redirect_uri.to_owned()),
            });
        }
        if let Some(previous) = previous {
            let same_redirect = previous.kind != RegistrationKind::Dynamic
                || previous.redirect_uri.as_deref() == Some(redirect_uri);
            if &previous.issuer == issuer && same_redirect {
                return Ok(previous.clone());
            }
        }
        if let (Some(url), true) = (
            &self.config.metadata_document_url,
            found.server.client_id_metadata_document_supported,
        ) {
            return Ok(Registration {
                issuer: issuer.clone(),
                client_id: url.clone(),
                client_secret: None,
                token_auth: TokenAuth::None,
                kind: RegistrationKind::MetadataDocument,
                redirect_uri: None,
            });
        }
        let Some(endpoint) = &found.server.registration_endpoint else {
            return Err(Error::NeedsClientId {
                issuer: issuer.clone(),
            });
        };
        self.register_dynamically(found, endpoint, redirect_uri)
            .await
    }

    async fn register_dynamically(
        &self,
        found: &Discovered,
        endpoint: &str,
        redirect_uri: &str,
    ) -> Result<Registration> {
        let issuer = &found.issuer;
        let failed = |message: String| Error::Registration {
            issuer: issuer.clone(),
            message,
        };
        let supported = supported_auth(found);
        let wanted = if supported.contains(&TokenAuth::None) {
            TokenAuth::None
        } else {
            pick_secret_auth(found)?
        };
        let request = json!({
            "client_name": self.config.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted.as_str(),
            // MCP 2026-07-28: a desktop client registers as a native app (loopback redirects).
            "application_type": "native",
        });
        let response = self
            .http
            .post(endpoint)
            .header(reqwest::header::ACCEPT, "application/json")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(request.to_string())
            .send()
            .await
            .map_err(|e| failed(e.without_url().to_string()))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| failed(e.without_url().to_string()))?;
        let doc: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if !status.is_success() {
            let reason = doc
                .get("error_description")
                .or_else(|| doc.get("error"))
                .and_then(Value::as_str)
                .map(|s| s.chars().take(200).collect::<String>())
                .unwrap_or_default();
            return Err(failed(format!("HTTP {status} {reason}")));
        }
        let client_id = doc
            .get("client_id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| failed("the answer has no client_id".into()))?;
        let client_secret = doc
            .get("client_secret")
            .and_then(Value::as_str)
            .map(|s| Sensitive::new(s.to_owned()));
        // The server may assign another method than the one asked for; it has the last word.
        let token_auth = match doc
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
        {
            Some(name) => TokenAuth::parse(name).ok_or(Error::NoTokenAuth {
                issuer: issuer.clone(),
            })?,
            None if client_secret.is_none() => TokenAuth::None,
            None => wanted,
        };
        if token_auth != TokenAuth::None && client_secret.is_none() {
            return Err(failed(format!(
                "it assigned {} without a client secret",
                token_auth.as_str()
            )));
        }
        Ok(Registration {
            issuer: issuer.clone(),
            client_id: client_id.to_owned(),
            client_secret,
            token_auth,
            kind: RegistrationKind::Dynamic,
            redirect_uri: Some(redirect_uri.to_owned()),
        })
    }

    /// The scopes to ask for, in the spec's order: the challenge's `scope`, else every scope of
    /// the protected resource metadata, else none; plus whatever was granted before (a step-up
    /// widens, never narrows) and `offline_access` where the authorization server lists it.
    pub fn scopes(
        &self,
        found: &Discovered,
        challenge: &Challenge,
        before: &[String],
    ) -> Vec<String> {
        let mut scopes = challenge.scopes();
        if scopes.is_empty() {
            scopes = found.resource.scopes_supported.clone().unwrap_or_default();
        }
        for scope in before {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
        if found.server.offers_scope(OFFLINE_ACCESS) && !scopes.iter().any(|s| s == OFFLINE_ACCESS)
        {
            scopes.push(OFFLINE_ACCESS.into());
        }
        scopes
    }

    /// The authorization request: PKCE S256, a fresh `state`, the scopes, the RFC 8707
    /// `resource` exactly as the metadata spells it.
    pub fn authorization_request(
        &self,
        found: &Discovered,
        registration: &Registration,
        redirect_uri: &str,
        scopes: &[String],
    ) -> Result<PendingAuthorization> {
        let issuer = &found.issuer;
        let authorization_endpoint =
            found
                .server
                .authorization_endpoint
                .as_deref()
                .ok_or_else(|| Error::MissingEndpoint {
                    issuer: issuer.clone(),
                    endpoint: "authorization endpoint",
                })?;
        let auth_url =
            AuthUrl::new(authorization_endpoint.to_owned()).map_err(|_| Error::BadUrl {
                what: "the authorization endpoint",
                url: authorization_endpoint.to_owned(),
            })?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned()).map_err(|_| Error::BadUrl {
            what: "the redirect URI",
            url: redirect_uri.to_owned(),
        })?;
        let client = BasicClient::new(ClientId::new(registration.client_id.clone()))
            .set_auth_uri(auth_url)
            .set_redirect_uri(redirect);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(challenge)
            .add_extra_param("resource", found.resource.resource.clone());
        for scope in scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state) = request.url();
        Ok(PendingAuthorization {
            url: url.to_string(),
            state: state.secret().clone(),
            issuer: issuer.clone(),
            redirect_uri: redirect_uri.to_owned(),
            scopes: scopes.to_vec(),
            verifier,
        })
    }

    /// Checks the callback before anything is redeemed: `state`, then RFC 9207 `iss` (required
    /// where advertised, byte-equal to the issuer we used wherever present; on a mismatch the
    /// `error` is not believed either), then the code or the error.
    pub fn accept_callback(
        &self,
        found: &Discovered,
        pending: &PendingAuthorization,
        callback: &Callback,
    ) -> Result<String> {
        if callback.get("state") != Some(pending.state.as_str()) {
            return Err(Error::StateMismatch);
        }
        match callback.get("iss") {
            Some(iss) if iss != pending.issuer => {
                return Err(Error::WrongIssuer {
                    expected: pending.issuer.clone(),
                    found: iss.to_owned(),
                })
            }
            None if found.server.authorization_response_iss_parameter_supported => {
                return Err(Error::WrongIssuer {
                    expected: pending.issuer.clone(),
                    found: "<missing>".into(),
                })
            }
            _ => {}
        }
        if let Some(error) = callback.get("error") {
            return Err(Error::Denied {
                error: error.to_owned(),
                description: callback.get("error_description").map(str::to_owned),
            });
        }
        callback
            .get("code")
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .ok_or(Error::NoCode)
    }

    /// Redeems the code: PKCE verifier, the same redirect URI, `resource`.
    pub async fn redeem(
        &self,
        found: &Discovered,
        registration: &Registration,
        pending: PendingAuthorization,
        code: String,
    ) -> Result<Credentials> {
        let token_endpoint = token_endpoint(found)?;
        let redirect =
            RedirectUrl::new(pending.redirect_uri.clone()).map_err(|_| Error::BadUrl {
                what: "the redirect URI",
                url: pending.redirect_uri.clone(),
            })?;
        let client = token_client(registration, &token_endpoint)?.set_redirect_uri(redirect);
        let response = client
            .exchange_code(AuthorizationCode::new(code))
            .set_pkce_verifier(pending.verifier)
            .add_extra_param("resource", found.resource.resource.clone())
            .request_async(&self.http)
            .await
            .map_err(|e| token_error(&token_endpoint, e))?;
        Ok(Credentials {
            resource: found.resource.resource.clone(),
            token_endpoint,
            registration: registration.clone(),
            tokens: token_set(&response, None, None, &pending.scopes, SystemTime::now()),
        })
    }

    /// Refreshes the tokens (with `resource`); a rotated refresh token replaces the old one,
    /// otherwise the old one is kept.
    pub async fn refresh(&self, credentials: &Credentials) -> Result<Credentials> {
        let refresh = credentials
            .tokens
            .refresh_token
            .as_ref()
            .ok_or(Error::NoRefreshToken)?;
        let client = token_client(&credentials.registration, &credentials.token_endpoint)?;
        let token = RefreshToken::new(refresh.expose().clone());
        let response = client
            .exchange_refresh_token(&token)
            .add_extra_param("resource", credentials.resource.clone())
            .request_async(&self.http)
            .await
            .map_err(|e| token_error(&credentials.token_endpoint, e))?;
        Ok(Credentials {
            tokens: token_set(
                &response,
                Some(refresh),
                credentials.tokens.account.as_deref(),
                &credentials.tokens.scopes,
                SystemTime::now(),
            ),
            ..credentials.clone()
        })
    }

    /// The whole sign-in: discovery, registration, the browser step on a loopback listener,
    /// the callback checks, the token request. `open` shows the person `url` (a browser, or a
    /// test client that follows it); the listener waits at most `timeout`. `previous` (the
    /// server's last credentials) keeps the registration and widens the scopes on a step-up.
    pub async fn sign_in<F, Fut>(
        &self,
        challenge: &Challenge,
        previous: Option<&Credentials>,
        open: &F,
        timeout: Duration,
    ) -> Result<Credentials>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let found = self.discover(challenge).await?;
        let previous_registration = previous
            .map(|c| &c.registration)
            .or(self.remembered.as_ref())
            .filter(|r| r.issuer == found.issuer);
        let port_of = |r: &Registration| {
            r.redirect_uri
                .as_deref()
                .and_then(|uri| url::Url::parse(uri).ok())
                .and_then(|u| u.port())
        };
        // A fixed port (the person's, or the one a pre-registered client was registered with)
        // is bound exactly or not at all: any other port would be refused by the server.
        // Otherwise the dynamic registration's port, where free: its redirect URI stays valid.
        let fixed = self.config.redirect_port.or_else(|| {
            previous_registration
                .filter(|r| r.kind == RegistrationKind::PreRegistered)
                .filter(|_| self.config.pre_registered.is_none())
                .and_then(port_of)
        });
        let loopback = match fixed {
            Some(port) => Loopback::bind_exactly(port).await?,
            None => Loopback::bind(previous_registration.and_then(port_of)).await?,
        };
        let redirect_uri = loopback.redirect_uri();
        let registration = self
            .register(&found, &redirect_uri, previous_registration)
            .await?;
        let before = previous
            .filter(|c| c.registration.issuer == found.issuer)
            .map(|c| c.tokens.scopes.clone())
            .unwrap_or_default();
        let scopes = self.scopes(&found, challenge, &before);
        let pending = self.authorization_request(&found, &registration, &redirect_uri, &scopes)?;

        let callback = {
            let receive = loopback.receive(&pending.state, timeout);
            tokio::pin!(receive);
            tokio::select! {
                callback = &mut receive => callback?,
                opened = open(pending.url.clone()) => {
                    opened?;
                    receive.await?
                }
            }
        };
        let code = self.accept_callback(&found, &pending, &callback)?;
        self.redeem(&found, &registration, pending, code).await
    }
}

fn token_endpoint(found: &Discovered) -> Result<String> {
    found
        .server
        .token_endpoint
        .clone()
        .ok_or_else(|| Error::MissingEndpoint {
            issuer: found.issuer.clone(),
            endpoint: "token endpoint",
        })
}

fn token_client(registration: &Registration, token_endpoint: &str) -> Result<TokenClient> {
    let token_url = TokenUrl::new(token_endpoint.to_owned()).map_err(|_| Error::BadUrl {
        what: "the token endpoint",
        url: token_endpoint.to_owned(),
    })?;
    let mut client =
        oauth2::Client::new(ClientId::new(registration.client_id.clone())).set_token_uri(token_url);
    // oauth2 sends `client_id` in the body when there is no secret (`none`), Basic with the
    // URL-encoded pair when there is one, and both in the body with `RequestBody`.
    match (registration.token_auth, &registration.client_secret) {
        (TokenAuth::None, _) | (_, None) => {}
        (TokenAuth::ClientSecretBasic, Some(secret)) => {
            client = client
                .set_client_secret(ClientSecret::new(secret.expose().clone()))
                .set_auth_type(AuthType::BasicAuth);
        }
        (TokenAuth::ClientSecretPost, Some(secret)) => {
            client = client
                .set_client_secret(ClientSecret::new(secret.expose().clone()))
                .set_auth_type(AuthType::RequestBody);
        }
    }
    Ok(client)
}

/// The methods we can do that the server lists (RFC 8414 default: `client_secret_basic`).
fn supported_auth(found: &Discovered) -> Vec<TokenAuth> {
    match &found.server.token_endpoint_auth_methods_supported {
        Some(methods) => methods.iter().filter_map(|m| TokenAuth::parse(m)).collect(),
        None => vec![TokenAuth::ClientSecretBasic],
    }
}

/// For a client with a secret: the first secret method in the server's own order. (The server's
/// order matters: the MCP Python SDK lists `client_secret_post` first and, with
/// `client_secret_basic`, still demands `client_id` in the body, which Basic does not send.)
fn pick_secret_auth(found: &Discovered) -> Result<TokenAuth> {
    supported_auth(found)
        .into_iter()
        .find(|m| *m != TokenAuth::None)
        .ok_or_else(|| Error::NoTokenAuth {
            issuer: found.issuer.clone(),
        })
}

fn token_set(
    response: &TokenAnswer,
    old_refresh: Option<&Sensitive<String>>,
    old_account: Option<&str>,
    asked: &[String],
    now: SystemTime,
) -> TokenSet {
    let expires_at = response.expires_in().map(|lifetime| {
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        now.saturating_add(lifetime.min(MAX_TOKEN_LIFETIME))
            .as_secs()
    });
    let scopes = response
        .scopes()
        .map(|s| s.iter().map(|s| s.to_string()).collect())
        .unwrap_or_else(|| asked.to_vec());
    TokenSet {
        access_token: Sensitive::new(response.access_token().secret().clone()),
        refresh_token: response
            .refresh_token()
            .map(|t| Sensitive::new(t.secret().clone()))
            .or_else(|| old_refresh.cloned()),
        expires_at,
        scopes,
        // A refresh rarely repeats the id_token: who signed in stays who they were.
        account: response
            .extra_fields()
            .id_token
            .as_deref()
            .and_then(account_of_id_token)
            .or_else(|| old_account.map(str::to_owned)),
    }
}

/// The longest account name we show (a server's text).
const MAX_ACCOUNT_CHARS: usize = 120;

/// Who an OpenID `id_token` names, for display only: `preferred_username`, else `email`, else
/// `name`, else `sub`. The signature is not checked: the token came straight from the token
/// endpoint over the connection we opened to it (OpenID Connect Core §3.1.3.7 allows TLS server
/// validation in its place), and the name decides nothing, it is only shown. Control
/// characters are dropped and the length is bounded: it is server text.
pub(crate) fn account_of_id_token(id_token: &str) -> Option<String> {
    use base64::Engine as _;
    let payload = id_token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    ["preferred_username", "email", "name", "sub"]
        .iter()
        .filter_map(|claim| claims.get(claim).and_then(Value::as_str))
        .map(|name| {
            name.chars()
                .filter(|c| !c.is_control())
                .take(MAX_ACCOUNT_CHARS)
                .collect::<String>()
        })
        .find(|name| !name.trim().is_empty())
}

/// A token endpoint failure, without the body (it may hold a token) or any secret.
fn token_error(
    url: &str,
    error: RequestTokenError<HttpClientError<reqwest::Error>, BasicErrorResponse>,
) -> Error {
    match error {
        RequestTokenError::ServerResponse(response) => Error::TokenRefused {
            error: response.error().to_string(),
            description: response
                .error_description()
                .map(|d| d.chars().take(200).collect()),
        },
        RequestTokenError::Request(e) => Error::TokenRequest {
            url: url.to_owned(),
            message: match e {
                HttpClientError::Reqwest(e) => e.without_url().to_string(),
                other => other.to_string(),
            },
        },
        RequestTokenError::Parse(e, _body) => Error::TokenRequest {
            url: url.to_owned(),
            message: format!("unreadable answer at {}", e.path()),
        },
        RequestTokenError::Other(message) => Error::TokenRequest {
            url: url.to_owned(),
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn id_token(claims: Value) -> String {
        let encode = |v: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
        };
        format!(
            "{}.{}.signature",
            encode(&json!({"alg": "RS256"})),
            encode(&claims)
        )
    }

    #[test]
    fn the_account_is_the_id_tokens_most_readable_name() {
        let token = id_token(json!({"sub": "u-1", "email": "ada@example.com", "name": "Ada"}));
        assert_eq!(
            account_of_id_token(&token).as_deref(),
            Some("ada@example.com")
        );
        let token = id_token(json!({"sub": "u-1", "preferred_username": "ada"}));
        assert_eq!(account_of_id_token(&token).as_deref(), Some("ada"));
        let token = id_token(json!({"sub": "u-1"}));
        assert_eq!(account_of_id_token(&token).as_deref(), Some("u-1"));
    }

    #[test]
    fn an_unreadable_or_hostile_id_token_names_nobody_or_is_cleaned() {
        for bad in ["", "no-dots", "a.%%%.c", "a.e30.c"] {
            assert_eq!(account_of_id_token(bad), None, "{bad:?}");
        }
        let token = id_token(json!({"email": "ada\u{1b}[31m@example.com\n", "sub": "x"}));
        assert_eq!(
            account_of_id_token(&token).as_deref(),
            Some("ada[31m@example.com")
        );
        let long = "a".repeat(1000);
        let token = id_token(json!({ "sub": long }));
        assert_eq!(
            account_of_id_token(&token).map(|a| a.chars().count()),
            Some(MAX_ACCOUNT_CHARS)
        );
    }
}
