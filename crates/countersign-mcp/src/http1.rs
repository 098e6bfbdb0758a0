//! The poll path's own HTTP/1.1 connections: `tasks/get`, the one request the engine sends
//! thousands of times a minute, goes out on hyper's connection API with a small keep-alive pool
//! of our own instead of through reqwest.
//!
//! Why a second path at all: measured with callgrind, reqwest's per-request layers (the redirect
//! hook re-parsing the URL even when nothing redirects, parsing the response's URL, the retry and
//! proxy layers, the legacy pool's hand-off to a spawned connection task) cost more instructions
//! than everything else an unchanged poll does, and the hand-off adds a thread wake-up per poll.
//! Here the request's own task drives its connection, so a poll is a write, a read and no
//! hand-off.
//!
//! A pooled connection that fails is replaced by a fresh one for the same request only when not
//! one byte of the request was accepted by the socket (each connection counts the bytes its
//! writes accepted): then the server cannot have it. Once any byte was accepted the server may
//! have read the request, even if the connection then failed, so the failure is returned and the
//! poller backs off as for any failed poll; retrying at once would put two requests on the
//! server within a millisecond.
//!
//! What it covers, and what it leaves to reqwest (see [`Http1::for_url`]): plain `http://` URLs
//! without a proxy in the environment. `https://` and proxied servers keep reqwest's path (TLS,
//! ALPN, proxies), and so does any request the pool answers with a redirect: the client sends it
//! again through reqwest, whose same-origin policy then applies. Only `tasks/get` uses it: it is
//! idempotent, so a keep-alive connection that the server closed while it sat in the pool can be
//! retried on a fresh one without running anything twice; even so, see above for when it is.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderMap, HeaderValue, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How long an idle connection may wait in the pool (reqwest's pool used the same).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// The most idle connections kept per server: the poll loop bounds its requests in flight per
/// server well below this, so a burst never has to connect twice in a row.
const MAX_IDLE: usize = 64;

/// Why a request on this path failed, before the client names the server and the method.
#[derive(Debug)]
pub(super) enum Failure {
    /// No TCP connection could be made.
    Connect(String),
    /// The connect, or the whole request, took longer than allowed.
    Timeout,
    /// The connection failed after it was made.
    Io(String),
}

/// A connection's driver: reads and writes its socket. Polled by whoever uses the connection
/// (never spawned), so the task that waits for an answer is the one that reads it.
type Driver = Pin<Box<dyn Future<Output = hyper::Result<()>> + Send>>;

struct Conn {
    sender: SendRequest<Full<Bytes>>,
    /// `None` once the connection ended: it is then dropped, never pooled.
    driver: Option<Driver>,
    /// Bytes the socket accepted from our writes, ever: unchanged across a failed request means
    /// none of it left this process.
    written: Arc<AtomicU64>,
}

struct Idle {
    conn: Conn,
    since: Instant,
}

/// The keep-alive pool for one server's URL. Cheap to clone.
#[derive(Clone)]
pub(super) struct Http1 {
    shared: Arc<Shared>,
}

struct Shared {
    /// Where to connect: the URL's host (an IPv6 literal without its brackets) and port.
    host: String,
    port: u16,
    /// `Host:` as the URL spells it (with the port when it is not the default).
    host_header: HeaderValue,
    /// The request target: the URL's path and query.
    target: Uri,
    connect_timeout: Duration,
    idle: Mutex<Vec<Idle>>,
}

impl std::fmt::Debug for Http1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http1")
            .field("host", &self.shared.host)
            .field("port", &self.shared.port)
            .finish_non_exhaustive()
    }
}

impl Http1 {
    /// A pool for `url`, when this path may carry its polls: `http://` and no proxy set in the
    /// environment (reqwest would send through it; this path does not speak to proxies).
    pub(super) fn for_url(url: &url::Url, connect_timeout: Duration) -> Option<Self> {
        Self::for_url_with(url, connect_timeout, |name| std::env::var_os(name))
    }

