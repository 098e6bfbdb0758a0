//! Runs the demo server until killed, printing its URL as the first line of stdout.
//!
//! ```text
//! cargo run -p countersign-demo --example serve -- [PORT] [--time-scale F] [--mode json|sse|mixed]
//!     [--crlf] [--poll-interval-ms N] [--ttl-ms N|none] [--token TOKEN] [--no-push]
//!     [--keepalive-ms N] [--era 2026-07-28|2025-11-25]
//! ```
//!
//! `--era 2025-11-25` serves the same tools and tasks as a 2025-11-25 server on the TypeScript
//! SDK does (sessions, SEP-1686 Tasks); the default is 2026-07-28.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use countersign_demo::{serve_until_signal, DemoConfig, ResponseMode};

fn parse(args: &[String]) -> Result<(u16, DemoConfig), String> {
    let mut port = 0u16;
    let mut config = DemoConfig::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match arg.as_str() {
            "--time-scale" => {
                config.time_scale = value(arg)?
                    .parse()
                    .map_err(|_| "--time-scale takes a number".to_owned())?
            }
            "--mode" => {
                config.response_mode = match value(arg)?.as_str() {
                    "json" => ResponseMode::Json,
                    "sse" => ResponseMode::Sse,
                    "mixed" => ResponseMode::Mixed,
                    other => return Err(format!("unknown mode {other:?}")),
                }
            }
            "--crlf" => config.sse_crlf = true,
            "--era" => config.era = value(arg)?.parse()?,
            "--poll-interval-ms" => {
                config.poll_interval_ms = value(arg)?
                    .parse()
                    .map_err(|_| "--poll-interval-ms takes an integer".to_owned())?
            }
            "--ttl-ms" => {
                config.default_ttl_ms = match value(arg)?.as_str() {
                    "none" => None,
                    ms => Some(
                        ms.parse()
                            .map_err(|_| "--ttl-ms takes an integer or none".to_owned())?,
                    ),
                }
            }
            "--token" => config.required_token = Some(value(arg)?),
            "--no-push" => config.push = false,
            "--keepalive-ms" => {
                config.listen_keepalive = std::time::Duration::from_millis(
                    value(arg)?
                        .parse()
                        .map_err(|_| "--keepalive-ms takes an integer".to_owned())?,
                )
            }
            other => {
                port = other
                    .parse()
                    .map_err(|_| format!("unexpected argument {other:?}"))?
            }
        }
    }
    Ok((port, config))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (port, config) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("serve: {message}");
            return ExitCode::from(2);
        }
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match serve_until_signal(addr, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("serve: {error}");
            ExitCode::FAILURE
        }
    }
}
