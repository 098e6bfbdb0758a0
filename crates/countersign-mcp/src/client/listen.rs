//! `subscriptions/listen`: the long-lived stream of task status notifications.

use super::*;

impl Client {
    /// Opens a `subscriptions/listen` stream for task status notifications: a long-lived POST
    /// with no whole-request timeout. Getting the response headers is bounded by the request
    /// timeout; after that the stream is bounded by `request.idle_timeout` of silence. Errors
    /// before the stream opens are typed as for every other request (-32601 →
    /// [`Error::MethodNotFound`], -32021 → [`Error::MissingCapability`], ...); errors and events
    /// after it opens come from [`Listening::next`].
    pub async fn listen(&self, request: &ListenRequest) -> Result<Listening> {
        let OpenedListen {
            id,
            response,
            framing,
        } = self.open_listen(&request.params()).await?;
        let mut listening = Listening {
            id,
            url: self.inner.endpoint.url.clone(),
            body: Box::pin(futures_util::stream::empty()),
            decoder: ListenDecoder::new(Value::from(id)),
            queue: std::collections::VecDeque::new(),
            idle_timeout: request.idle_timeout,
            ended: false,
            client: self.clone(),
        };
        match framing {
            Framing::Sse => listening.body = Box::pin(response.bytes_stream()),
            // A JSON body is a single message: an error (some servers send -32601 with 200), or
            // a result, which means the subscription ended as soon as it began.
            Framing::Json => {
                let text = self.read_listen_body(response).await;
                match listening.decoder.message(&text, "response") {
                    Ok(Some(event)) => listening.queue.push_back(Ok(event)),
                    Ok(None) => {
                        return Err(invalid(
                            LISTEN_METHOD,
                            "the JSON body does not answer the listen request",
                        ))
                    }
                    Err(fault) => return Err(stream_fault(fault)),
                }
                listening.ended = true;
            }
        }
        Ok(listening)
    }

    /// A JSON answer to a listen request, read within the request timeout.
    pub(super) async fn read_listen_body(&self, response: reqwest::Response) -> String {
        tokio::time::timeout(
            self.inner.options.request_timeout,
            self.read_body_text(ReplyBody::Reqwest(Box::pin(response.bytes_stream()))),
        )
        .await
        .unwrap_or_default()
    }

    /// Sends `subscriptions/listen` and reads the answer's status and headers: errors typed as
    /// for every other request, else the response with its framing.
    pub(super) async fn open_listen(&self, params: &Map<String, Value>) -> Result<OpenedListen> {
        let method = LISTEN_METHOD;
        let inner = &self.inner;
        let version = self.protocol_version();
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let body = Envelope {
            id,
            method,
            params,
            version: &version,
            fixed: &inner.fixed_meta,
        }
        .encode()?;
        let headers = request_headers(method, None, &[], &version, self.bearer_token().as_ref())?;

        let timeout = inner.options.request_timeout;
        let url = inner.endpoint.url.clone();
        let send = inner
            .listen_http
            .post(inner.url.clone())
            .headers(headers)
            .body(body)
            .send();
        let response = match tokio::time::timeout(timeout, send).await {
            Err(_) => {
                return Err(Error::Timeout {
                    url,
                    after: timeout,
                })
            }
            Ok(response) => response.map_err(|e| self.transport_error(e))?,
        };
        let status = response.status().as_u16();
        let headers = response.headers();
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let retry_after = headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
        let www_authenticate = headers
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let framing = Framing::from_content_type(content_type.as_deref());

        if (300..400).contains(&status) {
            return Err(redirected(method, status, headers));
        }
        if status == 406 {
            return Err(Error::NotAcceptable {
                method: method.into(),
            });
        }
        if status == 429 {
            return Err(Error::RateLimited {
                method: method.into(),
                retry_after,
            });
        }
        if !(200..300).contains(&status) {
            let text = self.read_listen_body(response).await;
            return Err(failure(FailedAnswer {
                method,
                task_id: None,
                id,
                status,
                framing,
                body: &text,
                www_authenticate,
                retry_after,
            }));
        }

        let Some(framing) = framing else {
            return Err(invalid(
                method,
                format!(
                    "unexpected Content-Type {:?} (expected text/event-stream)",
                    content_type.unwrap_or_default()
                ),
            ));
        };
        Ok(OpenedListen {
            id,
            response,
            framing,
        })
    }
}

/// A listen request's answer, its status read.
pub(super) struct OpenedListen {
    pub(super) id: u64,
    pub(super) response: reqwest::Response,
    pub(super) framing: Framing,
}

/// An open `subscriptions/listen` stream ([`Client::listen`]). Dropping it closes the
/// connection, which is how an HTTP client cancels a subscription.
pub struct Listening {
    id: u64,
    url: String,
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: ListenDecoder,
    /// Decoded but not yet returned; an `Err` is always last.
    queue: std::collections::VecDeque<Result<ListenEvent>>,
    idle_timeout: Duration,
    /// No more bytes will be read.
    ended: bool,
    client: Client,
}

impl std::fmt::Debug for Listening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listening")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Listening {
    /// The subscription id: the JSON-RPC id of the listen request.
    pub fn subscription_id(&self) -> u64 {
        self.id
    }

    /// The next event; `None` once the stream is over (after [`ListenEvent::Closed`] or an
    /// error). Never waits longer than the idle timeout for bytes: a silent stream ends with
    /// [`Error::Timeout`], one that stops without a closing response with [`Error::Transport`],
    /// a server that breaks the stream's rules with [`Error::InvalidResponse`].
    pub async fn next(&mut self) -> Option<Result<ListenEvent>> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                if item.is_err() {
                    self.queue.clear();
                    self.ended = true;
                }
                return Some(item);
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout(self.idle_timeout, self.body.next()).await {
                Err(_) => self.end_with(Error::Timeout {
                    url: self.url.clone(),
                    after: self.idle_timeout,
                }),
                Ok(Some(Ok(bytes))) => {
                    let decoded = self.decoder.feed(&bytes);
                    self.absorb(decoded);
                }
                Ok(Some(Err(e))) => {
                    let error = self.client.transport_error(e);
                    self.end_with(error);
                }
                Ok(None) => {
                    let decoded = self.decoder.finish();
                    self.absorb(decoded);
                    if !self.ended {
                        self.end_with(Error::Transport {
                            url: self.url.clone(),
                            message: "the listen stream ended without a closing response".into(),
                        });
                    }
                }
            }
        }
    }

    fn absorb(&mut self, decoded: std::result::Result<Vec<ListenEvent>, StreamFault>) {
        match decoded {
            Ok(events) => {
                self.queue.extend(events.into_iter().map(Ok));
                self.ended |= self.decoder.is_closed();
            }
            Err(fault) => self.end_with(stream_fault(fault)),
        }
    }

    fn end_with(&mut self, error: Error) {
        self.queue.push_back(Err(error));
        self.ended = true;
    }
}

fn stream_fault(fault: StreamFault) -> Error {
    match fault {
        StreamFault::TooLarge { limit } => Error::ResponseTooLarge {
            method: LISTEN_METHOD.into(),
            limit,
        },
        StreamFault::Invalid(reason) => invalid(LISTEN_METHOD, reason),
        StreamFault::Rpc(error) => rpc_error(LISTEN_METHOD, None, error),
    }
}
