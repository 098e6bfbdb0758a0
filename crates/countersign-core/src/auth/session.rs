//! One operation against an OAuth-protected server: sign in on `401`, step up on
//! `403 insufficient_scope` (bounded), and retry the operation with the new token.

use std::future::Future;
use std::time::Duration;

use super::challenge::Challenge;
use super::flow::{Authorizer, Credentials, MAX_STEP_UP_ATTEMPTS};
use crate::mcp;
use crate::sensitive::Sensitive;

/// What sends the bearer token a sign-in obtains: the client of either era. The retry of an
/// operation only needs to hand it the new token; the operation itself is the caller's.
pub trait BearerClient {
    /// Replaces the bearer token sent from now on.
    fn set_bearer_token(&self, token: Option<Sensitive<String>>);
}

impl BearerClient for mcp::Client {
    fn set_bearer_token(&self, token: Option<Sensitive<String>>) {
        mcp::Client::set_bearer_token(self, token);
    }
}

impl BearerClient for mcp::LegacyClient {
    fn set_bearer_token(&self, token: Option<Sensitive<String>>) {
        mcp::LegacyClient::set_bearer_token(self, token);
    }
}

/// How an operation with sign-in failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The server's own failure (or a refusal we do not sign in for).
    #[error(transparent)]
    Mcp(#[from] mcp::Error),
    /// Signing in failed.
    #[error(transparent)]
    Auth(#[from] super::Error),
    /// The server refuses our token and a refresh cannot help: a person has to sign in again.
    #[error("{server} needs you to sign in again ({reason})")]
    SignInNeeded {
        /// The MCP server.
        server: String,
        /// Why (no refresh token, or what the authorization server said), without secrets.
        reason: String,
        /// The server's challenge, for the sign-in that follows.
        challenge: Challenge,
    },
}

/// Runs `op` on `client`; on `401` signs in (discovery anew each time, so a moved
/// authorization server is noticed and registered with), on `403 insufficient_scope` signs in
/// again for the old and the challenged scopes, and retries. After
/// [`MAX_STEP_UP_ATTEMPTS`] scope refusals (or as many `401`s right after signing in) the
/// operation fails. `credentials` holds the server's sign-in between operations.
pub async fn with_sign_in<C, T, Op, OpFut, Open, OpenFut>(
    client: &C,
    authorizer: &Authorizer,
    credentials: &mut Option<Credentials>,
    mut op: Op,
    open: Open,
    timeout: Duration,
) -> Result<T, SessionError>
where
    C: BearerClient + ?Sized,
    Op: FnMut() -> OpFut,
    OpFut: Future<Output = mcp::Result<T>>,
    Open: Fn(String) -> OpenFut,
    OpenFut: Future<Output = super::Result<()>>,
{
    let mut refusals = 0;
    let mut refreshed = false;
    loop {
        let (status, header) = match op().await {
            Err(mcp::Error::Unauthorized {
                status,
                www_authenticate,
                ..
            }) => (status, www_authenticate),
            other => return Ok(other?),
        };
        let challenge = Challenge::parse(header.as_deref());
        if status == 403 && !challenge.is_insufficient_scope() {
            return Err(unauthorized(status, header));
        }
        // An expired token first gets a refresh (no browser), once per operation.
        if status == 401 && !refreshed {
            if let Some(current) = credentials.as_ref() {
                refreshed = true;
                if let Ok(fresh) = authorizer.refresh(current).await {
                    client.set_bearer_token(Some(fresh.tokens.access_token.clone()));
                    *credentials = Some(fresh);
                    continue;
                }
            }
        }
        refusals += 1;
        if refusals >= MAX_STEP_UP_ATTEMPTS {
            if status == 403 {
                return Err(super::Error::StepUpLimit { attempts: refusals }.into());
            }
            return Err(unauthorized(status, header));
        }
        let signed_in = authorizer
            .sign_in(&challenge, credentials.as_ref(), &open, timeout)
            .await?;
        client.set_bearer_token(Some(signed_in.tokens.access_token.clone()));
        *credentials = Some(signed_in);
    }
}

/// Runs `op` without ever asking a person: refreshes the token when it expires within
/// `margin` (before the request) and once on a `401`; when that cannot help, fails with
/// [`SessionError::SignInNeeded`]. For background work (the engine's polling), where a browser
/// must not open by itself.
pub async fn with_refresh<C, T, Op, OpFut>(
    client: &C,
    authorizer: &Authorizer,
    credentials: &mut Credentials,
    margin: Duration,
    mut op: Op,
) -> Result<T, SessionError>
where
    C: BearerClient + ?Sized,
    Op: FnMut() -> OpFut,
    OpFut: Future<Output = mcp::Result<T>>,
{
    let mut refreshed = false;
    if credentials
        .tokens
        .expires_within(std::time::SystemTime::now(), margin)
        && credentials.tokens.refresh_token.is_some()
    {
        refreshed = true;
        refresh_into(client, authorizer, credentials, Challenge::default()).await?;
    }
    loop {
        let header = match op().await {
            Err(mcp::Error::Unauthorized {
                status: 401,
                www_authenticate,
                ..
            }) => www_authenticate,
            other => return Ok(other?),
        };
        let challenge = Challenge::parse(header.as_deref());
        if refreshed {
            return Err(SessionError::SignInNeeded {
                server: authorizer.server().to_owned(),
                reason: "the server refused a freshly refreshed token".into(),
                challenge,
            });
        }
        refreshed = true;
        refresh_into(client, authorizer, credentials, challenge).await?;
    }
}

async fn refresh_into<C: BearerClient + ?Sized>(
    client: &C,
    authorizer: &Authorizer,
    credentials: &mut Credentials,
    challenge: Challenge,
) -> Result<(), SessionError> {
    match authorizer.refresh(credentials).await {
        Ok(fresh) => {
            client.set_bearer_token(Some(fresh.tokens.access_token.clone()));
            *credentials = fresh;
            Ok(())
        }
        // Unreachable authorization server: transient, the caller retries later.
        Err(e @ super::Error::TokenRequest { .. }) => Err(e.into()),
        Err(e) => Err(SessionError::SignInNeeded {
            server: authorizer.server().to_owned(),
            reason: e.to_string(),
            challenge,
        }),
    }
}

fn unauthorized(status: u16, www_authenticate: Option<String>) -> SessionError {
    SessionError::Mcp(mcp::Error::Unauthorized {
        status,
        method: String::new(),
        www_authenticate,
    })
}
