//! A person's answer in their own terms: "approved" or "denied" rather than `accept` with
//! `approve: false`. The elicitation result says what was sent; a decision says what the person
//! chose, so the audit log, the timeline and the task list can say it the way they would.
//!
//! A question is an *approval* when its form is a single yes/no confirmation: exactly one required
//! property, a boolean (every other property optional). Accepting it with `true` approves, with
//! anything else denies. The desktop notification's Approve/Deny buttons and the window's
//! Approve/Deny buttons use the same test ([`confirmation_field`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a person decided when they answered a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// An approval question accepted with its confirmation set to yes.
    Approved,
    /// An approval question accepted with its confirmation set to no.
    Denied,
    /// Any other form (or a link) accepted with the values shown.
    Answered,
    /// The person declined the question (`decline`).
    Declined,
    /// The person dismissed the question without choosing (`cancel`).
    Dismissed,
}

impl Decision {
    /// The word for "you …" ("approved", "denied", …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Answered => "answered",
            Self::Declined => "declined",
            Self::Dismissed => "dismissed",
        }
    }

    /// Parses [`Decision::as_str`]'s spelling (as stored in events and audit details).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "approved" => Self::Approved,
            "denied" => Self::Denied,
            "answered" => Self::Answered,
            "declined" => Self::Declined,
            "dismissed" => Self::Dismissed,
            _ => return None,
        })
    }
}

/// The property name when a form's `requestedSchema` is a single boolean confirmation: exactly
/// one required property, a boolean, and every other property optional.
pub fn confirmation_field(requested_schema: &Value) -> Option<String> {
    let props = requested_schema.get("properties")?.as_object()?;
    let required: Vec<&str> = requested_schema
        .get("required")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let [only] = required.as_slice() else {
        return None;
    };
    let prop = props.get(*only)?;
    (prop.get("type")?.as_str()? == "boolean").then(|| (*only).to_owned())
}

/// The decision an elicitation `response` makes on the stored `request` (`{method, params}`).
/// `None` when the response has no known action (the console refuses those before this).
pub fn decide(request: &Value, response: &Value) -> Option<Decision> {
    match response.get("action")?.as_str()? {
        "decline" => Some(Decision::Declined),
        "cancel" => Some(Decision::Dismissed),
        "accept" => {
            let schema = request.get("params").and_then(|p| p.get("requestedSchema"));
            let field = schema.and_then(confirmation_field);
            Some(match field {
                Some(name) => {
                    let yes = response
                        .get("content")
                        .and_then(|c| c.get(&name))
                        .and_then(Value::as_bool);
                    if yes == Some(true) {
                        Decision::Approved
                    } else {
                        // Missing or false: the confirmation was not given, so the action the
                        // question asked about does not happen.
                        Decision::Denied
                    }
                }
                None => Decision::Answered,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy() -> Value {
        json!({"method": "elicitation/create", "params": {"mode": "form",
            "message": "Approve deployment of 'billing-api'?",
            "requestedSchema": {"type": "object", "properties": {
                "approve": {"type": "boolean", "title": "Approve"},
                "reason": {"type": "string"}}, "required": ["approve"]}}})
    }

    #[test]
    fn accepting_an_approval_with_no_is_a_denial_not_an_acceptance() {
        let no = json!({"action": "accept", "content": {"approve": false}});
        assert_eq!(decide(&deploy(), &no), Some(Decision::Denied));
        let missing = json!({"action": "accept", "content": {"reason": "x"}});
        assert_eq!(
            decide(&deploy(), &missing),
            Some(Decision::Denied),
            "no confirmation given is no approval"
        );
        let yes = json!({"action": "accept", "content": {"approve": true, "reason": "ok"}});
        assert_eq!(decide(&deploy(), &yes), Some(Decision::Approved));
    }

    #[test]
    fn other_forms_are_answered_and_decline_and_cancel_keep_their_meaning() {
        let form = json!({"method": "elicitation/create", "params": {"message": "Name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
        let accept = json!({"action": "accept", "content": {"name": "ada"}});
        assert_eq!(decide(&form, &accept), Some(Decision::Answered));
        let url = json!({"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": "https://h"}});
        assert_eq!(
            decide(&url, &json!({"action": "accept"})),
            Some(Decision::Answered)
        );
        assert_eq!(
            decide(&deploy(), &json!({"action": "decline"})),
            Some(Decision::Declined)
        );
        assert_eq!(
            decide(&deploy(), &json!({"action": "cancel"})),
            Some(Decision::Dismissed)
        );
        assert_eq!(decide(&deploy(), &json!({"action": "maybe"})), None);
    }

    #[test]
    fn decisions_round_trip_their_stored_spelling() {
        for d in [
            Decision::Approved,
            Decision::Denied,
            Decision::Answered,
            Decision::Declined,
            Decision::Dismissed,
        ] {
            assert_eq!(Decision::parse(d.as_str()), Some(d));
            assert_eq!(serde_json::to_value(d).ok(), Some(json!(d.as_str())));
        }
    }
}
