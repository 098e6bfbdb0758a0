//! The browser step's first half: showing the person the authorization URL in their browser.
//! The CLI and the app both open it here, so `$BROWSER` (which the tests set to a script that
//! follows the URL as a person's browser would) works the same in every face.

/// Opens `url` with `$BROWSER` (its first entry: the variable may list several, `:`-separated;
/// the URL as one argument, no shell), else the platform's opener (`xdg-open`, `open`,
/// `rundll32 url.dll`), without waiting for the browser to close.
pub fn open_browser(url: &str) -> std::io::Result<()> {
    let from_env = std::env::var("BROWSER")
        .ok()
        .and_then(|b| b.split(':').next().map(|b| b.trim().to_owned()))
        .filter(|b| !b.is_empty());
    let mut command = match from_env {
        Some(program) => std::process::Command::new(program),
        None => platform_opener(),
    };
    command
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(drop)
}

fn platform_opener() -> std::process::Command {
    #[cfg(target_os = "macos")]
    let command = std::process::Command::new("open");
    #[cfg(target_os = "windows")]
    let command = {
        let mut c = std::process::Command::new("rundll32");
        c.arg("url.dll,FileProtocolHandler");
        c
    };
    #[cfg(not(any(target_os = "macos", target_os = "windows")))]
    let command = std::process::Command::new("xdg-open");
    command
}

/// The host a URL points at (what a person is shown before the browser opens), without any
/// user name or password; the whole text when it is not a URL.
pub fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(port) => format!("{h}:{port}"),
                None => h.to_owned(),
            })
        })
        .unwrap_or_else(|| url.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_shown_has_no_user_name_or_path() {
        assert_eq!(
            host_of("https://me:pw@auth.example.com:8443/authorize?x=1"),
            "auth.example.com:8443"
        );
        assert_eq!(host_of("http://127.0.0.1:5000/a"), "127.0.0.1:5000");
        assert_eq!(host_of("not a url"), "not a url");
    }
}
