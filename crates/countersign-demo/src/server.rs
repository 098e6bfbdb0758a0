//! The listener: an accept loop over hyper connections that serve the axum router, a single
//! TTL sweeper, and graceful shutdown.
//!
//! The loop is hand-written (rather than `axum::serve`) so that [`Fault::Hangup`] can close a
//! connection without writing any response: the per-connection service turns a response
//! marked [`HangUp`] into a service error, and hyper then drops the connection.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use axum::routing::post;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::app::App;
use crate::clock::Clock;
use crate::config::{DemoConfig, Era};
use crate::fault::{Fault, FaultQueue};
use crate::legacy::{self, Legacy};
use crate::pollgaps::{PollGapStats, PollGaps};
use crate::request_state::StateSealer;
use crate::stats::{Stats, StatsRecorder};
use crate::subscriptions::Hub;
use crate::tasks::{TaskChange, TaskSettings, TaskStore};
use crate::tools::Catalog;
use crate::transport::{self, HangUp};

/// How long shutdown waits for in-flight requests before dropping them.
const GRACE: Duration = Duration::from_secs(5);

/// A running demo server. Dropping it stops accepting connections; [`DemoServer::shutdown`]
/// also waits for in-flight requests.
pub struct DemoServer {
    addr: SocketAddr,
    app: Arc<App>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// TCP connections accepted since start.
    connections: Arc<std::sync::atomic::AtomicU64>,
}

impl DemoServer {
    /// Binds `addr` (use `127.0.0.1:0` for an ephemeral port) and starts serving `POST /mcp`
    /// (and `POST /`). Fails on an invalid configuration or if the address cannot be bound.
    pub async fn start(addr: SocketAddr, config: DemoConfig) -> io::Result<DemoServer> {
        config.validate()?;
        if !addr.ip().is_loopback() {
            tracing::warn!(%addr, "the demo server is meant to listen on loopback only");
        }
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let clock = Clock::new();
        let settings = TaskSettings {
            time_scale: config.time_scale,
            ttl: config.default_ttl_ms.map(Duration::from_millis),
            poll_interval_ms: config.poll_interval_ms,
            era: config.era,
        };
        let catalog = Catalog::new();
        let app = Arc::new(App {
            store: TaskStore::new(clock, settings),
            sealer: StateSealer::new()?,
            stats: StatsRecorder::default(),
            faults: FaultQueue::default(),
            hub: Arc::new(Hub::default()),
            poll_gaps: PollGaps::new(Duration::from_millis(config.poll_interval_ms)),
            legacy: Legacy::new(&catalog),
            catalog,
            clock,
            config,
        });
        let endpoint = match app.config.era {
            Era::Modern => post(transport::handle),
            // The session's GET stream and DELETE exist only in the legacy era; the modern era
            // answers both with 405, as a modern-only server should.
            Era::Legacy => post(transport::handle)
                .get(legacy::get)
                .delete(legacy::delete),
        };
        let router = Router::new()
            .route("/mcp", endpoint.clone())
            .route("/", endpoint)
            .with_state(app.clone());
        let (shutdown, stop) = watch::channel(false);
        let connections = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let tasks = vec![
            tokio::spawn(accept_loop(
                listener,
                router,
                stop.clone(),
                connections.clone(),
            )),
            tokio::spawn(sweep_loop(app.clone(), stop.clone())),
            tokio::spawn(push_changes(app.clone(), stop)),
        ];
        tracing::info!(%addr, "countersign demo server listening");
        Ok(DemoServer {
            addr,
            app,
            shutdown,
            tasks,
            connections,
        })
    }

