//! The demo server's integration tests, one test binary (a module per area); `common` is the
//! strict MCP client they drive it with.

mod common;
mod legacy;
mod server_api;
mod tools;
mod transport;
