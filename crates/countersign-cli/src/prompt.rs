//! Asking a human on the terminal: a schema-aware prompt for form elicitations and a consent
//! prompt for URL elicitations.

use std::io::{BufRead, Write};

use serde_json::{Map, Value};

use crate::terminal::neutral;

/// The answer the user gave.
pub enum Answer {
    Accept(Option<Map<String, Value>>),
    Decline,
    Cancel,
}

/// Reads lines from `input`, writes prompts to `output`.
pub struct Prompter<R, W> {
    input: R,
    output: W,
}

impl<R: BufRead, W: Write> Prompter<R, W> {
    pub fn new(input: R, output: W) -> Self {
        Self { input, output }
    }

    /// One line of output, neutral (prompts carry server text: titles, messages, labels).
    fn say(&mut self, text: &str) -> std::io::Result<()> {
        writeln!(self.output, "{}", neutral(text))
    }

    /// Server text that may span lines (a question's message), each line indented and neutral.
    fn say_indented(&mut self, text: &str) -> std::io::Result<()> {
        for line in text.split('\n') {
            self.say(&format!("  {}", line.strip_suffix('\r').unwrap_or(line)))?;
        }
        Ok(())
    }

    fn ask(&mut self, question: &str) -> std::io::Result<Option<String>> {
        write!(self.output, "{}", neutral(question))?;
        self.output.flush()?;
        let mut line = String::new();
        if self.input.read_line(&mut line)? == 0 {
            return Ok(None); // end of input
        }
        Ok(Some(line.trim_end_matches(['\r', '\n']).to_owned()))
    }

    /// Asks for consent to open `url`; accept means "consented".
    pub fn url(&mut self, server: &str, message: &str, url: &str) -> std::io::Result<Answer> {
        // The host a person must judge: punycode, never the userinfo (`good.com@evil.com`).
        let host = countersign_core::notice::link_host(url)
            .unwrap_or_else(|| "(none: not an http(s) URL)".into());
        self.say("")?;
        self.say(&format!("{server} asks you to open a link:"))?;
        self.say_indented(message)?;
        self.say(&format!("  host: {host}"))?;
        self.say(&format!("  url:  {url}"))?;
        loop {
            match self.ask("Open it and continue? [y]es / [n]o (decline) / [c]ancel: ")? {
                None => return Ok(Answer::Cancel),
                Some(a) => match a.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => return Ok(Answer::Accept(None)),
                    "n" | "no" => return Ok(Answer::Decline),
                    "c" | "cancel" => return Ok(Answer::Cancel),
                    _ => self.say("  please answer y, n or c")?,
                },
            }
        }
    }

    /// Walks the flat form schema field by field, validating as it goes, then asks to review.
    pub fn form(&mut self, server: &str, message: &str, schema: &Value) -> std::io::Result<Answer> {
        self.say("")?;
        self.say(&format!("{server} asks:"))?;
        self.say_indented(message)?;
        loop {
            match self.ask("[a]nswer / [d]ecline / [c]ancel: ")? {
                None => return Ok(Answer::Cancel),
                Some(a) => match a.trim().to_ascii_lowercase().as_str() {
                    "a" | "answer" | "" => break,
                    "d" | "decline" => return Ok(Answer::Decline),
                    "c" | "cancel" => return Ok(Answer::Cancel),
                    _ => self.say("  please answer a, d or c")?,
                },
            }
        }
        let empty = Map::new();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        loop {
            let mut content = Map::new();
            for (name, field) in properties {
                let is_required = required.contains(&name.as_str());
                match self.field(name, field, is_required)? {
                    FieldAnswer::Value(v) => {
                        content.insert(name.clone(), v);
                    }
                    FieldAnswer::Skip => {}
                    FieldAnswer::EndOfInput => return Ok(Answer::Cancel),
                }
            }
            self.say("")?;
            self.say(&format!("You will send to {server}:"))?;
            let pretty = serde_json::to_string_pretty(&content).unwrap_or_default();
            for line in pretty.lines() {
                self.say(line)?;
            }
            match self.ask("Send it? [y]es / [e]dit / [d]ecline / [c]ancel: ")? {
                None => return Ok(Answer::Cancel),
                Some(a) => match a.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" | "" => return Ok(Answer::Accept(Some(content))),
                    "d" | "decline" => return Ok(Answer::Decline),
                    "c" | "cancel" => return Ok(Answer::Cancel),
                    _ => continue,
                },
            }
        }
    }

    fn field(&mut self, name: &str, field: &Value, required: bool) -> std::io::Result<FieldAnswer> {
        let title = field.get("title").and_then(Value::as_str).unwrap_or(name);
        let kind = field_kind(field);
        let default = field.get("default");
        if let Some(description) = field.get("description").and_then(Value::as_str) {
            self.say(&format!("  {title}: {description}"))?;
        }
        if looks_secret(name, field) {
            self.say(
                "  warning: this field looks like a secret; servers must not ask for secrets in a form",
            )?;
        }
        if let Kind::Enum(options) | Kind::Multi(options, _, _) = &kind {
            for (i, (_, label)) in options.iter().enumerate() {
                self.say(&format!("    {}) {label}", i + 1))?;
            }
        }
        let hint = match &kind {
            Kind::Bool => "y/n".to_owned(),
            Kind::Enum(_) => "number".to_owned(),
            Kind::Multi(..) => "numbers, comma-separated".to_owned(),
            Kind::Integer => "integer".to_owned(),
            Kind::Number => "number".to_owned(),
            Kind::String => field
                .get("format")
                .and_then(Value::as_str)
                .unwrap_or("text")
                .to_owned(),
        };
        let default_text = default
            .map(|d| format!(" [default {d}]"))
            .unwrap_or_default();
        let marker = if required { " (required)" } else { "" };
        loop {
            let Some(line) = self.ask(&format!("  {title} ({hint}){marker}{default_text}: "))?
            else {
                return Ok(FieldAnswer::EndOfInput);
            };
            let line = line.trim();
            if line.is_empty() {
                if let Some(d) = default {
                    return Ok(FieldAnswer::Value(d.clone()));
                }
                if !required {
                    return Ok(FieldAnswer::Skip);
                }
                self.say("  this field is required")?;
                continue;
            }
            match parse_field(&kind, field, line) {
                Ok(v) => return Ok(FieldAnswer::Value(v)),
                Err(e) => self.say(&format!("  {e}"))?,
            }
        }
    }
}

