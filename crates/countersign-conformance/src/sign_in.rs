//! The sign-in both eras share: the app's `Authorizer`, configured from the scenario's context
//! (a pre-registered client when the suite gives one, our client ID metadata document URL
//! otherwise), and the browser played by a client that follows the authorization redirect into
//! the loopback listener.

use std::time::Duration;

use countersign_core::auth::{Authorizer, ClientConfig, PreRegistered};
use countersign_core::sensitive::Sensitive;
use serde_json::Value;

use crate::Failure;

/// The client ID metadata document URL the suite expects (it never fetches it).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// How long one sign-in waits for the redirect back to the loopback listener.
pub const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(20);

/// The authorizer for the MCP server at `url`, as the scenario's context asks.
pub fn authorizer(url: &str) -> Result<Authorizer, Failure> {
    let mut config = ClientConfig {
        metadata_document_url: Some(CLIENT_METADATA_URL.into()),
        ..ClientConfig::default()
    };
    if let Ok(context) = std::env::var("MCP_CONFORMANCE_CONTEXT") {
        let context: Value = serde_json::from_str(&context)?;
        if let (Some(id), Some(issuer)) =
            (context["client_id"].as_str(), context["issuer"].as_str())
        {
            config.pre_registered = Some(PreRegistered {
                issuer: Some(issuer.into()),
                client_id: id.into(),
                client_secret: context["client_secret"]
                    .as_str()
                    .map(|s| Sensitive::new(s.to_owned())),
            });
        }
    }
    Ok(Authorizer::new(url, config)?)
}
