//! The local MCP gateway: agents connect to Countersign instead of to an upstream server, and
//! every tool call passes the policy first.
//!
//! - [`endpoint`]: the Streamable HTTP endpoint on 127.0.0.1 (`/mcp/<server-name>`), both
//!   protocol generations, bearer token per agent;
//! - [`relay`]: `countersign connect`, a stdio MCP server relaying to the running gateway;
//! - [`demo_agent`]: the first-launch demo's agent, calling demo tools through the gateway.
//!
//! What the policy says and what the agent is told is the core's model
//! ([`countersign_core::gateway`]); every action on agents, rules and held calls is a
//! [`countersign_core::console::Console`] method, so the CLI, the app and the endpoint share one
//! path.
#![deny(missing_docs)]
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

pub mod demo_agent;
pub mod endpoint;
pub mod relay;

pub use countersign_core::gateway::{outcome, policy, TASK_PREFIX};
