//! The MCP crate's integration tests, one binary: replays of real peers' recorded exchanges
//! (both eras), the 2025-11-25 client against the real server-everything, and scripted faults.

mod legacy_everything;
mod legacy_faults;
mod legacy_replay;
mod replay_captures;
mod scenario;
mod stdio_everything;
