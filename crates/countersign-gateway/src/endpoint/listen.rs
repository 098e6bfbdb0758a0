//! `subscriptions/listen`, relayed to the upstream as a stream and retagged for the agent.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use countersign_core::gateway::TASK_PREFIX;
use countersign_core::mcp::sse::SseDecoder;
use countersign_core::mcp::subscription::{DEFAULT_IDLE_TIMEOUT, META_SUBSCRIPTION_ID};
use countersign_core::mcp::{self, RelayedListen};

use super::request::Request;
use super::{error_reply, error_status, forwarded, json_reply, rpc_error, Link, Shared};

/// `subscriptions/listen`, relayed to the upstream as a stream: the agent's filter goes up, each
/// message comes back retagged with the agent's own subscription id (the agent's request id;
/// the upstream knows the gateway's), the upstream's closing response or cancellation ends the
/// relay. Bounded as the engine's own listen is: at most [`DEFAULT_IDLE_TIMEOUT`] of upstream
/// silence (its keep-alives count), an event no larger than a response body; the agent hears
/// the gateway's keep-alives. An agent that hangs up drops the relay at the next write, which
/// closes the upstream connection, which ends the subscription there.
///
/// Countersign's own tasks (`csg-…`) are not the upstream's: their ids are kept out of the
/// upstream's filter, so its acknowledgement leaves them out and the agent polls them with
/// `tasks/get` (notifications are optional, polling is what every agent does anyway).
pub(super) async fn listen(shared: &Shared, link: &Link, request: &Request) -> Response {
    let mut params = request.upstream_params();
    if let Some(ids) = params
        .get_mut("notifications")
        .and_then(|n| n.get_mut("taskIds"))
        .and_then(Value::as_array_mut)
    {
        ids.retain(|id| !id.as_str().is_some_and(|id| id.starts_with(TASK_PREFIX)));
    }
    // 2025-11-25 has no subscriptions: the agent polls, as after any server's -32601.
    let Some(client) = link.peer.modern() else {
        return error_reply(
            request,
            -32601,
            "Method not found: the upstream speaks MCP 2025-11-25, which has no subscriptions/listen",
            None,
        );
    };
    match client.relay_listen(params).await {
        Err(e) => forwarded(request, Err(e)),
        Ok(RelayedListen::Message { id, text }) => match serde_json::from_str::<Value>(&text) {
            Ok(message) => {
                let (message, _) = retag(message, id, &request.id);
                json_reply(error_status(&message, request.stateless), message)
            }
            Err(_) => json_reply(
                StatusCode::BAD_GATEWAY,
                rpc_error(
                    &request.id,
                    -32603,
                    "the upstream answered subscriptions/listen with a body that is not JSON",
                    None,
                ),
            ),
        },
        Ok(RelayedListen::Stream { id, body }) => {
            let listen = ListenStream {
                body,
                decoder: SseDecoder::new(),
                upstream_id: id,
                agent_id: request.id.clone(),
                queue: std::collections::VecDeque::new(),
                ended: false,
            };
            let stream = futures_util::stream::unfold(listen, |mut listen| async move {
                let event = listen.next().await?;
                Some((Ok::<_, Infallible>(event), listen))
            });
            Sse::new(stream)
                .keep_alive(
                    KeepAlive::new()
                        .interval(shared.config.keep_alive)
                        .text("keep-alive"),
                )
                .into_response()
        }
    }
}

/// One upstream listen stream, forwarded to the agent.
struct ListenStream {
    body: futures_util::stream::BoxStream<'static, mcp::Result<Bytes>>,
    decoder: SseDecoder,
    upstream_id: u64,
    agent_id: Value,
    queue: std::collections::VecDeque<Event>,
    /// The upstream closed the subscription, broke the stream's rules, or went silent.
    ended: bool,
}

impl ListenStream {
    /// The next message for the agent; `None` when the stream is over.
    async fn next(&mut self) -> Option<Event> {
        use futures_util::StreamExt as _;
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            let mut events = Vec::new();
            match tokio::time::timeout(DEFAULT_IDLE_TIMEOUT, self.body.next()).await {
                Ok(Some(Ok(bytes))) => {
                    if self.decoder.feed(&bytes, &mut events).is_err() {
                        tracing::warn!(
                            "an upstream listen event passed the size limit; the relay ends"
                        );
                        self.ended = true;
                    }
                }
                Ok(None) => {
                    self.decoder.finish(&mut events);
                    self.ended = true;
                }
                Ok(Some(Err(e))) => {
                    tracing::debug!("the upstream listen stream broke: {e}");
                    self.ended = true;
                }
                Err(_) => {
                    tracing::debug!("the upstream listen stream went silent; the relay ends");
                    self.ended = true;
                }
            }
            for event in events {
                let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                    continue;
                };
                // A request on a listen stream could not be answered through the relay.
                if message.get("method").is_some() && message.get("id").is_some() {
                    continue;
                }
                let (message, last) = retag(message, self.upstream_id, &self.agent_id);
                self.queue
                    .push_back(Event::default().event("message").data(message.to_string()));
                if last {
                    self.ended = true;
                    break;
                }
            }
        }
    }
}

/// An upstream listen-stream message as the agent's: the subscription id, the response's id and
/// a cancellation's `requestId` become the agent's request id. Also says whether it ends the
/// subscription (the response, or a cancellation of it).
pub(super) fn retag(mut message: Value, upstream_id: u64, agent_id: &Value) -> (Value, bool) {
    let upstream = Value::from(upstream_id);
    if message.get("method").is_none() {
        if let Some(id) = message.get_mut("id") {
            *id = agent_id.clone();
        }
        return (message, true);
    }
    let cancels = message["method"] == "notifications/cancelled"
        && message["params"]["requestId"] == upstream;
    if cancels {
        message["params"]["requestId"] = agent_id.clone();
    }
    if let Some(tag) = message
        .get_mut("params")
        .and_then(|p| p.get_mut("_meta"))
        .and_then(|m| m.get_mut(META_SUBSCRIPTION_ID))
    {
        *tag = agent_id.clone();
    }
    (message, cancels)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_relayed_listen_message_carries_the_agents_subscription_id() {
        let agent = json!("agent-7");
        let (ack, last) = retag(
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {META_SUBSCRIPTION_ID: 12}, "notifications": {}}}),
            12,
            &agent,
        );
        assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], agent);
        assert!(!last, "an acknowledgement opens the stream");
        let (cancel, last) = retag(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12}}),
            12,
            &agent,
        );
        assert_eq!(cancel["params"]["requestId"], agent);
        assert!(
            last,
            "the upstream's cancellation of the listen request ends the relay"
        );
        let (other, last) = retag(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}),
            12,
            &agent,
        );
        assert_eq!(other["params"]["requestId"], json!(3));
        assert!(!last, "a cancellation of something else is relayed as is");
        let (closing, last) = retag(
            json!({"jsonrpc": "2.0", "id": 12, "result": {}}),
            12,
            &agent,
        );
        assert_eq!(closing["id"], agent);
        assert!(last, "the response closes the subscription");
    }
}
