//! The MCP client of both eras: 2026-07-28 with the Tasks extension, and 2025-11-25 with its
//! sessions and SEP-1686 Tasks. The only crate of Countersign that speaks MCP to a server. A
//! leaf: it knows nothing of the ledger, the engine or the faces.
//!
//! - [`wire`]: the JSON shapes (tasks, input requests, results, tools, discovery);
//! - [`client`]: [`Client`], one stateless POST per request, `_meta` and headers on each (the
//!   modern era, 2026-07-28);
//! - [`legacy`]: [`LegacyClient`], the 2025-11-25 era over Streamable HTTP: sessions, SSE
//!   replies and the GET stream, and that era's Tasks (SEP-1686);
//! - [`peer`]: [`Peer`], a server of either era as the engine follows its tasks (a legacy
//!   task shown as a modern one);
//! - [`era`]: which era a server speaks ([`era::connect`], [`Era`]);
//! - [`response`]: reading JSON or SSE bodies into the answer to our request id;
//! - [`sse`]: the incremental event-stream decoder;
//! - [`subscription`]: `subscriptions/listen` for task status notifications ([`Client::listen`]);
//! - [`headers`]: `Mcp-Name`/`Mcp-Param-*` encoding and `x-mcp-header` validation;
//! - [`error`]: [`Error`], one variant per failure class;
//! - [`sensitive`]: [`sensitive::Sensitive`], the wrapper that keeps tokens out of logs and storage;
//! - [`text`]: cutting server text to a length a person reads.
#![deny(missing_docs)]
// Errors carry the server's own words and data for the timeline; they are the cold path, so their
// size is not worth boxing.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

pub mod client;
pub mod era;
pub mod error;
pub mod headers;
mod http1;
pub mod legacy;
pub mod peer;
pub mod response;
pub mod sensitive;
pub mod sse;
pub mod stdio;
pub mod subscription;
pub mod text;
pub mod wire;

/// How many times a call is re-sent with answers (MRTR, `input_required` on `tools/call`) before
/// the client gives up on a server that keeps asking: a human answers a handful of questions per
/// call, and a server that never stops asking would otherwise keep the caller in a loop for ever.
/// Every face that re-sends calls automatically (the CLI, direct and ledger mode) stops here.
pub const MAX_MRTR_ROUNDS: usize = 16;

/// The largest body we will buffer for one response (64 MiB), and the most an SSE stream may
/// send without completing an event.
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

pub use client::{
    check_server_url, client_capabilities, Client, ClientOptions, Digest, Endpoint, Listening,
    Polled, RelayedListen, ToolCall,
};
pub use era::{Connection, Era, ServerProfile};
pub use error::{Error, ErrorClass, Result};
pub use legacy::{LegacyClient, LegacySession};
pub use peer::{LegacyPeer, Peer, PeerSignal, SessionStore, SignalSink};
pub use subscription::{ListenEvent, ListenRequest};
pub use wire::{
    CallOutcome, Discovery, Elicitation, ElicitationResponse, ExcludedTool, InputRequest,
    InputRequests, InputRequired, RpcError, Task, TaskDetail, TaskState, TaskStatus, Tool,
    ToolList, ToolResult, PROTOCOL_VERSION, TASKS_EXTENSION,
};
