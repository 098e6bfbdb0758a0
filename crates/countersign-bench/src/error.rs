//! The benchmark's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// Why a benchmark run could not finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or process could not be read, written or started.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A child process (demo server, engine, Python client) broke the line protocol or exited.
    #[error("{child}: {message}")]
    Child {
        /// Which child.
        child: String,
        /// What went wrong.
        message: String,
    },
    /// Something did not happen in time: every wait in the benchmark is bounded.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
    /// The engine could not start.
    #[error(transparent)]
    Engine(Box<countersign_core::engine::Error>),
    /// The ledger refused a write or read.
    #[error(transparent)]
    Ledger(Box<countersign_core::ledger::Error>),
    /// A tool call failed.
    #[error(transparent)]
    Action(Box<countersign_core::actions::Error>),
    /// The MCP client could not be built.
    #[error(transparent)]
    Mcp(Box<countersign_core::mcp::Error>),
    /// The server answered something the benchmark did not ask for.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// A required file is missing.
    #[error("{path} not found ({hint})")]
    Missing {
        /// The path.
        path: PathBuf,
        /// How to get it.
        hint: &'static str,
    },
}

impl Error {
    /// An I/O error with context.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }

    /// A protocol or exit problem of a child process.
    pub fn child(child: &str, message: impl Into<String>) -> Self {
        Self::Child {
            child: child.into(),
            message: message.into(),
        }
    }
}

// The core's errors are large; boxed, every `Result` of this crate stays small.
impl From<countersign_core::engine::Error> for Error {
    fn from(e: countersign_core::engine::Error) -> Self {
        Self::Engine(Box::new(e))
    }
}

impl From<countersign_core::ledger::Error> for Error {
    fn from(e: countersign_core::ledger::Error) -> Self {
        Self::Ledger(Box::new(e))
    }
}

impl From<countersign_core::actions::Error> for Error {
    fn from(e: countersign_core::actions::Error) -> Self {
        Self::Action(Box::new(e))
    }
}

impl From<countersign_core::mcp::Error> for Error {
    fn from(e: countersign_core::mcp::Error) -> Self {
        Self::Mcp(Box::new(e))
    }
}

/// Result with the benchmark's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
