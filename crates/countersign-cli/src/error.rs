//! How a command fails: one error type, the exit-code contract for scripts, and the `--json`
//! error's `code`, which is the window's own vocabulary ([`ErrorCode`]), so a script and the app
//! branch on the same words.

use countersign_core::console;
use countersign_core::console::view::ErrorCode;
use countersign_core::{actions, auth, engine, hosts, ledger, mcp};

/// Exit code: the outcome was completed.
pub const EXIT_COMPLETED: u8 = 0;
/// Exit code: completed with `isError: true`.
pub const EXIT_TOOL_ERROR: u8 = 1;
/// Exit code: the task failed.
pub const EXIT_FAILED: u8 = 2;
/// Exit code: the task was cancelled.
pub const EXIT_CANCELLED: u8 = 3;
/// Exit code: a question needs a human and none could answer.
pub const EXIT_INPUT_NEEDED: u8 = 4;
/// Exit code: the task is still working (`task get` of an unfinished task).
pub const EXIT_WORKING: u8 = 5;
/// Exit code: bad command line, or something named that does not exist or cannot be used.
pub const EXIT_USAGE: u8 = 64;
/// Exit code: connection or protocol error.
pub const EXIT_UNAVAILABLE: u8 = 69;
/// Exit code: the server needs a person to sign in (OAuth) and the sign-in did not happen
/// (`EX_NOPERM`).
pub const EXIT_SIGN_IN_NEEDED: u8 = 77;

/// A failure that ends the command.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The command line was wrong.
    #[error("{0}")]
    Usage(String),
    /// Local I/O failed (a port to listen on, the terminal, a pipe).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// What the console (or the client under it) said, in the words every face uses.
    #[error(transparent)]
    Console(#[from] console::Error),
}

impl From<mcp::Error> for CliError {
    fn from(e: mcp::Error) -> Self {
        Self::Console(e.into())
    }
}

impl From<ledger::Error> for CliError {
    fn from(e: ledger::Error) -> Self {
        Self::Console(match e {
            ledger::Error::NotFound(what) => console::Error::NotFound(what),
            e => e.into(),
        })
    }
}

impl From<actions::Error> for CliError {
    fn from(e: actions::Error) -> Self {
        Self::Console(e.into())
    }
}

impl From<engine::Error> for CliError {
    fn from(e: engine::Error) -> Self {
        Self::Console(e.into())
    }
}

impl From<console::OpenError> for CliError {
    fn from(e: console::OpenError) -> Self {
        match e {
            console::OpenError::Ledger(e) => e.into(),
            console::OpenError::Engine(e) => e.into(),
        }
    }
}

impl CliError {
    /// The code a script branches on: the window's [`ErrorCode`].
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            Self::Usage(_) => ErrorCode::InvalidInput,
            Self::Io(_) => ErrorCode::Internal,
            Self::Console(e) => e.code(),
        }
    }

    /// The finer reason, where there is one: the client's error class (`connect`,
    /// `unknown_task`, …) or what the ledger refused.
    pub(crate) fn reason(&self) -> Option<&'static str> {
        match self {
            Self::Usage(_) => Some("usage"),
            Self::Io(_) => Some("io"),
            Self::Console(console::Error::Server(e))
            | Self::Console(console::Error::SignIn(auth::SessionError::Mcp(e))) => Some(e.code()),
            Self::Console(console::Error::Refused(actions::Error::TaskIdReused { .. })) => {
                Some("task_id_reused")
            }
            Self::Console(console::Error::TooManyRounds { .. }) => Some("too_many_question_rounds"),
            Self::Console(console::Error::Engine(engine::Error::Lock(_))) => {
                Some("engine_elsewhere")
            }
            Self::Console(console::Error::Hosts(e)) => Some(match e {
                hosts::Error::Parse { .. } => "parse_error",
                hosts::Error::UnknownFormat { .. } => "unknown_format",
                hosts::Error::Io { .. } => "io",
                hosts::Error::AlreadyImported { .. } => "already_imported",
                hosts::Error::NothingToUndo { .. } => "nothing_to_undo",
                hosts::Error::ChangedSince { .. } => "changed_since",
                hosts::Error::Raced { .. } => "changed_while_writing",
            }),
            Self::Console(_) => None,
        }
    }

    /// The exit code, from the code: what the caller must fix is a usage error, a sign-in a
    /// person must do is 77, everything else is a connection or protocol error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self.code() {
            ErrorCode::InvalidInput | ErrorCode::NotFound | ErrorCode::AlreadyAnswered => {
                EXIT_USAGE
            }
            ErrorCode::SignIn => EXIT_SIGN_IN_NEEDED,
            ErrorCode::Unavailable
            | ErrorCode::Server
            | ErrorCode::Keyring
            | ErrorCode::Cancelled
            | ErrorCode::Internal => EXIT_UNAVAILABLE,
        }
    }

    /// The client's error, for the plain diagnosis printed under the message.
    pub(crate) fn server_error(&self) -> Option<&mcp::Error> {
        match self {
            Self::Console(console::Error::Server(e)) => Some(e),
            _ => None,
        }
    }
}
