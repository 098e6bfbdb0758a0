//! The fixture tools the official conformance scenarios call, with the behaviour they expect:
//! `greet`, `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`,
//! `multi_input` and `test_tool_with_task` (tasks scenarios), `test_missing_capability`,
//! `test_streaming_elicitation` and `test_logging_tool` (the `server-stateless` scenario).

use std::time::Duration;

use serde_json::{json, Value};

use super::{Call, Definition, InputNeed, Invocation, Resume, SyncRun, TaskSupport, Tool};
use crate::elicitation::{Answer, Answers, Ask, Form};
use crate::error::{Error, Result};
use crate::tasks::{Program, Script, Step};
use crate::wire::{ErrorObject, ToolResult};

/// Longest `slow_compute` run served synchronously (without the tasks extension).
const MAX_SYNC_SECONDS: f64 = 60.0;

fn invalid(message: String) -> Result<Invocation> {
    Ok(Invocation::Complete(ToolResult::error(message)))
}

/// Checks an MRTR answer against the question it answers; a mismatch is a protocol error.
fn checked<'a>(resume: Option<&'a Resume>, key: &str, ask: &Ask) -> Result<Option<&'a Answer>> {
    let Some(answer) = resume.and_then(|resume| resume.answer(key)) else {
        return Ok(None);
    };
    ask.check(answer)
        .map_err(|detail| Error::invalid_params(format!("inputResponses[{key:?}]: {detail}")))?;
    Ok(Some(answer))
}

/// `greet {name}`: `Hello, {name}!`, synchronously.
pub(crate) struct Greet;

impl Tool for Greet {
    fn definition(&self) -> Definition {
        Definition {
            name: "greet",
            title: "Greet",
            description: "Conformance fixture: returns \"Hello, {name}!\" at once. Never a task.",
            input_schema: json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "Who to greet"}},
                "required": ["name"]
            }),
            output_schema: None,
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Forbidden,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        match call.args.text("name") {
            Ok(name) => Ok(Invocation::Complete(ToolResult::text(format!(
                "Hello, {name}!"
            )))),
            Err(message) => invalid(message),
        }
    }
}

/// `slow_compute {seconds, label?}`: sleeps, then returns; a task when the client supports
/// tasks, a streamed synchronous call otherwise. Cancels immediately.
pub(crate) struct SlowCompute;

impl Tool for SlowCompute {
    fn definition(&self) -> Definition {
        Definition {
            name: "slow_compute",
            title: "Slow compute",
            description: "Conformance fixture: computes for `seconds` seconds, then returns. Runs as a task when \
                          the client declares the tasks extension (cancellation takes effect at once); otherwise \
                          synchronously (up to 60 s), streaming progress when the request has a progressToken.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "maximum": 3600, "description": "How long to compute"},
                    "label": {"type": "string", "description": "Free-form label echoed in the result"}
                },
                "required": ["seconds"]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {"seconds": {"type": "number"}, "label": {"type": ["string", "null"]}},
                "required": ["seconds"]
            })),
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Optional,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let args = (|| {
            let seconds = call
                .args
                .number_opt("seconds", (0.0, 3600.0))?
                .ok_or_else(|| "argument 'seconds' is required".to_owned())?;
            Ok::<_, String>((seconds, call.args.text_opt("label")?))
        })();
        let (seconds, label) = match args {
            Ok(args) => args,
            Err(message) => return invalid(message),
        };
        let suffix = label.map(|label| format!(" ({label})")).unwrap_or_default();
        let result = ToolResult::text(format!("slow_compute finished after {seconds} s{suffix}"))
            .with_structured(json!({"seconds": seconds, "label": label}));
        // One progress message per whole second, then the remainder.
        let mut slices = Vec::new();
        let mut elapsed = 0.0;
        while elapsed < seconds {
            let slice = (seconds - elapsed).min(1.0);
            slices.push((
                slice,
                format!("computing: {elapsed:.0}/{seconds} s{suffix}"),
            ));
            elapsed += slice;
        }
        if call.caps.tasks {
            let mut steps: Vec<Step> = slices
                .into_iter()
                .map(|(slice, message)| Step::work(slice, message))
                .collect();
            steps.push(Step::complete(result, "done"));
            return Ok(Invocation::task(Script::new(steps)));
        }
        if seconds > MAX_SYNC_SECONDS {
            return invalid(format!(
                "seconds > {MAX_SYNC_SECONDS} needs the tasks extension (io.modelcontextprotocol/tasks)"
            ));
        }
        Ok(Invocation::Sync(SyncRun {
            steps: slices
                .into_iter()
                .map(|(slice, message)| (Duration::from_secs_f64(slice), message))
                .collect(),
            result,
        }))
    }
}

