//! How the adapter answers a form (an elicitation's `requestedSchema`) in place of a person:
//! it accepts what the form proposes. Every field with a `default` gets it (SEP-1034: the
//! client applies the defaults the person did not change); a boolean without one is ticked.
//! Nothing else is made up, so a required field with no default stays missing and the server's
//! validation speaks.

use serde_json::{Map, Value};

/// The content of an `accept` for a form with this `requestedSchema`.
pub fn accepted_content(requested_schema: &Value) -> Map<String, Value> {
    let Some(properties) = requested_schema
        .get("properties")
        .and_then(Value::as_object)
    else {
        return Map::new();
    };
    properties
        .iter()
        .filter_map(|(name, field)| {
            let value = field.get("default").cloned().or_else(|| {
                match field.get("type").and_then(Value::as_str) {
                    Some("boolean") => Some(Value::Bool(true)),
                    _ => None,
                }
            })?;
            Some((name.clone(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_applied_and_nothing_is_invented() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": false},
            "agree": {"type": "boolean"},
            "comment": {"type": "string"}
        }});
        let content = accepted_content(&schema);
        assert_eq!(
            Value::Object(content),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active",
                   "verified": false, "agree": true})
        );
        assert!(accepted_content(&json!({})).is_empty());
        assert!(accepted_content(&json!({"properties": []})).is_empty());
    }
}
