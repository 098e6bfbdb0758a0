//! The `WWW-Authenticate: Bearer` challenge (RFC 6750 §3, RFC 9728 §5.1).

/// What a `401`/`403` told us about signing in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected resource metadata is (RFC 9728).
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes this request needs, space-separated.
    pub scope: Option<String>,
    /// `error`, e.g. `invalid_token` or `insufficient_scope`.
    pub error: Option<String>,
}

impl Challenge {
    /// Reads the `Bearer` challenge of a `WWW-Authenticate` value; another scheme, or none, gives
    /// an empty challenge (discovery then falls back to the well-known URLs).
    pub fn parse(header: Option<&str>) -> Self {
        let mut challenge = Self::default();
        let Some(header) = header else {
            return challenge;
        };
        let mut in_bearer = false;
        for (scheme, name, value) in params(header) {
            if let Some(scheme) = scheme {
                in_bearer = scheme.eq_ignore_ascii_case("bearer");
            }
            let (Some(name), true) = (name, in_bearer) else {
                continue;
            };
            let slot = match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => &mut challenge.resource_metadata,
                "scope" => &mut challenge.scope,
                "error" => &mut challenge.error,
                _ => continue,
            };
            if slot.is_none() && !value.is_empty() {
                *slot = Some(value);
            }
        }
        challenge
    }

    /// The challenged scopes, in the server's order.
    pub fn scopes(&self) -> Vec<String> {
        self.scope
            .as_deref()
            .unwrap_or_default()
            .split_ascii_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// A `403` asking for more scope (RFC 6750 `insufficient_scope`).
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Splits a `WWW-Authenticate` value into `(new scheme?, param name?, value)` items: a scheme
/// starts a challenge, the params after it belong to it. Quoted strings keep commas and
/// backslash escapes are undone.
fn params(header: &str) -> Vec<(Option<String>, Option<String>, String)> {
    let mut out = Vec::new();
    let mut chars = header.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            return out;
        }
        let mut token = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || c == ',' || c == '=' {
                break;
            }
            token.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        if chars.peek() != Some(&'=') {
            // A token not followed by `=` is a scheme (or a token68 we do not use).
            out.push((Some(token), None, String::new()));
            continue;
        }
        chars.next();
        // `token68` values end in `=`; a param's `=` is followed by a value.
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => {
                        if let Some(escaped) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' || c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((None, Some(token), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resource_metadata_scope_and_error_from_a_bearer_challenge() {
        let c = Challenge::parse(Some(
            r#"Bearer realm="mcp", error="insufficient_scope", scope="mcp:write mcp:basic", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#,
        ));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scopes(), ["mcp:write", "mcp:basic"]);
        assert!(c.is_insufficient_scope());
    }

    #[test]
    fn ignores_params_of_other_schemes_and_keeps_commas_inside_quotes() {
        let c = Challenge::parse(Some(
            r#"Basic realm="x", scope="nope", Bearer scope="a,b", error=invalid_token"#,
        ));
        assert_eq!(c.scope.as_deref(), Some("a,b"));
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.resource_metadata, None);
    }

    #[test]
    fn a_missing_or_bare_header_is_an_empty_challenge() {
        assert_eq!(Challenge::parse(None), Challenge::default());
        assert_eq!(Challenge::parse(Some("Bearer")), Challenge::default());
    }
}