/// `failing_job`: a task that completes with a tool error after about a second.
pub(crate) struct FailingJob;

impl Tool for FailingJob {
    fn definition(&self) -> Definition {
        Definition {
            name: "failing_job",
            title: "Failing job",
            description: "Conformance fixture: a task (required) that completes after about one second with a \
                          tool execution error (status completed, result.isError true).",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Required,
            input: None,
        }
    }

    fn invoke(&self, _call: &Call<'_>) -> Result<Invocation> {
        Ok(Invocation::task(Script::new([
            Step::work(1.0, "running"),
            Step::complete(
                ToolResult::error("failing_job failed: the job reported an error (deliberate)"),
                "finished with a tool error",
            ),
        ])))
    }
}

/// `protocol_error_job`: a task that fails with a JSON-RPC error.
pub(crate) struct ProtocolErrorJob;

impl Tool for ProtocolErrorJob {
    fn definition(&self) -> Definition {
        Definition {
            name: "protocol_error_job",
            title: "Protocol error job",
            description:
                "Conformance fixture: a task (required) that crashes into a protocol error: status \
                          failed with an inlined JSON-RPC error (-32603).",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Required,
            input: None,
        }
    }

    fn invoke(&self, _call: &Call<'_>) -> Result<Invocation> {
        Ok(Invocation::task(Script::new([
            Step::work(0.5, "running"),
            Step::fail(
                ErrorObject {
                    code: -32603,
                    message: "protocol_error_job crashed: internal failure (deliberate)".into(),
                    data: Some(json!({"deliberate": true})),
                },
                "crashed with an internal error",
            ),
        ])))
    }
}

/// `confirm_delete {filename}`: asks for confirmation, in a task or over MRTR.
pub(crate) struct ConfirmDelete;

impl ConfirmDelete {
    fn question(filename: &str) -> Ask {
        Ask::form(
            format!("Delete {filename}? This cannot be undone."),
            Form::new().boolean(
                "confirm",
                "Delete",
                "Permanently delete the file",
                Some(false),
            ),
        )
    }

    fn confirmed(answer: Option<&Answer>) -> bool {
        answer.and_then(|answer| answer.flag("confirm")) == Some(true)
    }

    fn outcome(filename: &str, deleted: bool) -> ToolResult {
        let text = if deleted {
            format!("Deleted {filename}.")
        } else {
            format!("Kept {filename}: deletion was not confirmed.")
        };
        ToolResult::text(text).with_structured(json!({"filename": filename, "deleted": deleted}))
    }
}

