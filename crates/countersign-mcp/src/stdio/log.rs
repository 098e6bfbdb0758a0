//! A server's stderr as the person sees it on the server page: the last lines, bounded in
//! count and size, so a server that logs without end costs a fixed amount of memory.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Lines kept.
pub const MAX_LOG_LINES: usize = 200;
/// Bytes kept per line; the rest of a longer line is cut.
pub const MAX_LOG_LINE_BYTES: usize = 2048;

/// The bounded log of one server (across its restarts: a crash loop's reasons stay visible).
#[derive(Debug, Default)]
pub struct StderrLog {
    lines: Mutex<VecDeque<String>>,
}

impl StderrLog {
    /// Appends one line, cut to [`MAX_LOG_LINE_BYTES`]; the oldest goes past [`MAX_LOG_LINES`].
    pub fn push(&self, line: &str) {
        let line = crate::text::truncate(line.trim_end_matches(['\r', '\n']), MAX_LOG_LINE_BYTES);
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == MAX_LOG_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// Countersign's own note about the process (started, exited), told apart from its output.
    pub fn note(&self, text: &str) {
        self.push(&format!("[countersign] {text}"));
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// Splits a byte stream into lines without holding more than [`MAX_LOG_LINE_BYTES`] of one.
#[derive(Debug, Default)]
pub(super) struct LineCutter {
    current: Vec<u8>,
    /// The current line went past the limit: the rest of it is dropped.
    cut: bool,
}

impl LineCutter {
    /// Feeds a chunk; each complete line goes to `out`.
    pub(super) fn feed(&mut self, chunk: &[u8], mut out: impl FnMut(&str)) {
        for part in chunk.split_inclusive(|b| *b == b'\n') {
            let (body, ends) = match part.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (part, false),
            };
            if !self.cut {
                let room = MAX_LOG_LINE_BYTES.saturating_sub(self.current.len());
                self.current
                    .extend_from_slice(&body[..body.len().min(room)]);
                self.cut = body.len() > room;
            }
            if ends {
                out(&String::from_utf8_lossy(&self.current));
                self.current.clear();
                self.cut = false;
            }
        }
    }

    /// The last line, if the stream ended without a newline.
    pub(super) fn finish(&mut self, mut out: impl FnMut(&str)) {
        if !self.current.is_empty() {
            out(&String::from_utf8_lossy(&self.current));
            self.current.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_chunks_and_cut_at_the_limit() {
        let mut cutter = LineCutter::default();
        let mut got = Vec::new();
        cutter.feed(b"one\ntw", |l| got.push(l.to_owned()));
        cutter.feed(b"o\n", |l| got.push(l.to_owned()));
        let long = vec![b'x'; MAX_LOG_LINE_BYTES * 3];
        cutter.feed(&long, |l| got.push(l.to_owned()));
        cutter.feed(b"tail\nlast", |l| got.push(l.to_owned()));
        cutter.finish(|l| got.push(l.to_owned()));
        assert_eq!(got[0], "one");
        assert_eq!(got[1], "two");
        assert_eq!(got[2].len(), MAX_LOG_LINE_BYTES);
        assert_eq!(got[3], "last");
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn the_log_keeps_the_newest_lines() {
        let log = StderrLog::default();
        for i in 0..MAX_LOG_LINES + 5 {
            log.push(&format!("line {i}"));
        }
        let lines = log.lines();
        assert_eq!(lines.len(), MAX_LOG_LINES);
        assert_eq!(lines[0], "line 5");
        assert_eq!(
            lines.last().unwrap(),
            &format!("line {}", MAX_LOG_LINES + 4)
        );
    }
}
