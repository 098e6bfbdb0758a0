//! The request body: JSON-RPC written straight into bytes, with the client's fixed `_meta`.

use super::*;

/// The `_meta` entries that are the same on every request of a client (its capabilities and
/// `clientInfo`), encoded once when the client is built rather than rebuilt as `Value` trees on
/// every poll.
#[derive(Debug)]
pub(super) struct FixedMeta {
    capabilities: Box<RawValue>,
    client_info: Box<RawValue>,
    /// `_meta`'s text up to the protocol version's value: `{"…protocolVersion":`.
    head: Box<[u8]>,
    /// `_meta`'s text after the protocol version: `,"…clientCapabilities":…,"…clientInfo":…}`.
    tail: Box<[u8]>,
}

impl FixedMeta {
    pub(super) fn new(options: &ClientOptions) -> Result<Self> {
        let encode = |value: Value| {
            serde_json::value::to_raw_value(&value).map_err(|e| {
                Error::InvalidRequest(format!("the client's _meta could not be encoded: {e}"))
            })
        };
        let capabilities = encode(client_capabilities())?;
        let client_info =
            encode(json!({"name": options.client_name, "version": options.client_version}))?;
        let mut tail = Vec::new();
        for (key, value) in [
            (META_CLIENT_CAPABILITIES, &capabilities),
            (META_CLIENT_INFO, &client_info),
        ] {
            tail.push(b',');
            write_json(&mut tail, key)?;
            tail.push(b':');
            tail.extend_from_slice(value.get().as_bytes());
        }
        tail.push(b'}');
        let mut head = vec![b'{'];
        write_json(&mut head, META_PROTOCOL_VERSION)?;
        head.push(b':');
        Ok(Self {
            capabilities,
            client_info,
            head: head.into_boxed_slice(),
            tail: tail.into_boxed_slice(),
        })
    }
}

/// Appends `value`'s JSON text to `out`.
fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    serde_json::to_writer(out, value)
        .map_err(|e| Error::InvalidRequest(format!("a request could not be encoded: {e}")))
}

/// One JSON-RPC request, written straight into the body's bytes: `params` as given, then the
/// `_meta` every request carries (protocol version, capabilities, `clientInfo`). Building a
/// `Value` tree for the body and printing it through `Display` was about a fifth of the CPU of
/// an unchanged poll. A `_meta` among `params` is not sent: only its client capabilities, when
/// it has them, are, instead of the client's own (the gateway forwarding an agent's request,
/// see [`Client::forward`]); its other entries are dropped, not merged.
pub(super) struct Envelope<'a> {
    pub(super) id: u64,
    pub(super) method: &'a str,
    pub(super) params: &'a Map<String, Value>,
    pub(super) version: &'a str,
    pub(super) fixed: &'a FixedMeta,
}

impl Envelope<'_> {
    /// The request's bytes, exactly as serde_json would print the request as a `Value` (the
    /// tests hold it to that), but with the fixed parts copied in rather than escaped again on
    /// every poll: only the id, the method, `params` and the protocol version go through serde.
    pub(super) fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(128 + self.fixed.head.len() + self.fixed.tail.len());
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        write_json(&mut out, &self.id)?;
        out.extend_from_slice(b",\"method\":");
        write_json(&mut out, self.method)?;
        out.extend_from_slice(b",\"params\":{");
        for (key, value) in self.params.iter().filter(|(key, _)| *key != "_meta") {
            write_json(&mut out, key)?;
            out.push(b':');
            write_json(&mut out, value)?;
            out.push(b',');
        }
        out.extend_from_slice(b"\"_meta\":");
        // The gateway speaks for an agent: the agent's declared capabilities, not ours.
        let agents = self
            .params
            .get("_meta")
            .and_then(|meta| meta.get(META_CLIENT_CAPABILITIES));
        match agents {
            Some(_) => write_json(&mut out, &EnvelopeMeta(self))?,
            None => {
                out.extend_from_slice(&self.fixed.head);
                write_json(&mut out, self.version)?;
                out.extend_from_slice(&self.fixed.tail);
            }
        }
        out.extend_from_slice(b"}}");
        Ok(out)
    }
}

struct EnvelopeMeta<'a>(&'a Envelope<'a>);

