//! The core's integration tests, one test binary (a module per area).

mod replay_captures;
mod server_events;
