//! Servers: add, update, check and remove them, sign in and out (tokens in the OS keyring, one
//! refresher per signed-in server), and their tools.

use std::time::Duration;

use crate::actions;
use crate::engine;
use crate::ledger::events;
use crate::ledger::servers::{self, ServerRecord};
use crate::mcp::{self, Client};
use crate::secrets;

use super::view::{ServerAddRequest, ServerUpdateRequest, ServerView, TokenChange, ToolView};
use super::{present, Console, Error, Result, SignInClient};

impl Console {
    /// A registered server.
    pub async fn server(&self, id: i64) -> Result<ServerRecord> {
        self.read(move |c| servers::get(c, id)).await
    }

    /// A registered server by name.
    pub async fn server_named(&self, name: &str) -> Result<Option<ServerRecord>> {
        let name = name.to_owned();
        self.read(move |c| servers::by_name(c, &name)).await
    }

    /// Registered servers as records.
    pub async fn server_records(&self) -> Result<Vec<ServerRecord>> {
        self.read(servers::list).await
    }

    /// Registered servers with their health.
    pub async fn servers(&self) -> Result<Vec<ServerView>> {
        let (list, seen, sign_ins) = self
            .read(|c| {
                Ok((
                    servers::list(c)?,
                    events::reachability(c)?,
                    events::sign_in_states(c)?,
                ))
            })
            .await?;
        Ok(list
            .iter()
            .map(|s| {
                let mut view = present::server(
                    s,
                    seen.iter().find(|r| r.server_id == s.id),
                    sign_ins.iter().find(|r| r.server_id == s.id),
                    self.tokens.sign_in_info(s.id),
                );
                if let Some(stdio) = &mut view.stdio {
                    stdio.process = self.stdio_process(s);
                }
                view
            })
            .collect())
    }