impl Serialize for EnvelopeMeta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let envelope = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry(META_PROTOCOL_VERSION, envelope.version)?;
        // The gateway speaks for an agent: the agent's declared capabilities, not ours.
        match envelope
            .params
            .get("_meta")
            .and_then(|meta| meta.get(META_CLIENT_CAPABILITIES))
        {
            Some(agents) => map.serialize_entry(META_CLIENT_CAPABILITIES, agents)?,
            None => map.serialize_entry(META_CLIENT_CAPABILITIES, &*envelope.fixed.capabilities)?,
        }
        map.serialize_entry(META_CLIENT_INFO, &*envelope.fixed.client_info)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body the client sent before it encoded requests directly: the same keys in the same
    /// order, byte for byte.
    fn built_as_a_value(
        id: u64,
        method: &str,
        params: &Map<String, Value>,
        version: &str,
    ) -> Value {
        let mut params = params.clone();
        params.insert(
            "_meta".into(),
            json!({
                META_PROTOCOL_VERSION: version,
                META_CLIENT_CAPABILITIES: client_capabilities(),
                META_CLIENT_INFO: {"name": "countersign", "version": env!("CARGO_PKG_VERSION")},
            }),
        );
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    #[test]
    fn a_request_is_encoded_exactly_as_its_json_value_would_print() {
        let fixed = FixedMeta::new(&ClientOptions::default()).expect("encodable");
        let mut params = Map::new();
        params.insert("taskId".into(), json!("t-1"));
        params.insert(
            "inputResponses".into(),
            json!({"k": {"action": "accept", "content": {"n": 1.5, "s": "é\"\n"}}}),
        );
        let body = Envelope {
            id: 42,
            method: "tasks/update",
            params: &params,
            version: PROTOCOL_VERSION,
            fixed: &fixed,
        }
        .encode()
        .expect("encodable");
        let expected = built_as_a_value(42, "tasks/update", &params, PROTOCOL_VERSION).to_string();
        assert_eq!(String::from_utf8(body).expect("UTF-8"), expected);
    }

    #[test]
    fn capabilities_among_the_params_replace_the_clients_own_and_nothing_else_does() {
        let fixed = FixedMeta::new(&ClientOptions::default()).expect("encodable");
        let mut params = Map::new();
        params.insert("name".into(), json!("failing_job"));
        params.insert(
            "_meta".into(),
            json!({META_CLIENT_CAPABILITIES: {"sampling": {}}, META_PROTOCOL_VERSION: "1999-01-01"}),
        );
        let body = Envelope {
            id: 7,
            method: "tools/call",
            params: &params,
            version: PROTOCOL_VERSION,
            fixed: &fixed,
        }
        .encode()
        .expect("encodable");
        let sent: Value = serde_json::from_slice(&body).expect("valid JSON");
        let meta = &sent["params"]["_meta"];
        assert_eq!(
            meta[META_CLIENT_CAPABILITIES],
            json!({"sampling": {}}),
            "{sent}"
        );
        assert_eq!(
            meta[META_PROTOCOL_VERSION],
            json!(PROTOCOL_VERSION),
            "{sent}"
        );
        assert_eq!(
            meta[META_CLIENT_INFO]["name"],
            json!("countersign"),
            "{sent}"
        );
    }

    #[test]
    fn a_meta_among_the_params_is_not_sent_beside_the_clients_own() {
        let fixed = FixedMeta::new(&ClientOptions::default()).expect("encodable");
        let mut params = Map::new();
        params.insert("_meta".into(), json!({"stray": true}));
        params.insert("taskId".into(), json!("t-1"));
        let body = Envelope {
            id: 1,
            method: "tasks/get",
            params: &params,
            version: PROTOCOL_VERSION,
            fixed: &fixed,
        }
        .encode()
        .expect("encodable");
        let sent: Value = serde_json::from_slice(&body).expect("valid JSON");
        let meta = &sent["params"]["_meta"];
        assert_eq!(meta[META_PROTOCOL_VERSION], json!(PROTOCOL_VERSION));
        assert!(meta.get("stray").is_none(), "{sent}");
        assert_eq!(
            body.windows(b"\"_meta\"".len())
                .filter(|w| *w == b"\"_meta\"")
                .count(),
            1,
            "one _meta key: {sent}"
        );
    }
}
