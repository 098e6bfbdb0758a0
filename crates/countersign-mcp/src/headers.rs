//! The HTTP headers that mirror parts of the JSON-RPC body (`Mcp-Name`, `Mcp-Param-*`), and the
//! validation of the `x-mcp-header` schema annotation that declares the latter.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::wire::HeaderParam;

/// Encodes a header value: plain when it is visible ASCII without surrounding white space,
/// otherwise the `=?base64?…?=` sentinel over its UTF-8 bytes.
pub fn encode_header_value(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with([' ', '\t'])
        && !value.ends_with([' ', '\t'])
        && !value.starts_with("=?base64?");
    if plain || value.is_empty() {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        )
    }
}

/// Decodes a header value written by [`encode_header_value`]; `None` if the sentinel is malformed.
pub fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// RFC 9110 `tchar`: the characters allowed in a header field name.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Reads the `x-mcp-header` annotations of one tool's `inputSchema`.
///
/// A tool is rejected (returns `Err` with the reason) when any annotation is empty or has
/// non-token characters, two names collide case-insensitively, the annotated property is not a
/// string, integer or boolean, or the annotation is not reachable from the root through
/// `properties` alone (inside `items`, `anyOf`, `$defs`, …), since the client could not know
/// which value to mirror.
pub fn header_params(input_schema: Option<&Value>) -> Result<Vec<HeaderParam>, String> {
    let mut found = Vec::new();
    if let Some(schema) = input_schema {
        walk(schema, &mut Vec::new(), true, &mut found)?;
    }
    let mut seen = std::collections::HashSet::new();
    for param in &found {
        if !seen.insert(param.name.to_ascii_lowercase()) {
            return Err(format!(
                "x-mcp-header {:?} is declared twice (names are case-insensitive)",
                param.name
            ));
        }
    }
    Ok(found)
}

