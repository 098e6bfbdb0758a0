//! The person's settings: what they are, their defaults, and which values are acceptable.
//!
//! Stored one key per row in the ledger's `settings` table ([`crate::ledger::settings`]) and
//! changed only through [`crate::console::Console::set_settings`] /
//! [`set_setting`](crate::console::Console::set_setting), which check them here first. The
//! keys are also the CLI's (`countersign settings set dnd.from 22:00`).
//!
//! Pure: "is do-not-disturb on now" takes the local day and time from the caller
//! ([`DndSchedule::active_at`]), so it is tested without a clock.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::scheduler::{MAX_FLOOR, MIN_INTERVAL};

/// A day of the week, in local time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Day {
    /// Monday.
    Mon,
    /// Tuesday.
    Tue,
    /// Wednesday.
    Wed,
    /// Thursday.
    Thu,
    /// Friday.
    Fri,
    /// Saturday.
    Sat,
    /// Sunday.
    Sun,
}

impl Day {
    /// Monday first.
    pub const ALL: [Day; 7] = [
        Day::Mon,
        Day::Tue,
        Day::Wed,
        Day::Thu,
        Day::Fri,
        Day::Sat,
        Day::Sun,
    ];

    /// The spelling in settings and on the command line (`mon` … `sun`).
    pub fn as_str(self) -> &'static str {
        match self {
            Day::Mon => "mon",
            Day::Tue => "tue",
            Day::Wed => "wed",
            Day::Thu => "thu",
            Day::Fri => "fri",
            Day::Sat => "sat",
            Day::Sun => "sun",
        }
    }

    /// Parses `mon` … `sun` (any case).
    pub fn parse(text: &str) -> Option<Day> {
        let text = text.trim().to_ascii_lowercase();
        Day::ALL.into_iter().find(|d| d.as_str() == text)
    }

    /// Days since Monday (Monday = 0).
    pub fn from_monday(self) -> usize {
        self as usize
    }

    /// The day before.
    pub fn previous(self) -> Day {
        Day::ALL[(self.from_monday() + 6) % 7]
    }
}

/// When desktop notifications are held: from `from` to `to` (local time, `HH:MM`), starting on
/// each of `days`. A window that ends before it starts runs past midnight (22:00–07:00 started
/// on Friday ends on Saturday morning). Questions still fill the inbox and the tray count; what
/// arrived while it was on is told in one summary when it ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DndSchedule {
    /// Whether the schedule is used at all.
    pub enabled: bool,
    /// Start, `HH:MM` (24 h, local time).
    pub from: String,
    /// End, `HH:MM`, exclusive.
    pub to: String,
    /// Days on which the window starts.
    pub days: Vec<Day>,
}

impl Default for DndSchedule {
    fn default() -> Self {
        Self {
            enabled: false,
            from: "22:00".into(),
            to: "07:00".into(),
            days: Day::ALL.to_vec(),
        }
    }
}

impl DndSchedule {
    /// Whether the schedule holds notifications on `day` at `minute` minutes after local
    /// midnight. A schedule that does not validate is never active.
    pub fn active_at(&self, day: Day, minute: u16) -> bool {
        if !self.enabled {
            return false;
        }
        let (Ok(from), Ok(to)) = (minutes("dnd.from", &self.from), minutes("dnd.to", &self.to))
        else {
            return false;
        };
        let starts = |d: Day| self.days.contains(&d);
        if from < to {
            starts(day) && (from..to).contains(&minute)
        } else {
            // Past midnight: this evening's window, or the tail of yesterday's.
            (starts(day) && minute >= from) || (starts(day.previous()) && minute < to)
        }
    }
}

/// The local MCP gateway in the app: agents connect to `127.0.0.1:port` (0: any free port).
/// The app's `--gateway PORT` flag overrides it for that run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct GatewaySetting {
    /// Whether the app runs the gateway.
    pub enabled: bool,
    /// The port on 127.0.0.1 (0: any free port, chosen at each start).
    pub port: u16,
}

/// Every setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Do-not-disturb schedule.
    pub dnd: DndSchedule,
    /// Notifications play the desktop's message sound.
    pub sound: bool,
    /// The app starts (in the tray, without its window) when the person logs in.
    pub start_at_login: bool,
    /// The shortest interval between two polls of one task on any server, in milliseconds (at
    /// least the built-in 250 ms): raises every server's own floor.
    pub poll_floor_ms: u64,
    /// The local MCP gateway.
    pub gateway: GatewaySetting,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            dnd: DndSchedule::default(),
            sound: true,
            start_at_login: false,
            poll_floor_ms: MIN_INTERVAL.as_millis() as u64,
            gateway: GatewaySetting::default(),
        }
    }
}

