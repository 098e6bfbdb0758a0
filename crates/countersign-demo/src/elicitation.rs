//! Input requests the tools put in `inputRequests` (elicitation in form or URL mode, and
//! sampling), and validation of the answers the client sends back (through `tasks/update` or
//! an MRTR re-send).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// Answers to one round of questions, keyed by the tool's local name for each question.
pub(crate) type Answers = BTreeMap<String, Answer>;

/// A question a tool asks the user.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ask {
    /// A flat form rendered by the client.
    Form { message: String, form: Form },
    /// Out-of-band interaction at a URL (OAuth, payment, ...). `accept` means "consented".
    Url {
        message: String,
        url: String,
        elicitation_id: String,
    },
    /// A completion from the client's model (`sampling/createMessage`).
    Sampling { prompt: String, max_tokens: u32 },
}

impl Ask {
    pub(crate) fn form(message: impl Into<String>, form: Form) -> Self {
        Self::Form {
            message: message.into(),
            form,
        }
    }

    /// The `{method, params}` object of `inputRequests`.
    pub(crate) fn to_request(&self) -> Value {
        if let Self::Sampling { prompt, max_tokens } = self {
            return json!({
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": max_tokens,
                }
            });
        }
        let params = match self {
            Self::Form { message, form } => json!({
                "mode": "form",
                "message": message,
                "requestedSchema": form.schema(),
            }),
            Self::Url {
                message,
                url,
                elicitation_id,
            } => json!({
                "mode": "url",
                "message": message,
                "url": url,
                "elicitationId": elicitation_id,
            }),
            Self::Sampling { .. } => Value::Null,
        };
        json!({ "method": "elicitation/create", "params": params })
    }

    /// Checks an answer against what was asked; the error explains the mismatch.
    pub(crate) fn check(&self, answer: &Answer) -> Result<(), String> {
        match (self, answer) {
            (Self::Form { form, .. }, Answer::Accept(content)) => form.check(content),
            (Self::Sampling { .. }, Answer::Sampled { .. }) => Ok(()),
            (Self::Sampling { .. }, _) => {
                Err("a sampling request needs a CreateMessageResult".to_owned())
            }
            (_, Answer::Sampled { .. }) => {
                Err("an elicitation needs an ElicitResult, not a CreateMessageResult".to_owned())
            }
            _ => Ok(()),
        }
    }
}

/// The client's response to one input request: an `ElicitResult` (accept, decline, cancel)
/// or a `CreateMessageResult` (sampled).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    Accept(Map<String, Value>),
    Decline,
    Cancel,
    Sampled { text: String, model: String },
}

impl Answer {
    /// Reads an `ElicitResult`: `{"action": "accept", "content": {...}}`, `{"action":
    /// "decline"}` or `{"action": "cancel"}`.
    pub(crate) fn parse(value: &Value) -> Result<Self, String> {
        let object = value
            .as_object()
            .ok_or_else(|| "an input response must be an object".to_owned())?;
        if !object.contains_key("action") && object.contains_key("role") {
            return Self::parse_sampled(object);
        }
        match object.get("action").and_then(Value::as_str) {
            Some("accept") => match object.get("content") {
                None | Some(Value::Null) => Ok(Self::Accept(Map::new())),
                Some(Value::Object(content)) => {
                    for (key, value) in content {
                        let primitive = match value {
                            Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
                            Value::Array(items) => items.iter().all(Value::is_string),
                            _ => false,
                        };
                        if !primitive {
                            return Err(format!(
                                "content.{key} must be a string, number, boolean or array of strings"
                            ));
                        }
                    }
                    Ok(Self::Accept(content.clone()))
                }
                Some(_) => Err("content must be an object".to_owned()),
            },
            Some("decline") => Ok(Self::Decline),
            Some("cancel") => Ok(Self::Cancel),
            Some(other) => Err(format!(
                "action must be accept, decline or cancel (got {other:?})"
            )),
            None => Err("an elicitation response needs an action".to_owned()),
        }
    }

