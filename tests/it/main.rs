//! The integration tests of `countersign-tests`, one test binary: each module was a test binary
//! of its own, and each links the whole stack, so one binary links it once. The shared support
//! (servers, the CLI as a process, the rig, the ledger read back) is the package's library,
//! `countersign_tests`.
//!
//! The modules run side by side in one process: a test keeps its state (data directories,
//! servers, ports, keyring entries) to itself, never in the process's environment or its
//! current directory.

mod cli_direct;
mod cli_faces;
mod cli_legacy;
mod crash;
mod demo_server;
mod engine_legacy;
mod engine_paused;
mod faults;
mod feed;
mod gateway;
mod gateway_legacy;
mod gateway_stdio;
mod hostile;
mod hosts_import;
mod interop_fastmcp;
mod keyring;
mod ledger_write;
mod oauth_fastmcp;
mod poll_connections;
mod push;
mod settings;
mod sse_limits;
mod stdio_servers;
