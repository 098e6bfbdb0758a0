//! The browser step's return address: a one-shot HTTP listener on `127.0.0.1` (RFC 8252 §7.3,
//! any port; the IP literal rather than `localhost`, §8.3) that takes the authorization
//! response, answers the browser with a page saying it can be closed, and stops.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::{Error, Result};

/// The path of the redirect URI.
const CALLBACK_PATH: &str = "/callback";

/// The most we read of one request: an authorization response is a short GET.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// How long one connection may take to send its request (a stalled one must not block the
/// real callback behind it).
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The query parameters of the authorization response, as received.
#[derive(Clone, PartialEq, Eq)]
pub struct Callback {
    params: Vec<(String, String)>,
}

impl Callback {
    /// Parses the query of a callback URL (or a bare query string).
    pub fn from_query(query: &str) -> Self {
        Self {
            params: url::form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        }
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

// The code is a credential until redeemed: never printed.
impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.params.iter().map(|(k, _)| k.as_str()).collect();
        write!(f, "Callback {{ params: {names:?} }}")
    }
}

/// A listener bound on `127.0.0.1`, waiting for one authorization response.
#[derive(Debug)]
pub struct Loopback {
    listener: TcpListener,
    port: u16,
}

impl Loopback {
    /// Binds `127.0.0.1:port` when given and free (a dynamic registration is bound to its
    /// redirect URI), else any free port.
    pub async fn bind(port: Option<u16>) -> Result<Self> {
        let listener = match port {
            Some(port) => match TcpListener::bind(("127.0.0.1", port)).await {
                Ok(listener) => listener,
                Err(_) => TcpListener::bind(("127.0.0.1", 0)).await.map_err(io)?,
            },
            None => TcpListener::bind(("127.0.0.1", 0)).await.map_err(io)?,
        };
        let port = listener.local_addr().map_err(io)?.port();
        Ok(Self { listener, port })
    }

    /// A listener on exactly `127.0.0.1:{port}` (a redirect URI registered with that port):
    /// [`Error::RedirectPortTaken`] when another program holds it.
    pub async fn bind_exactly(port: u16) -> Result<Self> {
        let listener =
            TcpListener::bind(("127.0.0.1", port))
                .await
                .map_err(|e| Error::RedirectPortTaken {
                    port,
                    message: e.to_string(),
                })?;
        Ok(Self { listener, port })
    }

    /// `http://127.0.0.1:{port}/callback`.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{CALLBACK_PATH}", self.port)
    }

    /// Waits up to `timeout` for a GET of the callback path carrying `state`. Other paths get
    /// a 404 and a wrong `state` a 400 page (someone else's request must not end this
    /// sign-in); the matching request gets the "you can close this tab" page.
    pub async fn receive(&self, state: &str, timeout: Duration) -> Result<Callback> {
        let wait = async {
            loop {
                let (stream, _) = self.listener.accept().await.map_err(io)?;
                if let Some(callback) = serve(stream, state).await {
                    return Ok(callback);
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| Error::Timeout {
                seconds: timeout.as_secs(),
            })?
    }
}

/// Answers one connection; `Some` when it was the callback we wait for.
async fn serve(mut stream: TcpStream, state: &str) -> Option<Callback> {
    let head = tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream))
        .await
        .ok()
        .flatten()?;
    let target = head
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != CALLBACK_PATH {
        respond(&mut stream, "404 Not Found", "Not found", "").await;
        return None;
    }
    let callback = Callback::from_query(query);
    if callback.get("state") != Some(state) {
        respond(
            &mut stream,
            "400 Bad Request",
            "This answer is not for the sign-in in progress",
            "Countersign is waiting for another sign-in. Start it again from Countersign.",
        )
        .await;
        return None;
    }
    if callback.get("error").is_some() {
        respond(
            &mut stream,
            "200 OK",
            "Sign-in did not complete",
            "Countersign got the answer. You can close this tab and go back to Countersign.",
        )
        .await;
    } else {
        respond(
            &mut stream,
            "200 OK",
            "Signed in",
            "Countersign got the answer. You can close this tab.",
        )
        .await;
    }
    Some(callback)
}

async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() + n > MAX_REQUEST_BYTES {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(buf).ok()
}

async fn respond(stream: &mut TcpStream, status: &str, title: &str, text: &str) {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body style=\"font-family:sans-serif;margin:3em\"><h1>{title}</h1><p>{text}</p></body></html>"
    );
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // The browser may already be gone; the sign-in goes on either way.
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn io(e: std::io::Error) -> Error {
    Error::Loopback {
        message: e.to_string(),
    }
}

/// A stand-in for the person's browser, for tests and the conformance adapter: GETs the
/// authorization URL without following redirects and delivers its `Location` (the loopback
/// callback) with a second GET, as a browser would after the person approved.
pub async fn follow_without_browser(authorization_url: String) -> Result<()> {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| Error::Browser {
            message: e.to_string(),
        })?;
    let response = http
        .get(&authorization_url)
        .send()
        .await
        .map_err(|e| Error::Browser {
            message: e.without_url().to_string(),
        })?;
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| Error::Browser {
            message: format!(
                "the authorization endpoint answered HTTP {} without a redirect",
                response.status()
            ),
        })?
        .to_owned();
    http.get(&location)
        .send()
        .await
        .map_err(|e| Error::Browser {
            message: e.without_url().to_string(),
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(url: String) -> u16 {
        reqwest::get(url)
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn takes_the_callback_with_our_state_after_refusing_others() {
        let loopback = Loopback::bind(None).await.unwrap();
        let uri = loopback.redirect_uri();
        assert!(uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback"));
        let base = uri.trim_end_matches("/callback").to_owned();
        let browser = async {
            let other_path = get(format!("{base}/favicon.ico")).await;
            let wrong_state = get(format!("{uri}?code=x&state=forged")).await;
            let ours = get(format!("{uri}?code=abc&state=s1&iss=http%3A%2F%2Fas")).await;
            (other_path, wrong_state, ours)
        };
        let (callback, statuses) =
            tokio::join!(loopback.receive("s1", Duration::from_secs(10)), browser);
        assert_eq!(statuses, (404, 400, 200));
        let callback = callback.unwrap();
        assert_eq!(callback.get("code"), Some("abc"));
        assert_eq!(callback.get("iss"), Some("http://as"));
        assert!(
            !format!("{callback:?}").contains("abc"),
            "the code never prints"
        );
    }

    #[tokio::test]
    async fn gives_up_after_the_timeout() {
        let loopback = Loopback::bind(None).await.unwrap();
        let err = loopback
            .receive("s", Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
    }
}
