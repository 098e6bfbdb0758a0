//! The gateway's pass-through: an agent's request or listen sent upstream as it came.

use super::*;

impl Client {
    /// Sends `method` with `params` as the agent sent them and returns the result verbatim,
    /// task handles included: the gateway's pass-through. The agent's `_meta` is replaced by
    /// this client's own (its protocol version, capabilities and identity), except the client
    /// capabilities it declares (`_meta["io.modelcontextprotocol/clientCapabilities"]`), which
    /// go upstream instead of ours: the upstream decides what it may ask of, or must refuse to,
    /// the agent (-32021 for a task-only tool to an agent without tasks); `Mcp-Name` is set
    /// as for the typed methods, and a `tools/call` mirrors its `x-mcp-header` arguments as
    /// learnt from the last `tools/list`.
    pub async fn forward(&self, method: &str, params: Map<String, Value>) -> Result<Value> {
        let name_field = match method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            m if m.starts_with("tasks/") => Some("taskId"),
            _ => None,
        };
        let name = name_field
            .and_then(|f| params.get(f))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let extra = match (method, name.as_deref()) {
            ("tools/call", Some(tool)) => {
                let header_params = self
                    .inner
                    .tools
                    .read()
                    .ok()
                    .and_then(|cache| cache.params.get(tool).cloned())
                    .unwrap_or_default();
                let arguments = params.get("arguments").and_then(Value::as_object);
                param_headers(&header_params, arguments)
            }
            _ => Vec::new(),
        };
        self.request(method, params, name.as_deref(), extra).await
    }

    /// Opens `subscriptions/listen` with `params` as an agent sent them, for the gateway to
    /// relay: the stream's bytes untouched (the caller decodes them), or the one JSON message
    /// that answered instead. `params._meta` may carry the agent's client capabilities (see
    /// [`Client::forward`]). Bounded as [`Client::listen`] is up to the response headers; the
    /// caller bounds the silence.
    pub async fn relay_listen(&self, params: Map<String, Value>) -> Result<RelayedListen> {
        let OpenedListen {
            id,
            response,
            framing,
        } = self.open_listen(&params).await?;
        Ok(match framing {
            Framing::Sse => {
                let client = self.clone();
                RelayedListen::Stream {
                    id,
                    body: Box::pin(
                        response
                            .bytes_stream()
                            .map(move |chunk| chunk.map_err(|e| client.transport_error(e))),
                    ),
                }
            }
            Framing::Json => RelayedListen::Message {
                id,
                text: self.read_listen_body(response).await,
            },
        })
    }
}

/// What the upstream answered a relayed `subscriptions/listen` with ([`Client::relay_listen`]).
pub enum RelayedListen {
    /// An event stream: the bytes as they come. Dropping it closes the connection, which ends
    /// the subscription upstream.
    Stream {
        /// The JSON-RPC id the upstream knows the subscription by (its `subscriptionId`).
        id: u64,
        /// The body.
        body: futures_util::stream::BoxStream<'static, Result<bytes::Bytes>>,
    },
    /// A single JSON message (an error sent with 200, or a result: the subscription is over).
    Message {
        /// The JSON-RPC id of the request.
        id: u64,
        /// The body.
        text: String,
    },
}

impl std::fmt::Debug for RelayedListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stream { id, .. } => f
                .debug_struct("Stream")
                .field("id", id)
                .finish_non_exhaustive(),
            Self::Message { id, text } => f
                .debug_struct("Message")
                .field("id", id)
                .field("text", text)
                .finish(),
        }
    }
}
