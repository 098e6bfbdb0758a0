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
