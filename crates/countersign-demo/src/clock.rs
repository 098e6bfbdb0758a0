//! One time source for the whole server.
//!
//! Instants come from `tokio::time` (so tests can pause and advance time) and wall-clock
//! timestamps are derived from them, so `createdAt`, `lastUpdatedAt` and the recorded change
//! instants always agree with each other.

use std::time::Duration;

use time::format_description::FormatItem;
use time::macros::format_description;
use time::OffsetDateTime;
use tokio::time::Instant;

/// RFC 3339 in UTC with microseconds, e.g. `2026-12-02T09:36:05.356137Z`.
const TIMESTAMP: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

/// A point in time seen both as a monotonic instant and as a UTC timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moment {
    pub(crate) instant: Instant,
    pub(crate) wall: OffsetDateTime,
}

impl Moment {
    /// The wire form of the timestamp.
    pub(crate) fn rfc3339(&self) -> String {
        self.wall
            .format(TIMESTAMP)
            // Formatting a UTC date with this description cannot fail for any representable
            // date; fall back to the default rendering rather than panicking.
            .unwrap_or_else(|_| self.wall.to_string())
    }
}

/// Maps tokio instants onto wall-clock time from a fixed origin.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: Instant,
    origin_wall: OffsetDateTime,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            origin: Instant::now(),
            origin_wall: OffsetDateTime::now_utc(),
        }
    }

    pub(crate) fn now(&self) -> Moment {
        self.at(Instant::now())
    }

    pub(crate) fn at(&self, instant: Instant) -> Moment {
        let since: Duration = instant.saturating_duration_since(self.origin);
        Moment {
            instant,
            wall: self.origin_wall + since,
        }
    }
}

/// Multiplies a simulated duration by the configured time scale.
pub(crate) fn scaled(duration: Duration, time_scale: f64) -> Duration {
    Duration::try_from_secs_f64(duration.as_secs_f64() * time_scale).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wall_clock_follows_tokio_time() {
        let clock = Clock::new();
        let before = clock.now();
        tokio::time::advance(Duration::from_millis(1500)).await;
        let after = clock.now();
        assert_eq!(after.wall - before.wall, time::Duration::milliseconds(1500));
        assert_eq!(after.instant - before.instant, Duration::from_millis(1500));
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_microseconds() {
        let moment = Moment {
            instant: Instant::now(),
            wall: time::macros::datetime!(2026-12-02 09:36:05.356137 UTC),
        };
        assert_eq!(moment.rfc3339(), "2026-12-02T09:36:05.356137Z");
    }

    #[test]
    fn scaling_multiplies_and_saturates() {
        assert_eq!(
            scaled(Duration::from_secs(10), 0.01),
            Duration::from_millis(100)
        );
        assert_eq!(scaled(Duration::MAX, 10.0), Duration::MAX);
    }
}
