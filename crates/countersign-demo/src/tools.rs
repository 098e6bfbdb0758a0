//! The tool catalog: what `tools/list` shows and what `tools/call` runs.
//!
//! A tool validates its arguments and answers with an [`Invocation`]: a result right away, a
//! synchronous run that streams progress, an MRTR question round, or a task [`Program`]. The
//! dispatcher, not the tool, checks client capabilities from the tool's [`Definition`].

mod account;
mod basic;
mod bench;
mod delivery;
mod fixtures;
mod quality;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::elicitation::{Answer, Answers, Ask};
use crate::error::Result;
use crate::tasks::Program;
use crate::wire::{ClientCaps, ToolResult};

/// Whether a tool runs as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskSupport {
    /// Never a task.
    Forbidden,
    /// A task when the request declares the extension, synchronous otherwise.
    Optional,
    /// Only as a task: without the extension the call is refused with -32021.
    Required,
}

impl TaskSupport {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

/// Which kind of input request a tool sends, so the client must support it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputNeed {
    /// Form-mode elicitation.
    Form,
    /// URL-mode elicitation.
    Url,
    /// `sampling/createMessage` (the client's model).
    Sampling,
}

/// Static description of a tool.
pub(crate) struct Definition {
    pub(crate) name: &'static str,
    pub(crate) title: &'static str,
    pub(crate) description: &'static str,
    pub(crate) input_schema: Value,
    pub(crate) output_schema: Option<Value>,
    pub(crate) annotations: Value,
    pub(crate) tasks: TaskSupport,
    pub(crate) input: Option<InputNeed>,
}

/// A simulated synchronous run: progress messages at given (simulated) offsets, then a result.
/// The transport paces it, streams `notifications/progress` when it can, and stops it when
/// the client goes away.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SyncRun {
    pub(crate) steps: Vec<(Duration, String)>,
    pub(crate) result: ToolResult,
}

/// What a `tools/call` turns into.
pub(crate) enum Invocation {
    /// Finished at once.
    Complete(ToolResult),
    /// Finishes synchronously after some (simulated) time.
    Sync(SyncRun),
    /// MRTR: ask these questions (local key, question); the client re-sends the call with
    /// `inputResponses` and the `requestState` the dispatcher seals.
    InputRequired(Vec<(String, Ask)>),
    /// Run as a task (only offered when the request declared the tasks extension).
    Task(Box<dyn Program>),
}

impl Invocation {
    pub(crate) fn task(program: impl Program + 'static) -> Self {
        Self::Task(Box::new(program))
    }
}

/// The answers of a previous MRTR round, after the `requestState` verified.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resume {
    /// How many rounds have been answered (1 after the first).
    pub(crate) round: u32,
    pub(crate) answers: Answers,
}

impl Resume {
    pub(crate) fn answer(&self, key: &str) -> Option<&Answer> {
        self.answers.get(key)
    }
}

/// One `tools/call`, as a tool sees it.
pub(crate) struct Call<'a> {
    pub(crate) args: Args<'a>,
    pub(crate) caps: ClientCaps,
    pub(crate) resume: Option<Resume>,
    /// Short random id of this call, for realistic-looking artifact names.
    pub(crate) call_id: String,
    /// Wall-clock time of the call.
    pub(crate) now: time::OffsetDateTime,
}

pub(crate) trait Tool: Send + Sync {
    fn definition(&self) -> Definition;

    /// Runs the call. Bad arguments are a tool execution error (`isError: true`), not an
    /// `Err`; `Err` is for protocol errors such as an MRTR answer of the wrong shape.
    fn invoke(&self, call: &Call<'_>) -> Result<Invocation>;
}

/// A parameter mirrored into an `Mcp-Param-*` header (`x-mcp-header`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderParam {
    /// Chain of `properties` keys from the schema root.
    pub(crate) path: Vec<String>,
    /// The `{name}` of `Mcp-Param-{name}`.
    pub(crate) header: String,
}

pub(crate) struct Entry {
    pub(crate) definition: Definition,
    pub(crate) tool: Box<dyn Tool>,
    pub(crate) header_params: Vec<HeaderParam>,
}

/// Every tool, in `tools/list` order.
pub(crate) struct Catalog {
    entries: Vec<Entry>,
    by_name: HashMap<&'static str, usize>,
    list: Value,
}