enum FieldAnswer {
    Value(Value),
    Skip,
    EndOfInput,
}

enum Kind {
    Bool,
    Integer,
    Number,
    String,
    /// (value, label) pairs.
    Enum(Vec<(Value, String)>),
    /// (value, label) pairs, min and max items.
    Multi(Vec<(Value, String)>, Option<u64>, Option<u64>),
}

fn options(field: &Value) -> Option<Vec<(Value, String)>> {
    if let Some(values) = field.get("enum").and_then(Value::as_array) {
        let names = field.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let label = names
                        .and_then(|n| n.get(i))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| display(v));
                    (v.clone(), label)
                })
                .collect(),
        );
    }
    let alternatives = field
        .get("oneOf")
        .or_else(|| field.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        alternatives
            .iter()
            .filter_map(|alt| {
                let value = alt.get("const")?.clone();
                let label = alt
                    .get("title")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| display(&value));
                Some((value, label))
            })
            .collect(),
    )
}

fn display(v: &Value) -> String {
    v.as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| v.to_string())
}

fn field_kind(field: &Value) -> Kind {
    match field.get("type").and_then(Value::as_str) {
        Some("boolean") => Kind::Bool,
        Some("integer") => Kind::Integer,
        Some("number") => Kind::Number,
        Some("array") => {
            let items = field.get("items").cloned().unwrap_or(Value::Null);
            Kind::Multi(
                options(&items).unwrap_or_default(),
                field.get("minItems").and_then(Value::as_u64),
                field.get("maxItems").and_then(Value::as_u64),
            )
        }
        _ => match options(field) {
            Some(o) => Kind::Enum(o),
            None => Kind::String,
        },
    }
}

