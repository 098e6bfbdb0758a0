//! The person's settings on the console ([`crate::settings`]: the keys, defaults and checks).
//! A change is one synced transaction: the changed rows, an audit record with the new values
//! and a `settings_changed` event, which the app follows to apply them (in any process) and the
//! engine reads its poll floor from.

use serde_json::{Map, Value};

use super::{Console, Result};
use crate::ledger::audit::{self, NewAudit};
use crate::ledger::events::NewEvent;
use crate::ledger::{settings as rows, EventKind, Via};
use crate::settings::Settings;

impl Console {
    /// The settings now: each stored one, the default for the rest. A stored value this build
    /// cannot use is logged and read as its default.
    pub async fn settings(&self) -> Result<Settings> {
        let stored = self.read(rows::all).await?;
        let (settings, mistakes) = Settings::from_rows(&stored);
        for mistake in mistakes {
            tracing::warn!("a stored setting is ignored: {mistake}");
        }
        Ok(settings)
    }

    /// Replaces the settings with `wanted` once every value checks out
    /// ([`crate::settings::SettingsError`] otherwise, nothing written). Only the keys that
    /// changed are written; nothing changed writes nothing. Returns the settings now.
    pub async fn set_settings(&self, wanted: Settings) -> Result<Settings> {
        let wanted = wanted.validate()?;
        let before = self.settings().await?;
        let changed: Vec<(&'static str, Value)> = wanted
            .to_rows()
            .into_iter()
            .zip(before.to_rows())
            .filter(|((_, new), (_, old))| new != old)
            .map(|(new, _)| new)
            .collect();
        if changed.is_empty() {
            return Ok(wanted);
        }
        let actor = self.actor.clone();
        self.ledger
            .write(move |ctx| {
                let mut detail = Map::new();
                for (key, value) in &changed {
                    rows::put(ctx.conn, key, value)?;
                    detail.insert((*key).to_owned(), value.clone());
                }
                audit::record(
                    ctx.conn,
                    NewAudit {
                        actor: &actor,
                        action: crate::ledger::audit::AuditAction::SettingsChange,
                        server: None,
                        task_id: None,
                        input_key: None,
                        detail: Value::Object(detail),
                    },
                )?;
                ctx.append(NewEvent {
                    task: None,
                    server_id: None,
                    via: Via::User,
                    kind: EventKind::SettingsChanged {
                        keys: changed.iter().map(|(k, _)| (*k).to_owned()).collect(),
                    },
                })?;
                Ok(())
            })
            .await?;
        // Our engine takes the new poll floor now; another process's sees the commit.
        self.nudge();
        Ok(wanted)
    }

    /// Sets one setting from its text form (`countersign settings set KEY VALUE`).
    pub async fn set_setting(&self, key: &str, value: &str) -> Result<Settings> {
        let wanted = self.settings().await?.with(key, value)?;
        self.set_settings(wanted).await
    }
}