    /// The endpoint URL, e.g. `http://127.0.0.1:43127/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The bound address (with the real port when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &DemoConfig {
        &self.app.config
    }

    /// TCP connections accepted since start: how well a client reuses its connections.
    pub fn connections(&self) -> u64 {
        self.connections.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counters of requests per method and responses per HTTP status.
    pub fn stats(&self) -> Stats {
        self.app.stats.snapshot()
    }

    /// Sets every counter back to zero.
    pub fn reset_stats(&self) {
        self.app.stats.reset();
    }

    /// Per-task gaps between `tasks/get` arrivals (the first from the task's creation), and each
    /// task's first poll, since start or [`DemoServer::reset_poll_gaps`].
    pub fn poll_gaps(&self) -> PollGapStats {
        self.app.poll_gaps.snapshot()
    }

    /// Zeroes the poll-gap counters (the gap spanning the reset is still measured).
    pub fn reset_poll_gaps(&self) {
        self.app.poll_gaps.reset();
    }

    /// The next `times` requests, whatever their method, get `fault` instead of normal
    /// handling. Faults queue up in injection order.
    pub fn inject(&self, fault: Fault, times: u32) {
        self.app.faults.push(fault, times, None);
    }

    /// Like [`DemoServer::inject`], but only requests for `method` (e.g. `"tasks/get"`) are hit.
    pub fn inject_for(&self, method: &str, fault: Fault, times: u32) {
        self.app.faults.push(fault, times, Some(method));
    }

    /// Drops every pending fault.
    pub fn clear_faults(&self) {
        self.app.faults.clear();
    }

    /// Every state change of a task so far, each stamped with its server-side time; `None` if
    /// the task is unknown or its TTL has elapsed.
    pub fn task_changes(&self, task_id: &str) -> Option<Vec<TaskChange>> {
        self.app.store.changes(task_id)
    }

    /// Open push streams: `subscriptions/listen`, or in the legacy era the sessions' GET streams.
    pub fn subscriptions(&self) -> usize {
        self.app.hub.len()
    }

    /// Test hook: breaks every open listen stream without a closing result (the connection is
    /// aborted mid-body, as when a proxy or the network drops it). Returns how many.
    pub fn drop_subscriptions(&self) -> usize {
        self.app.hub.drop_all()
    }

    /// Ends every open listen stream gracefully (the closing `subscriptions/listen` result), as
    /// shutdown does, while the server keeps serving. Returns how many.
    pub fn close_subscriptions(&self) -> usize {
        self.app.hub.close_all(false)
    }

    /// Legacy-era sessions open now (always 0 in the modern era).
    pub fn sessions(&self) -> usize {
        self.app.legacy.sessions.len()
    }

    /// Legacy-era sessions opened since start: how often clients had to `initialize`.
    pub fn sessions_opened(&self) -> u64 {
        self.app.legacy.sessions.opened()
    }

    /// Number of tasks held (including expired ones not yet swept).
    pub fn task_count(&self) -> usize {
        self.app.store.len()
    }

    /// Stops accepting connections and waits (up to 5 s) for in-flight requests to finish.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        for task in std::mem::take(&mut self.tasks) {
            if let Err(error) = task.await {
                tracing::warn!(%error, "demo server task ended abnormally");
            }
        }
        tracing::info!(addr = %self.addr, "countersign demo server stopped");
    }
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

/// Runs a demo server on `addr` until Ctrl-C or SIGTERM, printing its URL as the first line
/// of stdout. This is what `countersign demo-server` calls.
pub async fn serve_until_signal(addr: SocketAddr, config: DemoConfig) -> io::Result<()> {
    use std::io::Write;

    let server = DemoServer::start(addr, config).await?;
    {
        let mut stdout = io::stdout().lock();
        writeln!(stdout, "{}", server.url())?;
        stdout.flush()?;
    }
    wait_for_signal().await?;
    server.shutdown().await;
    Ok(())
}

#[cfg(unix)]
async fn wait_for_signal() -> io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result,
        _ = terminate.recv() => Ok(()),
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() -> io::Result<()> {
    tokio::signal::ctrl_c().await
}

/// Serves one connection; a response marked [`HangUp`] becomes an error, so hyper closes the
/// connection without writing anything.
#[derive(Clone)]
struct Connection {
    router: Router,
}

/// The error that makes hyper drop a connection.
#[derive(Debug, thiserror::Error)]
#[error("connection closed on purpose (fault injection)")]
struct HungUp;

impl hyper::service::Service<Request<Incoming>> for Connection {
    type Response = Response<Body>;
    type Error = HungUp;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let router = self.router.clone();
        Box::pin(async move {
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            if response.extensions().get::<HangUp>().is_some() {
                return Err(HungUp);
            }
            Ok(response)
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    mut stop: watch::Receiver<bool>,
    connections: Arc<std::sync::atomic::AtomicU64>,
) {
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if let Err(error) = stream.set_nodelay(true) {
                        tracing::debug!(%error, "could not set TCP_NODELAY");
                    }
                    let service = Connection { router: router.clone() };
                    let connection = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    let connection = graceful.watch(connection);
                    tokio::spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::debug!(%error, "connection ended with an error");
                        }
                    });
                }
                Err(error) => {
                    // Typically EMFILE under load: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(GRACE) => {
            tracing::warn!("in-flight requests still running after the grace period; dropping them");
        }
    }
}

/// One ticker for all tasks: drops those whose TTL has elapsed. Reads check the TTL
/// themselves, so the period only bounds memory, not correctness.
async fn sweep_loop(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    let Some(ttl_ms) = app.config.default_ttl_ms else {
        return;
    };
    let mut ticker = tokio::time::interval(Duration::from_millis((ttl_ms / 4).clamp(10, 5_000)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let dropped = app.store.sweep();
                if dropped > 0 {
                    tracing::debug!(dropped, "expired tasks forgotten");
                }
            }
            _ = stop.changed() => break,
        }
    }
}

/// The pusher: publishes every change of every subscribed task until `stop`, then closes every
/// subscription gracefully.
async fn push_changes(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    loop {
        for task in app.hub.take_work(Instant::now()) {
            match app.store.observe(&task) {
                Some(observed) => {
                    let sent = app.hub.publish(&task, observed.version, &observed.task);
                    app.stats.notifications(sent);
                    if let Some(at) = observed.next_change {
                        app.hub.schedule(&task, at);
                    }
                }
                None => app.hub.forget(&task),
            }
        }
        let next = app.hub.next_due();
        tokio::select! {
            () = sleep_until(next) => {}
            () = app.hub.wake.notified() => {}
            _ = stop.changed() => break,
        }
    }
    app.legacy.end_all();
    let closed = app.hub.close_all(true);
    if closed > 0 {
        tracing::info!(closed, "listen streams closed for shutdown");
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
