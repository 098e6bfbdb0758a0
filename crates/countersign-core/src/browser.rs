//! Opening a link in the person's browser, for every face: the app's "Open link" (after the UI
//! asked consent, showing the host) and the sign-in step of the app and the CLI.
//!
//! Only absolute http(s) URLs with a host are ever handed to another program, whatever asked for
//! it (a server's URL question, IPC from the webview), so no `file:`, `javascript:` or
//! option-like argument can be launched. `$BROWSER` (its first entry, as the `BROWSER` convention
//! separates them with `:`) wins over the platform's opener, which is also how tests stand in for
//! a person's browser. Nothing runs through a shell, and the browser is not waited for.

use std::process::{Command, Stdio};

/// Why a link was not opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Not an absolute http(s) URL with a host, or it holds whitespace or control characters.
    #[error("only http and https links can be opened")]
    NotHttp,
    /// The browser (or the platform's opener) could not be started.
    #[error("cannot start the browser ({program}): {source}")]
    Spawn {
        /// What was started.
        program: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// `url` if it is an absolute http(s) URL with a host and no whitespace or control characters.
pub fn checked_http_url(url: &str) -> Result<&str, OpenError> {
    let (scheme, rest) = url.split_once("://").ok_or(OpenError::NotHttp)?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let http = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    if !http || host.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(OpenError::NotHttp);
    }
    Ok(url)
}

/// Opens `url` (checked by [`checked_http_url`]) with `$BROWSER`, else the platform's opener.
pub fn open(url: &str) -> Result<(), OpenError> {
    let url = checked_http_url(url)?;
    let mut command = match std::env::var("BROWSER")
        .ok()
        .and_then(|b| b.split(':').next().map(|p| p.trim().to_owned()))
        .filter(|p| !p.is_empty())
    {
        Some(program) => Command::new(program),
        None => platform_opener(),
    };
    let program = command.get_program().to_string_lossy().into_owned();
    command
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|source| OpenError::Spawn { program, source })
}

#[cfg(target_os = "macos")]
fn platform_opener() -> Command {
    Command::new("open")
}

#[cfg(target_os = "windows")]
fn platform_opener() -> Command {
    let mut command = Command::new("rundll32");
    command.arg("url.dll,FileProtocolHandler");
    command
}

#[cfg(not(any(target_os = "macos", target_os = "windows")))]
fn platform_opener() -> Command {
    Command::new("xdg-open")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_may_be_opened() {
        assert!(checked_http_url("https://login.example.com/a?b=c").is_ok());
        assert!(checked_http_url("HTTP://h:8080").is_ok());
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://",
            "ftp://h/x",
            "https://h/a b",
            "-https://h",
            "https://h/\u{7}",
        ] {
            assert!(
                matches!(checked_http_url(bad), Err(OpenError::NotHttp)),
                "{bad} must be refused"
            );
            assert!(
                matches!(open(bad), Err(OpenError::NotHttp)),
                "{bad} must not be opened"
            );
        }
    }
}
