//! HTTP header rules of the 2026-07-28 Streamable HTTP transport (SEP-2243).

use axum::http::header::{GetAll, HeaderValue};
use axum::http::HeaderMap;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::tools::HeaderParam;

const SENTINEL_PREFIX: &str = "=?base64?";
const SENTINEL_SUFFIX: &str = "?=";

/// The single value of a header, trimmed of optional whitespace (RFC 9110 §5.5). A header sent
/// twice or containing characters outside visible ASCII is a mismatch.
pub(super) fn single(headers: &HeaderMap, name: &str) -> Result<Option<String>> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(Error::header(format!("{name} header sent more than once")));
    }
    let text = value
        .to_str()
        .map_err(|_| Error::header(format!("{name} header contains invalid characters")))?;
    Ok(Some(text.trim_matches([' ', '\t']).to_owned()))
}

/// Decodes the `=?base64?…?=` sentinel; any other value is literal. An encoded value that is
/// not canonical base64 of UTF-8 is rejected.
pub(super) fn decode(value: &str, header: &str) -> Result<String> {
    let is_sentinel = value.len() >= SENTINEL_PREFIX.len() + SENTINEL_SUFFIX.len()
        && value.starts_with(SENTINEL_PREFIX)
        && value.ends_with(SENTINEL_SUFFIX);
    if !is_sentinel {
        return Ok(value.to_owned());
    }
    let encoded = &value[SENTINEL_PREFIX.len()..value.len() - SENTINEL_SUFFIX.len()];
    let bytes = STANDARD
        .decode(encoded)
        .map_err(|_| Error::header(format!("{header} header is not valid base64")))?;
    String::from_utf8(bytes)
        .map_err(|_| Error::header(format!("{header} header does not decode to UTF-8")))
}

/// Checks every `x-mcp-header` parameter of the tool: a value present in the body needs its
/// `Mcp-Param-*` header, and header and body must agree (numbers compare numerically).
pub(super) fn check_params(
    headers: &HeaderMap,
    params: &[HeaderParam],
    args: Option<&Map<String, Value>>,
) -> Result<()> {
    for param in params {
        let header_name = format!("Mcp-Param-{}", param.header);
        let raw = single(headers, &header_name.to_ascii_lowercase())?;
        let body = args
            .and_then(|args| value_at(args, &param.path))
            .filter(|value| !value.is_null());
        let path = param.path.join(".");
        match (raw, body) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(Error::header(format!(
                    "missing {header_name} header: arguments.{path} is present in the body"
                )))
            }
            (Some(_), None) => {
                return Err(Error::header(format!(
                    "{header_name} header is present but arguments.{path} is not"
                )))
            }
            (Some(raw), Some(body)) => {
                let value = decode(&raw, &header_name)?;
                if !matches_body(&value, body) {
                    return Err(Error::header(format!(
                        "{header_name} header {value:?} does not match arguments.{path}"
                    )));
                }
            }
        }
    }
    Ok(())
}

fn value_at<'a>(args: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = args.get(first)?;
    for key in rest {
        value = value.get(key)?;
    }
    Some(value)
}

fn matches_body(header: &str, body: &Value) -> bool {
    match body {
        Value::String(text) => header == text,
        Value::Bool(flag) => header == if *flag { "true" } else { "false" },
        Value::Number(number) => match (header.parse::<f64>(), number.as_f64()) {
            (Ok(header), Some(body)) => header == body,
            _ => false,
        },
        _ => false,
    }
}

/// Whether `Accept` lists both `application/json` and `text/event-stream` explicitly. Like
/// both reference peers, wildcards (`*/*`, what HTTP libraries send by default) do not count.
pub(crate) fn accepts_json_and_sse(values: GetAll<'_, HeaderValue>) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in values {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let media = range
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            match media.as_str() {
                "application/json" => json = true,
                "text/event-stream" => sse = true,
                _ => {}
            }
        }
    }
    json && sse
}