    /// Reads a `CreateMessageResult` carrying text.
    fn parse_sampled(object: &Map<String, Value>) -> Result<Self, String> {
        if object.get("role").and_then(Value::as_str) != Some("assistant") {
            return Err("a sampling result must have role \"assistant\"".to_owned());
        }
        let content = object.get("content");
        let blocks: Vec<&Value> = match content {
            Some(Value::Array(blocks)) => blocks.iter().collect(),
            Some(block @ Value::Object(_)) => vec![block],
            _ => return Err("a sampling result needs content".to_owned()),
        };
        let text: Vec<&str> = blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect();
        if text.is_empty() {
            return Err("a sampling result needs text content".to_owned());
        }
        Ok(Self::Sampled {
            text: text.join("\n"),
            model: object
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("unknown model")
                .to_owned(),
        })
    }

    pub(crate) fn content(&self) -> Option<&Map<String, Value>> {
        match self {
            Self::Accept(content) => Some(content),
            _ => None,
        }
    }

    pub(crate) fn text(&self, field: &str) -> Option<&str> {
        self.content()
            .and_then(|content| content.get(field))
            .and_then(Value::as_str)
    }

    pub(crate) fn flag(&self, field: &str) -> Option<bool> {
        self.content()
            .and_then(|content| content.get(field))
            .and_then(Value::as_bool)
    }

    pub(crate) fn integer(&self, field: &str) -> Option<i64> {
        self.content()
            .and_then(|content| content.get(field))
            .and_then(Value::as_i64)
    }
}

/// A flat form of primitive fields, as form-mode elicitation allows.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Form {
    fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: &'static str,
    title: &'static str,
    description: Option<&'static str>,
    required: bool,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Text {
        min_length: Option<u64>,
        max_length: Option<u64>,
        format: Option<&'static str>,
    },
    Boolean {
        default: Option<bool>,
    },
    Integer {
        minimum: i64,
        maximum: i64,
        default: Option<i64>,
    },
    Choice {
        options: Vec<(&'static str, &'static str)>,
        default: Option<&'static str>,
    },
}

impl Form {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn push(
        mut self,
        name: &'static str,
        title: &'static str,
        description: &'static str,
        required: bool,
        kind: Kind,
    ) -> Self {
        self.fields.push(Field {
            name,
            title,
            description: (!description.is_empty()).then_some(description),
            required,
            kind,
        });
        self
    }

    pub(crate) fn text(
        self,
        name: &'static str,
        title: &'static str,
        description: &'static str,
        required: bool,
        max_length: u64,
    ) -> Self {
        self.push(
            name,
            title,
            description,
            required,
            Kind::Text {
                min_length: required.then_some(1),
                max_length: Some(max_length),
                format: None,
            },
        )
    }

    pub(crate) fn boolean(
        self,
        name: &'static str,
        title: &'static str,
        description: &'static str,
        default: Option<bool>,
    ) -> Self {
        self.push(name, title, description, true, Kind::Boolean { default })
    }

    pub(crate) fn integer(
        self,
        name: &'static str,
        title: &'static str,
        description: &'static str,
        (minimum, maximum): (i64, i64),
        default: Option<i64>,
    ) -> Self {
        self.push(
            name,
            title,
            description,
            true,
            Kind::Integer {
                minimum,
                maximum,
                default,
            },
        )
    }

    pub(crate) fn choice(
        self,
        name: &'static str,
        title: &'static str,
        description: &'static str,
        options: &[(&'static str, &'static str)],
        default: Option<&'static str>,
    ) -> Self {
        self.push(
            name,
            title,
            description,
            true,
            Kind::Choice {
                options: options.to_vec(),
                default,
            },
        )
    }

