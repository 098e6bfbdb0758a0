//! Countersign's headless core: everything that is not a window.
//!
//! - [`mcp`]: the stateless MCP 2026-07-28 client with the Tasks extension (the only module that
//!   touches HTTP);
//! - [`secret`]: [`secret::Sensitive`], the wrapper that keeps tokens out of logs and storage.
//!
//! The CLI (`crates/countersign-cli`) and, later, the desktop shell (`src-tauri`) drive this crate;
//! neither talks to a server directly.
#![deny(missing_docs)]
// Errors carry the server's own words and data for the timeline; they are the cold path, so their
// size is not worth boxing.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

pub mod actions;
pub mod engine;
pub mod ledger;
pub mod mcp;
pub mod scheduler;
pub mod secret;
pub mod status;
pub mod tracking;
