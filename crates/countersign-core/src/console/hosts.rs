//! "Put my servers behind Countersign" on the console: a host's file ([`crate::hosts`]) read,
//! its servers registered, the file rewritten so each goes through the gateway with a new
//! agent's token, and undone. The CLI's `agents import` and the app's Agents view both come
//! here.
//!
//! Registering one server is one seam, [`Console::register_imported`]: HTTP servers are added
//! as `servers add NAME URL` adds them, their bearer token to the keyring; stdio servers as
//! `servers add NAME -- COMMAND` does, their whole environment to the keyring.

use std::path::Path;

use serde::Serialize;

use super::view::{SecretText, ServerAddRequest, StdioAddRequest};
use super::{Console, Result};
use crate::hosts::{self, config::HostFile, file, Entry, Host, Route, ServerSpec};
use crate::ledger::servers::ServerRecord;
use crate::sensitive::Sensitive;

/// Where the rewritten entries point: the gateway's URL, and for stdio hosts the `countersign`
/// command and data directory.
#[derive(Debug, Clone)]
pub struct ImportTarget {
    /// The gateway's base URL (`…/mcp/`).
    pub gateway_url: String,
    /// The `countersign` executable, for hosts that start only stdio servers.
    pub command: String,
    /// The data directory `countersign connect` reads the gateway's URL from, when not the
    /// default.
    pub data_dir: Option<String>,
    /// The agent to create for the file (default: the host's id, numbered if taken).
    pub agent: Option<String>,
}

/// How a server was reached, as shown (never a token or an environment value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum ImportedServer {
    /// Streamable HTTP.
    Http {
        /// Its endpoint.
        url: String,
        /// Whether the file gave a bearer token (it goes to the keyring).
        has_token: bool,
    },
    /// A process the host starts.
    Stdio {
        /// The executable.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// The names of its environment variables (their values are not shown).
        env_keys: Vec<String>,
        /// Its working directory.
        #[cfg_attr(feature = "ts", ts(optional))]
        #[serde(skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
    /// Already through Countersign, or not a server Countersign can take over.
    Other,
}

/// What happens (preview) or happened (apply) to one entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ImportAction {
    /// It will be registered with Countersign and go through the gateway.
    Register,
    /// It was registered.
    Registered,
    /// A server of that name and URL is registered already: it only goes through the gateway.
    Reuse,
    /// It already goes through Countersign: nothing to do.
    AlreadyBehind,
    /// A server of that name is registered with another URL: left as it is.
    Conflict {
        /// Why.
        reason: String,
    },
    /// Countersign cannot take it over as it is: left as it is.
    Unsupported {
        /// Why.
        reason: String,
    },
    /// Registering it failed: left as it is.
    Failed {
        /// Why (no secret).
        reason: String,
    },
}

/// One entry of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ImportItem {
    /// Its name in the file and in Countersign.
    pub name: String,
    /// How the host reaches it today.
    pub server: ImportedServer,
    /// What happens to it.
    #[serde(flatten)]
    pub action: ImportAction,
    /// Whether its entry (will) go through the gateway.
    pub rewritten: bool,
}

/// A host file's import: previewed or applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ImportReport {
    /// The file.
    pub path: String,
    /// Whose file it is.
    pub host: Host,
    /// Its entries.
    pub items: Vec<ImportItem>,
    /// The unified diff of the file (secrets masked; the agent's token as `<agent token>`),
    /// empty when nothing changes.
    pub diff: String,
    /// Whether the file was written.
    pub applied: bool,
    /// Where its original is kept (after apply, or from an earlier import not undone).
    #[cfg_attr(feature = "ts", ts(optional))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// The agent created for it (its token is in the file, nowhere else).
    #[cfg_attr(feature = "ts", ts(optional))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// What undo did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ImportUndone {
    /// The file, restored.
    pub path: String,
    /// The agent revoked with it (its token was only in the rewritten file).
    #[cfg_attr(feature = "ts", ts(optional))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_revoked: Option<String>,
}

/// What [`Console::register_imported`] did.
#[derive(Debug, Clone)]
pub enum Registration {
    /// Added.
    Added(ServerRecord),
}