fn walk(
    schema: &Value,
    path: &mut Vec<String>,
    reachable: bool,
    found: &mut Vec<HeaderParam>,
) -> Result<(), String> {
    match schema {
        Value::Object(map) => {
            if let Some(annotation) = map.get("x-mcp-header") {
                let where_ = if path.is_empty() {
                    "the schema root".to_owned()
                } else {
                    format!("property {:?}", path.join("."))
                };
                if !reachable || path.is_empty() {
                    return Err(format!(
                        "x-mcp-header on {where_} is not reachable through `properties` alone"
                    ));
                }
                let name = annotation
                    .as_str()
                    .ok_or_else(|| format!("x-mcp-header on {where_} is not a string"))?;
                if !is_token(name) {
                    return Err(format!(
                        "x-mcp-header {name:?} on {where_} is empty or has characters not allowed in a header name"
                    ));
                }
                match map.get("type").and_then(Value::as_str) {
                    Some("string" | "integer" | "boolean") => {}
                    other => {
                        return Err(format!(
                            "x-mcp-header {name:?} on {where_} annotates a {} value; only string, integer and boolean can be mirrored",
                            other.unwrap_or("non-primitive")
                        ))
                    }
                }
                found.push(HeaderParam {
                    path: path.clone(),
                    name: name.to_owned(),
                });
            }
            for (key, child) in map {
                if key == "properties" {
                    if let Value::Object(props) = child {
                        for (prop, sub) in props {
                            path.push(prop.clone());
                            walk(sub, path, reachable, found)?;
                            path.pop();
                        }
                    }
                } else if key != "x-mcp-header" && !is_literal_keyword(key) {
                    walk(child, path, false, found)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            for item in items {
                walk(item, path, false, found)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Keywords whose values are data, not subschemas: an `x-mcp-header` key inside them is not an
/// annotation.
fn is_literal_keyword(key: &str) -> bool {
    matches!(
        key,
        "enum" | "const" | "default" | "examples" | "required" | "title" | "description"
    )
}

/// The `Mcp-Param-*` headers for one call: each declared argument present in `arguments` with a
/// primitive value. Absent arguments send no header.
pub fn param_headers(
    params: &[HeaderParam],
    arguments: Option<&Map<String, Value>>,
) -> Vec<(String, String)> {
    let Some(arguments) = arguments else {
        return Vec::new();
    };
    params
        .iter()
        .filter_map(|param| {
            let mut value = arguments.get(param.path.first()?)?;
            for segment in &param.path[1..] {
                value = value.get(segment)?;
            }
            let text = match value {
                Value::String(s) => encode_header_value(s),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            Some((format!("Mcp-Param-{}", param.name), text))
        })
        .collect()
}

/// How a request's `Mcp-Param-*` headers disagree with its body (SEP-2243, the server's side):
/// a server answers it with 400 and -32020 (HeaderMismatch) before acting on the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamHeaderMismatch {
    /// A declared argument is in the body but its header is not.
    #[error("missing {header} header: arguments.{path} is present in the body")]
    Missing {
        /// `Mcp-Param-…`.
        header: String,
        /// The argument's path, dot-separated.
        path: String,
    },
    /// The header is there but the argument is not.
    #[error("{header} header is present but arguments.{path} is not")]
    Unexpected {
        /// `Mcp-Param-…`.
        header: String,
        /// The argument's path, dot-separated.
        path: String,
    },
    /// The header's `=?base64?…?=` sentinel is not canonical base64 of UTF-8 (bad padding,
    /// characters outside the alphabet), or the header is not visible ASCII, or came twice.
    #[error("{header} header is not a valid value")]
    Undecodable {
        /// `Mcp-Param-…`.
        header: String,
    },
    /// Header and argument have different values.
    #[error("{header} header does not match arguments.{path}")]
    Different {
        /// `Mcp-Param-…`.
        header: String,
        /// The argument's path, dot-separated.
        path: String,
    },
}

/// Checks a request's `Mcp-Param-*` headers against its `arguments` as a server must (SEP-2243):
/// every declared argument present in the body (and not null) needs its header, a header needs
/// its argument, and the header, decoded, must equal the argument (numbers compare as numbers).
/// `sent` gives a header's value by its lower-case name, `None` when absent; a value it could
/// not read as one visible-ASCII string should come back as one that cannot decode (`"\u{fffd}"`).
/// The mirror of [`param_headers`], which writes these headers on the client's side.
pub fn check_param_headers<'h>(
    params: &[HeaderParam],
    arguments: Option<&Map<String, Value>>,
    sent: impl Fn(&str) -> Option<&'h str>,
) -> Result<(), ParamHeaderMismatch> {
    for param in params {
        let header = format!("Mcp-Param-{}", param.name);
        let body = arguments
            .and_then(|args| {
                let (first, rest) = param.path.split_first()?;
                rest.iter()
                    .try_fold(args.get(first)?, |value, key| value.get(key))
            })
            .filter(|value| !value.is_null());
        let path = || param.path.join(".");
        match (sent(&header.to_ascii_lowercase()), body) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(ParamHeaderMismatch::Missing {
                    header,
                    path: path(),
                })
            }
            (Some(_), None) => {
                return Err(ParamHeaderMismatch::Unexpected {
                    header,
                    path: path(),
                })
            }
            (Some(raw), Some(body)) => {
                let value = Some(raw.trim_matches([' ', '\t']))
                    .filter(|raw| raw.is_ascii())
                    .and_then(decode_header_value)
                    .ok_or_else(|| ParamHeaderMismatch::Undecodable {
                        header: header.clone(),
                    })?;
                let same = match body {
                    Value::String(text) => value == *text,
                    Value::Bool(flag) => value == if *flag { "true" } else { "false" },
                    Value::Number(number) => value
                        .parse::<f64>()
                        .ok()
                        .zip(number.as_f64())
                        .is_some_and(|(sent, body)| sent == body),
                    _ => false,
                };
                if !same {
                    return Err(ParamHeaderMismatch::Different {
                        header,
                        path: path(),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_ascii_stays_plain_and_the_rest_is_base64() {
        assert_eq!(encode_header_value("approve_deploy"), "approve_deploy");
        assert_eq!(encode_header_value("déployer"), "=?base64?ZMOpcGxveWVy?=");
        assert_eq!(encode_header_value(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode_header_value("a\nb"), "=?base64?YQpi?=");
        assert_eq!(
            decode_header_value("=?base64?ZMOpcGxveWVy?="),
            Some("déployer".into())
        );
        assert_eq!(decode_header_value("plain"), Some("plain".into()));
        assert_eq!(decode_header_value("=?base64?***?="), None);
    }

    #[test]
    fn reads_valid_annotations_and_mirrors_present_arguments() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "other": {"type": "string"}
        }});
        let params = header_params(Some(&schema)).expect("valid");
        let args = json!({"region": "eu-west-1", "dry": true, "count": 3});
        let headers = param_headers(&params, args.as_object());
        assert_eq!(
            headers,
            vec![
                ("Mcp-Param-Region".to_owned(), "eu-west-1".to_owned()),
                ("Mcp-Param-Dry-Run".to_owned(), "true".to_owned()),
                ("Mcp-Param-Count".to_owned(), "3".to_owned()),
            ]
        );
        assert!(param_headers(&params, json!({}).as_object()).is_empty());
    }

    #[test]
    fn a_server_accepts_only_headers_that_mirror_the_body() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"}
        }});
        let params = header_params(Some(&schema)).expect("valid");
        let check = |args: Value, sent: &[(&'static str, &'static str)]| {
            check_param_headers(&params, args.as_object(), |name| {
                sent.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
            })
        };
        let both = json!({"region": "Hello", "count": 3});
        assert_eq!(check(json!({}), &[]), Ok(()));
        assert_eq!(
            check(
                both.clone(),
                &[("mcp-param-region", "Hello"), ("mcp-param-count", "3.0")]
            ),
            Ok(())
        );
        assert_eq!(
            check(
                both.clone(),
                &[
                    ("mcp-param-region", "=?base64?SGVsbG8=?="),
                    ("mcp-param-count", "3")
                ]
            ),
            Ok(()),
            "canonical base64 decodes to the body's value"
        );
        assert_eq!(
            check(
                json!({"region": "SGVsbG8="}),
                &[("mcp-param-region", "SGVsbG8=")]
            ),
            Ok(()),
            "without the sentinel a value is literal"
        );
        for bad in ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "\u{fffd}"] {
            assert!(
                matches!(
                    check(json!({"region": "Hello"}), &[("mcp-param-region", bad)]),
                    Err(ParamHeaderMismatch::Undecodable { .. })
                ),
                "{bad} must be refused"
            );
        }
        assert!(matches!(
            check(json!({"region": "Hello"}), &[]),
            Err(ParamHeaderMismatch::Missing { .. })
        ));
        assert!(matches!(
            check(json!({}), &[("mcp-param-region", "Hello")]),
            Err(ParamHeaderMismatch::Unexpected { .. })
        ));
        assert!(matches!(
            check(
                json!({"region": "Hello", "count": 3}),
                &[("mcp-param-region", "Hello"), ("mcp-param-count", "4")]
            ),
            Err(ParamHeaderMismatch::Different { .. })
        ));
    }

    #[test]
    fn rejects_each_invalid_annotation_with_a_reason() {
        for (schema, needle) in [
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
                "empty",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": "Bad Name"}}}),
                "not allowed",
            ),
            (
                json!({"properties": {"a": {"type": "number", "x-mcp-header": "N"}}}),
                "number",
            ),
            (
                json!({"properties": {"a": {"type": "object", "x-mcp-header": "O"}}}),
                "object",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}}),
                "twice",
            ),
            (
                json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}}),
                "reachable",
            ),
            (
                json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
                "reachable",
            ),
        ] {
            let err = header_params(Some(&schema)).unwrap_err();
            assert!(err.contains(needle), "{err} should mention {needle}");
        }
    }
}
