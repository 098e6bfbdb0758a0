//! Shared test support: starting the independent fastmcp peer, our demo server, a hostile
//! server, the reference server-everything (the 2025-11-25 era), and the CLI.

pub mod cli;
pub mod demo;
pub mod drive;
pub mod everything;
pub mod gateway;
pub mod hostile;
pub mod ledger_view;
pub mod peer;
pub mod procs;
pub mod proxy;
pub mod raw;
pub mod rig;