fn shown(entry: &Entry) -> ImportedServer {
    match entry {
        Entry::Server(ServerSpec::Http { url, token }) => ImportedServer::Http {
            url: url.clone(),
            has_token: token.is_some(),
        },
        Entry::Server(ServerSpec::Stdio {
            command,
            args,
            env,
            cwd,
        }) => ImportedServer::Stdio {
            command: command.clone(),
            args: args.clone(),
            env_keys: env.keys().cloned().collect(),
            cwd: cwd.clone(),
        },
        Entry::Behind | Entry::Unsupported(_) => ImportedServer::Other,
    }
}

/// Two URLs of one server (a trailing slash is not a different server).
fn same_url(a: &str, b: &str) -> bool {
    a.trim().trim_end_matches('/') == b.trim().trim_end_matches('/')
}

impl Console {
    /// Registers one server found in a host's file under `name`, as `servers add` does: asked
    /// what it is first (a stdio server: started once for that), its token or environment to
    /// the keyring only. A stdio server's whole environment is taken as secret: hosts' files
    /// put API keys there.
    pub async fn register_imported(&self, name: &str, spec: &ServerSpec) -> Result<Registration> {
        let record = match spec {
            ServerSpec::Http { url, token } => {
                self.add_server(ServerAddRequest {
                    name: name.to_owned(),
                    url: url.clone(),
                    token: token.clone().map(SecretText),
                    discover: true,
                })
                .await?
            }
            ServerSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                self.add_stdio_server(StdioAddRequest {
                    name: name.to_owned(),
                    program: command.clone(),
                    args: args.clone(),
                    env: Vec::new(),
                    secret_env: env
                        .iter()
                        .map(|(k, v)| (k.clone(), SecretText(v.clone())))
                        .collect(),
                    cwd: cwd.clone(),
                    discover: true,
                })
                .await?
            }
        };
        Ok(Registration::Added(record))
    }

    /// What importing `path` would do: its entries and the diff of the file, nothing written.
    pub async fn import_preview(&self, path: &Path, target: &ImportTarget) -> Result<ImportReport> {
        let file = hosts::config::read(path)?;
        let items = self.plan(&file).await?;
        let route = route(target, Sensitive::new(hosts::TOKEN_PLACEHOLDER.to_owned()));
        let names = rewritten_names(&items);
        let text = hosts::rewrite::rewrite(&file, &names, &route);
        let diff = if names.is_empty() {
            String::new()
        } else {
            file::diff(path, &file.text, &text, &file::secrets_of(&file))
        };
        Ok(ImportReport {
            path: path.display().to_string(),
            host: file.host,
            items,
            diff,
            applied: false,
            backup: file::imported(path).then(|| file::backup_path(path).display().to_string()),
            agent: None,
        })
    }

    /// Imports `path`: registers its servers, creates the agent, and rewrites the file (the
    /// original kept beside it) so each registered server goes through the gateway. An entry
    /// that could not be registered stays as it was. Nothing is written when nothing would
    /// change.
    pub async fn import_apply(&self, path: &Path, target: &ImportTarget) -> Result<ImportReport> {
        let file = hosts::config::read(path)?;
        if file::imported(path) {
            return Err(hosts::Error::AlreadyImported {
                path: path.to_owned(),
                backup: file::backup_path(path),
            }
            .into());
        }
        let mut items = self.plan(&file).await?;
        let mut report = ImportReport {
            path: path.display().to_string(),
            host: file.host,
            items: Vec::new(),
            diff: String::new(),
            applied: false,
            backup: None,
            agent: None,
        };
        if rewritten_names(&items).is_empty() {
            report.items = items;
            return Ok(report);
        }
        // The agent first: a name that cannot be used stops the import before anything is
        // registered.
        let (agent, token) = self.import_agent(&file, target).await?;
        for (item, found) in items.iter_mut().zip(&file.servers) {
            let (ImportAction::Register, Entry::Server(spec)) = (&item.action, &found.entry) else {
                continue;
            };
            (item.action, item.rewritten) = match self.register_imported(&found.name, spec).await {
                Ok(Registration::Added(_)) => (ImportAction::Registered, true),
                Err(e) => (
                    ImportAction::Failed {
                        reason: e.to_string(),
                    },
                    false,
                ),
            };
        }
        let names = rewritten_names(&items);
        report.items = items;
        if names.is_empty() {
            // Its token would be in no file: an agent nobody can use.
            let _ = self.remove_agent(&agent).await;
            return Ok(report);
        }
        let route = route(target, token);
        let text = hosts::rewrite::rewrite(&file, &names, &route);
        let mut secrets = file::secrets_of(&file);
        secrets.push(route.token.expose().clone());
        report.diff = file::diff(path, &file.text, &text, &secrets);
        match file::write(&file, &text, Some(&agent)) {
            Ok(backup) => {
                report.applied = true;
                report.backup = Some(backup.display().to_string());
                report.agent = Some(agent);
                Ok(report)
            }
            Err(e) => {
                // Its token is in no file: an agent nobody can use.
                let _ = self.remove_agent(&agent).await;
                Err(e.into())
            }
        }
    }

    /// Restores `path` from the backup an import left, when the file is still what the import
    /// wrote, and revokes the agent created for it. The registered servers stay.
    pub async fn import_undo(&self, path: &Path) -> Result<ImportUndone> {
        let restored = file::undo(path)?;
        let mut agent_revoked = None;
        if let Some(agent) = restored.agent {
            if self.remove_agent(&agent).await.is_ok() {
                agent_revoked = Some(agent);
            }
        }
        Ok(ImportUndone {
            path: path.display().to_string(),
            agent_revoked,
        })
    }

    /// Each entry's action, from the file and the servers registered now.
    async fn plan(&self, file: &HostFile) -> Result<Vec<ImportItem>> {
        let mut items = Vec::with_capacity(file.servers.len());
        for found in &file.servers {
            let (action, rewritten) = match &found.entry {
                Entry::Behind => (ImportAction::AlreadyBehind, false),
                Entry::Unsupported(reason) => (
                    ImportAction::Unsupported {
                        reason: reason.clone(),
                    },
                    false,
                ),
                Entry::Server(spec) => match (self.server_named(&found.name).await?, spec) {
                    (Some(existing), ServerSpec::Http { url, .. })
                        if same_url(&existing.url, url) =>
                    {
                        (ImportAction::Reuse, true)
                    }
                    (Some(existing), ServerSpec::Stdio { command, args, .. })
                        if existing
                            .command
                            .as_ref()
                            .is_some_and(|c| &c.program == command && &c.args == args) =>
                    {
                        (ImportAction::Reuse, true)
                    }
                    (Some(existing), _) => (
                        ImportAction::Conflict {
                            reason: format!(
                                "a server named {:?} is registered with {}",
                                found.name, existing.url
                            ),
                        },
                        false,
                    ),
                    (None, _) => (ImportAction::Register, true),
                },
            };
            items.push(ImportItem {
                name: found.name.clone(),
                server: shown(&found.entry),
                action,
                rewritten,
            });
        }
        Ok(items)
    }

    /// The agent whose token goes into the file: the name asked for, else the host's id,
    /// numbered past the names taken.
    async fn import_agent(
        &self,
        file: &HostFile,
        target: &ImportTarget,
    ) -> Result<(String, Sensitive<String>)> {
        let name = match &target.agent {
            Some(name) => name.trim().to_owned(),
            None => {
                let taken: Vec<String> = self.agents().await?.into_iter().map(|a| a.name).collect();
                let base = file.host.id();
                std::iter::once(base.to_owned())
                    .chain((2..).map(|n| format!("{base}-{n}")))
                    .find(|n| !taken.contains(n))
                    .unwrap_or_else(|| base.to_owned())
            }
        };
        let (agent, token) = self.add_agent(&name).await?;
        Ok((agent.name, token))
    }
}

fn rewritten_names(items: &[ImportItem]) -> Vec<String> {
    items
        .iter()
        .filter(|i| i.rewritten)
        .map(|i| i.name.clone())
        .collect()
}

fn route(target: &ImportTarget, token: Sensitive<String>) -> Route {
    Route {
        gateway_url: target.gateway_url.clone(),
        token,
        command: target.command.clone(),
        data_dir: target.data_dir.clone(),
    }
}
