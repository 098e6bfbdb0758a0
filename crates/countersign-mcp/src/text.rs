//! Server text cut to a length a person reads (timeline notes, error messages, notifications).

/// `text` cut to `max_chars` characters (never inside one), with `…` when something was cut.
pub fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}