impl Catalog {
    pub(crate) fn new() -> Self {
        // Order matters to generic probes that take the first tool: `get_time` works with no
        // arguments and no capabilities, and `echo` is the first tool with an `x-mcp-header`
        // parameter and needs no task support.
        let tools: Vec<Box<dyn Tool>> = vec![
            Box::new(basic::GetTime),
            Box::new(basic::Echo),
            Box::new(delivery::RunCiPipeline),
            Box::new(delivery::DeployService),
            Box::new(delivery::BatchExport),
            Box::new(delivery::FlakyMigration),
            Box::new(quality::LintRepository),
            Box::new(account::ProvisionAccount),
            Box::new(account::ConnectGithub),
            Box::new(bench::BenchJob),
            Box::new(fixtures::Greet),
            Box::new(fixtures::SlowCompute),
            Box::new(fixtures::FailingJob),
            Box::new(fixtures::ProtocolErrorJob),
            Box::new(fixtures::ConfirmDelete),
            Box::new(fixtures::MultiInput),
            Box::new(fixtures::TestToolWithTask),
            Box::new(fixtures::TestMissingCapability),
            Box::new(fixtures::TestStreamingElicitation),
            Box::new(fixtures::TestLoggingTool),
        ];
        let entries: Vec<Entry> = tools
            .into_iter()
            .map(|tool| {
                let definition = tool.definition();
                let mut header_params = Vec::new();
                collect_header_params(
                    &definition.input_schema,
                    &mut Vec::new(),
                    &mut header_params,
                );
                Entry {
                    definition,
                    tool,
                    header_params,
                }
            })
            .collect();
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(index, entry)| (entry.definition.name, index))
            .collect();
        let list = json!({
            "resultType": "complete",
            "tools": entries.iter().map(|entry| tool_json(&entry.definition)).collect::<Vec<_>>(),
            "ttlMs": 0,
            "cacheScope": "private",
        });
        Self {
            entries,
            by_name,
            list,
        }
    }

    /// Every tool, in `tools/list` order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name
            .get(name)
            .and_then(|index| self.entries.get(*index))
    }

    /// The `tools/list` result.
    pub(crate) fn list(&self) -> &Value {
        &self.list
    }
}

fn tool_json(definition: &Definition) -> Value {
    let mut tool = json!({
        "name": definition.name,
        "title": definition.title,
        "description": definition.description,
        "inputSchema": definition.input_schema,
        "annotations": definition.annotations,
        "_meta": {"dev.countersign/taskSupport": definition.tasks.label()},
    });
    if let (Some(schema), Some(object)) = (&definition.output_schema, tool.as_object_mut()) {
        object.insert("outputSchema".into(), schema.clone());
    }
    tool
}

/// Finds `x-mcp-header` annotations reachable through `properties` chains only.
fn collect_header_params(schema: &Value, path: &mut Vec<String>, out: &mut Vec<HeaderParam>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        path.push(name.clone());
        if let Some(header) = property.get("x-mcp-header").and_then(Value::as_str) {
            out.push(HeaderParam {
                path: path.clone(),
                header: header.to_owned(),
            });
        }
        collect_header_params(property, path, out);
        path.pop();
    }
}

/// Typed access to `arguments`; every failure is a message for an `isError` result.
#[derive(Clone, Copy)]
pub(crate) struct Args<'a> {
    map: &'a Map<String, Value>,
}

pub(crate) type ArgResult<T> = std::result::Result<T, String>;

impl<'a> Args<'a> {
    pub(crate) fn new(map: &'a Map<String, Value>) -> Self {
        Self { map }
    }

