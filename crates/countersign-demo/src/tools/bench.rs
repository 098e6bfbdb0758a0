//! `bench_job`: the benchmark's workload, with exact (unscaled) timing.

use std::time::Duration;

use serde_json::json;

use super::{Call, Definition, Invocation, TaskSupport, Tool};
use crate::error::Result;
use crate::tasks::{Script, Step};
use crate::wire::ToolResult;

/// `bench_job {duration_ms, steps?}`: `working` for exactly `duration_ms`, then `completed`.
pub(crate) struct BenchJob;

impl Tool for BenchJob {
    fn definition(&self) -> Definition {
        Definition {
            name: "bench_job",
            title: "Benchmark job",
            description: "For benchmarks: a task that stays working for exactly duration_ms (not affected by the \
                          server's time scale) and then completes. With steps > 1 its status message also changes \
                          steps - 1 times at even intervals, giving more server-side changes to observe.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "duration_ms": {"type": "integer", "minimum": 0, "maximum": 86_400_000},
                    "steps": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1}
                },
                "required": ["duration_ms"]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {"durationMs": {"type": "integer"}, "steps": {"type": "integer"}},
                "required": ["durationMs", "steps"]
            })),
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Required,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let args = (|| {
            let duration_ms = call
                .args
                .integer_opt("duration_ms", (0, 86_400_000))?
                .ok_or_else(|| "argument 'duration_ms' is required".to_owned())?;
            let steps = call.args.integer_opt("steps", (1, 1000))?.unwrap_or(1);
            Ok::<_, String>((duration_ms.unsigned_abs(), steps.unsigned_abs()))
        })();
        let (duration_ms, steps) = match args {
            Ok(args) => args,
            Err(message) => return Ok(Invocation::Complete(ToolResult::error(message))),
        };
        // Split the duration so that the slices add up exactly to duration_ms (in µs).
        let total_us = duration_ms * 1000;
        let mut plan: Vec<Step> = (0..steps)
            .map(|index| {
                let slice = total_us * (index + 1) / steps - total_us * index / steps;
                Step::work_exact(
                    Duration::from_micros(slice),
                    (steps > 1).then(|| format!("step {}/{steps}", index + 1)),
                )
            })
            .collect();
        plan.push(Step::complete(
            ToolResult::text(format!("bench_job finished after {duration_ms} ms"))
                .with_structured(json!({"durationMs": duration_ms, "steps": steps})),
            "done",
        ));
        Ok(Invocation::task(Script::new(plan)))
    }
}