    /// One server with its health.
    pub async fn server_view(&self, id: i64) -> Result<ServerView> {
        self.servers()
            .await?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| Error::NotFound(format!("server #{id}")))
    }

    /// A client for `server` carrying that server's own token (if it has one).
    pub async fn client(&self, server: &ServerRecord) -> Result<Client> {
        self.read_tokens().await?;
        Ok(engine::make_client(server, &self.config)?)
    }

    /// The server's peer, of its era: the running engine's when it runs here (a legacy server's
    /// session and open questions are the engine's), else one for this action, whose legacy
    /// session is the one stored in the ledger.
    pub async fn peer(&self, server: &ServerRecord) -> Result<mcp::Peer> {
        self.read_tokens().await?;
        if let Some(engine) = self.engine() {
            return Ok(engine.peer_for(server)?);
        }
        Ok(engine::make_peer(server, &self.config, &self.ledger, None)?)
    }

    /// Registers a server: the name and URL are checked, the server asked what it is (with the
    /// token given, which is this server's), the row recorded, and the token kept in the OS
    /// keyring only. When the keyring cannot keep it, the server is not added.
    pub async fn add_server(&self, request: ServerAddRequest) -> Result<ServerRecord> {
        let name = request.name.trim().to_owned();
        let url = request.url.trim().to_owned();
        if name.is_empty() {
            return Err(Error::Invalid("a server needs a name".into()));
        }
        if self.server_named(&name).await?.is_some() {
            return Err(Error::Invalid(format!(
                "a server named {name:?} already exists"
            )));
        }
        let token = request
            .token
            .map(|t| t.0)
            .filter(|t| !t.expose().trim().is_empty());
        // The client validates the URL (http/https, a host, no credentials) before anything is
        // stored.
        let probe = Client::with_options(
            mcp::Endpoint::new(url.clone()).with_token(token.clone()),
            self.config.client.clone(),
            None,
        )?;
        // Either era: a server of the 2025-11-25 generation is initialized and its session kept.
        let found = if request.discover {
            Some(self.unless_cancelled(mcp::era::check(&probe)).await??)
        } else {
            None
        };
        // Stored without the token flag: the engine builds a server's client when the flag
        // flips, which happens only once the token is in the keyring and the cache.
        let mut record = actions::add_server(
            &self.ledger,
            &name,
            &url,
            false,
            found.as_ref(),
            &self.actor,
        )
        .await?;
        if let Some(token) = token {
            if let Err(e) = self.tokens.store(record.id, token).await {
                // A server whose token could not be kept would fail every request: undo.
                if let Err(undo) =
                    actions::remove_server(&self.ledger, record.id, &self.actor).await
                {
                    self.warn(&format!(
                        "server {name} stays registered without its token: {undo}"
                    ));
                }
                return Err(e.into());
            }
            match self.set_token_flag(record.id, true).await {
                Ok(flagged) => record = flagged,
                Err(e) => {
                    // Neither a token nobody knows of nor a server without its token stays.
                    let _ = self.tokens.delete(record.id).await;
                    let _ = actions::remove_server(&self.ledger, record.id, &self.actor).await;
                    return Err(e);
                }
            }
        }
        self.nudge();
        Ok(record)
    }

    /// Flips `has_token` without an audit entry (part of an audited add), with the
    /// `server_updated` event every window and engine follows.
    async fn set_token_flag(&self, id: i64, has_token: bool) -> Result<ServerRecord> {
        Ok(self
            .ledger
            .write(move |ctx| {
                let s = servers::get(ctx.conn, id)?;
                servers::update(ctx.conn, id, &s.url, has_token, s.poll_floor_ms)?;
                ctx.append(events::NewEvent {
                    task: None,
                    server_id: Some(id),
                    via: events::Via::User,
                    kind: events::EventKind::ServerUpdated {
                        name: s.name.clone(),
                        url: s.url.clone(),
                    },
                })?;
                servers::get(ctx.conn, id)
            })
            .await?)
    }

    /// Changes a server's URL, poll floor and token.
    pub async fn update_server(&self, request: ServerUpdateRequest) -> Result<ServerRecord> {
        let before = self.server(request.id).await?;
        let url = request.url.trim().to_owned();
        Client::new(mcp::Endpoint::new(url.clone()))?;
        let has_token = match request.token {
            TokenChange::Keep => before.has_token,
            TokenChange::Set { token } if token.0.expose().trim().is_empty() => before.has_token,
            TokenChange::Set { token } => {
                self.tokens.store(before.id, token.0).await?;
                if let Some(engine) = self.engine() {
                    // The ledger cannot see a replaced token: have the engine rebuild its clients.
                    engine.reload_links();
                }
                true
            }
            TokenChange::Clear => {
                self.tokens.delete(before.id).await?;
                false
            }
        };
        actions::update_server(
            &self.ledger,
            before.id,
            &url,
            has_token,
            request.poll_floor_ms,
            &self.actor,
        )
        .await?;
        self.nudge();
        self.server(before.id).await
    }

    /// Signs in to the OAuth-protected server `id`: discovery from its `401`, registration, the
    /// browser step (`open` shows the person the authorization URL; the loopback listener waits
    /// at most `timeout`), the token request. The sign-in goes to the OS keyring only, and the
    /// engine sends its access token to this server from then on. A server that does not ask
    /// for a sign-in is refused ([`Error::Invalid`]).
    pub async fn sign_in<F, Fut>(&self, id: i64, open: F, timeout: Duration) -> Result<ServerRecord>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = crate::auth::Result<()>>,
    {
        self.sign_in_as(id, SignInClient::default(), open, timeout)
            .await
    }

    /// [`Console::sign_in`] as a client the person chose: a client they registered with the
    /// authorization server themselves (its secret goes to the OS keyring with the sign-in and
    /// nowhere else), and/or our client ID metadata document at their URL.
    pub async fn sign_in_as<F, Fut>(
        &self,
        id: i64,
        client: SignInClient,
        open: F,
        timeout: Duration,
    ) -> Result<ServerRecord>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = crate::auth::Result<()>>,
    {
        let config = client.config()?;
        let server = self.server(id).await?;
        let client = Client::with_options(
            mcp::Endpoint::new(server.url.clone()),
            self.config.client.clone(),
            None,
        )?;
        // The last sign-in keeps its registration (a new one only for a new authorization
        // server), also after a sign-out; an unreadable one is simply replaced.
        let mut credentials = self.tokens.load_credentials(id).await.ok().flatten();
        let kept = match credentials {
            Some(_) => None,
            None => self.tokens.load_registration(id).await.ok().flatten(),
        };
        let authorizer = crate::auth::Authorizer::new(&server.url, config)
            .map_err(crate::auth::SessionError::from)?
            .remembering(kept);
        let before = credentials.as_ref().map(|c| c.tokens.access_token.clone());
        let found = crate::auth::with_sign_in(
            &client,
            &authorizer,
            &mut credentials,
            || mcp::era::check(&client),
            open,
            timeout,
        )
        .await?;
        // Only a 401 leads to a new token (signed in or refreshed): same token, open server.
        let Some(credentials) =
            credentials.filter(|c| Some(&c.tokens.access_token) != before.as_ref())
        else {
            return Err(Error::Invalid(format!(
                "{} does not ask for a sign-in",
                server.name
            )));
        };
        self.tokens.store_credentials(id, &credentials).await?;
        actions::record_check(&self.ledger, id, &found).await?;
        let record = self.set_token_flag(id, true).await?;
        // Every engine (here or in another process) reloads the token and resumes the server's
        // tasks if they waited for this sign-in.
        self.record_sign_in(id, events::EventKind::SignedIn).await?;
        self.nudge();
        self.keep_fresh(id, authorizer, credentials);
        Ok(record)
    }

    /// Registers a server and, when it answers `401` without a token given (it is
    /// OAuth-protected), signs in to it (see [`Console::sign_in`]). A sign-in that fails leaves
    /// the server registered, waiting for a sign-in, and returns the sign-in's error.
    pub async fn add_server_signing_in<F, Fut>(
        &self,
        request: ServerAddRequest,
        client: SignInClient,
        open: F,
        timeout: Duration,
    ) -> Result<ServerRecord>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = crate::auth::Result<()>>,
    {
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
            // Registered undiscovered; the sign-in discovers it with the token.
            Err(Error::Server(mcp::Error::Unauthorized { status: 401, .. })) if !static_token => {
                // Checked before anything is registered: a bad client URL adds nothing.
                client.config()?;
                let added = self.add_server(undiscovered).await?;
                self.sign_in_as(added.id, client, open, timeout).await
            }
            other => other,
        }
    }

    /// Keeps server `id`'s sign-in fresh for as long as this process runs an engine (see
    /// [`sign_ins::Refreshers`]).
    pub(super) fn keep_fresh(
        &self,
        id: i64,
        authorizer: crate::auth::Authorizer,
        credentials: crate::auth::Credentials,
    ) {
        self.refreshers.keep_fresh(
            id,
            authorizer.server().to_owned(),
            credentials,
            self.tokens.clone(),
            self.flights.clone(),
        );
    }

    /// Appends a server's `signed_in`/`signed_out`, the event engines act on.
    pub(super) async fn record_sign_in(&self, id: i64, kind: events::EventKind) -> Result<()> {
        self.ledger
            .write(move |ctx| {
                ctx.append(events::NewEvent {
                    task: None,
                    server_id: Some(id),
                    via: events::Via::User,
                    kind,
                })?;
                Ok(())
            })
            .await?;
        Ok(())
    }

    fn stop_refreshing(&self, id: i64) {
        self.refreshers.stop(id);
    }

    /// Signs out of server `id`: its OAuth tokens leave the keyring (and the engine stops
    /// sending them); the client registration stays in the keyring, so the next sign-in is the
    /// same client and the server's tasks for that client resume. The server and its tasks
    /// stay. [`Console::forget_sign_in`] forgets the registration too.
    pub async fn sign_out(&self, id: i64) -> Result<ServerRecord> {
        self.signing_out(id, false).await
    }

    /// Signs out of server `id` and forgets its client registration: the next sign-in registers
    /// anew (a new client to the server, which may not know the old client's tasks).
    pub async fn forget_sign_in(&self, id: i64) -> Result<ServerRecord> {
        self.signing_out(id, true).await
    }

    async fn signing_out(&self, id: i64, forget_client: bool) -> Result<ServerRecord> {
        let server = self.server(id).await?;
        self.stop_refreshing(id);
        if forget_client {
            self.tokens.delete_credentials(id).await?;
        } else {
            self.tokens.delete_tokens(id).await?;
        }
        let record = if server.has_token && self.tokens.get(id).is_none() {
            self.set_token_flag(id, false).await?
        } else {
            server
        };
        self.record_sign_in(id, events::EventKind::SignedOut)
            .await?;
        self.nudge();
        Ok(record)
    }

    /// Removes a server, everything tracked on it, and its token.
    pub async fn remove_server(&self, id: i64) -> Result<()> {
        let server = self.server(id).await?;
        // The secret first: a server row without its secret is harmless, an orphaned secret is
        // not. (A server without one needs no keyring at all: the CLI works without one.)
        if server.has_token {
            self.tokens.delete(server.id).await?;
        }
        if server
            .command
            .as_ref()
            .is_some_and(|c| !c.secret_env.is_empty())
        {
            self.tokens.delete_env(server.id).await?;
        }
        self.stop_refreshing(server.id);
        // An OAuth sign-in has no flag in the ledger; where there is no keyring there is none.
        match self.tokens.delete_credentials(server.id).await {
            Ok(()) | Err(secrets::Error::NoKeyring { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        actions::remove_server(&self.ledger, server.id, &self.actor).await?;
        self.nudge();
        Ok(())
    }

    /// Asks the server what it is again (either era) and records what it says.
    pub async fn check_server(&self, id: i64) -> Result<ServerRecord> {
        let server = self.server(id).await?;
        let checked = if server.is_stdio() {
            self.unless_cancelled(self.check_stdio(&server)).await??
        } else {
            let client = self.client(&server).await?;
            self.unless_cancelled(mcp::era::check(&client)).await?
        };
        let found = match checked {
            Ok(found) => found,
            Err(e) => {
                // A server that cannot be reached shows as unreachable, not "unknown" (a server
                // added anyway has no tasks, so the engine would never say so).
                if e.class() == mcp::ErrorClass::Transient {
                    actions::record_unreachable(&self.ledger, id, e.to_string()).await?;
                }
                return Err(e.into());
            }
        };
        let record = actions::record_check(&self.ledger, id, &found).await?;
        if let mcp::Connection::Legacy(probe) = &found {
            let kept = record.legacy_session.as_ref().map(|s| &s.session_id);
            if kept != Some(&probe.session().session_id) {
                // The stored session was kept for its tasks: this one is not needed.
                let _ = probe.close().await;
            }
        }
        self.server(id).await
    }

    /// Stops every server check waiting for its server now (adding with discovery, checking):
    /// each ends with [`Error::Cancelled`] and records nothing. The server may still see the
    /// request; a check only reads.
    pub fn cancel_checks(&self) {
        self.checks
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// `work`, unless [`Console::cancel_checks`] is called before it ends.
    pub(super) async fn unless_cancelled<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T> {
        let mut cancelled = self.checks.subscribe();
        tokio::select! {
            done = work => Ok(done),
            _ = cancelled.changed() => Err(Error::Cancelled),
        }
    }

    /// The tools of a server.
    pub async fn tools(&self, server_id: i64) -> Result<Vec<ToolView>> {
        let server = self.server(server_id).await?;
        if let mcp::Peer::Legacy(peer) = self.peer(&server).await? {
            let tools = peer.client().await?.list_tools().await?;
            return Ok(tools
                .into_iter()
                .map(|t| {
                    present::tool(&mcp::Tool {
                        name: t.name,
                        definition: t.definition,
                        header_params: Vec::new(),
                    })
                })
                .collect());
        }
        let list = self.client(&server).await?.list_tools().await?;
        Ok(list.tools.iter().map(present::tool).collect())
    }
}
