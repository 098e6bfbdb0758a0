//! Software-delivery tools that run as tasks: `run_ci_pipeline`, `deploy_service`,
//! `batch_export` and `flaky_migration`.

use serde_json::{json, Value};

use super::{fingerprint, thousands, Call, Definition, InputNeed, Invocation, TaskSupport, Tool};
use crate::elicitation::{Answer, Answers, Ask, Form};
use crate::error::Result;
use crate::tasks::{CancelPolicy, Program, Script, Step};
use crate::wire::{ErrorObject, ToolResult};

fn invalid(message: String) -> Result<Invocation> {
    Ok(Invocation::Complete(ToolResult::error(message)))
}

fn check_repo(repo: &str) -> std::result::Result<(), String> {
    let valid = repo
        .split_once('/')
        .is_some_and(|(owner, name)| !owner.is_empty() && !name.is_empty() && !name.contains('/'))
        && !repo.contains(char::is_whitespace);
    if valid {
        Ok(())
    } else {
        Err(format!(
            "argument 'repo' must look like owner/name (got {repo:?})"
        ))
    }
}

/// `run_ci_pipeline {repo, branch?}`: checkout → build → test → package, ~19 s.
pub(crate) struct RunCiPipeline;

const CI_STAGES: [(&str, f64); 4] = [
    ("checkout", 2.0),
    ("build", 6.0),
    ("test", 8.0),
    ("package", 3.0),
];

impl Tool for RunCiPipeline {
    fn definition(&self) -> Definition {
        Definition {
            name: "run_ci_pipeline",
            title: "Run CI pipeline",
            description: "Runs the CI pipeline of a repository branch: checkout, build, test and package \
                          (about 20 seconds). Runs as a task; the current stage shows in the task's status \
                          message and the result summarises the run.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "Repository as owner/name, e.g. acme/web"},
                    "branch": {"type": "string", "description": "Branch to build", "default": "main"}
                },
                "required": ["repo"]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "pipeline": {"type": "integer"},
                    "repo": {"type": "string"},
                    "branch": {"type": "string"},
                    "commit": {"type": "string"},
                    "status": {"type": "string", "enum": ["passed", "failed"]},
                    "stages": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "durationMs": {"type": "integer"},
                            "status": {"type": "string"}
                        },
                        "required": ["name", "durationMs", "status"]
                    }},
                    "tests": {"type": "object", "properties": {
                        "passed": {"type": "integer"}, "failed": {"type": "integer"}, "skipped": {"type": "integer"}
                    }},
                    "artifact": {"type": "string"}
                },
                "required": ["pipeline", "repo", "branch", "status", "stages"]
            })),
            annotations: json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": true}),
            tasks: TaskSupport::Required,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let args = (|| {
            let repo = call.args.text("repo")?;
            check_repo(repo)?;
            Ok::<_, String>((repo, call.args.text_opt("branch")?.unwrap_or("main")))
        })();
        let (repo, branch) = match args {
            Ok(args) => args,
            Err(message) => return invalid(message),
        };
        let seed = fingerprint(&format!("{repo}@{branch}"));
        let pipeline = 4000 + seed % 1000;
        let commit = format!("{:07x}", (seed >> 8) & 0xfff_ffff);
        let modules = 80 + seed % 120;
        let tests = 900 + seed % 700;
        let skipped = seed % 17;
        let short_name = repo.rsplit('/').next().unwrap_or(repo);
        let artifact = format!("{short_name}-{branch}-{commit}.tar.gz");
        let details = [
            format!("cloning {repo}@{branch}"),
            format!("compiling {modules} modules"),
            format!("running {} tests", thousands(tests)),
            format!("building {artifact}"),
        ];
        let mut steps: Vec<Step> = CI_STAGES
            .iter()
            .zip(details)
            .enumerate()
            .map(|(index, ((stage, seconds), detail))| {
                Step::work(
                    *seconds,
                    format!("stage {}/4: {stage} — {detail}", index + 1),
                )
            })
            .collect();
        let total: f64 = CI_STAGES.iter().map(|(_, seconds)| seconds).sum();
        let stages: Vec<Value> = CI_STAGES
            .iter()
            .map(|(name, seconds)| {
                json!({"name": name, "durationMs": (seconds * 1000.0) as u64, "status": "passed"})
            })
            .collect();
        let summary = format!(
            "Pipeline #{pipeline} for {repo}@{branch} passed in {total:.0} s: checkout, build, test and \
             package all green; {} tests passed, {skipped} skipped; artifact {artifact}.",
            thousands(tests)
        );
        steps.push(Step::complete(
            ToolResult::text(summary).with_structured(json!({
                "pipeline": pipeline,
                "repo": repo,
                "branch": branch,
                "commit": commit,
                "status": "passed",
                "stages": stages,
                "tests": {"passed": tests, "failed": 0, "skipped": skipped},
                "artifact": artifact,
            })),
            format!("pipeline #{pipeline} passed"),
        ));
        Ok(Invocation::task(Script::new(steps)))
    }
}