    fn for_url_with(
        url: &url::Url,
        connect_timeout: Duration,
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Option<Self> {
        if url.scheme() != "http" {
            return None;
        }
        // The variables reqwest's system proxy reads for http URLs. Any of them set (even one
        // NO_PROXY would exempt this host from) keeps the server on reqwest's path, which has
        // the exemption rules; rare enough not to repeat them here.
        let proxied = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .any(|name| env(name).is_some_and(|v| !v.is_empty()));
        if proxied {
            return None;
        }
        let host = match url.host()? {
            url::Host::Domain(name) => name.to_owned(),
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(ip) => ip.to_string(),
        };
        let port = url.port_or_known_default()?;
        let authority = &url[url::Position::BeforeHost..url::Position::AfterPort];
        let host_header = HeaderValue::from_str(authority).ok()?;
        let target = url[url::Position::BeforePath..url::Position::AfterQuery]
            .parse::<Uri>()
            .ok()?;
        Some(Self {
            shared: Arc::new(Shared {
                host,
                port,
                host_header,
                target,
                connect_timeout,
                idle: Mutex::new(Vec::new()),
            }),
        })
    }

    /// POSTs `body` with `headers` and returns the response's head, its body still to read.
    /// Waits at most until `deadline` (one timer for the request and its body). A pooled
    /// connection that turns out to be closed before any byte of the request was written is
    /// replaced by a fresh one, with headers from `again`: the first ones went with the
    /// request that failed, and keeping a copy of every request's headers for that rare case
    /// cost more than building them anew. A failure after bytes were written is returned.
    pub(super) async fn post(
        &self,
        headers: HeaderMap,
        again: &(dyn Fn() -> Option<HeaderMap> + Sync),
        body: Bytes,
        deadline: tokio::time::Instant,
    ) -> Result<Reply, Failure> {
        let mut timer = Box::pin(tokio::time::sleep_until(deadline));
        match within(&mut timer, self.post_within(headers, again, body)).await {
            Some(result) => result.map(|(status, headers, body)| Reply {
                status,
                headers,
                body: Streaming {
                    conn: Some(body.0),
                    body: body.1,
                    ended: false,
                    pool: self.clone(),
                    timer,
                },
            }),
            None => Err(Failure::Timeout),
        }
    }

    async fn post_within(
        &self,
        headers: HeaderMap,
        again: &(dyn Fn() -> Option<HeaderMap> + Sync),
        body: Bytes,
    ) -> Result<(u16, HeaderMap, (Conn, Incoming)), Failure> {
        let mut headers = Some(headers);
        loop {
            let (mut conn, pooled) = match self.checkout() {
                Some(conn) => (conn, true),
                None => (self.connect().await?, false),
            };
            let mut request = Request::new(Full::new(body.clone()));
            *request.method_mut() = Method::POST;
            *request.uri_mut() = self.shared.target.clone();
            let Some(mut request_headers) = headers.take().or_else(again) else {
                return Err(Failure::Io(
                    "the request's headers could not be built again".into(),
                ));
            };
            request_headers.insert(HOST, self.shared.host_header.clone());
            *request.headers_mut() = request_headers;
            let written_before = conn.written.load(Ordering::Relaxed);

            let sent = async {
                if let Err(e) = drive(&mut conn.driver, conn.sender.ready()).await {
                    return Err(e.to_string());
                }
                drive(&mut conn.driver, conn.sender.send_request(request))
                    .await
                    .map_err(|e| error_text(&e))
            }
            .await;
            match sent {
                Ok(response) => {
                    let (head, incoming) = response.into_parts();
                    return Ok((head.status.as_u16(), head.headers, (conn, incoming)));
                }
                // The server closed a kept-alive connection while it sat in the pool and the
                // socket refused our first write (or we never wrote): the server has nothing of
                // this request, so a fresh connection may carry it.
                Err(message)
                    if pooled && conn.written.load(Ordering::Relaxed) == written_before =>
                {
                    tracing::trace!(%message, "a pooled connection was closed; connecting anew");
                }
                Err(message) => return Err(Failure::Io(message)),
            }
        }
    }

    /// The most recently used idle connection that is still open; closed and stale ones are
    /// dropped on the way.
    fn checkout(&self) -> Option<Conn> {
        let mut idle = self.shared.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(Idle { mut conn, since }) = idle.pop() {
            if since.elapsed() > IDLE_TIMEOUT || conn.sender.is_closed() {
                continue;
            }
            // Lets the connection notice an end the server already sent (a FIN read while it
            // was idle) without waiting; a live idle connection stays pending.
            let ended = conn
                .driver
                .as_mut()
                .is_none_or(|driver| driver.as_mut().now_or_never().is_some());
            if !ended {
                return Some(conn);
            }
        }
        None
    }

    fn checkin(&self, conn: Conn) {
        if conn.driver.is_none() || conn.sender.is_closed() {
            return;
        }
        let mut idle = self.shared.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }

    async fn connect(&self) -> Result<Conn, Failure> {
        let shared = &self.shared;
        let stream = match tokio::time::timeout(
            shared.connect_timeout,
            TcpStream::connect((shared.host.as_str(), shared.port)),
        )
        .await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(Failure::Connect(e.to_string())),
            Err(_) => return Err(Failure::Timeout),
        };
        // Requests are one small write each; Nagle would hold the next one for an ACK.
        let _ = stream.set_nodelay(true);
        let written = Arc::new(AtomicU64::new(0));
        let stream = Counted {
            stream,
            written: Arc::clone(&written),
        };
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| Failure::Connect(error_text(&e)))?;
        Ok(Conn {
            sender,
            driver: Some(Box::pin(connection)),
            written,
        })
    }
}

