//! Our demo server, in this process, on 127.0.0.1.

use countersign_demo::{DemoConfig, DemoServer};

/// The demo server with `config`, on a free port of 127.0.0.1.
pub async fn start(config: DemoConfig) -> DemoServer {
    DemoServer::start(([127, 0, 0, 1], 0).into(), config)
        .await
        .unwrap_or_else(|e| panic!("the demo server must start: {e}"))
}