/// `deploy_service {service, environment, version?}`: plans, asks for approval mid-flight,
/// rolls out instance by instance.
pub(crate) struct DeployService;

impl Tool for DeployService {
    fn definition(&self) -> Definition {
        Definition {
            name: "deploy_service",
            title: "Deploy service",
            description: "Deploys a service to staging or production. Runs as a task: it plans the release, \
                          then stops and asks a human to approve (a form with approve and reason) before \
                          rolling out instance by instance. Declining aborts the deployment. `environment` is \
                          mirrored into the Mcp-Param-Environment header (x-mcp-header).",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "service": {"type": "string", "description": "Service to deploy, e.g. billing-api"},
                    "environment": {
                        "type": "string",
                        "enum": ["staging", "production"],
                        "description": "Target environment",
                        "x-mcp-header": "Environment"
                    },
                    "version": {"type": "string", "description": "Release to deploy; defaults to the latest build"}
                },
                "required": ["service", "environment"]
            }),
            output_schema: None,
            annotations: json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}),
            tasks: TaskSupport::Required,
            input: Some(InputNeed::Form),
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let args = (|| {
            let service = call.args.text("service")?;
            let environment = call
                .args
                .choice("environment", &["staging", "production"])?
                .ok_or_else(|| "argument 'environment' is required".to_owned())?;
            let version = call.args.text_opt("version")?;
            Ok::<_, String>((service, environment, version))
        })();
        let (service, environment, version) = match args {
            Ok(args) => args,
            Err(message) => return invalid(message),
        };
        let seed = fingerprint(service);
        let version = version
            .map(str::to_owned)
            .unwrap_or_else(|| format!("v{}.{}.{}", 1 + seed % 3, seed % 10, (seed >> 4) % 10));
        Ok(Invocation::task(Deploy {
            service: service.to_owned(),
            environment,
            version,
            instances: if environment == "production" { 3 } else { 2 },
            stage: DeployStage::Plan,
            reason: None,
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum DeployStage {
    Plan,
    Preflight,
    Approval,
    AwaitingApproval,
    Rollout(u32),
    Verify,
    Done,
}

struct Deploy {
    service: String,
    environment: &'static str,
    version: String,
    instances: u32,
    stage: DeployStage,
    reason: Option<String>,
}

impl Deploy {
    fn target(&self) -> String {
        format!("{} {} to {}", self.service, self.version, self.environment)
    }

    fn approval_form() -> Form {
        Form::new()
            .boolean(
                "approve",
                "Approve",
                "Allow the deployment to proceed",
                None,
            )
            .text(
                "reason",
                "Reason",
                "Why (recorded in the audit log)",
                false,
                500,
            )
    }

    fn aborted(&mut self, why: &str) -> Step {
        self.stage = DeployStage::Done;
        Step::complete(
            ToolResult::error(format!(
                "Deployment aborted: {why}. {} was not deployed.",
                self.target()
            ))
            .with_structured(json!({
                "service": self.service,
                "environment": self.environment,
                "version": self.version,
                "deployed": false,
            })),
            "deployment aborted",
        )
    }
}

impl Program for Deploy {
    fn next(&mut self, answers: Option<Answers>) -> Step {
        match self.stage {
            DeployStage::Plan => {
                self.stage = DeployStage::Preflight;
                Step::work(
                    2.0,
                    format!("building the release plan for {}", self.target()),
                )
            }
            DeployStage::Preflight => {
                self.stage = DeployStage::Approval;
                Step::work(
                    1.5,
                    format!(
                        "pre-flight checks passed: image signed, no pending migrations, {} instances to replace",
                        self.instances
                    ),
                )
            }
            DeployStage::Approval => {
                self.stage = DeployStage::AwaitingApproval;
                let message = format!(
                    "Approve deploying {}? {} instances will be replaced one at a time.",
                    self.target(),
                    self.instances
                );
                Step::ask(
                    format!("waiting for approval to deploy {}", self.target()),
                    vec![("approval", Ask::form(message, Self::approval_form()))],
                )
            }
            DeployStage::AwaitingApproval => {
                let answer = answers.as_ref().and_then(|answers| answers.get("approval"));
                match answer {
                    Some(answer @ Answer::Accept(_)) if answer.flag("approve") == Some(true) => {
                        self.reason = answer
                            .text("reason")
                            .filter(|reason| !reason.trim().is_empty())
                            .map(str::to_owned);
                        self.stage = DeployStage::Rollout(1);
                        Step::work(
                            2.0,
                            format!(
                                "rolling out 1/{}: replacing {}-0",
                                self.instances, self.service
                            ),
                        )
                    }
                    Some(answer @ Answer::Accept(_)) => match answer.text("reason") {
                        Some(reason) if !reason.trim().is_empty() => {
                            self.aborted(&format!("approval denied ({reason})"))
                        }
                        _ => self.aborted("approval denied"),
                    },
                    Some(Answer::Decline) => self.aborted("the approval request was declined"),
                    // A sampling result cannot get here: the store checks answers against the form.
                    Some(Answer::Cancel | Answer::Sampled { .. }) | None => {
                        self.aborted("the approval request was dismissed")
                    }
                }
            }
            DeployStage::Rollout(done) if done < self.instances => {
                self.stage = DeployStage::Rollout(done + 1);
                Step::work(
                    2.0,
                    format!(
                        "rolling out {}/{}: replacing {}-{done}",
                        done + 1,
                        self.instances,
                        self.service
                    ),
                )
            }
            DeployStage::Rollout(_) => {
                self.stage = DeployStage::Verify;
                Step::work(
                    1.5,
                    format!("verifying health checks on {} instances", self.instances),
                )
            }
            DeployStage::Verify | DeployStage::Done => {
                self.stage = DeployStage::Done;
                let approval = match &self.reason {
                    Some(reason) => format!(" Approved with reason: {reason}."),
                    None => " Approved.".to_owned(),
                };
                Step::complete(
                    ToolResult::text(format!(
                        "Deployed {}: {}/{} instances healthy.{approval}",
                        self.target(),
                        self.instances,
                        self.instances
                    ))
                    .with_structured(json!({
                        "service": self.service,
                        "environment": self.environment,
                        "version": self.version,
                        "deployed": true,
                        "instances": self.instances,
                        "approvalReason": self.reason,
                    })),
                    format!("deployed {}", self.target()),
                )
            }
        }
    }
}

/// `batch_export {rows, format?}`: a long export in chunks; cancellation stops after the
/// current chunk.
pub(crate) struct BatchExport;

impl Tool for BatchExport {
    fn definition(&self) -> Definition {
        Definition {
            name: "batch_export",
            title: "Batch export",
            description: "Exports `rows` rows to object storage in ten chunks (about one second per 2,000 rows, \
                          between 5 s and 2 min). Runs as a task reporting progress in its status message. \
                          Cancellation is cooperative: the chunk in flight is finished first.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "rows": {"type": "integer", "minimum": 1, "maximum": 10_000_000, "description": "Number of rows to export"},
                    "format": {"type": "string", "enum": ["csv", "jsonl", "parquet"], "default": "csv"}
                },
                "required": ["rows"]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "rows": {"type": "integer"},
                    "format": {"type": "string"},
                    "location": {"type": "string"},
                    "bytes": {"type": "integer"}
                },
                "required": ["rows", "format", "location", "bytes"]
            })),
            annotations: json!({"readOnlyHint": true, "openWorldHint": true}),
            tasks: TaskSupport::Required,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let args = (|| {
            let rows = call
                .args
                .integer_opt("rows", (1, 10_000_000))?
                .ok_or_else(|| "argument 'rows' is required".to_owned())?;
            let format = call
                .args
                .choice("format", &["csv", "jsonl", "parquet"])?
                .unwrap_or("csv");
            Ok::<_, String>((rows.unsigned_abs(), format))
        })();
        let (rows, format) = match args {
            Ok(args) => args,
            Err(message) => return invalid(message),
        };
        let chunks = rows.min(10);
        let total_seconds = (rows as f64 / 2000.0).clamp(5.0, 120.0);
        Ok(Invocation::task(Export {
            rows,
            format,
            chunks,
            started: 0,
            seconds_per_chunk: total_seconds / chunks as f64,
            location: format!("s3://demo-exports/export-{}.{format}", call.call_id),
        }))
    }
}

