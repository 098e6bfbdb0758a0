//! Raw MCP requests over HTTP, as a client that is not ours sends them: for the checks on the
//! wire that our own client would not let a test make.

/// A 2026-07-28 POST of `method` to `url`: a JSON body, JSON or an event stream accepted, the
/// protocol version and `Mcp-Method` headers set. The caller adds the body and anything else.
pub fn post(http: &reqwest::Client, url: &str, method: &str) -> reqwest::RequestBuilder {
    http.post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
}
