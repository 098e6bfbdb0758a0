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

/// Feeds bytes in, gets whole events out. Never panics, whatever the input.
#[derive(Debug, Default)]
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
}

/// The most a single line may hold before the stream is rejected (16 MiB): a hostile server must
/// not be able to grow our memory without bound.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The stream broke the decoder's limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event-stream line longer than {MAX_LINE_BYTES} bytes")]
pub struct LineTooLong;

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes one chunk, appending every event it completes to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), LineTooLong> {
        if !self.bom_checked && !chunk.is_empty() {
            self.bom_checked = true;
            if chunk.starts_with(&[0xEF, 0xBB, 0xBF]) {
                chunk = &chunk[3..];
            }
        }
        for &byte in chunk {
            if self.pending_cr {
                self.pending_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(out),
                b'\r' => {
                    self.pending_cr = true;
                    self.end_line(out);
                }
                _ => {
                    if self.line.len() >= MAX_LINE_BYTES {
                        return Err(LineTooLong);
                    }
                    self.line.push(byte);
                }
            }
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
