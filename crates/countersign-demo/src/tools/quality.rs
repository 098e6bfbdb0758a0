//! `lint_repository`: a task that completes with a tool error (`isError: true`).

use serde_json::json;

use super::{fingerprint, Call, Definition, Invocation, TaskSupport, Tool};
use crate::error::Result;
use crate::tasks::{Script, Step};
use crate::wire::ToolResult;

/// `lint_repository {repo, ruleset?}`: lints, finds problems, reports them as a tool error.
pub(crate) struct LintRepository;

impl Tool for LintRepository {
    fn definition(&self) -> Definition {
        Definition {
            name: "lint_repository",
            title: "Lint repository",
            description: "Lints every source file of a repository (a few seconds). Runs as a task. The demo \
                          repository always has three problems, so the task completes with a tool error \
                          (isError: true) listing them: the run worked, the code did not pass.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "Repository as owner/name"},
                    "ruleset": {"type": "string", "enum": ["recommended", "strict"], "default": "recommended"}
                },
                "required": ["repo"]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "filesChecked": {"type": "integer"},
                    "problems": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "file": {"type": "string"},
                            "line": {"type": "integer"},
                            "rule": {"type": "string"},
                            "message": {"type": "string"}
                        },
                        "required": ["file", "line", "rule", "message"]
                    }}
                },
                "required": ["filesChecked", "problems"]
            })),
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Required,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let args = (|| {
            Ok::<_, String>((
                call.args.text("repo")?,
                call.args
                    .choice("ruleset", &["recommended", "strict"])?
                    .unwrap_or("recommended"),
            ))
        })();
        let (repo, ruleset) = match args {
            Ok(args) => args,
            Err(message) => return Ok(Invocation::Complete(ToolResult::error(message))),
        };
        let files = 120 + fingerprint(repo) % 200;
        let problems = json!([
            {"file": "src/billing/invoice.ts", "line": 42, "rule": "no-floating-promises", "message": "Promise returned by sendInvoice() is not awaited"},
            {"file": "src/billing/invoice.ts", "line": 88, "rule": "eqeqeq", "message": "Use === instead of =="},
            {"file": "src/api/routes.ts", "line": 17, "rule": "no-unused-vars", "message": "'legacyHandler' is defined but never used"}
        ]);
        let text = format!(
            "Lint failed for {repo} ({ruleset} rules): 3 problems in 2 of {files} files.\n\
             src/billing/invoice.ts:42 no-floating-promises: Promise returned by sendInvoice() is not awaited\n\
             src/billing/invoice.ts:88 eqeqeq: Use === instead of ==\n\
             src/api/routes.ts:17 no-unused-vars: 'legacyHandler' is defined but never used"
        );
        Ok(Invocation::task(Script::new([
            Step::work(1.0, format!("collecting source files of {repo}")),
            Step::work(
                2.5,
                format!("linting {files} files with the {ruleset} rules"),
            ),
            Step::complete(
                ToolResult::error(text)
                    .with_structured(json!({"filesChecked": files, "problems": problems})),
                "lint failed: 3 problems",
            ),
        ])))
    }
}
