//! One operation against an OAuth-protected server: sign in on `401`, step up on
//! `403 insufficient_scope` (bounded), and retry the operation with the new token.

use std::future::Future;
use std::time::Duration;

use super::challenge::Challenge;
use super::flow::{Authorizer, Credentials, MAX_STEP_UP_ATTEMPTS};
use crate::mcp;

/// How an operation with sign-in failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The server's own failure (or a refusal we do not sign in for).
    #[error(transparent)]
    Mcp(#[from] mcp::Error),
    /// Signing in failed.
    #[error(transparent)]
    Auth(#[from] super::Error),
}

/// Runs `op` on `client`; on `401` signs in (discovery anew each time, so a moved
/// authorization server is noticed and registered with), on `403 insufficient_scope` signs in
/// again for the old and the challenged scopes, and retries. After
/// [`MAX_STEP_UP_ATTEMPTS`] scope refusals (or as many `401`s right after signing in) the
/// operation fails. `credentials` holds the server's sign-in between operations.
pub async fn with_sign_in<T, Op, OpFut, Open, OpenFut>(
    client: &mcp::Client,
    authorizer: &Authorizer,
    credentials: &mut Option<Credentials>,
    mut op: Op,
    open: Open,
    timeout: Duration,
) -> Result<T, SessionError>
where
    Op: FnMut() -> OpFut,
    OpFut: Future<Output = mcp::Result<T>>,
    Open: Fn(String) -> OpenFut,
    OpenFut: Future<Output = super::Result<()>>,
{
    let mut refusals = 0;
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

fn unauthorized(status: u16, www_authenticate: Option<String>) -> SessionError {
    SessionError::Mcp(mcp::Error::Unauthorized {
        status,
        method: String::new(),
        www_authenticate,
    })
}
