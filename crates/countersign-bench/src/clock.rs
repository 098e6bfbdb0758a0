//! Wall-clock time derived from the monotonic clock, the way the demo server stamps `createdAt`
//! and its changes (a wall-clock origin plus monotonic elapsed time). Comparing our receive times
//! with the server's change times through the same model keeps an NTP slew during the run out of
//! the latency figures: both processes run on one machine, one monotonic clock.

use std::time::Instant;

use crate::usage::system_now_us;

/// Maps `Instant`s to Unix microseconds from one origin taken at construction.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    origin: Instant,
    origin_us: i64,
}

impl WallClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
            origin_us: system_now_us(),
        }
    }

    /// Unix microseconds now.
    pub fn now_us(&self) -> i64 {
        self.at_us(Instant::now())
    }

    /// Unix microseconds of `instant`.
    pub fn at_us(&self, instant: Instant) -> i64 {
        let since = instant.saturating_duration_since(self.origin);
        self.origin_us + since.as_micros() as i64
    }
}

/// Parses an RFC 3339 timestamp (the server's `createdAt`) into Unix microseconds.
pub fn parse_rfc3339_us(text: &str) -> Option<i64> {
    let at =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_demo_servers_timestamps() {
        assert_eq!(
            parse_rfc3339_us("1970-01-01T00:00:01.000002Z"),
            Some(1_000_002)
        );
        assert_eq!(parse_rfc3339_us("not a time"), None);
    }

    #[test]
    fn follows_the_monotonic_clock() {
        let clock = WallClock::new();
        let a = clock.now_us();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = clock.now_us();
        assert!(b - a >= 5_000, "{a} → {b}");
        assert!(
            (clock.now_us() - system_now_us()).abs() < 1_000_000,
            "close to the system clock"
        );
    }
}