    /// The `requestedSchema`.
    pub(crate) fn schema(&self) -> Value {
        let mut properties = Map::new();
        for field in &self.fields {
            let mut property = Map::new();
            let mut put = |key: &str, value: Value| {
                property.insert(key.to_owned(), value);
            };
            match &field.kind {
                Kind::Text {
                    min_length,
                    max_length,
                    format,
                } => {
                    put("type", json!("string"));
                    if let Some(min) = min_length {
                        put("minLength", json!(min));
                    }
                    if let Some(max) = max_length {
                        put("maxLength", json!(max));
                    }
                    if let Some(format) = format {
                        put("format", json!(format));
                    }
                }
                Kind::Boolean { default } => {
                    put("type", json!("boolean"));
                    if let Some(default) = default {
                        put("default", json!(default));
                    }
                }
                Kind::Integer {
                    minimum,
                    maximum,
                    default,
                } => {
                    put("type", json!("integer"));
                    put("minimum", json!(minimum));
                    put("maximum", json!(maximum));
                    if let Some(default) = default {
                        put("default", json!(default));
                    }
                }
                Kind::Choice { options, default } => {
                    put("type", json!("string"));
                    put(
                        "oneOf",
                        Value::Array(
                            options
                                .iter()
                                .map(|(value, title)| json!({"const": value, "title": title}))
                                .collect(),
                        ),
                    );
                    if let Some(default) = default {
                        put("default", json!(default));
                    }
                }
            }
            put("title", json!(field.title));
            if let Some(description) = field.description {
                put("description", json!(description));
            }
            properties.insert(field.name.to_owned(), Value::Object(property));
        }
        let required: Vec<&str> = self
            .fields
            .iter()
            .filter(|field| field.required)
            .map(|field| field.name)
            .collect();
        json!({ "type": "object", "properties": properties, "required": required })
    }

