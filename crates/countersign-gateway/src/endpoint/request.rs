//! One request as the endpoint reads it: the agent's bearer token, the JSON-RPC message, and a
//! 2026-07-28 request's own consistency (its `_meta` and the `Mcp-*` headers against its body).

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use countersign_core::console::gateway::PolicyInput;
use countersign_core::gateway::outcome::TASKS_EXTENSION;
use countersign_core::gateway::TASK_PREFIX;
use countersign_core::ledger::agents::AgentRecord;
use countersign_core::ledger::servers::ServerRecord;
use countersign_core::mcp::headers::check_param_headers;

use super::{
    console_error, error_reply, json_reply, rpc_error, unauthorized, Listed, Shared, SESSION_HEADER,
};

/// The stateless protocol version.
const STATELESS_VERSION: &str = "2026-07-28";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// A request admitted: the agent holding the token, the server it is for, the policy for the
/// tool it calls (`tools/call` only), and the request itself.
pub(super) struct Admitted {
    pub(super) agent: AgentRecord,
    pub(super) server: ServerRecord,
    pub(super) policy: Option<PolicyInput>,
    pub(super) request: Request,
}

/// Reads a `POST`: the bearer token, the JSON-RPC message, the agent, server and policy it
/// concerns (one read), and a 2026-07-28 request's own consistency. `Err` is the reply when there
/// is nothing more to do: a refusal, or `202` for a response or a notification.
pub(super) async fn admit(
    shared: &Shared,
    server_name: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Admitted, Response> {
    let Some(token) = bearer(headers) else {
        return Err(unauthorized(
            "a bearer token is required (countersign agents add NAME)",
        ));
    };
    let message: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => {
            return Err(json_reply(
                StatusCode::BAD_REQUEST,
                rpc_error(&Value::Null, -32700, &format!("Parse error: {e}"), None),
            ))
        }
    };
    let method = message.get("method").and_then(Value::as_str);
    let tool = match method {
        Some("tools/call") => message
            .get("params")
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str),
        _ => None,
    };
    // One read for the agent, the server and the policy: every request shares one reader.
    let admission = match shared.console.admit(token, server_name, tool).await {
        Ok(admission) => admission,
        Err(e) => {
            return Err(json_reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                console_error(&Value::Null, &e),
            ))
        }
    };
    let Some(agent) = admission.agent else {
        return Err(unauthorized("unknown or revoked agent token"));
    };
    let Some(server) = admission.server else {
        return Err(json_reply(
            StatusCode::NOT_FOUND,
            rpc_error(
                &Value::Null,
                -32602,
                &format!("no server named {server_name:?} is registered in Countersign"),
                None,
            ),
        ));
    };
    let Some(method) = method else {
        // A response to a request of ours: the gateway sends none.
        return Err(StatusCode::ACCEPTED.into_response());
    };
    let Some(id) = message.get("id").cloned() else {
        // A notification (`notifications/initialized`, cancellations): nothing to answer.
        return Err(StatusCode::ACCEPTED.into_response());
    };
    let params = match message.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            return Err(json_reply(
                StatusCode::BAD_REQUEST,
                rpc_error(&id, -32602, "params must be an object", None),
            ))
        }
    };
    let mut request = Request {
        id,
        method: method.to_owned(),
        params,
        stateless: false,
    };
    let session = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    if session.is_none() && request.stateless(headers) {
        request.stateless = true;
        request.check_stateless(headers)?;
    }
    Ok(Admitted {
        agent,
        server,
        policy: admission.policy,
        request,
    })
}

/// What one request says about its sender.
pub(super) struct Request {
    pub(super) id: Value,
    pub(super) method: String,
    pub(super) params: Map<String, Value>,
    /// A 2026-07-28 request (no session): stricter checks, HTTP statuses on errors.
    pub(super) stateless: bool,
}

impl Request {
    /// `tasks/get`, `tasks/update` or `tasks/cancel`.
    pub(super) fn is_tasks_method(&self) -> bool {
        matches!(
            self.method.as_str(),
            "tasks/get" | "tasks/update" | "tasks/cancel"
        )
    }

    /// The id of one of Countersign's own tasks (`csg-…`) the request names, if any: those are
    /// served from the ledger, every other task id is the upstream's.
    pub(super) fn own_task_id(&self) -> Option<String> {
        self.params
            .get("taskId")
            .and_then(Value::as_str)
            .filter(|t| t.starts_with(TASK_PREFIX))
            .map(str::to_owned)
    }

