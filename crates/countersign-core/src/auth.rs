//! Signing in to OAuth-protected MCP servers (MCP 2026-07-28 authorization, OAuth 2.1).
//!
//! - [`challenge`]: the `WWW-Authenticate: Bearer` challenge of a `401`/`403`;
//! - [`discovery`]: protected resource metadata (RFC 9728) and authorization server metadata
//!   (RFC 8414 / OpenID discovery), with the resource and issuer checks;
//! - [`flow`]: [`Authorizer`], client registration (pre-registered → client ID metadata
//!   document → dynamic registration), the authorization request (PKCE S256, `resource`,
//!   `state`), the callback check (RFC 9207 `iss`), token and refresh requests;
//! - [`loopback`]: the browser step, a one-shot listener on `127.0.0.1:0` (RFC 8252);
//! - [`session`]: one operation with sign-in on `401` and bounded step-up on `403`, for a
//!   client of either era ([`BearerClient`]);
//! - [`store`]: a server's sign-in as one keyring blob (tokens, registration, expiry).
//!
//! The protocol pieces OAuth already has a crate for (PKCE, the authorization URL, token and
//! refresh requests, client authentication) go through `oauth2` 5; the MCP-specific discovery,
//! registration and `iss` checks are here. No request of this module carries an MCP access
//! token, follows a redirect, or puts a token or secret in an error.

pub mod challenge;
pub mod discovery;
pub mod flow;
pub mod loopback;
pub mod session;
pub mod store;

pub use challenge::Challenge;
pub use discovery::{AuthServerMetadata, Discovered, ProtectedResource};
pub use flow::{
    Authorizer, ClientConfig, Credentials, PendingAuthorization, PreRegistered, Registration,
    RegistrationKind, RegistrationPlan, TokenAuth, TokenSet, MAX_STEP_UP_ATTEMPTS,
};
pub use loopback::{follow_without_browser, Callback, Loopback};
pub use session::{with_refresh, with_sign_in, BearerClient, SessionError};
pub use store::SignedOut;

