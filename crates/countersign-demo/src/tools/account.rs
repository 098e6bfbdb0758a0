//! Account tools: `provision_account` (two questions at once) and `connect_github` (URL-mode
//! elicitation).

use serde_json::json;

use super::{Call, Definition, InputNeed, Invocation, TaskSupport, Tool};
use crate::elicitation::{Answer, Answers, Ask, Form};
use crate::error::{Error, Result};
use crate::tasks::{Program, Step};
use crate::wire::ToolResult;

const PLANS: [(&str, &str); 3] = [
    ("free", "Free (1 seat)"),
    ("team", "Team ($12/seat/month)"),
    ("enterprise", "Enterprise (SSO, audit log)"),
];
const REGIONS: [(&str, &str); 3] = [
    ("eu-west-1", "Europe (Ireland)"),
    ("us-east-1", "US East (Virginia)"),
    ("ap-southeast-2", "Asia Pacific (Sydney)"),
];

/// `provision_account {email}`: asks for the plan and the region in one go.
pub(crate) struct ProvisionAccount;

impl Tool for ProvisionAccount {
    fn definition(&self) -> Definition {
        Definition {
            name: "provision_account",
            title: "Provision account",
            description: "Creates a workspace account for a new customer. Runs as a task that asks two \
                          questions at once (plan and seats, and data region); both must be answered before \
                          it continues. Declining either aborts the provisioning.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "email": {"type": "string", "format": "email", "description": "Owner of the new account"}
                },
                "required": ["email"]
            }),
            output_schema: None,
            annotations: json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": true}),
            tasks: TaskSupport::Required,
            input: Some(InputNeed::Form),
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let email = match call.args.text("email") {
            Ok(email) if email.contains('@') => email,
            Ok(email) => {
                return Ok(Invocation::Complete(ToolResult::error(format!(
                    "argument 'email' must be an email address (got {email:?})"
                ))))
            }
            Err(message) => return Ok(Invocation::Complete(ToolResult::error(message))),
        };
        Ok(Invocation::task(Provision {
            email: email.to_owned(),
            stage: ProvisionStage::Check,
            plan: None,
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ProvisionStage {
    Check,
    Asking,
    Create,
    Invite,
    Done,
}

struct Provision {
    email: String,
    stage: ProvisionStage,
    /// (plan, seats, region) once answered.
    plan: Option<(String, i64, String)>,
}

impl Provision {
    fn questions(&self) -> Vec<(&'static str, Ask)> {
        vec![
            (
                "plan",
                Ask::form(
                    format!("Which plan should the account for {} use?", self.email),
                    Form::new()
                        .choice(
                            "plan",
                            "Plan",
                            "Billing plan of the new account",
                            &PLANS,
                            Some("team"),
                        )
                        .integer("seats", "Seats", "Number of paid seats", (1, 500), Some(5)),
                ),
            ),
            (
                "region",
                Ask::form(
                    format!("Where should the data of {} be stored?", self.email),
                    Form::new().choice(
                        "region",
                        "Data region",
                        "Cannot be changed later",
                        &REGIONS,
                        Some("eu-west-1"),
                    ),
                ),
            ),
        ]
    }
}

impl Program for Provision {
    fn next(&mut self, answers: Option<Answers>) -> Step {
        match self.stage {
            ProvisionStage::Check => {
                self.stage = ProvisionStage::Asking;
                Step::work(
                    1.0,
                    format!("checking that {} is not already registered", self.email),
                )
            }
            ProvisionStage::Asking if answers.is_none() => {
                Step::ask("waiting for the plan and the data region", self.questions())
            }
            ProvisionStage::Asking => {
                let answers = answers.unwrap_or_default();
                let plan = answers.get("plan");
                let region = answers.get("region");
                let declined = [plan, region]
                    .into_iter()
                    .any(|answer| !matches!(answer, Some(Answer::Accept(_))));
                if declined {
                    self.stage = ProvisionStage::Done;
                    return Step::complete(
                        ToolResult::error(format!(
                            "Provisioning aborted: the questions for {} were declined. No account was created.",
                            self.email
                        )),
                        "provisioning aborted",
                    );
                }
                let chosen = (
                    plan.and_then(|a| a.text("plan"))
                        .unwrap_or("team")
                        .to_owned(),
                    plan.and_then(|a| a.integer("seats")).unwrap_or(5),
                    region
                        .and_then(|a| a.text("region"))
                        .unwrap_or("eu-west-1")
                        .to_owned(),
                );
                let message = format!("creating the workspace in {}", chosen.2);
                self.plan = Some(chosen);
                self.stage = ProvisionStage::Create;
                Step::work(2.0, message)
            }
            ProvisionStage::Create => {
                self.stage = ProvisionStage::Invite;
                Step::work(1.0, format!("sending the invitation to {}", self.email))
            }
            ProvisionStage::Invite | ProvisionStage::Done => {
                self.stage = ProvisionStage::Done;
                let (plan, seats, region) = self
                    .plan
                    .clone()
                    .unwrap_or_else(|| ("team".into(), 5, "eu-west-1".into()));
                Step::complete(
                    ToolResult::text(format!(
                        "Provisioned an account for {} on the {plan} plan with {seats} seats in {region}; \
                         an invitation was sent.",
                        self.email
                    ))
                    .with_structured(json!({
                        "email": self.email,
                        "plan": plan,
                        "seats": seats,
                        "region": region,
                    })),
                    "account provisioned",
                )
            }
        }
    }
}

/// `connect_github {account?}`: OAuth through URL-mode elicitation.
pub(crate) struct ConnectGithub;

impl ConnectGithub {
    fn authorize(call: &Call<'_>) -> Ask {
        Ask::Url {
            message: "Authorize Countersign Demo to read your GitHub repositories. The page opens on \
                      example.com; come back here once you have approved."
                .to_owned(),
            url: format!(
                "https://example.com/oauth/authorize?client_id=countersign-demo&scope=repo%3Aread&state={}",
                call.call_id
            ),
            elicitation_id: uuid::Uuid::new_v4().to_string(),
        }
    }

    fn connected(account: &str) -> ToolResult {
        ToolResult::text(format!(
            "Connected GitHub account @{account} (scopes: repo:read, read:org)."
        ))
        .with_structured(json!({"account": account, "scopes": ["repo:read", "read:org"]}))
    }

    fn refused(answer: Option<&Answer>) -> ToolResult {
        let why = match answer {
            Some(Answer::Decline) => "you declined",
            _ => "the request was dismissed",
        };
        ToolResult::error(format!("GitHub was not connected: {why}."))
    }
}

impl Tool for ConnectGithub {
    fn definition(&self) -> Definition {
        Definition {
            name: "connect_github",
            title: "Connect GitHub",
            description: "Connects a GitHub account through OAuth. Asks the user to open an authorization page \
                          (URL-mode elicitation) and then waits for the callback. Runs as a task when the client \
                          supports tasks, otherwise as a multi-round-trip call.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "account": {"type": "string", "description": "GitHub user or organisation to connect", "default": "demo-user"}
                }
            }),
            output_schema: None,
            annotations: json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": true}),
            tasks: TaskSupport::Optional,
            input: Some(InputNeed::Url),
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let account = match call.args.text_opt("account") {
            Ok(account) => account.unwrap_or("demo-user").to_owned(),
            Err(message) => return Ok(Invocation::Complete(ToolResult::error(message))),
        };
        if call.caps.tasks {
            return Ok(Invocation::task(Connect {
                account,
                ask: Some(Self::authorize(call)),
                stage: ConnectStage::Prepare,
            }));
        }
        let answer = call
            .resume
            .as_ref()
            .and_then(|resume| resume.answer("authorize"));
        Ok(match answer {
            None => {
                Invocation::InputRequired(vec![("authorize".to_owned(), Self::authorize(call))])
            }
            Some(Answer::Accept(_)) => Invocation::Complete(Self::connected(&account)),
            Some(other) => Invocation::Complete(Self::refused(Some(other))),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ConnectStage {
    Prepare,
    Authorize,
    AwaitingConsent,
    Callback,
    Done,
}

struct Connect {
    account: String,
    ask: Option<Ask>,
    stage: ConnectStage,
}

impl Program for Connect {
    fn next(&mut self, answers: Option<Answers>) -> Step {
        match self.stage {
            ConnectStage::Prepare => {
                self.stage = ConnectStage::Authorize;
                Step::work(0.5, "preparing the GitHub authorization")
            }
            ConnectStage::Authorize => {
                self.stage = ConnectStage::AwaitingConsent;
                match self.ask.take() {
                    Some(ask) => Step::ask(
                        "waiting for you to authorize Countersign Demo on GitHub",
                        vec![("authorize", ask)],
                    ),
                    None => Step::fail(
                        Error::internal("the authorization request was already used").to_object(),
                        "internal error",
                    ),
                }
            }
            ConnectStage::AwaitingConsent => {
                match answers
                    .as_ref()
                    .and_then(|answers| answers.get("authorize"))
                {
                    Some(Answer::Accept(_)) => {
                        self.stage = ConnectStage::Callback;
                        Step::work(2.0, "waiting for the OAuth callback from GitHub")
                    }
                    other => {
                        self.stage = ConnectStage::Done;
                        Step::complete(ConnectGithub::refused(other), "GitHub not connected")
                    }
                }
            }
            ConnectStage::Callback | ConnectStage::Done => {
                self.stage = ConnectStage::Done;
                Step::complete(ConnectGithub::connected(&self.account), "GitHub connected")
            }
        }
    }
}
