//! The state every request shares: configuration, clock, tasks, tools, faults, statistics and
//! the push hub. Its own module so that the request path (`transport` → `dispatch`) and the
//! server's lifecycle (`server`) both depend on it and not on each other.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::DemoConfig;
use crate::fault::FaultQueue;
use crate::legacy::Legacy;
use crate::pollgaps::PollGaps;
use crate::request_state::StateSealer;
use crate::stats::StatsRecorder;
use crate::subscriptions::Hub;
use crate::tasks::TaskStore;
use crate::tools::Catalog;

/// State shared by every request.
pub(crate) struct App {
    pub(crate) config: DemoConfig,
    pub(crate) clock: Clock,
    pub(crate) store: TaskStore,
    pub(crate) catalog: Catalog,
    pub(crate) sealer: StateSealer,
    pub(crate) stats: StatsRecorder,
    pub(crate) faults: FaultQueue,
    pub(crate) hub: Arc<Hub>,
    pub(crate) poll_gaps: PollGaps,
    /// Sessions and the tool list of the 2025-11-25 era (empty in the modern era).
    pub(crate) legacy: Legacy,
}