/// A setting that cannot be used as given: one variant per mistake, each naming its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// No setting has this name.
    #[error("there is no setting {key:?} (settings: {})", KEYS.join(", "))]
    UnknownKey {
        /// The name given.
        key: String,
    },
    /// A yes/no setting got something else.
    #[error("{key} is on or off (true/false), not {value:?}")]
    NotOnOff {
        /// The setting.
        key: &'static str,
        /// What was given.
        value: String,
    },
    /// A time that is not `HH:MM` between 00:00 and 23:59.
    #[error("{key} is a time of day as HH:MM (00:00 to 23:59), not {value:?}")]
    BadTime {
        /// The setting.
        key: &'static str,
        /// What was given.
        value: String,
    },
    /// A do-not-disturb window that starts when it ends.
    #[error("do-not-disturb would start and end at {at}: pick two different times")]
    EmptyWindow {
        /// The time given for both.
        at: String,
    },
    /// A do-not-disturb schedule turned on without a day.
    #[error("do-not-disturb needs at least one day to start on")]
    NoDays,
    /// A day that is not `mon` … `sun`.
    #[error("{value:?} is not a day (mon, tue, wed, thu, fri, sat, sun)")]
    BadDay {
        /// What was given.
        value: String,
    },
    /// A number that is not a whole, non-negative number.
    #[error("{key} is a whole number, not {value:?}")]
    NotANumber {
        /// The setting.
        key: &'static str,
        /// What was given.
        value: String,
    },
    /// A poll floor under the built-in one.
    #[error("the poll floor is at least {min_ms} ms (the built-in floor), not {ms} ms")]
    FloorTooLow {
        /// What was given.
        ms: u64,
        /// [`MIN_INTERVAL`].
        min_ms: u64,
    },
    /// A poll floor over the longest one honoured.
    #[error("the poll floor is at most {max_ms} ms (24 hours), not {ms} ms")]
    FloorTooHigh {
        /// What was given.
        ms: u64,
        /// [`MAX_FLOOR`].
        max_ms: u64,
    },
    /// A port that is not 0 (any free port) or 1024–65535.
    #[error("the gateway port is 0 (any free port) or 1024 to 65535, not {value:?}")]
    BadPort {
        /// What was given.
        value: String,
    },
}

impl SettingsError {
    /// The setting the mistake is in (where a form shows the message); none for a name that
    /// is no setting.
    pub fn key(&self) -> Option<SettingKey> {
        match self {
            Self::UnknownKey { .. } => None,
            Self::NotOnOff { key, .. }
            | Self::BadTime { key, .. }
            | Self::NotANumber { key, .. } => SettingKey::parse(key),
            Self::EmptyWindow { .. } => Some(SettingKey::DndTo),
            Self::NoDays | Self::BadDay { .. } => Some(SettingKey::DndDays),
            Self::FloorTooLow { .. } | Self::FloorTooHigh { .. } => Some(SettingKey::PollFloorMs),
            Self::BadPort { .. } => Some(SettingKey::GatewayPort),
        }
    }
}

/// A setting's key, as the CLI and a refused value's `field` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum SettingKey {
    /// `dnd.enabled`.
    #[serde(rename = "dnd.enabled")]
    DndEnabled,
    /// `dnd.from`.
    #[serde(rename = "dnd.from")]
    DndFrom,
    /// `dnd.to`.
    #[serde(rename = "dnd.to")]
    DndTo,
    /// `dnd.days`.
    #[serde(rename = "dnd.days")]
    DndDays,
    /// `sound`.
    #[serde(rename = "sound")]
    Sound,
    /// `start_at_login`.
    #[serde(rename = "start_at_login")]
    StartAtLogin,
    /// `poll_floor_ms`.
    #[serde(rename = "poll_floor_ms")]
    PollFloorMs,
    /// `gateway.enabled`.
    #[serde(rename = "gateway.enabled")]
    GatewayEnabled,
    /// `gateway.port`.
    #[serde(rename = "gateway.port")]
    GatewayPort,
}