    /// Validates accepted content: required fields present, types and ranges as declared.
    /// Unknown keys are ignored.
    pub(crate) fn check(&self, content: &Map<String, Value>) -> Result<(), String> {
        for field in &self.fields {
            let Some(value) = content.get(field.name) else {
                if field.required {
                    return Err(format!("content.{} is required", field.name));
                }
                continue;
            };
            let name = field.name;
            match &field.kind {
                Kind::Text {
                    min_length,
                    max_length,
                    format,
                } => {
                    let text = value
                        .as_str()
                        .ok_or_else(|| format!("content.{name} must be a string"))?;
                    let length = text.chars().count() as u64;
                    if min_length.is_some_and(|min| length < min) {
                        return Err(format!("content.{name} must not be empty"));
                    }
                    if max_length.is_some_and(|max| length > max) {
                        return Err(format!("content.{name} is too long"));
                    }
                    if *format == Some("email") && !text.contains('@') {
                        return Err(format!("content.{name} must be an email address"));
                    }
                }
                Kind::Boolean { .. } => {
                    if !value.is_boolean() {
                        return Err(format!("content.{name} must be a boolean"));
                    }
                }
                Kind::Integer {
                    minimum, maximum, ..
                } => {
                    let number = value
                        .as_i64()
                        .ok_or_else(|| format!("content.{name} must be an integer"))?;
                    if number < *minimum || number > *maximum {
                        return Err(format!(
                            "content.{name} must be between {minimum} and {maximum}"
                        ));
                    }
                }
                Kind::Choice { options, .. } => {
                    let choice = value
                        .as_str()
                        .ok_or_else(|| format!("content.{name} must be a string"))?;
                    if !options.iter().any(|(value, _)| *value == choice) {
                        return Err(format!("content.{name} must be one of the offered options"));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval() -> Form {
        Form::new()
            .boolean(
                "approve",
                "Approve",
                "Allow the deployment to proceed",
                None,
            )
            .text("reason", "Reason", "Why (free text)", false, 500)
    }

    #[test]
    fn form_request_matches_the_elicitation_schema() {
        let ask = Ask::form("Approve deployment of 'billing-api'?", approval());
        assert_eq!(
            ask.to_request(),
            json!({
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Approve deployment of 'billing-api'?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "approve": {"type": "boolean", "title": "Approve", "description": "Allow the deployment to proceed"},
                            "reason": {"type": "string", "maxLength": 500, "title": "Reason", "description": "Why (free text)"}
                        },
                        "required": ["approve"]
                    }
                }
            })
        );
    }

    #[test]
    fn url_request_carries_mode_url_and_an_elicitation_id() {
        let ask = Ask::Url {
            message: "Authorize".into(),
            url: "https://example.com/oauth/authorize?state=abc".into(),
            elicitation_id: "e-1".into(),
        };
        assert_eq!(
            ask.to_request(),
            json!({
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": "Authorize",
                    "url": "https://example.com/oauth/authorize?state=abc",
                    "elicitationId": "e-1"
                }
            })
        );
        assert_eq!(ask.check(&Answer::Accept(Map::new())), Ok(()));
    }

    #[test]
    fn answers_parse_the_three_actions_and_reject_malformed_ones() {
        assert_eq!(
            Answer::parse(&json!({"action": "decline"})),
            Ok(Answer::Decline)
        );
        assert_eq!(
            Answer::parse(&json!({"action": "cancel"})),
            Ok(Answer::Cancel)
        );
        let accepted = Answer::parse(&json!({"action": "accept", "content": {"approve": true}}));
        assert_eq!(
            accepted.as_ref().ok().and_then(|a| a.flag("approve")),
            Some(true)
        );
        for bad in [
            json!({"content": {"approve": true}}),
            json!({"action": "maybe"}),
            json!({"action": "accept", "content": [1]}),
            json!({"action": "accept", "content": {"nested": {"a": 1}}}),
            json!(12345),
        ] {
            assert!(Answer::parse(&bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn sampling_requests_and_results() {
        let ask = Ask::Sampling {
            prompt: "Summarise".into(),
            max_tokens: 50,
        };
        assert_eq!(
            ask.to_request(),
            json!({
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
                    "maxTokens": 50
                }
            })
        );
        let sampled = Answer::parse(&json!({
            "role": "assistant",
            "content": {"type": "text", "text": "All green."},
            "model": "test-model",
            "stopReason": "endTurn"
        }));
        assert_eq!(
            sampled,
            Ok(Answer::Sampled {
                text: "All green.".into(),
                model: "test-model".into()
            })
        );
        assert!(ask.check(&Answer::Decline).is_err());
        assert!(Ask::form("x", Form::new())
            .check(sampled.as_ref().unwrap_or(&Answer::Cancel))
            .is_err());
        assert!(
            Answer::parse(&json!({"role": "user", "content": {"type": "text", "text": "x"}}))
                .is_err()
        );
    }

    #[test]
    fn form_check_enforces_types_ranges_and_required_fields() {
        let form = approval();
        let ok = json!({"approve": false, "reason": "not today", "extra": 1});
        assert_eq!(form.check(ok.as_object().unwrap_or(&Map::new())), Ok(()));
        let wrong_type = json!({"approve": "yes"});
        assert_eq!(
            form.check(wrong_type.as_object().unwrap_or(&Map::new())),
            Err("content.approve must be a boolean".to_owned())
        );
        assert_eq!(
            form.check(&Map::new()),
            Err("content.approve is required".to_owned())
        );
        let seats = Form::new().integer("seats", "Seats", "", (1, 500), Some(5));
        let too_many = json!({"seats": 501});
        assert!(seats
            .check(too_many.as_object().unwrap_or(&Map::new()))
            .is_err());
        let plan = Form::new().choice("plan", "Plan", "", &[("team", "Team")], None);
        let unknown = json!({"plan": "gold"});
        assert!(plan
            .check(unknown.as_object().unwrap_or(&Map::new()))
            .is_err());
    }
}
