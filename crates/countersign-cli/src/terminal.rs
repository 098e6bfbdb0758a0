//! The only way the CLI writes to stdout and stderr (`clippy::print_stdout`/`print_stderr` are
//! denied elsewhere in the crate).
//!
//! Human-readable output is made of server text: status messages, task ids, question keys and
//! messages, tool output, server names, error messages. A server must not be able to drive the
//! terminal with it (set the window title, erase lines, print a forged "completed" row, start a
//! new row from inside a task id), so every such line goes through [`neutral`]: control
//! characters are shown escaped (`\x1b`, `\n`, `\u{202e}`), never sent raw. Text that is
//! multi-line by nature (tool output, pretty JSON) goes through [`lines`], one neutral line per
//! line. Machine output stays exact: `--json` ([`json`]: every string decodes to the server's
//! exact text, with control characters written as JSON escapes) and the CSV export ([`exact`]).
//!
//! A closed stdout (`countersign task show … | head -1`) is not an error worth a panic or a
//! message: the command ends at once with [`EXIT_STDOUT_CLOSED`], the status a process ended by
//! SIGPIPE reports in a shell. Whatever it recorded in the ledger before stays recorded (the
//! ledger survives a `kill -9` at any point, which the crash tests check).

use std::borrow::Cow;
use std::io::Write as _;

use serde_json::Value;

/// Exit code when stdout was closed by the reader (128 + SIGPIPE, as shells report it).
pub const EXIT_STDOUT_CLOSED: u8 = 141;
/// Exit code when stdout cannot be written for another reason (disk full, ...).
const EXIT_OUTPUT_FAILED: u8 = crate::EXIT_UNAVAILABLE;

/// Prints one line of human-readable text on stdout, neutralised with [`neutral`]. Takes
/// `format!` arguments; the format string itself must not contain `\n` (it would be escaped
/// too): print several lines with several calls.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::terminal::line(&format!($($arg)*))
    };
}

/// As [`say!`], on stderr (progress, warnings and errors).
macro_rules! tell {
    ($($arg:tt)*) => {
        $crate::terminal::note(&format!($($arg)*))
    };
}

pub(crate) use {say, tell};

/// `text` with every character that can steer a terminal or reorder what is shown replaced by
/// its escaped form: C0 and C1 controls and DEL (`\n`, `\r`, `\t`, `\x1b`, `\x9b`, ...), Unicode
/// bidirectional overrides and isolates, and the line and paragraph separators. Everything else
/// is kept as it is (borrowed when nothing needs escaping).
pub fn neutral(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Bidirectional marks, embeddings, overrides and isolates ("Trojan Source").
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            // Line and paragraph separators: some terminals start a new row on them.
            | '\u{2028}' | '\u{2029}'
        )
}

/// One neutral line on stdout (see [`say!`]).
pub fn line(text: &str) {
    let mut bytes = neutral(text).into_owned();
    bytes.push('\n');
    out(bytes.as_bytes());
}

/// Multi-line text (tool output, pretty JSON) on stdout, each line neutral on its own row.
/// A `\r\n` line end counts as one.
pub fn lines(text: &str) {
    let mut buf = String::with_capacity(text.len() + 8);
    for l in text.split('\n') {
        buf.push_str(&neutral(l.strip_suffix('\r').unwrap_or(l)));
        buf.push('\n');
    }
    out(buf.as_bytes());
}

/// One neutral line on stderr (see [`tell!`]). A failing stderr is ignored: there is nowhere
/// left to report it.
pub fn note(text: &str) {
    let mut bytes = neutral(text).into_owned();
    bytes.push('\n');
    let _ = std::io::stderr().lock().write_all(bytes.as_bytes());
}

/// One JSON value on one stdout line, exact (the `--json` contract).
pub fn json(value: &Value) {
    let mut bytes = json_text(value);
    bytes.push('\n');
    out(bytes.as_bytes());
}

/// `value` as compact JSON whose every string is the exact server text and whose bytes cannot
/// steer a terminal: serde_json escapes C0 controls itself; DEL, the C1 controls (U+009B is a
/// CSI to some terminals) and the other characters [`neutral`] escapes are written as `\uXXXX`
/// too, which any JSON reader decodes to the same string. They can only occur inside strings
/// (JSON's own syntax is ASCII), so the escape is always valid there.
fn json_text(value: &Value) -> String {
    let text = value.to_string();
    if !text.chars().any(needs_escape) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_escape(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Text on stdout exactly as given (an export format with its own escaping).
pub fn exact(text: &str) {
    out(text.as_bytes());
}

fn out(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    // Flushed per write: a reader (`watch | grep`) sees each line when it happens, and a closed
    // pipe is noticed at the write that hit it.
    let result = stdout.write_all(bytes).and_then(|()| stdout.flush());
    if let Err(e) = result {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(i32::from(EXIT_STDOUT_CLOSED));
        }
        note(&format!("error: cannot write to stdout: {e}"));
        std::process::exit(i32::from(EXIT_OUTPUT_FAILED));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_sent() {
        let forged = "\x1b]0;pwned\x07\x1b[2K\rtask t1 completed";
        assert_eq!(
            neutral(forged),
            "\\x1b]0;pwned\\x07\\x1b[2K\\rtask t1 completed"
        );
    }

    #[test]
    fn newlines_and_tabs_cannot_start_rows_or_columns() {
        assert_eq!(neutral("t1\nt2 completed\tx"), "t1\\nt2 completed\\tx");
    }

    #[test]
    fn c1_controls_del_and_bidi_overrides_are_escaped() {
        assert_eq!(neutral("a\u{9b}2Jb\u{7f}"), "a\\x9b2Jb\\x7f");
        assert_eq!(
            neutral("evil\u{202e}txt.exe\u{2028}x"),
            "evil\\u{202e}txt.exe\\u{2028}x"
        );
    }

    #[test]
    fn json_keeps_the_exact_string_but_no_raw_c1_or_bidi_character() {
        let value = serde_json::json!({"m": "a\u{9b}2J\u{7f}\u{202e}b\x1b[1m\n", "k\u{85}": 1});
        let text = json_text(&value);
        assert!(
            !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{text:?}"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&text).ok(),
            Some(value),
            "the same JSON value: {text}"
        );
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        let text = "Déploiement 2/3 — 50 % ✓ \\x1b";
        assert!(matches!(neutral(text), Cow::Borrowed(t) if t == text));
    }
}
