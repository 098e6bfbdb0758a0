//! Where to sign in: protected resource metadata (RFC 9728) and authorization server metadata
//! (RFC 8414, OpenID Connect discovery), fetched in the order MCP 2026-07-28 gives.
//!
//! Every request here goes through a client that follows no redirect and sends no credentials:
//! metadata is public, and a redirect to another host is exactly how a token would leak.

use serde::Deserialize;
use serde_json::Value;
use url::Url;

use super::challenge::Challenge;
use super::{Error, Result};
use crate::mcp::PROTOCOL_VERSION;

/// The protected resource metadata of one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    /// Where the document was found.
    pub url: String,
    /// `resource`, exactly as the document spells it: this string (not a normalised URL) is the
    /// RFC 8707 `resource` of every authorization, token and refresh request.
    pub resource: String,
    /// `authorization_servers`, in the document's order.
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`, if given.
    pub scopes_supported: Option<Vec<String>>,
}

/// The fields of authorization server metadata the client uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AuthServerMetadata {
    /// `issuer`: byte-equal to the issuer it was fetched for.
    pub issuer: String,
    /// `authorization_endpoint`.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// `token_endpoint`.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// `registration_endpoint` (RFC 7591).
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// `scopes_supported`.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// `code_challenge_methods_supported`; absent means no PKCE.
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// `token_endpoint_auth_methods_supported`; absent means `client_secret_basic` (RFC 8414).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// `client_id_metadata_document_supported`.
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
}

impl AuthServerMetadata {
    /// The server offers PKCE with S256.
    pub fn supports_s256(&self) -> bool {
        self.code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m == "S256"))
    }

    /// The server lists `scope` in `scopes_supported`.
    pub fn offers_scope(&self, scope: &str) -> bool {
        self.scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == scope))
    }
}

/// Everything discovery found for one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The protected resource metadata.
    pub resource: ProtectedResource,
    /// The issuer chosen from `authorization_servers`.
    pub issuer: String,
    /// That issuer's metadata.
    pub server: AuthServerMetadata,
}

/// Finds where to sign in for `server` (the MCP URL), starting from a `401`'s challenge.
pub async fn discover(
    http: &reqwest::Client,
    server: &str,
    challenge: &Challenge,
) -> Result<Discovered> {
    let server_url = parse(server, "the server URL")?;
    let resource = protected_resource(http, &server_url, challenge).await?;
    let issuer = resource
        .authorization_servers
        .first()
        .cloned()
        .ok_or_else(|| Error::NoAuthorizationServer {
            url: resource.url.clone(),
        })?;
    let server = authorization_server(http, &issuer).await?;
    Ok(Discovered {
        resource,
        issuer,
        server,
    })
}

/// RFC 9728 in the spec's order: the challenge's `resource_metadata`, then the path-aware
/// well-known URL, then the root one. The document must name this server before anything
/// else is asked of any authorization server.
async fn protected_resource(
    http: &reqwest::Client,
    server: &Url,
    challenge: &Challenge,
) -> Result<ProtectedResource> {
    let mut candidates = Vec::new();
    if let Some(url) = &challenge.resource_metadata {
        candidates.push(parse(url, "resource_metadata")?);
    }
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        candidates.push(well_known(
            server,
            &format!("/.well-known/oauth-protected-resource{path}"),
        ));
    }
    candidates.push(well_known(server, "/.well-known/oauth-protected-resource"));

    for url in &candidates {
        let Some(doc) = get_json(http, url).await? else {
            continue;
        };
        let resource = doc
            .get("resource")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::BadMetadata {
                url: url.to_string(),
                message: "no `resource`".into(),
            })?
            .to_owned();
        check_resource(&resource, server)?;
        return Ok(ProtectedResource {
            url: url.to_string(),
            resource,
            authorization_servers: strings(&doc, "authorization_servers").unwrap_or_default(),
            scopes_supported: strings(&doc, "scopes_supported"),
        });
    }
    Err(Error::NoResourceMetadata {
        server: server.to_string(),
        tried: list(&candidates),
    })
}

/// The metadata's `resource` must identify this server (RFC 9728 §3.3): same origin, and a path
/// that is the server's own or one of its parent paths (the root document names the origin).
/// A fragment is never allowed (RFC 8707).
fn check_resource(resource: &str, server: &Url) -> Result<()> {
    let mismatch = || Error::ResourceMismatch {
        resource: resource.to_owned(),
        server: server.to_string(),
    };
    let parsed = Url::parse(resource).map_err(|_| mismatch())?;
    if parsed.fragment().is_some() || parsed.origin() != server.origin() {
        return Err(mismatch());
    }
    let theirs = parsed.path().trim_end_matches('/');
    let ours = server.path().trim_end_matches('/');
    let is_prefix = theirs.is_empty()
        || ours == theirs
        || ours
            .strip_prefix(theirs)
            .is_some_and(|rest| rest.starts_with('/'));
    if is_prefix {
        Ok(())
    } else {
        Err(mismatch())
    }
}

/// RFC 8414 and OpenID discovery in the spec's order; a document whose `issuer` is not
/// byte-equal to `issuer` is dropped (a mix-up attack or a misconfigured server).
async fn authorization_server(http: &reqwest::Client, issuer: &str) -> Result<AuthServerMetadata> {
    let base = parse(issuer, "the authorization server (issuer)")?;
    let path = base.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            well_known(&base, "/.well-known/oauth-authorization-server"),
            well_known(&base, "/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            well_known(
                &base,
                &format!("/.well-known/oauth-authorization-server{path}"),
            ),
            well_known(&base, &format!("/.well-known/openid-configuration{path}")),
            well_known(&base, &format!("{path}/.well-known/openid-configuration")),
        ]
    };
    let mut mismatch = None;
    for url in &candidates {
        let Some(doc) = get_json(http, url).await? else {
            continue;
        };
        let metadata: AuthServerMetadata =
            serde_json::from_value(doc).map_err(|e| Error::BadMetadata {
                url: url.to_string(),
                message: e.to_string(),
            })?;
        if metadata.issuer != issuer {
            mismatch = Some(Error::IssuerMismatch {
                url: url.to_string(),
                expected: issuer.to_owned(),
                found: metadata.issuer,
            });
            continue;
        }
        return Ok(metadata);
    }
    Err(mismatch.unwrap_or_else(|| Error::NoServerMetadata {
        issuer: issuer.to_owned(),
        tried: list(&candidates),
    }))
}

/// GETs a metadata document: `Some(json)` on 2xx, `None` when it is not there (any 4xx/5xx or
/// a redirect, which we do not follow), an error when the server cannot be reached.
async fn get_json(http: &reqwest::Client, url: &Url) -> Result<Option<Value>> {
    let response = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .header("MCP-Protocol-Version", PROTOCOL_VERSION)
        .send()
        .await
        .map_err(|e| Error::Transport {
            url: url.to_string(),
            message: e.without_url().to_string(),
        })?;
    if !response.status().is_success() {
        return Ok(None);
    }
    let body = response.bytes().await.map_err(|e| Error::Transport {
        url: url.to_string(),
        message: e.without_url().to_string(),
    })?;
    serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(Value::is_object)
        .map(Some)
        .ok_or_else(|| Error::BadMetadata {
            url: url.to_string(),
            message: "not a JSON object".into(),
        })
}

fn well_known(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    url.set_path(path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

fn parse(url: &str, what: &'static str) -> Result<Url> {
    Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| Error::BadUrl {
            what,
            url: url.to_owned(),
        })
}

fn strings(doc: &Value, key: &str) -> Option<Vec<String>> {
    doc.get(key)?.as_array().map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    })
}

fn list(urls: &[Url]) -> String {
    urls.iter().map(Url::as_str).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn a_resource_naming_this_server_or_its_origin_is_accepted() {
        let server = url("https://mcp.example.com/tenant/mcp");
        for ok in [
            "https://mcp.example.com/tenant/mcp",
            "https://mcp.example.com/tenant/mcp/",
            "https://mcp.example.com",
            "https://mcp.example.com/tenant",
        ] {
            assert!(
                check_resource(ok, &server).is_ok(),
                "{ok} names this server"
            );
        }
    }

    #[test]
    fn a_resource_naming_another_server_or_with_a_fragment_is_refused() {
        let server = url("https://mcp.example.com/tenant/mcp");
        for bad in [
            "https://evil.example.com/mcp",
            "https://mcp.example.com/other",
            "https://mcp.example.com/tenant/mcpx",
            "https://mcp.example.com/tenant/mcp#frag",
            "http://mcp.example.com/tenant/mcp",
            "not a url",
        ] {
            assert!(
                matches!(
                    check_resource(bad, &server),
                    Err(Error::ResourceMismatch { .. })
                ),
                "{bad} must be refused"
            );
        }
    }
}
