//! Which rule applies to a call, and what it says.
//!
//! Rules are per agent (or every agent) × server × tool, optionally with an argument condition
//! (every field of a JSON object must equal the call's argument of that name). The most specific
//! matching rule decides: a rule for this agent beats one for every agent, and within each, a
//! rule with a condition beats one without. Between equally specific matching rules the
//! strictest wins (deny, then ask, then allow). Without a rule the call is `ask`, unless the
//! server's "allow read-only tools" switch is on and the tool says `readOnlyHint: true`
//! (annotations are hints from the server, which is why the switch is off by default).

use serde_json::{Map, Value};

use crate::ledger::rules::{RuleAction, RuleRecord};

/// Why the policy said what it said (shown to the person and recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Basis {
    /// This rule matched.
    Rule(i64),
    /// No rule; the server's read-only switch is on and the tool says it is read-only.
    ReadOnly,
    /// No rule: a person decides.
    Default,
}

/// The policy's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What to do.
    pub action: RuleAction,
    /// Why.
    pub basis: Basis,
}

/// Whether every field of `condition` equals the call's argument of that name.
pub fn condition_matches(condition: &Map<String, Value>, arguments: &Map<String, Value>) -> bool {
    condition
        .iter()
        .all(|(field, value)| arguments.get(field) == Some(value))
}

fn strictness(action: RuleAction) -> u8 {
    match action {
        RuleAction::Allow => 0,
        RuleAction::Ask => 1,
        RuleAction::Deny => 2,
    }
}

/// Decides a call of `agent_id` with `arguments`, given the rules for its server and tool
/// (`ledger::rules::for_call`), the server's read-only switch and the tool's `readOnlyHint`.
pub fn evaluate(
    rules: &[RuleRecord],
    agent_id: i64,
    arguments: &Map<String, Value>,
    allow_read_only: bool,
    read_only_hint: bool,
) -> Verdict {
    let best = rules
        .iter()
        .filter(|r| r.agent_id.is_none_or(|a| a == agent_id))
        .filter(|r| {
            r.condition
                .as_ref()
                .is_none_or(|c| condition_matches(c, arguments))
        })
        .max_by_key(|r| {
            (
                r.agent_id.is_some(),
                r.condition.is_some(),
                strictness(r.action),
            )
        });
    match best {
        Some(rule) => Verdict {
            action: rule.action,
            basis: Basis::Rule(rule.id),
        },
        None if allow_read_only && read_only_hint => Verdict {
            action: RuleAction::Allow,
            basis: Basis::ReadOnly,
        },
        None => Verdict {
            action: RuleAction::Ask,
            basis: Basis::Default,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn rule(
        id: i64,
        agent: Option<i64>,
        action: RuleAction,
        condition: Option<Value>,
    ) -> RuleRecord {
        RuleRecord {
            id,
            agent_id: agent,
            agent: agent.map(|a| format!("agent{a}")),
            server_id: 1,
            server: "demo".into(),
            tool: "deploy_service".into(),
            action,
            condition: condition.map(object),
            created_at: 0,
        }
    }

    #[test]
    fn without_a_rule_a_person_decides() {
        let v = evaluate(&[], 1, &Map::new(), false, true);
        assert_eq!(
            v.action,
            RuleAction::Ask,
            "the read-only switch is off by default"
        );
        assert_eq!(v.basis, Basis::Default);
    }

    #[test]
    fn the_read_only_switch_allows_only_tools_marked_read_only() {
        assert_eq!(
            evaluate(&[], 1, &Map::new(), true, true).action,
            RuleAction::Allow
        );
        assert_eq!(
            evaluate(&[], 1, &Map::new(), true, false).action,
            RuleAction::Ask
        );
    }

    #[test]
    fn an_argument_condition_matches_only_equal_values() {
        let rules = [rule(
            1,
            None,
            RuleAction::Allow,
            Some(json!({"environment": "staging"})),
        )];
        let staging = object(json!({"service": "api", "environment": "staging"}));
        let production = object(json!({"service": "api", "environment": "production"}));
        assert_eq!(
            evaluate(&rules, 7, &staging, false, false).action,
            RuleAction::Allow
        );
        assert_eq!(
            evaluate(&rules, 7, &production, false, false).action,
            RuleAction::Ask
        );
        assert_eq!(
            evaluate(&rules, 7, &Map::new(), false, false).action,
            RuleAction::Ask
        );
    }

    #[test]
    fn the_most_specific_rule_wins_and_ties_go_to_the_strictest() {
        let rules = [
            rule(1, None, RuleAction::Deny, None),
            rule(2, Some(7), RuleAction::Allow, None),
            rule(
                3,
                Some(7),
                RuleAction::Ask,
                Some(json!({"environment": "production"})),
            ),
            rule(
                4,
                None,
                RuleAction::Allow,
                Some(json!({"environment": "production"})),
            ),
        ];
        let production = object(json!({"environment": "production"}));
        let staging = object(json!({"environment": "staging"}));
        // Agent 7: its own conditional rule, then its own plain rule.
        assert_eq!(
            evaluate(&rules, 7, &production, false, false).basis,
            Basis::Rule(3)
        );
        assert_eq!(
            evaluate(&rules, 7, &staging, false, false).basis,
            Basis::Rule(2)
        );
        // Another agent: the every-agent conditional rule, then the every-agent deny.
        assert_eq!(
            evaluate(&rules, 8, &production, false, false).basis,
            Basis::Rule(4)
        );
        assert_eq!(
            evaluate(&rules, 8, &staging, false, false).action,
            RuleAction::Deny
        );
        let tie = [
            rule(5, None, RuleAction::Allow, None),
            rule(6, None, RuleAction::Deny, None),
        ];
        assert_eq!(
            evaluate(&tie, 1, &staging, false, false).action,
            RuleAction::Deny
        );
    }

    #[test]
    fn a_rule_beats_the_read_only_switch() {
        let rules = [rule(1, None, RuleAction::Deny, None)];
        assert_eq!(
            evaluate(&rules, 1, &Map::new(), true, true).action,
            RuleAction::Deny
        );
    }
}