    pub(super) fn declares_tasks(&self) -> bool {
        self.params
            .get("_meta")
            .and_then(|m| m.get(META_CAPABILITIES))
            .and_then(|c| c.get("extensions"))
            .and_then(|e| e.get(TASKS_EXTENSION))
            .is_some()
    }

    pub(super) fn stateless(&self, headers: &HeaderMap) -> bool {
        let header = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let meta = self
            .params
            .get("_meta")
            .and_then(|m| m.get(META_VERSION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        [header, meta]
            .iter()
            .flatten()
            .any(|v| v.as_str() >= STATELESS_VERSION)
    }

    /// A 2026-07-28 request's own consistency (SEP-2575, SEP-2243): `_meta` with the protocol
    /// version and the client's capabilities; the `MCP-Protocol-Version`, `Mcp-Method` and
    /// `Mcp-Name` headers, when sent, agreeing with the body; a version the gateway speaks;
    /// none of the methods 2026-07-28 removed. The upstream checks its own copy, which the
    /// gateway's client writes from the body, so the agent's headers are checked here.
    pub(super) fn check_stateless(&self, headers: &HeaderMap) -> Result<(), Response> {
        let header = |name: &str| {
            headers
                .get(name)
                .map(|v| v.to_str().map(str::trim).unwrap_or("\u{fffd}"))
        };
        let invalid = |what: &str| {
            Err(json_reply(
                StatusCode::BAD_REQUEST,
                rpc_error(
                    &self.id,
                    -32602,
                    &format!("Invalid params: {what} is required"),
                    None,
                ),
            ))
        };
        let Some(meta) = self.params.get("_meta").and_then(Value::as_object) else {
            return invalid("_meta");
        };
        let Some(version) = meta.get(META_VERSION).and_then(Value::as_str) else {
            return invalid(&format!("_meta[\"{META_VERSION}\"]"));
        };
        if !meta.get(META_CAPABILITIES).is_some_and(Value::is_object) {
            return invalid(&format!("_meta[\"{META_CAPABILITIES}\"]"));
        }
        let mismatch = |what: &str| {
            Err(error_reply(
                self,
                -32020,
                &format!("Header mismatch: {what} does not match the request body"),
                None,
            ))
        };
        if header("mcp-protocol-version").is_some_and(|h| h != version) {
            return mismatch("MCP-Protocol-Version");
        }
        if header("mcp-method") != Some(self.method.as_str()) {
            return mismatch("Mcp-Method (missing or different)");
        }
        if !self.name_header_agrees(header("mcp-name")) {
            return mismatch("Mcp-Name (missing or different)");
        }
        if version != STATELESS_VERSION {
            return Err(error_reply(
                self,
                -32022,
                &format!("Unsupported protocol version {version}"),
                Some(json!({"supported": [STATELESS_VERSION], "requested": version})),
            ));
        }
        if matches!(
            self.method.as_str(),
            "initialize"
                | "ping"
                | "logging/setLevel"
                | "resources/subscribe"
                | "resources/unsubscribe"
        ) {
            return Err(error_reply(
                self,
                -32601,
                &format!(
                    "Method not found: {} is not part of MCP 2026-07-28",
                    self.method
                ),
                None,
            ));
        }
        Ok(())
    }

    /// Whether the `Mcp-Name` the agent sent (`None`: none) agrees with the name its body routes
    /// by. The name must come as `Mcp-Name` too (plain, or the `=?base64?…?=` form), equal to
    /// the body's; on `tasks/*` a missing one is accepted, as fastmcp's server accepts it, since
    /// released clients (fastmcp 4.1.4) send none there: the body names the task, and the
    /// gateway's client writes the upstream's copy from the body. A header that contradicts
    /// the body is refused everywhere.
    fn name_header_agrees(&self, sent: Option<&str>) -> bool {
        let (field, optional) = match self.method.as_str() {
            "tools/call" | "prompts/get" => ("name", false),
            "resources/read" => ("uri", false),
            "tasks/get" | "tasks/update" | "tasks/cancel" => ("taskId", true),
            _ => return true,
        };
        let Some(name) = self.params.get(field).and_then(Value::as_str) else {
            return true;
        };
        match sent.map(countersign_core::mcp::headers::decode_header_value) {
            Some(Some(sent)) => sent == name,
            Some(None) => false,
            None => optional,
        }
    }

    /// The `_meta.progressToken` the agent sent, if any (a string or a number).
    pub(super) fn progress_token(&self) -> Option<Value> {
        self.params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned()
    }

    /// The params to send upstream. The agent's `_meta` is the agent's (its version, identity);
    /// the gateway's client sends its own, but with the capabilities of the agent it speaks
    /// for (`mcp::Client::forward`): the upstream must know what this agent can do to serve
    /// or refuse it as it would the agent itself. A 2026-07-28 agent's are the ones it
    /// declares. A session agent's are tasks only: the gateway waits for an upstream task on
    /// its behalf, but cannot put an upstream's questions (MRTR) to it, as 2025-11-25 has no
    /// such round, so the upstream must not plan on asking (it refuses with -32021 instead,
    /// which the agent understands). Approved calls are the gateway's own and go through the
    /// console, whose questions go to the person.
    pub(super) fn upstream_params(&self) -> Map<String, Value> {
        let mut params = self.params.clone();
        let meta = params.remove("_meta");
        let capabilities = if self.stateless {
            meta.as_ref()
                .and_then(|m| m.get(META_CAPABILITIES))
                .cloned()
        } else {
            Some(json!({"extensions": {TASKS_EXTENSION: {}}}))
        };
        if let Some(capabilities) = capabilities {
            params.insert("_meta".into(), json!({ META_CAPABILITIES: capabilities }));
        }
        params
    }

    /// A 2026-07-28 `tools/call`'s `Mcp-Param-*` headers against its arguments, as a server
    /// checks them (SEP-2243): the gateway's client writes the upstream's copy from the body,
    /// so a mismatch the agent sent would otherwise go unseen. 400 and -32020 when they differ.
    pub(super) fn check_param_headers(
        &self,
        listed: Option<&Listed>,
        headers: &HeaderMap,
    ) -> Result<(), Response> {
        let Some(listed) = listed.filter(|l| !l.header_params.is_empty()) else {
            return Ok(());
        };
        let arguments = self.params.get("arguments").and_then(Value::as_object);
        let sent = |name: &str| {
            let mut values = headers.get_all(name).iter();
            let first = values.next()?;
            // Sent twice, or not visible ASCII: a value that cannot decode.
            Some(match (first.to_str(), values.next()) {
                (Ok(value), None) => value,
                _ => "\u{fffd}",
            })
        };
        check_param_headers(&listed.header_params, arguments, sent).map_err(|mismatch| {
            error_reply(self, -32020, &format!("Header mismatch: {mismatch}"), None)
        })
    }
}

pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue, StatusCode};
    use serde_json::{json, Value};

