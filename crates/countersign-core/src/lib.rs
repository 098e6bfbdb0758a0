//! Countersign's headless core: everything that is not a window.
//!
//! - [`mcp`]: the stateless MCP 2026-07-28 client with the Tasks extension (the only module that
//!   touches HTTP);
//! - [`ledger`]: the durable SQLite ledger (servers, call intents, tasks, timeline events,
//!   questions, outbox, audit);
//! - [`status`]: the seam for how task status arrives ([`status::StatusSource`]; polling in
//!   [`status::poll`]), with [`scheduler`] deciding when;
//! - [`tracking`]: a new task state turned into timeline events and question records;
//! - [`engine`]: the loop that resumes, observes and delivers; one per ledger;
//! - [`actions`]: what a person does (call, answer, cancel, adopt), recorded before it is sent;
//! - [`decision`]: an answer in a person's terms (approved, denied, declined, …);
//! - [`diagnosis`]: why a server could not be reached or checked, as a sentence and what to do;
//! - [`console`]: the one facade every face uses (ledger, engine here or elsewhere, tokens,
//!   validated actions, the MRTR registry) and the views they share ([`console::view`]);
//! - [`notice`]: what a person is told outside the window (notification text, a link's host);
//! - [`sensitive`]: [`sensitive::Sensitive`], the wrapper that keeps tokens out of logs and storage;
//! - [`settings`]: the person's settings (do-not-disturb, sound, start at login, poll floor,
//!   gateway): keys, defaults and checks;
//! - [`auth`]: signing in to OAuth-protected servers (discovery, registration, PKCE, the
//!   loopback browser step, refresh);
//! - [`gateway`]: the local MCP gateway agents connect through: policy per agent, server and tool,
//!   calls held for a person's approval, the Streamable HTTP endpoint;
//! - [`hosts`]: agent hosts' configuration: the snippets to paste, and reading, rewriting (through
//!   the gateway) and restoring a host's file;
//! - [`secrets`]: bearer tokens in the OS keyring (Secret Service / Keychain / Credential Manager).
//!
//! The CLI (`crates/countersign-cli`) and the desktop shell (`src-tauri`) drive this crate;
//! neither talks to a server directly. See ARCHITECTURE.md for the path of one task id.
#![deny(missing_docs)]
// Errors carry the server's own words and data for the timeline; they are the cold path, so their
// size is not worth boxing.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

pub mod actions;
pub mod auth;
pub mod browser;
pub mod console;
pub use countersign_ledger::decision;
pub mod diagnosis;
pub mod engine;
pub mod gateway;
pub mod hosts;
/// The durable ledger (`crates/countersign-ledger`), re-exported for the layers above it.
pub use countersign_ledger as ledger;
/// The MCP client (`crates/countersign-mcp`), re-exported: its wire types are the vocabulary of
/// every layer above it.
pub use countersign_mcp as mcp;
pub mod notice;
pub mod scheduler;
pub mod secrets;
pub use countersign_mcp::sensitive;
pub mod settings;
pub mod status;
pub(crate) mod tracking;