impl SettingKey {
    /// Every key, in [`KEYS`] order.
    pub const ALL: [SettingKey; 9] = [
        SettingKey::DndEnabled,
        SettingKey::DndFrom,
        SettingKey::DndTo,
        SettingKey::DndDays,
        SettingKey::Sound,
        SettingKey::StartAtLogin,
        SettingKey::PollFloorMs,
        SettingKey::GatewayEnabled,
        SettingKey::GatewayPort,
    ];

    /// Its spelling (`dnd.from`).
    pub fn as_str(self) -> &'static str {
        KEYS[self as usize]
    }

    /// The key spelled `text`, if any.
    pub fn parse(text: &str) -> Option<SettingKey> {
        SettingKey::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// Every key, in the order `countersign settings get` prints them.
pub const KEYS: [&str; 9] = [
    "dnd.enabled",
    "dnd.from",
    "dnd.to",
    "dnd.days",
    "sound",
    "start_at_login",
    "poll_floor_ms",
    "gateway.enabled",
    "gateway.port",
];

/// Minutes after midnight of an `HH:MM` time.
fn minutes(key: &'static str, text: &str) -> Result<u16, SettingsError> {
    let bad = || SettingsError::BadTime {
        key,
        value: text.to_owned(),
    };
    let (h, m) = text.trim().split_once(':').ok_or_else(bad)?;
    let two_digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !two_digits(h) || !two_digits(m) {
        return Err(bad());
    }
    let (h, m): (u16, u16) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

fn on_off(key: &'static str, text: &str) -> Result<bool, SettingsError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(SettingsError::NotOnOff {
            key,
            value: text.to_owned(),
        }),
    }
}

fn days(text: &str) -> Result<Vec<Day>, SettingsError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let day = Day::parse(part).ok_or_else(|| SettingsError::BadDay {
            value: part.to_owned(),
        })?;
        if !out.contains(&day) {
            out.push(day);
        }
    }
    out.sort();
    Ok(out)
}

impl Settings {
    /// Checks every value; the first mistake found is returned. Times are normalised
    /// (` 7:05` is refused, `07:05` kept), days sorted and deduplicated.
    pub fn validate(mut self) -> Result<Self, SettingsError> {
        let from = minutes("dnd.from", &self.dnd.from)?;
        let to = minutes("dnd.to", &self.dnd.to)?;
        self.dnd.from = self.dnd.from.trim().to_owned();
        self.dnd.to = self.dnd.to.trim().to_owned();
        if self.dnd.enabled && from == to {
            return Err(SettingsError::EmptyWindow {
                at: self.dnd.from.clone(),
            });
        }
        self.dnd.days.sort();
        self.dnd.days.dedup();
        if self.dnd.enabled && self.dnd.days.is_empty() {
            return Err(SettingsError::NoDays);
        }
        let min_ms = MIN_INTERVAL.as_millis() as u64;
        let max_ms = MAX_FLOOR.as_millis() as u64;
        if self.poll_floor_ms < min_ms {
            return Err(SettingsError::FloorTooLow {
                ms: self.poll_floor_ms,
                min_ms,
            });
        }
        if self.poll_floor_ms > max_ms {
            return Err(SettingsError::FloorTooHigh {
                ms: self.poll_floor_ms,
                max_ms,
            });
        }
        if (1..1024).contains(&self.gateway.port) {
            return Err(SettingsError::BadPort {
                value: self.gateway.port.to_string(),
            });
        }
        Ok(self)
    }