struct Export {
    rows: u64,
    format: &'static str,
    chunks: u64,
    /// Chunks started so far; every started chunk runs to its end.
    started: u64,
    seconds_per_chunk: f64,
    location: String,
}

impl Export {
    fn rows_after(&self, chunks: u64) -> u64 {
        self.rows * chunks / self.chunks
    }
}

impl Program for Export {
    fn next(&mut self, _answers: Option<Answers>) -> Step {
        if self.started < self.chunks {
            let done = self.rows_after(self.started);
            self.started += 1;
            return Step::work(
                self.seconds_per_chunk,
                format!(
                    "exported {} of {} rows ({}%)",
                    thousands(done),
                    thousands(self.rows),
                    done * 100 / self.rows
                ),
            );
        }
        let bytes_per_row = match self.format {
            "parquet" => 38,
            "jsonl" => 212,
            _ => 124,
        };
        let bytes = self.rows * bytes_per_row;
        Step::complete(
            ToolResult::text(format!(
                "Exported {} rows to {} ({:.1} MB).",
                thousands(self.rows),
                self.location,
                bytes as f64 / 1_000_000.0
            ))
            .with_structured(json!({
                "rows": self.rows,
                "format": self.format,
                "location": self.location,
                "bytes": bytes,
            })),
            format!("exported {} rows", thousands(self.rows)),
        )
    }

