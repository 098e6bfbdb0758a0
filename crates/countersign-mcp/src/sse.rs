//! An incremental `text/event-stream` decoder.
//!
//! Servers differ in how they frame SSE (rmcp: `data:` lines only; fastmcp: CRLF and `event:` lines;
//! both may interleave `: ping` comments), and a response body can arrive split at any byte. The
//! decoder therefore takes arbitrary chunks and yields complete events, following the WHATWG
//! event-stream parsing rules for the fields we use (`data`, `event`, `id`, `retry`).

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any (the default event type is "message").
    pub event: Option<String>,
    /// The concatenated `data:` lines, joined with `\n`.
    pub data: String,
    /// The last `id:` field seen in this event, if any.
    pub id: Option<String>,
    /// A `retry:` reconnection delay in milliseconds, if the event carried one.
    pub retry_ms: Option<u64>,
}

/// Feeds bytes in, gets whole events out. Never panics, whatever the input, and never holds more
/// than its limit of bytes that have not yet made a complete event.
#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// A `\r` ended the previous chunk: a `\n` at the start of the next one belongs to it.
    pending_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    retry_ms: Option<u64>,
    /// Whether the very first bytes of the stream were checked for a UTF-8 BOM.
    bom_checked: bool,
    /// Bytes read since the last event that carried data (comments and blank lines included).
    pending: usize,
    /// The most `pending` may reach.
    limit: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::with_limit(super::MAX_BODY_BYTES)
    }
}

/// The stream sent more than the decoder's limit of bytes without completing an event: one
/// event's data larger than a JSON body may be, or an endless line, or endless comments and
/// empty events. A hostile server must not be able to grow our memory (or burn our CPU) without
/// bound, on a single response or on a stream meant to stay open for days.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the event stream sent more than {limit} bytes without a complete event")]
pub struct TooLarge {
    /// The limit that was crossed.
    pub limit: usize,
}

