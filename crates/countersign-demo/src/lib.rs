//! The built-in demo/test MCP server of Countersign.
//!
//! A stateless MCP `2026-07-28` server over Streamable HTTP that speaks the Tasks extension
//! (`io.modelcontextprotocol/tasks`), or, with [`DemoConfig::era`] = [`Era::Legacy`]
//! (`--era 2025-11-25`), the same tools and tasks as a 2025-11-25 server on the TypeScript SDK
//! serves them (sessions, SEP-1686 Tasks), so the benchmark needs no Node for that era. It serves two audiences: people trying the console
//! (realistic tools such as a CI pipeline or a deployment that asks for approval) and the test
//! suites (the official conformance fixtures, fault injection, per-task change timelines for the
//! latency benchmark).
//!
//! Module map:
//! - [`config`]: [`DemoConfig`] and [`ResponseMode`].
//! - `server`: [`DemoServer`], the listener, the accept loop and graceful shutdown.
//! - `transport`: one POST = one JSON-RPC request; HTTP/header validation, JSON or SSE framing.
//! - `dispatch`: method routing (`server/discover`, `tools/*`, `tasks/*`) and MRTR handling.
//! - `tools`: the tool catalog, one file per family of tools.
//! - `tasks`: the sharded task store; task state advances lazily from elapsed time.
//! - `elicitation`: form/URL elicitation requests and validation of the answers.
//! - `request_state`: the integrity-protected MRTR `requestState`.
//! - `subscriptions`: `subscriptions/listen` (push task status) and the pusher that drives it.
//! - `legacy`: the 2025-11-25 era behind [`Era::Legacy`] (`--era 2025-11-25`): sessions,
//!   SEP-1686 Tasks, the GET stream; the same tools and task store, another wire.
//! - `wire`: JSON shapes of the protocol.
//! - [`fault`], [`stats`] and [`pollgaps`]: test hooks ([`Fault`] injection, [`Stats`] counters,
//!   [`PollGapStats`]: per-task gaps between polls, for the benchmark).
//! - `clock`: one time source for instants and wall-clock timestamps.
#![deny(missing_docs)]

mod app;
mod clock;
pub mod config;
mod dispatch;
mod elicitation;
mod error;
pub mod fault;
mod legacy;
pub mod pollgaps;
mod request_state;
mod server;
pub mod stats;
mod subscriptions;
mod tasks;
mod tools;
mod transport;
mod wire;

pub use config::{DemoConfig, Era, ResponseMode};
pub use fault::Fault;
pub use pollgaps::PollGapStats;
pub use server::{serve_until_signal, DemoServer};
pub use stats::Stats;
pub use tasks::TaskChange;
pub use wire::{TaskStatus, TASKS_EXTENSION};

/// The only protocol version this server speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";
