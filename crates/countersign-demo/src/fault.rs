//! Fault injection: make the next requests misbehave the way real networks and servers do.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// A misbehaviour served instead of (or, for [`Fault::Delay`], before) normal handling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this HTTP status and a short `text/plain` body (e.g. 500, 502, 503).
    Status(u16),
    /// Answer 429 with `Retry-After: retry_after_secs`.
    TooManyRequests {
        /// Value of the `Retry-After` header, in seconds.
        retry_after_secs: u64,
    },
    /// Answer 200 `application/json` with a truncated JSON-RPC body.
    MalformedJson,
    /// Answer 200 with a valid JSON-RPC result of the wrong shape (a task without `status`,
    /// a `CreateTaskResult` to `tasks/update`, a tool list that is not a list, ...).
    WrongShape,
    /// Wait this long (real time, not scaled), then handle the request normally.
    Delay(Duration),
    /// Close the connection without sending any response.
    Hangup,
}

struct Rule {
    fault: Fault,
    remaining: u32,
    method: Option<String>,
}

/// Pending faults, consumed in the order they were injected.
#[derive(Default)]
pub(crate) struct FaultQueue {
    rules: Mutex<VecDeque<Rule>>,
}

impl FaultQueue {
    pub(crate) fn push(&self, fault: Fault, times: u32, method: Option<&str>) {
        if times == 0 {
            return;
        }
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Rule {
                fault,
                remaining: times,
                method: method.map(str::to_owned),
            });
    }

    /// The fault for a request with this method, if one is pending; consumes one use of it.
    pub(crate) fn take(&self, method: Option<&str>) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        let index = rules
            .iter()
            .position(|rule| rule.method.is_none() || rule.method.as_deref() == method)?;
        let rule = rules.get_mut(index)?;
        rule.remaining -= 1;
        let fault = rule.fault.clone();
        if rule.remaining == 0 {
            rules.remove(index);
        }
        Some(fault)
    }

    pub(crate) fn clear(&self) {
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_consumed_in_order_and_by_method() {
        let queue = FaultQueue::default();
        queue.push(Fault::Status(503), 2, Some("tasks/get"));
        queue.push(Fault::Hangup, 1, None);
        assert_eq!(queue.take(Some("tools/call")), Some(Fault::Hangup));
        assert_eq!(queue.take(Some("tools/call")), None);
        assert_eq!(queue.take(Some("tasks/get")), Some(Fault::Status(503)));
        assert_eq!(queue.take(Some("tasks/get")), Some(Fault::Status(503)));
        assert_eq!(queue.take(Some("tasks/get")), None);
        queue.push(Fault::MalformedJson, 5, None);
        queue.clear();
        assert_eq!(queue.take(None), None);
        queue.push(Fault::WrongShape, 0, None);
        assert_eq!(queue.take(None), None, "zero times injects nothing");
    }
}
