//! A fault proxy: a TCP forwarder in front of a server under test that can take the server
//! "down" and bring it back on the same port without the server forgetting anything, hold
//! requests of one method (the request is received but not passed on), and log every request
//! with its arrival time.
//!
//! Why a proxy: restarting a server to simulate an outage also wipes its tasks (our demo server
//! and the fastmcp peer both keep tasks in memory), and the peer has no fault injection of its
//! own. Between the client and the server, an outage, a stalled request and a request log are
//! the same for every server.
//!
//! It understands just enough HTTP/1.1 to cut the client's byte stream into requests (head up
//! to the blank line, then `Content-Length` bytes of body) and read the `Mcp-Method` and
//! `Mcp-Name` headers; responses are copied back untouched.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

/// One request the proxy received from a client.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The `Mcp-Method` header (`tasks/get`, ...); empty if absent.
    pub method: String,
    /// The `Mcp-Name` header (the task id on `tasks/*`), if present.
    pub name: Option<String>,
    /// When its last byte arrived.
    pub at: Instant,
    /// The same moment as Unix milliseconds, comparable with ledger event times.
    pub wall_ms: i64,
}

/// A running proxy; stops (and cuts every connection) when dropped.
pub struct FaultProxy {
    inner: Arc<Inner>,
}

struct Inner {
    target: SocketAddr,
    port: u16,
    control: Mutex<Control>,
    /// Bumped whenever the set of held methods changes, to wake held requests.
    held_changed: watch::Sender<u64>,
    log: Mutex<Vec<Seen>>,
}

#[derive(Default)]
struct Control {
    accept: Option<JoinHandle<()>>,
    connections: Vec<AbortHandle>,
    held: HashSet<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("the fault proxy cannot bind a loopback port: {e}"));
        let port = listener.local_addr().expect("bound address").port();
        let (held_changed, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            target,
            port,
            control: Mutex::new(Control::default()),
            held_changed,
            log: Mutex::new(Vec::new()),
        });
        let accept = tokio::spawn(accept_loop(inner.clone(), listener));
        lock(&inner.control).accept = Some(accept);
        FaultProxy { inner }
    }

    /// Forwards to the server behind `url` (`http://127.0.0.1:PORT/...`).
    pub async fn in_front_of(url: &str) -> FaultProxy {
        let authority = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("not an http URL: {url}"));
        let target: SocketAddr = authority
            .parse()
            .unwrap_or_else(|e| panic!("{authority} is not an IP:port ({e})"));
        Self::start(target).await
    }

    /// The endpoint clients should use: `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.inner.port)
    }

    /// The server is "down": new connections are refused and open ones are cut (requests in
    /// flight fail, held requests are dropped unsent). The server itself keeps running.
    pub fn down(&self) {
        let mut control = lock(&self.inner.control);
        if let Some(accept) = control.accept.take() {
            accept.abort();
        }
        for connection in control.connections.drain(..) {
            connection.abort();
        }
    }

    /// The server is back, on the same port. Panics if the port cannot be bound again.
    pub async fn up(&self) {
        if lock(&self.inner.control).accept.is_some() {
            return;
        }
        let address = SocketAddr::from(([127, 0, 0, 1], self.inner.port));
        let mut last_error = None;
        for _ in 0..100 {
            match TcpListener::bind(address).await {
                Ok(listener) => {
                    let accept = tokio::spawn(accept_loop(self.inner.clone(), listener));
                    lock(&self.inner.control).accept = Some(accept);
                    return;
                }
                Err(e) => {
                    last_error = Some(e);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        panic!("the fault proxy cannot listen on {address} again: {last_error:?}");
    }

    /// Requests with this `Mcp-Method` are received (and logged) but not passed on until
    /// [`FaultProxy::release`].
    pub fn hold(&self, method: &str) {
        lock(&self.inner.control).held.insert(method.to_owned());
        self.inner.held_changed.send_modify(|g| *g += 1);
    }

    /// Passes held requests of `method` on, and no longer holds new ones.
    pub fn release(&self, method: &str) {
        lock(&self.inner.control).held.remove(method);
        self.inner.held_changed.send_modify(|g| *g += 1);
    }

    /// Every request received so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.inner.log).clone()
    }

    /// The requests received for `method` (and, if given, for this `Mcp-Name`).
    pub fn seen_for(&self, method: &str, name: Option<&str>) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == method && (name.is_none() || s.name.as_deref() == name))
            .collect()
    }

    /// How many requests for `method` were received.
    pub fn count(&self, method: &str) -> usize {
        self.seen_for(method, None).len()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.down();
    }
}

impl Inner {
    fn is_held(&self, method: &str) -> bool {
        lock(&self.control).held.contains(method)
    }

    fn track(&self, handle: AbortHandle) {
        let mut control = lock(&self.control);
        control.connections.retain(|c| !c.is_finished());
        control.connections.push(handle);
    }
}

async fn accept_loop(inner: Arc<Inner>, listener: TcpListener) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = client.set_nodelay(true);
        let connection = tokio::spawn(serve(inner.clone(), client));
        inner.track(connection.abort_handle());
    }
}

/// One client connection: requests are cut out of the client's stream, logged, maybe held, and
/// written upstream; the upstream's bytes go back untouched.
async fn serve(inner: Arc<Inner>, client: TcpStream) {
    let Ok(upstream) = TcpStream::connect(inner.target).await else {
        return; // dropping the client connection: it sees the server as gone
    };
    let _ = upstream.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut upstream_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    // Aborting this task drops `back`'s handle, not the task: track it too.
    inner.track(back.abort_handle());

    let mut buffer: Vec<u8> = Vec::with_capacity(8192);
    loop {
        let head_end = loop {
            if let Some(i) = find(&buffer, b"\r\n\r\n") {
                break i + 4;
            }
            if !read_more(&mut client_read, &mut buffer).await {
                let _ = upstream_write.shutdown().await;
                return;
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let header = |name: &str| {
            head.split("\r\n").skip(1).find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_owned())
            })
        };
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            if !read_more(&mut client_read, &mut buffer).await {
                let _ = upstream_write.shutdown().await;
                return;
            }
        }
        let request: Vec<u8> = buffer.drain(..head_end + length).collect();
        let method = header("mcp-method").unwrap_or_default();
        lock(&inner.log).push(Seen {
            method: method.clone(),
            name: header("mcp-name"),
            at: Instant::now(),
            wall_ms: wall_ms(),
        });
        let mut changes = inner.held_changed.subscribe();
        while inner.is_held(&method) {
            if changes.changed().await.is_err() {
                return;
            }
        }
        if upstream_write.write_all(&request).await.is_err() {
            return;
        }
    }
}

async fn read_more(stream: &mut tokio::net::tcp::OwnedReadHalf, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
