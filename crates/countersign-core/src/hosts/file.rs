//! Writing a host's file: atomically (a temporary file beside it, synced, then renamed over
//! it), with the original kept beside it as `FILE.countersign-backup` and a note of what was
//! written (`FILE.countersign-import.json`: its SHA-256 and the agent created for it), so undo
//! restores the original only when the file is still exactly what Countersign wrote. Also the
//! diff a person sees before, with every secret in the file masked.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::HostFile;
use super::{Entry, Error, ServerSpec};

/// Suffix of the original's copy beside the file.
pub const BACKUP_SUFFIX: &str = ".countersign-backup";
/// Suffix of the note of what was written.
const NOTE_SUFFIX: &str = ".countersign-import.json";
/// What stands for a secret in a diff.
pub const MASK: &str = "<redacted>";
/// Shorter values are not masked: they are flags and numbers, not secrets, and masking them
/// everywhere would garble the diff.
const MIN_SECRET_LEN: usize = 6;

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Where the original of `path` is kept.
pub fn backup_path(path: &Path) -> PathBuf {
    with_suffix(path, BACKUP_SUFFIX)
}

fn note_path(path: &Path) -> PathBuf {
    with_suffix(path, NOTE_SUFFIX)
}

/// What Countersign wrote, for undo.
#[derive(Debug, Serialize, Deserialize)]
struct Note {
    /// SHA-256 of the file as written.
    sha256: String,
    /// The agent created for the file (its token is in it), revoked on undo.
    agent: Option<String>,
}

fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, with `like`'s
/// permissions (a host file may hold tokens), synced, renamed over `path`, the directory synced.
fn write_atomic(
    path: &Path,
    bytes: &[u8],
    like: Option<&std::fs::Permissions>,
) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.countersign-{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        if let Some(perms) = like {
            std::fs::set_permissions(&tmp, perms.clone()).map_err(io(&tmp))?;
        }
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(io(path))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    // The rename is durable once the directory is; not every platform can open one to sync it.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The file `path` names, through any symlinks: a dotfile linked from a repository stays a link
/// and its target is what changes.
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// Whether `path` has a backup from an earlier import.
pub fn imported(path: &Path) -> bool {
    backup_path(path).exists()
}

/// Replaces `file` on disk with `text`: the original first to the backup, then the file, then
/// the note. Refuses when a backup is already there (an import not undone) or when the file is
/// no longer what was read. Returns the backup's path.
pub fn write(file: &HostFile, text: &str, agent: Option<&str>) -> Result<PathBuf, Error> {
    let path = &file.path;
    let backup = backup_path(path);
    if backup.exists() {
        return Err(Error::AlreadyImported {
            path: path.clone(),
            backup,
        });
    }
    let now = std::fs::read(path).map_err(io(path))?;
    if now != file.text.as_bytes() {
        return Err(Error::Raced { path: path.clone() });
    }
    let perms = std::fs::metadata(path).map_err(io(path))?.permissions();
    write_atomic(&backup, &now, Some(&perms))?;
    let note = Note {
        sha256: digest(text.as_bytes()),
        agent: agent.map(str::to_owned),
    };
    // The note before the file: a crash between them leaves a note for a file still original,
    // which undo refuses and says where the original is; never a rewritten file without a note.
    let note_text = serde_json::to_vec_pretty(&note).unwrap_or_default();
    write_atomic(&note_path(path), &note_text, Some(&perms))?;
    write_atomic(&resolved(path), text.as_bytes(), Some(&perms))?;
    Ok(backup)
}

/// What undo did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The backup restored from (removed once the file holds it again).
    pub backup: PathBuf,
    /// The agent created by the import, to revoke.
    pub agent: Option<String>,
}

/// Restores `path` from its backup, when the file is exactly what Countersign wrote.
pub fn undo(path: &Path) -> Result<Restored, Error> {
    let backup = backup_path(path);
    if !backup.exists() {
        return Err(Error::NothingToUndo {
            path: path.to_owned(),
        });
    }
    let changed = || Error::ChangedSince {
        path: path.to_owned(),
        backup: backup.clone(),
    };
    let note: Note = std::fs::read(note_path(path))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(changed)?;
    let now = std::fs::read(path).map_err(io(path))?;
    if digest(&now) != note.sha256 {
        return Err(changed());
    }
    // Written back rather than renamed over the file, so a symlinked file stays a link.
    let original = std::fs::read(&backup).map_err(io(&backup))?;
    let perms = std::fs::metadata(&backup)
        .map_err(io(&backup))?
        .permissions();
    write_atomic(&resolved(path), &original, Some(&perms))?;
    std::fs::remove_file(&backup).map_err(io(&backup))?;
    let _ = std::fs::remove_file(note_path(path));
    Ok(Restored {
        backup,
        agent: note.agent,
    })
}

/// The secrets in `file`: the tokens of its HTTP servers and its stdio servers' environment
/// values, masked in anything shown.
pub fn secrets_of(file: &HostFile) -> Vec<String> {
    let mut secrets = Vec::new();
    for found in &file.servers {
        match &found.entry {
            Entry::Server(ServerSpec::Http {
                token: Some(token), ..
            }) => secrets.push(token.expose().clone()),
            Entry::Server(ServerSpec::Stdio { env, .. }) => {
                secrets.extend(env.values().map(|v| v.expose().clone()))
            }
            _ => {}
        }
    }
    secrets.retain(|s| s.len() >= MIN_SECRET_LEN);
    // Longest first, so a secret containing another is masked whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// Every header value and environment value in `text` that looks like a secret, masked: the
/// ones [`secrets_of`] found, and anything after `Bearer `.
pub fn mask(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets {
        out = out.replace(s.as_str(), MASK);
    }
    // A bearer token the parse did not attribute (an entry left as it is, an agent token).
    let mut masked = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(i) = rest.find("Bearer ") {
        let (head, tail) = rest.split_at(i + "Bearer ".len());
        masked.push_str(head);
        let end = tail
            .find(|c: char| c == '"' || c == '\'' || c.is_whitespace())
            .unwrap_or(tail.len());
        let token = &tail[..end];
        // `<…>` is a placeholder (ours, or the mask itself), not a token.
        if token.is_empty() || token.starts_with('<') {
            masked.push_str(token);
        } else {
            masked.push_str(MASK);
        }
        rest = &tail[end..];
    }
    masked.push_str(rest);
    masked
}

/// A unified diff from `old` to `new`, labelled with `path`, secrets masked.
pub fn diff(path: &Path, old: &str, new: &str, secrets: &[String]) -> String {
    let label = path.display().to_string();
    let text = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&label, &label)
        .to_string();
    mask(&text, secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_masked_but_placeholders_are_not() {
        let text = r#""Authorization": "Bearer s3cr3t-token", "x": "Bearer <agent token>""#;
        assert_eq!(
            mask(text, &[]),
            r#""Authorization": "Bearer <redacted>", "x": "Bearer <agent token>""#
        );
    }

    #[test]
    fn known_secrets_are_masked_and_short_values_are_not_secrets() {
        assert_eq!(
            mask("GITHUB_TOKEN=ghp_abcdef", &["ghp_abcdef".into()]),
            "GITHUB_TOKEN=<redacted>"
        );
    }
}
