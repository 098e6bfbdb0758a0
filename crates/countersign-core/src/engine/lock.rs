//! One engine per ledger: an exclusive OS file lock on `engine.lock` in the data directory,
//! released by the OS when the process dies (kill -9 included), so it never goes stale.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::Path;

/// The lock file's name.
pub const LOCK_FILE: &str = "engine.lock";

/// Held for as long as the engine runs.
#[derive(Debug)]
pub struct EngineLock {
    _file: File,
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another engine holds it.
    #[error("another Countersign engine is already running on this data directory{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Held {
        /// Its process id, if it wrote one.
        pid: Option<u32>,
    },
    /// The lock file could not be opened.
    #[error("cannot open the engine lock {path}: {source}")]
    Io {
        /// The lock file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl EngineLock {
    /// Takes the lock or says who holds it.
    pub fn acquire(data_dir: &Path) -> Result<Self, LockError> {
        let path = data_dir.join(LOCK_FILE);
        let io = |source| LockError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {
                file.set_len(0).map_err(io)?;
                file.seek(SeekFrom::Start(0)).map_err(io)?;
                write!(file, "{}", std::process::id()).map_err(io)?;
                file.flush().map_err(io)?;
                Ok(Self { _file: file })
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                Err(LockError::Held {
                    pid: text.trim().parse().ok(),
                })
            }
            Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
        }
    }

    /// Creates the data directory if needed, then [`EngineLock::acquire`].
    pub fn acquire_creating(data_dir: &Path) -> Result<Self, LockError> {
        crate::ledger::prepare_data_dir(data_dir).map_err(|source| LockError::Io {
            path: data_dir.display().to_string(),
            source,
        })?;
        Self::acquire(data_dir)
    }

    /// Whether an engine currently holds the lock (without keeping it).
    pub fn is_held(data_dir: &Path) -> Result<Option<Option<u32>>, LockError> {
        match Self::acquire(data_dir) {
            Ok(lock) => {
                drop(lock);
                Ok(None)
            }
            Err(LockError::Held { pid }) => Ok(Some(pid)),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("cs-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let first = EngineLock::acquire(&dir).expect("first lock");
        match EngineLock::acquire(&dir) {
            Err(LockError::Held { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        assert!(
            EngineLock::acquire(&dir).is_ok(),
            "the lock must be free again"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