pub(crate) fn is_json(content_type: Option<&HeaderValue>) -> bool {
    content_type
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// DNS-rebinding protection: only loopback origins (and the desktop shell's) may call.
pub(crate) fn origin_is_local(origin: &str) -> bool {
    let rest = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or_default();
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    matches!(
        host.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "::1" | "tauri.localhost"
    )
}

/// Compares secrets without an early exit on the first differing byte.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::ACCEPT;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn sentinel_values_are_decoded_and_others_are_literal() {
        let decode = |value: &str| decode(value, "Mcp-Name").ok();
        assert_eq!(decode("=?base64?SGVsbG8=?="), Some("Hello".into()));
        assert_eq!(
            decode("=?base64?SGVsbG8sIOS4lueVjA==?="),
            Some("Hello, 世界".into())
        );
        assert_eq!(
            decode("SGVsbG8="),
            Some("SGVsbG8=".into()),
            "no prefix: literal"
        );
        assert_eq!(
            decode("=?base64?SGVsbG8="),
            Some("=?base64?SGVsbG8=".into()),
            "no suffix: literal"
        );
        assert_eq!(
            decode("=?base64?SGVsbG8?="),
            None,
            "bad padding is rejected"
        );
        assert_eq!(
            decode("=?base64?SGVs!!!bG8=?="),
            None,
            "non-alphabet characters are rejected"
        );
        assert_eq!(decode("=?base64?/w==?="), None, "not UTF-8");
    }

    #[test]
    fn single_trims_whitespace_and_rejects_duplicates() {
        let map = headers(&[("mcp-name", "  greet  ")]);
        assert_eq!(
            single(&map, "mcp-name").ok(),
            Some(Some("greet".to_owned()))
        );
        let twice = headers(&[("mcp-method", "tools/list"), ("mcp-method", "tools/list")]);
        assert!(single(&twice, "mcp-method").is_err());
        assert_eq!(single(&HeaderMap::new(), "mcp-method").ok(), Some(None));
    }

    #[test]
    fn param_headers_must_mirror_the_body() {
        let params = vec![
            HeaderParam {
                path: vec!["region".into()],
                header: "Region".into(),
            },
            HeaderParam {
                path: vec!["limits".into(), "count".into()],
                header: "Count".into(),
            },
        ];
        let args = json!({"region": "us-west1", "limits": {"count": 42}});
        let args = args.as_object();
        let ok = headers(&[
            ("mcp-param-region", "us-west1"),
            ("mcp-param-count", "42.0"),
        ]);
        assert!(check_params(&ok, &params, args).is_ok());
        let encoded = headers(&[
            ("mcp-param-region", "=?base64?dXMtd2VzdDE=?="),
            ("mcp-param-count", "42"),
        ]);
        assert!(check_params(&encoded, &params, args).is_ok());
        let missing = headers(&[("mcp-param-count", "42")]);
        assert!(check_params(&missing, &params, args).is_err());
        let wrong = headers(&[("mcp-param-region", "eu-west1"), ("mcp-param-count", "42")]);
        assert!(check_params(&wrong, &params, args).is_err());
        let absent_in_body = headers(&[("mcp-param-region", "us-west1")]);
        let only_count = json!({"limits": {"count": 42}});
        assert!(check_params(&absent_in_body, &params, only_count.as_object()).is_err());
        assert!(check_params(&HeaderMap::new(), &params, json!({}).as_object()).is_ok());
    }

    #[test]
    fn accept_needs_both_media_types() {
        let accepts = |value: &'static str| {
            accepts_json_and_sse(headers(&[("accept", value)]).get_all(ACCEPT))
        };
        assert!(accepts("application/json, text/event-stream"));
        assert!(accepts("text/event-stream;q=0.9, application/json"));
        assert!(
            !accepts("*/*"),
            "wildcards do not count, as with fastmcp and rmcp"
        );
        assert!(!accepts("application/json"));
        assert!(!accepts("text/event-stream"));
        assert!(!accepts_json_and_sse(HeaderMap::new().get_all(ACCEPT)));
    }

    #[test]
    fn origins() {
        assert!(origin_is_local("http://localhost:3000"));
        assert!(origin_is_local("http://127.0.0.1"));
        assert!(origin_is_local("http://[::1]:8080"));
        assert!(origin_is_local("tauri://localhost"));
        assert!(!origin_is_local("https://evil.example.com"));
        assert!(!origin_is_local("http://localhost.evil.example.com"));
        assert!(!origin_is_local("null"));
    }

    #[test]
    fn content_type_and_secret_comparison() {
        assert!(is_json(Some(&HeaderValue::from_static(
            "application/json; charset=utf-8"
        ))));
        assert!(!is_json(Some(&HeaderValue::from_static("text/plain"))));
        assert!(!is_json(None));
        assert!(constant_time_eq(b"token", b"token"));
        assert!(!constant_time_eq(b"token", b"tokem"));
        assert!(!constant_time_eq(b"token", b"token2"));
    }
}
