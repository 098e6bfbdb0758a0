//! Signing in the way a window does it, in two steps: what the sign-in will do (where the
//! browser will go, which scopes, as which client), shown before anything opens, then the
//! sign-in itself, bound to the host the person saw.

use std::future::Future;
use std::time::Duration;

use super::view::{ServerAddRequest, SignInPlan, SignInRegistration};
use super::{Console, Error, Result, SignInClient};
use crate::auth::{self, Challenge, RegistrationPlan};
use crate::ledger::events;
use crate::ledger::servers::ServerRecord;
use crate::mcp::{self, Client};

impl Console {
    /// What signing in to server `id` as `client` will do, found without opening anything and
    /// without sending a credential: the server's `401` challenge, its resource metadata and
    /// authorization server metadata (with every check of a real sign-in: the resource, the
    /// issuer, PKCE S256), the scopes that will be asked for, and how Countersign will be
    /// registered. A server that does not ask for a sign-in is [`Error::Invalid`]; each
    /// discovery failure is its own [`auth::Error`] with a plain sentence.
    pub async fn sign_in_plan(&self, id: i64, client: SignInClient) -> Result<SignInPlan> {
        let config = client.config()?;
        let server = self.server(id).await?;
        // Without any token: the challenge is what a sign-in starts from.
        let bare = Client::with_options(
            mcp::Endpoint::new(server.url.clone()),
            self.config.client.clone(),
            None,
        )?;
        let header = match bare.discover().await {
            Err(mcp::Error::Unauthorized {
                status: 401,
                www_authenticate,
                ..
            }) => www_authenticate,
            Err(e) => return Err(e.into()),
            Ok(_) => {
                return Err(Error::Invalid(format!(
                    "{} does not ask for a sign-in",
                    server.name
                )))
            }
        };
        let challenge = Challenge::parse(header.as_deref());
        let current = self.tokens.load_credentials(id).await.ok().flatten();
        let kept = match &current {
            Some(c) => Some(c.registration.clone()),
            None => self.tokens.load_registration(id).await.ok().flatten(),
        };
        let authorizer = auth::Authorizer::new(&server.url, config)
            .map_err(auth::SessionError::from)?
            .remembering(kept);
        let found = authorizer
            .discover(&challenge)
            .await
            .map_err(auth::SessionError::from)?;
        let registration = authorizer
            .registration_plan(&found, None)
            .map_err(auth::SessionError::from)?;
        let before = current
            .filter(|c| c.registration.issuer == found.issuer)
            .map(|c| c.tokens.scopes)
            .unwrap_or_default();
        let scopes = authorizer.scopes(&found, &challenge, &before);
        let endpoint = found
            .server
            .authorization_endpoint
            .as_deref()
            .ok_or_else(|| {
                auth::SessionError::from(auth::Error::MissingEndpoint {
                    issuer: found.issuer.clone(),
                    endpoint: "authorization endpoint",
                })
            })?;
        let host = crate::notice::link_host(endpoint).ok_or_else(|| {
            auth::SessionError::from(auth::Error::BadUrl {
                what: "the authorization endpoint",
                url: endpoint.to_owned(),
            })
        })?;
        let issuer_host =
            crate::notice::link_host(&found.issuer).unwrap_or_else(|| found.issuer.clone());
        Ok(SignInPlan {
            server_id: id,
            server: server.name,
            host,
            issuer_host,
            scopes,
            registration: match registration {
                RegistrationPlan::PreRegistered => SignInRegistration::PreRegistered,
                RegistrationPlan::Kept => SignInRegistration::Kept,
                RegistrationPlan::MetadataDocument => SignInRegistration::MetadataDocument,
                RegistrationPlan::Dynamic => SignInRegistration::Dynamic,
            },
        })
    }

    /// [`Console::sign_in_as`] after the person confirmed [`Console::sign_in_plan`]'s `host`:
    /// the browser opens only an authorization URL on that host; anything else (the server's
    /// metadata changed in between) fails with [`auth::Error::HostNotConfirmed`] and opens
    /// nothing.
    pub async fn sign_in_confirmed<F, Fut>(
        &self,
        id: i64,
        client: SignInClient,
        host: &str,
        open: F,
        timeout: Duration,
    ) -> Result<ServerRecord>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = auth::Result<()>>,
    {
        let open = &open;
        let guarded = move |url: String| async move {
            match crate::notice::link_host(&url) {
                Some(found) if found == host => open(url).await,
                found => Err(auth::Error::HostNotConfirmed {
                    confirmed: host.to_owned(),
                    found: found.unwrap_or_else(|| "a URL without a host".into()),
                }),
            }
        };
        self.sign_in_as(id, client, guarded, timeout).await
    }

    /// Registers a server; one that answers `401` without a token given (it is
    /// OAuth-protected) is registered undiscovered and marked "sign-in needed", so that the
    /// window can show the person where they would sign in ([`Console::sign_in_plan`]) before
    /// any browser opens. Everything else is [`Console::add_server`].
    pub async fn add_server_awaiting_sign_in(
        &self,
        request: ServerAddRequest,
    ) -> Result<ServerRecord> {
        let static_token = request
            .token
            .as_ref()
            .is_some_and(|t| !t.0.expose().trim().is_empty());
        let undiscovered = ServerAddRequest {
            discover: false,
            token: None,
            ..request.clone()
        };
        match self.add_server(request).await {
            Err(Error::Server(mcp::Error::Unauthorized { status: 401, .. })) if !static_token => {
                let added = self.add_server(undiscovered).await?;
                self.record_sign_in(
                    added.id,
                    events::EventKind::SignInNeeded {
                        message: "the server asks you to sign in".into(),
                    },
                )
                .await?;
                self.nudge();
                Ok(added)
            }
            other => other,
        }
    }
}