impl Tool for ConfirmDelete {
    fn definition(&self) -> Definition {
        Definition {
            name: "confirm_delete",
            title: "Confirm delete",
            description: "Conformance fixture: deletes a file after asking for confirmation (a form with one \
                          boolean). As a task it goes input_required; without the tasks extension it asks over \
                          a multi-round-trip call.",
            input_schema: json!({
                "type": "object",
                "properties": {"filename": {"type": "string", "description": "File to delete"}},
                "required": ["filename"]
            }),
            output_schema: None,
            annotations: json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Optional,
            input: Some(InputNeed::Form),
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let filename = match call.args.text("filename") {
            Ok(filename) => filename.to_owned(),
            Err(message) => return invalid(message),
        };
        if call.caps.tasks {
            return Ok(Invocation::task(Confirm {
                filename,
                stage: ConfirmStage::Check,
            }));
        }
        let question = Self::question(&filename);
        Ok(match checked(call.resume.as_ref(), "confirm", &question)? {
            None => Invocation::InputRequired(vec![("confirm".to_owned(), question)]),
            Some(answer) => {
                Invocation::Complete(Self::outcome(&filename, Self::confirmed(Some(answer))))
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ConfirmStage {
    Check,
    Asking,
    Deleting,
    Done,
}

struct Confirm {
    filename: String,
    stage: ConfirmStage,
}

impl Program for Confirm {
    fn next(&mut self, answers: Option<Answers>) -> Step {
        match self.stage {
            ConfirmStage::Check => {
                self.stage = ConfirmStage::Asking;
                Step::work(0.2, format!("checking {}", self.filename))
            }
            ConfirmStage::Asking if answers.is_none() => Step::ask(
                format!("waiting for confirmation to delete {}", self.filename),
                vec![("confirm", ConfirmDelete::question(&self.filename))],
            ),
            ConfirmStage::Asking => {
                let answer = answers.as_ref().and_then(|answers| answers.get("confirm"));
                if ConfirmDelete::confirmed(answer) {
                    self.stage = ConfirmStage::Deleting;
                    Step::work(0.5, format!("deleting {}", self.filename))
                } else {
                    self.stage = ConfirmStage::Done;
                    Step::complete(ConfirmDelete::outcome(&self.filename, false), "kept")
                }
            }
            ConfirmStage::Deleting | ConfirmStage::Done => {
                self.stage = ConfirmStage::Done;
                Step::complete(ConfirmDelete::outcome(&self.filename, true), "deleted")
            }
        }
    }
}

/// `multi_input`: two questions pending at once.
pub(crate) struct MultiInput;

impl MultiInput {
    fn questions() -> Vec<(&'static str, Ask)> {
        vec![
            (
                "name",
                Ask::form(
                    "What name should the record carry?",
                    Form::new().text("name", "Name", "Name of the record", true, 200),
                ),
            ),
            (
                "confirm",
                Ask::form(
                    "Create the record?",
                    Form::new().boolean("confirm", "Create", "Create the record now", Some(true)),
                ),
            ),
        ]
    }

    fn outcome(answers: &Answers) -> ToolResult {
        let name = answers.get("name").and_then(|answer| answer.text("name"));
        let confirm = answers
            .get("confirm")
            .and_then(|answer| answer.flag("confirm"));
        match (name, confirm) {
            (Some(name), Some(true)) => ToolResult::text(format!(
                "multi_input received both answers: name={name}, confirm=true"
            ))
            .with_structured(json!({"name": name, "confirm": true})),
            _ => ToolResult::text("multi_input: not created (an answer was declined or negative)")
                .with_structured(json!({"name": name, "confirm": confirm.unwrap_or(false)})),
        }
    }
}

impl Tool for MultiInput {
    fn definition(&self) -> Definition {
        Definition {
            name: "multi_input",
            title: "Multi input",
            description: "Conformance fixture: asks two questions at once (a name and a confirmation). As a \
                          task both stay pending until answered, possibly one at a time; without the tasks \
                          extension it asks both over a multi-round-trip call.",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: json!({"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false}),
            tasks: TaskSupport::Optional,
            input: Some(InputNeed::Form),
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        if call.caps.tasks {
            return Ok(Invocation::task(Multi { asked: false }));
        }
        let mut answers = Answers::new();
        let mut missing = Vec::new();
        for (key, question) in Self::questions() {
            match checked(call.resume.as_ref(), key, &question)? {
                Some(answer) => {
                    answers.insert(key.to_owned(), answer.clone());
                }
                None => missing.push((key.to_owned(), question)),
            }
        }
        Ok(if missing.is_empty() {
            Invocation::Complete(Self::outcome(&answers))
        } else {
            // Ask again for everything: MRTR keeps no state between rounds.
            Invocation::InputRequired(
                Self::questions()
                    .into_iter()
                    .map(|(key, question)| (key.to_owned(), question))
                    .collect(),
            )
        })
    }
}

struct Multi {
    asked: bool,
}

impl Program for Multi {
    fn next(&mut self, answers: Option<Answers>) -> Step {
        match answers {
            None if !self.asked => {
                self.asked = true;
                Step::ask("waiting for 2 answers", MultiInput::questions())
            }
            None => Step::fail(Error::internal("asked twice").to_object(), "internal error"),
            Some(answers) => Step::complete(MultiInput::outcome(&answers), "done"),
        }
    }
}

/// `test_tool_with_task`: gathers a name over MRTR, then escalates to a task whose result
/// carries the name.
pub(crate) struct TestToolWithTask;

impl TestToolWithTask {
    fn question() -> Ask {
        Ask::form(
            "What is your name?",
            Form::new().text("name", "Name", "Used in the greeting", true, 200),
        )
    }
}

impl Tool for TestToolWithTask {
    fn definition(&self) -> Definition {
        Definition {
            name: "test_tool_with_task",
            title: "MRTR then task",
            description: "Conformance fixture (task required): first asks for your name over a multi-round-trip \
                          call (input_required with requestState), then, on the re-sent call, creates a task \
                          whose result greets you by that name.",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Required,
            input: Some(InputNeed::Form),
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let question = Self::question();
        Ok(match checked(call.resume.as_ref(), "user_name", &question)? {
            None => Invocation::InputRequired(vec![("user_name".to_owned(), question)]),
            Some(answer) => match answer.text("name") {
                Some(name) => Invocation::task(Script::new([
                    Step::work(1.0, format!("preparing a greeting for {name}")),
                    Step::complete(
                        ToolResult::text(format!(
                            "Hello, {name}! (your name was gathered over MRTR before this task started)"
                        ))
                        .with_structured(json!({"name": name})),
                        "done",
                    ),
                ])),
                None => Invocation::Complete(
                    ToolResult::text("No name was given, so there is nobody to greet.")
                        .with_structured(json!({"name": Value::Null})),
                ),
            },
        })
    }
}

/// `test_missing_capability`: asks the client's model for a summary over MRTR sampling, so a
/// client that does not declare `sampling` gets -32021 with `requiredCapabilities.sampling`.
pub(crate) struct TestMissingCapability;

impl Tool for TestMissingCapability {
    fn definition(&self) -> Definition {
        Definition {
            name: "test_missing_capability",
            title: "Summarise with your model",
            description: "Conformance fixture (server-stateless): asks the client's model for a one-line status \
                          summary (sampling over a multi-round-trip call). Refused with -32021 when the request \
                          does not declare the sampling capability.",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Forbidden,
            input: Some(InputNeed::Sampling),
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let question = Ask::Sampling {
            prompt: "Summarise in one line: 3 pipelines passed, 1 deployment awaits approval."
                .into(),
            max_tokens: 60,
        };
        Ok(match checked(call.resume.as_ref(), "summary", &question)? {
            Some(Answer::Sampled { text, model }) => Invocation::Complete(
                ToolResult::text(format!("Summary from {model}: {text}"))
                    .with_structured(json!({"summary": text, "model": model})),
            ),
            _ => Invocation::InputRequired(vec![("summary".to_owned(), question)]),
        })
    }
}

/// `test_streaming_elicitation`: needs an answer from the user, and asks for it with an
/// `InputRequiredResult`, never with a request on the response stream.
pub(crate) struct TestStreamingElicitation;

impl Tool for TestStreamingElicitation {
    fn definition(&self) -> Definition {
        Definition {
            name: "test_streaming_elicitation",
            title: "Ask while answering",
            description: "Conformance fixture (server-stateless): needs a confirmation mid-call and asks for it \
                          with an InputRequiredResult (multi-round-trip), never as a request on the response \
                          stream.",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Forbidden,
            input: Some(InputNeed::Form),
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let question = Ask::form(
            "Continue?",
            Form::new().boolean("proceed", "Continue", "Let the call finish", Some(true)),
        );
        Ok(match checked(call.resume.as_ref(), "proceed", &question)? {
            None => Invocation::InputRequired(vec![("proceed".to_owned(), question)]),
            Some(answer) if answer.flag("proceed") == Some(true) => {
                Invocation::Complete(ToolResult::text("Finished after your confirmation."))
            }
            Some(_) => Invocation::Complete(ToolResult::text("Stopped: not confirmed.")),
        })
    }
}

/// `test_logging_tool`: a short synchronous run that logs each step, but only to a request
/// whose `_meta` sets a log level (and only on a streamed reply).
pub(crate) struct TestLoggingTool;

impl Tool for TestLoggingTool {
    fn definition(&self) -> Definition {
        Definition {
            name: "test_logging_tool",
            title: "Logged run",
            description: "Conformance fixture (server-stateless): a 0.3 s run of three steps. Each step is sent \
                          as an info notifications/message only when the request sets \
                          _meta[\"io.modelcontextprotocol/logLevel\"] and the reply is streamed.",
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Forbidden,
            input: None,
        }
    }

    fn invoke(&self, _call: &Call<'_>) -> Result<Invocation> {
        Ok(Invocation::Sync(SyncRun {
            steps: (1..=3)
                .map(|step| (Duration::from_millis(100), format!("step {step}/3")))
                .collect(),
            result: ToolResult::text("test_logging_tool finished 3 steps"),
        }))
    }
}