fn parse_field(kind: &Kind, field: &Value, line: &str) -> Result<Value, String> {
    let pick = |options: &[(Value, String)], text: &str| -> Result<Value, String> {
        let index: usize = text
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not one of the numbers shown"))?;
        options
            .get(index.wrapping_sub(1))
            .map(|(v, _)| v.clone())
            .ok_or_else(|| format!("choose a number from 1 to {}", options.len()))
    };
    match kind {
        Kind::Bool => match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("answer y or n".into()),
        },
        Kind::Enum(options) => pick(options, line),
        Kind::Multi(options, min, max) => {
            let picked = line
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(|p| pick(options, p))
                .collect::<Result<Vec<_>, _>>()?;
            let n = picked.len() as u64;
            if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                return Err(format!(
                    "choose between {} and {} items",
                    min.unwrap_or(0),
                    max.map(|m| m.to_string())
                        .unwrap_or_else(|| "any number of".into())
                ));
            }
            Ok(Value::Array(picked))
        }
        Kind::Integer | Kind::Number => {
            let number: f64 = line
                .parse()
                .map_err(|_| format!("{line:?} is not a number"))?;
            if matches!(kind, Kind::Integer) && number.fract() != 0.0 {
                return Err("enter a whole number".into());
            }
            if let Some(min) = field.get("minimum").and_then(Value::as_f64) {
                if number < min {
                    return Err(format!("must be at least {min}"));
                }
            }
            if let Some(max) = field.get("maximum").and_then(Value::as_f64) {
                if number > max {
                    return Err(format!("must be at most {max}"));
                }
            }
            Ok(if matches!(kind, Kind::Integer) {
                Value::from(number as i64)
            } else {
                serde_json::Number::from_f64(number)
                    .map(Value::Number)
                    .ok_or("not a finite number")?
            })
        }
        Kind::String => {
            let len = line.chars().count() as u64;
            if let Some(min) = field.get("minLength").and_then(Value::as_u64) {
                if len < min {
                    return Err(format!("at least {min} characters"));
                }
            }
            if let Some(max) = field.get("maxLength").and_then(Value::as_u64) {
                if len > max {
                    return Err(format!("at most {max} characters"));
                }
            }
            match field.get("format").and_then(Value::as_str) {
                Some("email")
                    if !(line.contains('@') && !line.starts_with('@') && !line.ends_with('@')) =>
                {
                    Err("enter an email address".into())
                }
                Some("uri") if !line.contains(':') => Err("enter a URI (scheme:…)".into()),
                Some("date") if !is_date(line) => Err("enter a date as YYYY-MM-DD".into()),
                Some("date-time")
                    if !(line.len() >= 19
                        && is_date(&line[..10])
                        && line.as_bytes()[10].eq_ignore_ascii_case(&b't')) =>
                {
                    Err("enter a date-time as YYYY-MM-DDTHH:MM:SSZ".into())
                }
                _ => Ok(Value::String(line.to_owned())),
            }
        }
    }
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// Field names or formats that suggest a secret (which servers must not request in form mode).
pub fn looks_secret(name: &str, field: &Value) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "password",
        "passwd",
        "secret",
        "token",
        "api_key",
        "apikey",
        "private_key",
    ]
    .iter()
    .any(|n| lower.contains(n))
        || lower == "key"
        || field.get("format").and_then(Value::as_str) == Some("password")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run_form(input: &str, schema: Value) -> (Option<Map<String, Value>>, String) {
        let mut out = Vec::new();
        let answer = Prompter::new(input.as_bytes(), &mut out)
            .form("demo", "Approve?", &schema)
            .expect("io");
        let content = match answer {
            Answer::Accept(c) => c,
            _ => None,
        };
        (content, String::from_utf8_lossy(&out).into_owned())
    }

    #[test]
    fn fills_every_kind_of_field_and_validates() {
        let schema = json!({"type": "object", "properties": {
            "approve": {"type": "boolean", "title": "Approve"},
            "env": {"type": "string", "oneOf": [{"const": "prod", "title": "Production"}, {"const": "stg", "title": "Staging"}]},
            "count": {"type": "integer", "minimum": 1, "maximum": 5},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2},
            "note": {"type": "string", "maxLength": 5, "default": "none"}
        }, "required": ["approve", "count"]});
        // answer, then: bad bool, good bool; enum 2; count 9 (too big) then 3; tags "1,2,3" (too many) then "1,3"; note default; send.
        let (content, out) = run_form("a\nmaybe\ny\n2\n9\n3\n1,2,3\n1,3\n\ny\n", schema);
        assert_eq!(
            content.map(Value::Object),
            Some(
                json!({"approve": true, "env": "stg", "count": 3, "tags": ["a", "c"], "note": "none"})
            )
        );
        assert!(out.contains("answer y or n"), "{out}");
        assert!(out.contains("at most 5"), "{out}");
        assert!(out.contains("between 1 and 2"), "{out}");
    }

    #[test]
    fn end_of_input_cancels_and_decline_declines() {
        let (content, _) = run_form(
            "a\n",
            json!({"properties": {"x": {"type": "string"}}, "required": ["x"]}),
        );
        assert_eq!(content, None);
        let mut out = Vec::new();
        let answer = Prompter::new("d\n".as_bytes(), &mut out)
            .form("demo", "q", &json!({}))
            .expect("io");
        assert!(matches!(answer, Answer::Decline));
    }

    #[test]
    fn warns_about_secret_looking_fields() {
        let (_, out) = run_form(
            "a\nhunter2\ny\n",
            json!({"properties": {"password": {"type": "string"}}}),
        );
        assert!(out.contains("looks like a secret"), "{out}");
    }

    #[test]
    fn server_text_in_prompts_is_shown_escaped() {
        let mut out = Vec::new();
        let schema = json!({"properties": {"ok": {
            "type": "boolean", "title": "OK\x1b]0;pwned\x07", "description": "erase\x1b[2K"}}});
        let _ = Prompter::new("c\n".as_bytes(), &mut out)
            .form("demo\x1b[31m", "line one\nline two\x1b[1A", &schema)
            .expect("io");
        let _ = Prompter::new("a\ny\ny\n".as_bytes(), &mut out)
            .form("demo", "q", &schema)
            .expect("io");
        let text = String::from_utf8_lossy(&out);
        assert!(
            !text.contains('\x1b'),
            "no raw ESC reaches the terminal: {text:?}"
        );
        assert!(text.contains("demo\\x1b[31m asks:"), "{text}");
        assert!(
            text.contains("  line one\n  line two\\x1b[1A"),
            "a multi-line message keeps its lines, each neutral: {text}"
        );
        assert!(text.contains("OK\\x1b]0;pwned\\x07"), "{text}");
    }

    #[test]
    fn a_link_prompt_shows_the_real_host_in_punycode_without_userinfo() {
        let mut out = Vec::new();
        let answer = Prompter::new("n\n".as_bytes(), &mut out)
            .url("demo", "Sign in", "https://good.com@\u{430}pple.com/login")
            .expect("io");
        assert!(matches!(answer, Answer::Decline));
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("  host: xn--pple-43d.com\n"), "{text}");
    }
}