    /// These settings with `key` set from its text form (as typed on the command line), not
    /// yet validated as a whole ([`Settings::validate`]).
    pub fn with(mut self, key: &str, text: &str) -> Result<Self, SettingsError> {
        let number = |key: &'static str| {
            text.trim()
                .parse::<u64>()
                .map_err(|_| SettingsError::NotANumber {
                    key,
                    value: text.to_owned(),
                })
        };
        match key {
            "dnd.enabled" => self.dnd.enabled = on_off("dnd.enabled", text)?,
            "dnd.from" => {
                minutes("dnd.from", text)?;
                self.dnd.from = text.trim().to_owned();
            }
            "dnd.to" => {
                minutes("dnd.to", text)?;
                self.dnd.to = text.trim().to_owned();
            }
            "dnd.days" => self.dnd.days = days(text)?,
            "sound" => self.sound = on_off("sound", text)?,
            "start_at_login" => self.start_at_login = on_off("start_at_login", text)?,
            "poll_floor_ms" => self.poll_floor_ms = number("poll_floor_ms")?,
            "gateway.enabled" => self.gateway.enabled = on_off("gateway.enabled", text)?,
            "gateway.port" => {
                self.gateway.port =
                    text.trim()
                        .parse::<u16>()
                        .map_err(|_| SettingsError::BadPort {
                            value: text.to_owned(),
                        })?
            }
            other => {
                return Err(SettingsError::UnknownKey {
                    key: other.to_owned(),
                })
            }
        }
        Ok(self)
    }

    /// Every key with its value as stored (JSON), in [`KEYS`] order.
    pub fn to_rows(&self) -> Vec<(&'static str, Value)> {
        let days: Vec<&str> = self.dnd.days.iter().map(|d| d.as_str()).collect();
        vec![
            ("dnd.enabled", json!(self.dnd.enabled)),
            ("dnd.from", json!(self.dnd.from)),
            ("dnd.to", json!(self.dnd.to)),
            ("dnd.days", json!(days.join(","))),
            ("sound", json!(self.sound)),
            ("start_at_login", json!(self.start_at_login)),
            ("poll_floor_ms", json!(self.poll_floor_ms)),
            ("gateway.enabled", json!(self.gateway.enabled)),
            ("gateway.port", json!(self.gateway.port)),
        ]
    }

    /// The settings from stored rows: a key not stored has its default; a stored value this
    /// build cannot use (a hand edit, a newer build's spelling) falls back to the default too
    /// and is returned as a mistake to log, so a bad row never keeps the app from starting.
    pub fn from_rows(rows: &[(String, Value)]) -> (Self, Vec<SettingsError>) {
        let mut settings = Settings::default();
        let mut mistakes = Vec::new();
        for (key, value) in rows {
            if !KEYS.contains(&key.as_str()) {
                continue; // a newer build's setting
            }
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            match settings.clone().with(key, &text) {
                Ok(next) => settings = next,
                Err(e) => mistakes.push(e),
            }
        }
        match settings.clone().validate() {
            Ok(valid) => (valid, mistakes),
            Err(e) => {
                // Each value read alone, but not together (a window enabled without days):
                // the schedule goes back to its default, the rest stays.
                mistakes.push(e);
                let fallback = Settings {
                    dnd: DndSchedule::default(),
                    ..settings
                };
                (fallback.validate().unwrap_or_default(), mistakes)
            }
        }
    }

    /// The text form of one key's value (what `countersign settings get` prints).
    pub fn text_of(&self, key: &str) -> Option<String> {
        self.to_rows()
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| match v {
                Value::String(s) => s,
                other => other.to_string(),
            })
    }

    /// The floor every server's polls are held to.
    pub fn poll_floor(&self) -> Duration {
        Duration::from_millis(self.poll_floor_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn night(days: &[Day]) -> DndSchedule {
        DndSchedule {
            enabled: true,
            from: "22:00".into(),
            to: "07:00".into(),
            days: days.to_vec(),
        }
    }

    #[test]
    fn an_overnight_window_holds_until_morning_of_the_next_day() {
        let fri = night(&[Day::Fri]);
        assert!(fri.active_at(Day::Fri, 22 * 60), "starts at 22:00");
        assert!(fri.active_at(Day::Sat, 6 * 60 + 59), "runs into Saturday");
        assert!(
            !fri.active_at(Day::Sat, 7 * 60),
            "ends at 07:00 (exclusive)"
        );
        assert!(
            !fri.active_at(Day::Fri, 6 * 60),
            "Friday's early hours belong to Thursday"
        );
        assert!(
            !fri.active_at(Day::Sat, 23 * 60),
            "Saturday night is not in the days"
        );
        assert!(
            night(&[Day::Sun]).active_at(Day::Mon, 60),
            "Sunday night wraps to Monday"
        );
    }

    #[test]
    fn a_daytime_window_holds_only_between_its_times_on_its_days() {
        let lunch = DndSchedule {
            enabled: true,
            from: "12:00".into(),
            to: "13:30".into(),
            days: vec![Day::Mon, Day::Wed],
        };
        assert!(lunch.active_at(Day::Mon, 12 * 60));
        assert!(lunch.active_at(Day::Wed, 13 * 60 + 29));
        assert!(!lunch.active_at(Day::Wed, 13 * 60 + 30));
        assert!(!lunch.active_at(Day::Tue, 12 * 60 + 30));
        assert!(
            !DndSchedule {
                enabled: false,
                ..lunch
            }
            .active_at(Day::Mon, 12 * 60),
            "a disabled schedule never holds"
        );
    }

    #[test]
    fn each_mistake_is_refused_with_its_own_error_naming_the_setting() {
        let s = Settings::default;
        let err = |r: Result<Settings, SettingsError>| r.expect_err("refused");
        assert!(matches!(
            err(s().with("dnd.from", "7:00")),
            SettingsError::BadTime {
                key: "dnd.from",
                ..
            }
        ));
        assert!(matches!(
            err(s().with("dnd.to", "24:00")),
            SettingsError::BadTime { key: "dnd.to", .. }
        ));
        assert!(matches!(
            err(s().with("dnd.days", "mon,funday")),
            SettingsError::BadDay { .. }
        ));
        assert!(matches!(
            err(s().with("sound", "loud")),
            SettingsError::NotOnOff { key: "sound", .. }
        ));
        assert!(matches!(
            err(s().with("volume", "3")),
            SettingsError::UnknownKey { .. }
        ));
        assert!(matches!(
            err(s().with("poll_floor_ms", "-5")),
            SettingsError::NotANumber { .. }
        ));
        assert!(matches!(
            err(s()
                .with("poll_floor_ms", "100")
                .and_then(Settings::validate)),
            SettingsError::FloorTooLow {
                ms: 100,
                min_ms: 250
            }
        ));
        assert!(matches!(
            err(s()
                .with("poll_floor_ms", "86400001")
                .and_then(Settings::validate)),
            SettingsError::FloorTooHigh { .. }
        ));
        assert!(matches!(
            err(s().with("gateway.port", "80").and_then(Settings::validate)),
            SettingsError::BadPort { .. }
        ));
        assert!(matches!(
            err(s().with("gateway.port", "70000")),
            SettingsError::BadPort { .. }
        ));
        let empty = Settings {
            dnd: DndSchedule {
                enabled: true,
                from: "09:00".into(),
                to: "09:00".into(),
                days: vec![Day::Mon],
            },
            ..s()
        };
        let e = err(empty.validate());
        assert_eq!(e, SettingsError::EmptyWindow { at: "09:00".into() });
        assert_eq!(
            e.key(),
            Some(SettingKey::DndTo),
            "the form shows it at the end time"
        );
        for key in SettingKey::ALL {
            assert_eq!(
                serde_json::to_value(key).ok(),
                Some(json!(key.as_str())),
                "the wire spelling is the CLI's"
            );
        }
        let no_days = Settings {
            dnd: DndSchedule {
                days: vec![],
                ..night(&[])
            },
            ..s()
        };
        assert_eq!(err(no_days.validate()), SettingsError::NoDays);
    }

    #[test]
    fn stored_rows_round_trip_and_a_bad_row_falls_back_to_its_default() {
        let mut wanted = Settings::default()
            .with("dnd.enabled", "on")
            .and_then(|s| s.with("dnd.days", "fri, mon,mon"))
            .and_then(|s| s.with("poll_floor_ms", "5000"))
            .and_then(|s| s.with("gateway.enabled", "true"))
            .and_then(|s| s.with("gateway.port", "8719"))
            .and_then(Settings::validate)
            .expect("valid");
        assert_eq!(
            wanted.dnd.days,
            vec![Day::Mon, Day::Fri],
            "sorted, deduplicated"
        );
        let rows: Vec<(String, Value)> = wanted
            .to_rows()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let (read, mistakes) = Settings::from_rows(&rows);
        assert!(mistakes.is_empty(), "{mistakes:?}");
        assert_eq!(read, wanted);

        let mut broken = rows.clone();
        broken.push(("poll_floor_ms".into(), json!("fast")));
        broken.push(("from_a_newer_build".into(), json!(1)));
        let (read, mistakes) = Settings::from_rows(&broken);
        assert_eq!(
            mistakes.len(),
            1,
            "only the bad value is a mistake: {mistakes:?}"
        );
        wanted.poll_floor_ms = 5000; // the earlier good row stands
        assert_eq!(read, wanted);
    }

    #[test]
    fn defaults_are_quiet_and_at_the_built_in_floor() {
        let d = Settings::default().validate().expect("defaults validate");
        assert!(!d.start_at_login, "start at login is off until asked for");
        assert!(!d.dnd.enabled);
        assert!(!d.gateway.enabled);
        assert_eq!(d.poll_floor(), MIN_INTERVAL);
        assert_eq!(
            d.text_of("dnd.days").as_deref(),
            Some("mon,tue,wed,thu,fri,sat,sun")
        );
    }
}