/// A socket that counts the bytes its writes accepted (see [`Conn::written`]).
struct Counted {
    stream: TcpStream,
    written: Arc<AtomicU64>,
}

impl Counted {
    fn count(&self, wrote: &Poll<std::io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = wrote {
            self.written.fetch_add(*n as u64, Ordering::Relaxed);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let wrote = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.count(&wrote);
        wrote
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let wrote = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.count(&wrote);
        wrote
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A response's head, and its body as it arrives.
pub(super) struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Streaming,
}

/// A response body being read. Read to its end, its connection goes back to the pool when this
/// is dropped; dropped before that, the connection closes.
pub(super) struct Streaming {
    conn: Option<Conn>,
    body: Incoming,
    ended: bool,
    pool: Http1,
    /// The request's deadline, shared with its head.
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Streaming {
    /// The next chunk of the body; `None` at its end.
    pub(super) async fn next(&mut self) -> Option<Result<Bytes, Failure>> {
        if self.ended {
            return None;
        }
        let conn = self.conn.as_mut()?;
        loop {
            let frame = within(&mut self.timer, drive(&mut conn.driver, self.body.frame())).await;
            match frame {
                None => return Some(Err(Failure::Timeout)),
                Some(None) => {
                    self.ended = true;
                    return None;
                }
                Some(Some(Err(e))) => return Some(Err(Failure::Io(error_text(&e)))),
                Some(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        return Some(Ok(data));
                    }
                    // Trailers: nothing we read; the end follows.
                }
            }
        }
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if self.ended {
                self.pool.checkin(conn);
            }
        }
    }
}

/// Awaits `work` while driving the connection it needs. When the connection ends first,
/// `work` is polled on alone: hyper then settles it (with what the connection delivered before
/// it ended, or an error), so this never hangs on a dead connection.
async fn drive<F: Future>(driver: &mut Option<Driver>, work: F) -> F::Output {
    let mut work = pin!(work);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        if let Some(running) = driver.as_mut() {
            if let Poll::Ready(end) = running.as_mut().poll(cx) {
                if let Err(e) = end {
                    tracing::trace!(error = %error_text(&e), "connection ended");
                }
                *driver = None;
                return work.as_mut().poll(cx);
            }
        }
        Poll::Pending
    })
    .await
}