    fn cancel_policy(&self) -> CancelPolicy {
        CancelPolicy::AfterCurrentStep {
            message: "cancellation requested; stopping after the current chunk".to_owned(),
        }
    }

    fn cancelled_message(&self) -> String {
        format!(
            "cancelled after exporting {} of {} rows",
            thousands(self.rows_after(self.started)),
            thousands(self.rows)
        )
    }
}

/// `flaky_migration {database?}`: applies two migrations, then fails with a JSON-RPC error.
pub(crate) struct FlakyMigration;

impl Tool for FlakyMigration {
    fn definition(&self) -> Definition {
        Definition {
            name: "flaky_migration",
            title: "Run database migration",
            description: "Applies the pending schema migrations of a database. Runs as a task; this demo \
                          always hits a lock timeout on the third migration, so the task ends `failed` with a \
                          JSON-RPC error (-32603) whose data says what was applied.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "database": {"type": "string", "description": "Database to migrate", "default": "orders"}
                }
            }),
            output_schema: None,
            annotations: json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Required,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let database = match call.args.text_opt("database") {
            Ok(database) => database.unwrap_or("orders").to_owned(),
            Err(message) => return invalid(message),
        };
        let migrations = [
            "0040_create_invoices",
            "0041_backfill_totals",
            "0042_add_customer_index",
        ];
        let mut steps: Vec<Step> = migrations
            .iter()
            .enumerate()
            .map(|(index, migration)| {
                Step::work(
                    if index == 2 { 2.0 } else { 1.5 },
                    format!(
                        "applying migration {}/3 to {database}: {migration}",
                        index + 1
                    ),
                )
            })
            .collect();
        steps.push(Step::fail(
            ErrorObject {
                code: -32603,
                message: format!(
                    "Migration 0042_add_customer_index failed: lock timeout after 30 s on table {database}.customers"
                ),
                data: Some(json!({
                    "database": database,
                    "migration": "0042_add_customer_index",
                    "applied": ["0040_create_invoices", "0041_backfill_totals"],
                    "retryable": true,
                })),
            },
            "migration failed: 2 of 3 applied",
        ));
        Ok(Invocation::task(Script::new(steps)))
    }
}