    fn present(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|value| !value.is_null())
    }

    pub(crate) fn text(&self, name: &str) -> ArgResult<&'a str> {
        self.text_opt(name)?
            .ok_or_else(|| format!("argument '{name}' is required"))
    }

    pub(crate) fn text_opt(&self, name: &str) -> ArgResult<Option<&'a str>> {
        match self.present(name) {
            None => Ok(None),
            Some(Value::String(text)) if text.trim().is_empty() => {
                Err(format!("argument '{name}' must not be empty"))
            }
            Some(Value::String(text)) if text.chars().count() > 10_000 => {
                Err(format!("argument '{name}' is too long"))
            }
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(format!("argument '{name}' must be a string")),
        }
    }

    pub(crate) fn choice(
        &self,
        name: &str,
        allowed: &[&'static str],
    ) -> ArgResult<Option<&'static str>> {
        match self.text_opt(name)? {
            None => Ok(None),
            Some(value) => allowed
                .iter()
                .find(|candidate| **candidate == value)
                .copied()
                .map(Some)
                .ok_or_else(|| format!("argument '{name}' must be one of: {}", allowed.join(", "))),
        }
    }

    pub(crate) fn integer_opt(&self, name: &str, (min, max): (i64, i64)) -> ArgResult<Option<i64>> {
        match self.present(name) {
            None => Ok(None),
            Some(value) => {
                let number = value
                    .as_i64()
                    .or_else(|| {
                        value
                            .as_f64()
                            .filter(|f| f.fract() == 0.0)
                            .map(|f| f as i64)
                    })
                    .ok_or_else(|| format!("argument '{name}' must be an integer"))?;
                if number < min || number > max {
                    return Err(format!("argument '{name}' must be between {min} and {max}"));
                }
                Ok(Some(number))
            }
        }
    }

    pub(crate) fn number_opt(&self, name: &str, (min, max): (f64, f64)) -> ArgResult<Option<f64>> {
        match self.present(name) {
            None => Ok(None),
            Some(value) => {
                let number = value
                    .as_f64()
                    .ok_or_else(|| format!("argument '{name}' must be a number"))?;
                if !(min..=max).contains(&number) {
                    return Err(format!("argument '{name}' must be between {min} and {max}"));
                }
                Ok(Some(number))
            }
        }
    }
}

/// A small deterministic number from a string, for realistic but reproducible figures.
pub(crate) fn fingerprint(text: &str) -> u64 {
    // FNV-1a: stable across runs and platforms, unlike the std hasher.
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `1234567` → `1,234,567`.
pub(crate) fn thousands(number: u64) -> String {
    let digits = number.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules a conforming client applies to `x-mcp-header` (a violating tool would be
    /// dropped from its tool list).
    fn header_annotation_is_valid(schema: &Value, param: &HeaderParam) -> bool {
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        let mut node = schema;
        for key in &param.path {
            match node.get("properties").and_then(|p| p.get(key)) {
                Some(next) => node = next,
                None => return false,
            }
        }
        !param.header.is_empty()
            && param.header.chars().all(token)
            && matches!(
                node.get("type").and_then(Value::as_str),
                Some("string" | "integer" | "boolean")
            )
    }

    #[test]
    fn catalog_is_well_formed() {
        let catalog = Catalog::new();
        assert_eq!(
            catalog.by_name.len(),
            catalog.entries.len(),
            "names are unique"
        );
        for entry in &catalog.entries {
            let definition = &entry.definition;
            assert_eq!(
                definition.input_schema.get("type"),
                Some(&json!("object")),
                "{} inputSchema must be an object schema",
                definition.name
            );
            let mut seen = std::collections::HashSet::new();
            for param in &entry.header_params {
                assert!(
                    header_annotation_is_valid(&definition.input_schema, param),
                    "{}: invalid x-mcp-header {param:?}",
                    definition.name
                );
                assert!(
                    seen.insert(param.header.to_ascii_lowercase()),
                    "{}: duplicate x-mcp-header",
                    definition.name
                );
            }
        }
    }

    #[test]
    fn generic_probes_find_friendly_tools_first() {
        let catalog = Catalog::new();
        let first = &catalog.entries[0].definition;
        assert_eq!(first.name, "get_time");
        assert_eq!(first.tasks, TaskSupport::Forbidden);
        let first_with_header = catalog
            .entries
            .iter()
            .find(|entry| !entry.header_params.is_empty())
            .map(|entry| &entry.definition);
        assert_eq!(first_with_header.map(|d| d.name), Some("echo"));
        assert_eq!(
            first_with_header.map(|d| d.tasks),
            Some(TaskSupport::Forbidden)
        );
    }

    #[test]
    fn every_conformance_fixture_is_listed() {
        let catalog = Catalog::new();
        for name in [
            "greet",
            "slow_compute",
            "failing_job",
            "protocol_error_job",
            "confirm_delete",
            "multi_input",
            "test_tool_with_task",
        ] {
            assert!(catalog.get(name).is_some(), "{name} missing");
        }
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(fingerprint("acme/web"), fingerprint("acme/web"));
        assert_ne!(fingerprint("acme/web"), fingerprint("acme/api"));
    }
}
