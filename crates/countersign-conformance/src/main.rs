//! `conformance-client URL`: the adapter the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`) runs as a client. It reads the scenario from
//! `MCP_CONFORMANCE_SCENARIO` and the protocol version from `MCP_CONFORMANCE_PROTOCOL_VERSION`,
//! and drives the real client of that era through it, so the suite tests what the app ships:
//!
//! - 2026-07-28: `countersign_core::mcp::Client` ([`modern`]);
//! - 2025-11-25: `countersign_core::mcp::LegacyClient`, with its session ([`legacy`]).
//!
//! Both sign in through the same `countersign_core::auth` ([`sign_in`]) and answer forms the
//! same way ([`answers`]).

use std::process::ExitCode;

use countersign_core::mcp::{legacy::LEGACY_VERSIONS, PROTOCOL_VERSION};

mod answers;
mod legacy;
mod modern;
mod sign_in;

type Failure = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1).filter(|a| a.starts_with("http")) else {
        eprintln!("usage: conformance-client URL (with MCP_CONFORMANCE_SCENARIO set)");
        return ExitCode::from(64);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
        .unwrap_or_else(|_| PROTOCOL_VERSION.into());
    // The legacy client always asks for its newest version; the suite's older versions would
    // expect an `initialize` it does not send.
    let outcome = if version == PROTOCOL_VERSION {
        modern::run(&scenario, &url).await
    } else if version == LEGACY_VERSIONS[0] {
        legacy::run(&scenario, &url).await
    } else {
        eprintln!(
            "conformance-client speaks {PROTOCOL_VERSION} and {}, not {version}",
            LEGACY_VERSIONS[0]
        );
        return ExitCode::from(2);
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client: {scenario} at {version}: {e}");
            ExitCode::FAILURE
        }
    }
}
