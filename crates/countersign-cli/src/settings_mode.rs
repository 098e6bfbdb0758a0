//! `countersign settings [get [KEY] | set KEY VALUE]`: the settings of the app's Settings page,
//! through the same console calls (checked there; a mistake names its setting and exits 64).
//! A running app applies a change at once: it follows the ledger's `settings_changed` event.

use countersign_core::settings::KEYS;
use serde_json::Value;

use crate::ledger_mode::Desk;
use crate::terminal::{self, say};
use crate::{CliError, EXIT_COMPLETED};

/// `settings get [KEY]`: every setting as `key = value`, or one value alone.
pub(crate) async fn get(desk: &Desk, key: Option<&str>, json_out: bool) -> Result<u8, CliError> {
    let settings = desk.console().settings().await?;
    match key {
        Some(key) => {
            let value = settings.text_of(key).ok_or_else(|| {
                CliError::Usage(format!(
                    "there is no setting {key:?} (settings: {})",
                    KEYS.join(", ")
                ))
            })?;
            if json_out {
                terminal::json(&Value::String(value));
            } else {
                say!("{value}");
            }
        }
        None if json_out => {
            terminal::json(&serde_json::to_value(&settings).unwrap_or(Value::Null));
        }
        None => {
            for (key, _) in settings.to_rows() {
                say!("{key} = {}", settings.text_of(key).unwrap_or_default());
            }
        }
    }
    Ok(EXIT_COMPLETED)
}

/// `settings set KEY VALUE`.
pub(crate) async fn set(
    desk: &Desk,
    key: &str,
    value: &str,
    json_out: bool,
) -> Result<u8, CliError> {
    let settings = desk.console().set_setting(key, value).await?;
    let now = settings.text_of(key).unwrap_or_default();
    if json_out {
        terminal::json(&serde_json::to_value(&settings).unwrap_or(Value::Null));
    } else {
        say!("{key} = {now}");
    }
    Ok(EXIT_COMPLETED)
}