/// Awaits `work` until `timer` fires: `None` if it fires first. One timer serves a request's
/// whole exchange, where a `timeout_at` per step would register (and remove) one each time.
async fn within<F: Future>(timer: &mut Pin<Box<tokio::time::Sleep>>, work: F) -> Option<F::Output> {
    let mut work = pin!(work);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// A hyper error with its causes, for the typed error's message.
fn error_text(error: &hyper::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    /// Reads one request (head and `Content-Length` body); `false` at the connection's end.
    async fn read_request(stream: &mut TcpStream, buffered: &mut Vec<u8>) -> bool {
        loop {
            if let Some(end) = buffered.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buffered[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .map_or(0, |n| n.trim().parse().unwrap());
                if buffered.len() >= end + 4 + length {
                    buffered.drain(..end + 4 + length);
                    return true;
                }
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => buffered.extend_from_slice(&chunk[..n]),
            }
        }
    }

    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";

    /// A server that counts the requests and connections it gets. On its first connection it
    /// answers the first request, then either closes at once (`close_idle`) or reads the second
    /// request and closes without answering; later connections answer everything.
    struct Server {
        url: url::Url,
        requests: Arc<AtomicUsize>,
        connections: Arc<AtomicUsize>,
        first_closed: tokio::sync::watch::Receiver<bool>,
    }

    async fn server(close_idle: bool) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url =
            url::Url::parse(&format!("http://{}/mcp", listener.local_addr().unwrap())).unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let (closed_tx, first_closed) = tokio::sync::watch::channel(false);
        let (r, c) = (Arc::clone(&requests), Arc::clone(&connections));
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let first = c.fetch_add(1, Ordering::SeqCst) == 0;
                let (r, closed_tx) = (Arc::clone(&r), closed_tx.clone());
                tokio::spawn(async move {
                    let mut buffered = Vec::new();
                    let mut answered = 0;
                    while read_request(&mut stream, &mut buffered).await {
                        r.fetch_add(1, Ordering::SeqCst);
                        if first && answered == 1 {
                            break;
                        }
                        stream.write_all(ANSWER).await.unwrap();
                        answered += 1;
                        if first && close_idle {
                            break;
                        }
                    }
                    drop(stream);
                    if first {
                        let _ = closed_tx.send(true);
                    }
                });
            }
        });
        Server {
            url,
            requests,
            connections,
            first_closed,
        }
    }

    async fn post(pool: &Http1) -> Result<Vec<u8>, Failure> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let again = || Some(HeaderMap::new());
        let mut reply = pool
            .post(
                HeaderMap::new(),
                &again,
                Bytes::from_static(b"{}"),
                deadline,
            )
            .await?;
        assert_eq!(reply.status, 200);
        let mut body = Vec::new();
        while let Some(chunk) = reply.body.next().await {
            body.extend_from_slice(&chunk?);
        }
        Ok(body)
    }

    #[tokio::test]
    async fn a_request_the_server_may_have_read_is_not_sent_again() {
        let server = server(false).await;
        let pool = Http1::for_url(&server.url, Duration::from_secs(5)).unwrap();
        assert_eq!(post(&pool).await.unwrap(), b"{}");
        // The kept-alive connection carries the second request; the server reads it and hangs
        // up without an answer.
        let failed = post(&pool).await;
        assert!(matches!(failed, Err(Failure::Io(_))), "{failed:?}");
        assert_eq!(server.requests.load(Ordering::SeqCst), 2);
        assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_pooled_connection_closed_while_idle_is_replaced_transparently() {
        let mut server = server(true).await;
        let pool = Http1::for_url(&server.url, Duration::from_secs(5)).unwrap();
        assert_eq!(post(&pool).await.unwrap(), b"{}");
        server
            .first_closed
            .wait_for(|closed| *closed)
            .await
            .unwrap();
        assert_eq!(post(&pool).await.unwrap(), b"{}");
        assert_eq!(server.requests.load(Ordering::SeqCst), 2);
        assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    }

    fn pool_for(url: &str, env: &[(&str, &str)]) -> Option<Http1> {
        let url = url::Url::parse(url).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Http1::for_url_with(&url, Duration::from_secs(1), |name| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| std::ffi::OsString::from(v))
        })
    }

    #[test]
    fn only_plain_http_without_a_proxy_takes_this_path() {
        assert!(pool_for("http://127.0.0.1:8080/mcp", &[]).is_some());
        assert!(pool_for("https://example.com/mcp", &[]).is_none());
        assert!(pool_for(
            "http://127.0.0.1:8080/mcp",
            &[("HTTP_PROXY", "http://proxy:3128")]
        )
        .is_none());
        assert!(pool_for(
            "http://127.0.0.1:8080/mcp",
            &[("all_proxy", "socks5://p:1080")]
        )
        .is_none());
        // An empty variable is no proxy, for reqwest too.
        assert!(pool_for("http://127.0.0.1:8080/mcp", &[("http_proxy", "")]).is_some());
    }

    #[test]
    fn the_request_names_the_host_as_the_url_does_and_targets_its_path_and_query() {
        let pool = pool_for("http://[::1]:9000/a/mcp?x=1", &[]).unwrap();
        assert_eq!(pool.shared.host, "::1");
        assert_eq!(pool.shared.port, 9000);
        assert_eq!(pool.shared.host_header, "[::1]:9000");
        assert_eq!(pool.shared.target, "/a/mcp?x=1");
        let pool = pool_for("http://Example.com/mcp", &[]).unwrap();
        assert_eq!(
            (pool.shared.host.as_str(), pool.shared.port),
            ("example.com", 80)
        );
        assert_eq!(pool.shared.host_header, "example.com");
    }
}
