//! `countersign demo-server`: the built-in demo MCP Tasks server on 127.0.0.1.

use crate::args::DemoServerArgs;
use crate::terminal::{say, tell};
use crate::{shutdown_signal, CliError, EXIT_COMPLETED};

/// Serves until Ctrl-C or SIGTERM.
pub(crate) async fn serve(args: DemoServerArgs) -> Result<u8, CliError> {
    let DemoServerArgs {
        port,
        speed,
        poll_interval_ms,
        ttl_ms,
        mode,
        no_push,
        require_token,
        era,
    } = args;
    let era = era
        .parse::<countersign_demo::Era>()
        .map_err(CliError::Usage)?;
    if !(speed.is_finite() && speed > 0.0) {
        return Err(CliError::Usage("--speed must be a positive number".into()));
    }
    let response_mode = match mode.as_str() {
        "json" => countersign_demo::ResponseMode::Json,
        "sse" => countersign_demo::ResponseMode::Sse,
        "mixed" => countersign_demo::ResponseMode::Mixed,
        other => {
            return Err(CliError::Usage(format!(
                "--mode must be json, sse or mixed, not {other:?}"
            )))
        }
    };
    let config = countersign_demo::DemoConfig {
        time_scale: 1.0 / speed,
        poll_interval_ms,
        default_ttl_ms: (ttl_ms > 0).then_some(ttl_ms),
        response_mode,
        required_token: require_token.filter(|t| !t.is_empty()),
        push: !no_push,
        era,
        ..countersign_demo::DemoConfig::default()
    };
    let server = countersign_demo::DemoServer::start(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        config,
    )
    .await?;
    say!("{}", server.url());
    tell!("countersign demo server listening; Ctrl-C to stop");
    shutdown_signal().await;
    server.shutdown().await;
    Ok(EXIT_COMPLETED)
}