impl SseDecoder {
    /// A decoder at the start of a stream, with the same limit as a JSON body
    /// ([`super::MAX_BODY_BYTES`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder that fails once `limit` bytes arrive without completing an event with data.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            pending_cr: false,
            event: None,
            data: String::new(),
            has_data: false,
            id: None,
            retry_ms: None,
            bom_checked: false,
            pending: 0,
            limit,
        }
    }

    /// Decodes one chunk, appending every event it completes to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), TooLarge> {
        if !self.bom_checked && !chunk.is_empty() {
            self.bom_checked = true;
            if chunk.starts_with(&[0xEF, 0xBB, 0xBF]) {
                chunk = &chunk[3..];
            }
        }
        while let Some((&first, rest)) = chunk.split_first() {
            if std::mem::take(&mut self.pending_cr) && first == b'\n' {
                self.count(1)?;
                chunk = rest;
                continue;
            }
            // Whole runs of line bytes at a time: the hot path for large results.
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.count(end + 1)?;
                    self.line.extend_from_slice(&chunk[..end]);
                    self.pending_cr = chunk[end] == b'\r';
                    self.end_line(out);
                    chunk = &chunk[end + 1..];
                }
                None => {
                    self.count(chunk.len())?;
                    self.line.extend_from_slice(chunk);
                    break;
                }
            }
        }
        Ok(())
    }

    /// Counts `bytes` more without a complete event; fails past the limit (before buffering them).
    fn count(&mut self, bytes: usize) -> Result<(), TooLarge> {
        self.pending = self.pending.saturating_add(bytes);
        if self.pending > self.limit {
            return Err(TooLarge { limit: self.limit });
        }
        Ok(())
    }

    /// Ends the stream: a final event without its blank line is dispatched, as browsers do not but
    /// lenient servers need (some close the body right after the last `data:` line).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            self.end_line(out);
        }
        self.dispatch(out);
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // a comment, e.g. a keep-alive `: ping`
        }
        let text = String::from_utf8_lossy(&line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let value = &text[i + 1..];
                (&text[..i], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&text[..], ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        let retry_ms = self.retry_ms.take();
        if !self.has_data {
            self.data.clear();
            return;
        }
        self.has_data = false;
        self.pending = 0;
        out.push(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
            retry_ms,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(input: &[u8]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(input, &mut out).expect("within limits");
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn decodes_rmcp_style_data_only_lf() {
        let events = decode_all(b"data: {\"a\":1}\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(events[0].event, None);
    }

    #[test]
    fn decodes_crlf_with_event_lines_and_comments() {
        let input = b": ping\r\n\r\nevent: message\r\ndata: {\"n\":1}\r\n\r\nevent: message\r\ndata: {\"n\":2}\r\n\r\n";
        let events = decode_all(input);
        let data: Vec<_> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["{\"n\":1}", "{\"n\":2}"]);
        assert_eq!(events[0].event.as_deref(), Some("message"));
    }

    #[test]
    fn joins_multi_line_data_with_newlines() {
        let events = decode_all(b"data:{\"a\":\ndata: 1}\n\n");
        assert_eq!(events[0].data, "{\"a\":\n1}");
    }

    #[test]
    fn dispatches_a_trailing_event_without_blank_line() {
        let events = decode_all(b"data: {\"last\":true}");
        assert_eq!(events[0].data, "{\"last\":true}");
    }

    #[test]
    fn ignores_events_without_data_and_keeps_id_and_retry() {
        let events = decode_all(b"event: x\n\nid: 7\nretry: 1500\ndata: y\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[0].retry_ms, Some(1500));
        assert_eq!(
            events[0].event, None,
            "the event type resets after each dispatch"
        );
    }

    #[test]
    fn strips_a_leading_bom() {
        let events = decode_all(b"\xEF\xBB\xBFdata: z\n\n");
        assert_eq!(events[0].data, "z");
    }

    #[test]
    fn an_endless_data_line_fails_at_the_limit_without_buffering_more() {
        let mut decoder = SseDecoder::with_limit(1000);
        let mut out = Vec::new();
        decoder.feed(b"data: ", &mut out).expect("within the limit");
        let chunk = [b'x'; 100];
        let mut fed = 6;
        let error = loop {
            match decoder.feed(&chunk, &mut out) {
                Ok(()) => fed += chunk.len(),
                Err(e) => break e,
            }
            assert!(
                fed <= 1000,
                "fed {fed} bytes past the limit without an error"
            );
        };
        assert_eq!(error, TooLarge { limit: 1000 });
        assert!(out.is_empty());
        assert!(
            decoder.line.len() <= 1000,
            "never buffers past the limit: {} bytes",
            decoder.line.len()
        );
    }

    #[test]
    fn many_data_lines_without_a_blank_line_fail_at_the_limit() {
        let mut decoder = SseDecoder::with_limit(1000);
        let mut out = Vec::new();
        let mut result = Ok(());
        for _ in 0..200 {
            result = decoder.feed(b"data: xxxxxxxx\n", &mut out);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(TooLarge { limit: 1000 }));
        assert!(
            decoder.data.len() <= 1000,
            "data held: {}",
            decoder.data.len()
        );
    }

    #[test]
    fn endless_comments_without_an_event_fail_at_the_limit() {
        let mut decoder = SseDecoder::with_limit(1000);
        let mut out = Vec::new();
        let fed = (0..200).try_for_each(|_| decoder.feed(b": ping\n\n", &mut out));
        assert_eq!(fed, Err(TooLarge { limit: 1000 }));
    }

    #[test]
    fn the_limit_counts_only_since_the_last_event() {
        let mut decoder = SseDecoder::with_limit(100);
        let mut out = Vec::new();
        for n in 0..1000 {
            decoder
                .feed(
                    format!(": ping\ndata: {{\"n\":{n}}}\n\n").as_bytes(),
                    &mut out,
                )
                .expect("each event is far below the limit");
        }
        assert_eq!(out.len(), 1000);
    }

    proptest! {
        /// However the bytes are split into chunks, the events are the same.
        #[test]
        fn chunking_never_changes_the_events(body in "(data: [a-z{}\":,]{0,12}(\r\n|\n|\r)|: ping\r?\n|event: m\n|\r?\n){0,12}", cuts in proptest::collection::vec(0usize..200, 0..6)) {
            let bytes = body.as_bytes();
            let whole = decode_all(bytes);
            let mut decoder = SseDecoder::new();
            let mut out = Vec::new();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut start = 0;
            for p in points {
                decoder.feed(&bytes[start..p], &mut out).expect("within limits");
                start = p;
            }
            decoder.feed(&bytes[start..], &mut out).expect("within limits");
            decoder.finish(&mut out);
            prop_assert_eq!(whole, out);
        }

        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_all(&bytes);
        }
    }
}
