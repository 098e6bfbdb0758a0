//! Request and response counters, for tests and benchmarks.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

/// A snapshot of what the server has seen since start (or the last reset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// POSTs per JSON-RPC method (`"tasks/get"`, ...); bodies without a readable method count
    /// under `"<invalid>"`, a client's responses to the server's requests under `"<response>"`,
    /// and the legacy era's GETs and DELETEs under `"GET"` and `"DELETE"`.
    pub requests: BTreeMap<String, u64>,
    /// HTTP responses per status code (hang-ups are not responses and count in `hangups`).
    pub responses: BTreeMap<u16, u64>,
    /// Connections closed without a response by [`Fault::Hangup`](crate::Fault::Hangup).
    pub hangups: u64,
    /// Requests that got an injected fault instead of normal handling.
    pub faults: u64,
    /// `notifications/tasks` sent on `subscriptions/listen` streams (in the legacy era,
    /// `notifications/tasks/status` on the sessions' GET streams).
    pub notifications: u64,
}

impl Stats {
    /// Requests seen for `method`.
    pub fn requests_for(&self, method: &str) -> u64 {
        self.requests.get(method).copied().unwrap_or(0)
    }

    /// Responses sent with HTTP `status`.
    pub fn responses_with(&self, status: u16) -> u64 {
        self.responses.get(&status).copied().unwrap_or(0)
    }

    /// All requests seen.
    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }
}

/// The live counters behind [`Stats`].
#[derive(Default)]
pub(crate) struct StatsRecorder {
    inner: Mutex<Stats>,
}

impl StatsRecorder {
    fn with(&self, change: impl FnOnce(&mut Stats)) {
        change(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner));
    }

    pub(crate) fn request(&self, method: Option<&str>) {
        let method = method.unwrap_or("<invalid>");
        self.with(|stats| {
            if let Some(count) = stats.requests.get_mut(method) {
                *count += 1;
            } else {
                stats.requests.insert(method.to_owned(), 1);
            }
        });
    }

    pub(crate) fn response(&self, status: u16) {
        self.with(|stats| *stats.responses.entry(status).or_insert(0) += 1);
    }

    pub(crate) fn hangup(&self) {
        self.with(|stats| stats.hangups += 1);
    }

    pub(crate) fn fault(&self) {
        self.with(|stats| stats.faults += 1);
    }

    pub(crate) fn notifications(&self, sent: u64) {
        if sent > 0 {
            self.with(|stats| stats.notifications += sent);
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn reset(&self) {
        self.with(|stats| *stats = Stats::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_resets() {
        let recorder = StatsRecorder::default();
        recorder.request(Some("tasks/get"));
        recorder.request(Some("tasks/get"));
        recorder.request(None);
        recorder.response(200);
        recorder.response(200);
        recorder.response(404);
        recorder.hangup();
        let stats = recorder.snapshot();
        assert_eq!(stats.requests_for("tasks/get"), 2);
        assert_eq!(stats.requests_for("<invalid>"), 1);
        assert_eq!(stats.total_requests(), 3);
        assert_eq!(stats.responses_with(200), 2);
        assert_eq!(stats.responses_with(404), 1);
        assert_eq!(stats.hangups, 1);
        recorder.reset();
        assert_eq!(recorder.snapshot(), Stats::default());
    }
}