    use super::Request;

    fn request(method: &str, params: Value) -> Request {
        let mut params = params.as_object().cloned().unwrap_or_default();
        params.insert(
            "_meta".into(),
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            }),
        );
        Request {
            id: json!(1),
            method: method.into(),
            params,
            stateless: true,
        }
    }

    fn headers(method: &str, name: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        headers.insert(
            "mcp-method",
            HeaderValue::from_str(method).expect("a value"),
        );
        if let Some(name) = name {
            headers.insert("mcp-name", HeaderValue::from_str(name).expect("a value"));
        }
        headers
    }

    fn refused(result: Result<(), axum::response::Response>) -> Option<StatusCode> {
        result.err().map(|r| r.status())
    }

    #[test]
    fn a_tasks_request_without_mcp_name_is_accepted_as_its_body_names_the_task() {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let req = request(method, json!({"taskId": "csg-1"}));
            assert_eq!(
                refused(req.check_stateless(&headers(method, None))),
                None,
                "{method}"
            );
            assert_eq!(
                refused(req.check_stateless(&headers(method, Some("csg-1")))),
                None,
                "{method} with the same name"
            );
        }
    }

    #[test]
    fn a_tasks_request_whose_mcp_name_contradicts_its_body_is_refused() {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let req = request(method, json!({"taskId": "csg-1"}));
            assert_eq!(
                refused(req.check_stateless(&headers(method, Some("csg-2")))),
                Some(StatusCode::BAD_REQUEST),
                "{method}"
            );
            // A sentinel that does not decode says nothing that agrees.
            assert_eq!(
                refused(req.check_stateless(&headers(method, Some("=?base64?!!?=")))),
                Some(StatusCode::BAD_REQUEST),
                "{method} with a malformed sentinel"
            );
        }
    }

    #[test]
    fn a_tool_call_still_needs_its_mcp_name() {
        let req = request("tools/call", json!({"name": "echo", "arguments": {}}));
        assert_eq!(
            refused(req.check_stateless(&headers("tools/call", None))),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            refused(req.check_stateless(&headers("tools/call", Some("other")))),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            refused(req.check_stateless(&headers("tools/call", Some("echo")))),
            None
        );
    }
}
