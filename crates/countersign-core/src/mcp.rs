//! The MCP 2026-07-28 client with the Tasks extension: the only module that speaks HTTP.
//!
//! - [`wire`]: the JSON shapes (tasks, input requests, results, tools, discovery);
//! - [`client`]: [`Client`], one stateless POST per request, `_meta` and headers on each;
//! - [`response`]: reading JSON or SSE bodies into the answer to our request id;
//! - [`sse`]: the incremental event-stream decoder;
//! - [`subscription`]: `subscriptions/listen` for task status notifications ([`Client::listen`]);
//! - [`headers`]: `Mcp-Name`/`Mcp-Param-*` encoding and `x-mcp-header` validation;
//! - [`error`]: [`Error`], one variant per failure class.

pub mod client;
pub mod error;
pub mod headers;
pub mod response;
pub mod sse;
pub mod subscription;
pub mod wire;

pub use client::{
    check_server_url, client_capabilities, Client, ClientOptions, Endpoint, Listening, ToolCall,
};
pub use error::{Error, ErrorClass, Result};
pub use subscription::{ListenEvent, ListenRequest};
pub use wire::{
    CallOutcome, Discovery, Elicitation, ElicitationResponse, ExcludedTool, InputRequest,
    InputRequests, InputRequired, RpcError, Task, TaskDetail, TaskState, TaskStatus, Tool,
    ToolList, ToolResult, PROTOCOL_VERSION, TASKS_EXTENSION,
};