/// Why signing in (or refreshing) failed. Messages are plain sentences for a person; none
/// contains a token, a client secret, an authorization code or a PKCE verifier.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A URL we were given or discovered is not usable.
    #[error("{what} is not a usable URL: {url}")]
    BadUrl {
        /// Which URL (for the message).
        what: &'static str,
        /// The URL as given.
        url: String,
    },
    /// A metadata request could not be sent or its answer read.
    #[error("could not fetch {url}: {message}")]
    Transport {
        /// The URL requested.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// No protected resource metadata at any of the places the spec lists.
    #[error(
        "the server at {server} publishes no OAuth protected resource metadata (tried {tried})"
    )]
    NoResourceMetadata {
        /// The MCP server URL.
        server: String,
        /// The URLs tried, in order.
        tried: String,
    },
    /// The protected resource metadata names another resource than this server.
    #[error(
        "the server's OAuth metadata is for {resource}, not for {server}: refusing to sign in"
    )]
    ResourceMismatch {
        /// The `resource` the metadata names.
        resource: String,
        /// The MCP server URL.
        server: String,
    },
    /// The protected resource metadata lists no authorization server.
    #[error("the server's OAuth metadata ({url}) names no authorization server")]
    NoAuthorizationServer {
        /// Where the metadata came from.
        url: String,
    },
    /// No authorization server metadata at any well-known URL for the issuer.
    #[error("the authorization server {issuer} publishes no metadata (tried {tried})")]
    NoServerMetadata {
        /// The issuer.
        issuer: String,
        /// The URLs tried, in order.
        tried: String,
    },
    /// The authorization server metadata claims another issuer than the one it was fetched for.
    #[error("the authorization server metadata at {url} names issuer {found}, not {expected}: refusing to use it")]
    IssuerMismatch {
        /// Where the metadata came from.
        url: String,
        /// The issuer we looked up.
        expected: String,
        /// The issuer the document names.
        found: String,
    },
    /// A metadata document is not the JSON the spec describes.
    #[error("{url} did not answer valid metadata: {message}")]
    BadMetadata {
        /// Where it came from.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The authorization server does not offer PKCE with S256, which OAuth 2.1 requires.
    #[error("the authorization server {issuer} does not advertise PKCE S256: refusing to sign in without it")]
    NoPkce {
        /// The issuer.
        issuer: String,
    },
    /// The authorization server lacks an endpoint the flow needs.
    #[error("the authorization server {issuer} has no {endpoint}")]
    MissingEndpoint {
        /// The issuer.
        issuer: String,
        /// Which endpoint.
        endpoint: &'static str,
    },
    /// The pre-registered client belongs to another authorization server.
    #[error(
        "the client id you gave is for {configured}, but this server now signs in at {issuer}"
    )]
    PreRegisteredElsewhere {
        /// The issuer the client was registered with.
        configured: String,
        /// The issuer in use.
        issuer: String,
    },
    /// No way to get a client id: nothing pre-registered, no client ID metadata document, no
    /// dynamic registration. A person has to register Countersign and give us the id.
    #[error("the authorization server {issuer} needs a client id: register Countersign with it (redirect URI http://127.0.0.1/callback, any port) and give the client id")]
    NeedsClientId {
        /// The issuer.
        issuer: String,
    },
    /// Dynamic client registration failed.
    #[error("client registration at {issuer} failed: {message}")]
    Registration {
        /// The issuer.
        issuer: String,
        /// What the server said (no secrets).
        message: String,
    },
    /// The authorization server supports no client authentication we can do.
    #[error("the authorization server {issuer} supports none of the token endpoint authentication methods none, client_secret_basic, client_secret_post")]
    NoTokenAuth {
        /// The issuer.
        issuer: String,
    },
    /// The callback's `state` is not the one we sent.
    #[error("the sign-in answer does not belong to this sign-in (state mismatch)")]
    StateMismatch,
    /// The callback's `iss` is missing (but advertised) or not the issuer we used (RFC 9207).
    #[error("the sign-in answer came from {found}, not from {expected}: ignoring it")]
    WrongIssuer {
        /// The issuer we sent the person to.
        expected: String,
        /// What came back (`<missing>` if absent).
        found: String,
    },
    /// The authorization server answered the authorization request with an error.
    #[error("the authorization server refused the sign-in: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Denied {
        /// The OAuth `error` code.
        error: String,
        /// `error_description`, if any.
        description: Option<String>,
    },
    /// The callback carried neither a code nor an error.
    #[error("the sign-in answer carries no authorization code")]
    NoCode,
    /// The token endpoint refused the request.
    #[error("the authorization server refused the token request: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    TokenRefused {
        /// The OAuth `error` code.
        error: String,
        /// `error_description`, if any.
        description: Option<String>,
    },
    /// The token endpoint's answer could not be used.
    #[error("the token request to {url} failed: {message}")]
    TokenRequest {
        /// The token endpoint.
        url: String,
        /// What went wrong (never the body: it may hold a token).
        message: String,
    },
    /// No refresh token to refresh with.
    #[error("no refresh token: the server needs a new sign-in")]
    NoRefreshToken,
    /// The server keeps asking for more scope.
    #[error("the server still refuses with insufficient_scope after {attempts} tries with new sign-ins; giving up")]
    StepUpLimit {
        /// Refusals taken (a sign-in followed each but the last).
        attempts: usize,
    },
    /// The authorization URL leads to another host than the one the person confirmed (the
    /// server's metadata changed between the two steps): nothing is opened.
    #[error("the sign-in would open {found}, not {confirmed} as you confirmed: nothing was opened; start the sign-in again to see where it leads")]
    HostNotConfirmed {
        /// The host shown and confirmed.
        confirmed: String,
        /// Where the authorization URL leads.
        found: String,
    },
    /// The browser could not be opened.
    #[error("could not open the browser: {message}")]
    Browser {
        /// What went wrong.
        message: String,
    },
    /// Nobody came back to the loopback address in time.
    #[error("the sign-in was not completed within {seconds} s")]
    Timeout {
        /// The limit.
        seconds: u64,
    },
    /// The fixed redirect port cannot be listened on (another program holds it).
    #[error("cannot listen on 127.0.0.1:{port} for the sign-in's answer ({message}): close the program that uses it, or register another redirect port")]
    RedirectPortTaken {
        /// The port.
        port: u16,
        /// What the system said.
        message: String,
    },
    /// The loopback listener failed.
    #[error("the local sign-in listener failed: {message}")]
    Loopback {
        /// What went wrong.
        message: String,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
