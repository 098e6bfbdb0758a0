//! Synchronous everyday tools: `get_time` and `echo`.

use serde_json::json;
use time::format_description::well_known::Rfc3339;

use super::{Call, Definition, Invocation, TaskSupport, Tool};
use crate::error::Result;
use crate::wire::ToolResult;

/// `get_time {format?}`: the server's current time.
pub(crate) struct GetTime;

impl Tool for GetTime {
    fn definition(&self) -> Definition {
        Definition {
            name: "get_time",
            title: "Get time",
            description:
                "Returns the server's current time (UTC). Answers immediately; never a task.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "format": {
                        "type": "string",
                        "enum": ["rfc3339", "unix_ms"],
                        "default": "rfc3339",
                        "description": "rfc3339 (2026-12-02T09:36:05Z) or milliseconds since the Unix epoch"
                    }
                }
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "now": {"type": "string", "description": "RFC 3339 timestamp (UTC)"},
                    "unixMs": {"type": "integer"}
                },
                "required": ["now", "unixMs"]
            })),
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Forbidden,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let format = match call.args.choice("format", &["rfc3339", "unix_ms"]) {
            Ok(format) => format.unwrap_or("rfc3339"),
            Err(message) => return Ok(Invocation::Complete(ToolResult::error(message))),
        };
        let now = call.now;
        let rfc3339 = now.format(&Rfc3339).unwrap_or_else(|_| now.to_string());
        let unix_ms = i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX);
        let text = if format == "unix_ms" {
            unix_ms.to_string()
        } else {
            rfc3339.clone()
        };
        Ok(Invocation::Complete(
            ToolResult::text(text).with_structured(json!({"now": rfc3339, "unixMs": unix_ms})),
        ))
    }
}

/// `echo {text, region?}`: sends the text back. `region` is mirrored into `Mcp-Param-Region`.
pub(crate) struct Echo;

impl Tool for Echo {
    fn definition(&self) -> Definition {
        Definition {
            name: "echo",
            title: "Echo",
            description: "Sends `text` back unchanged. `region` names the region that should serve the call; \
                          clients mirror it into the Mcp-Param-Region HTTP header (x-mcp-header) so a gateway \
                          can route on it without reading the body, and the server checks that both agree.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Text to send back", "maxLength": 10000},
                    "region": {
                        "type": "string",
                        "description": "Region that should serve the call, e.g. eu-west-1",
                        "x-mcp-header": "Region"
                    }
                },
                "required": ["text"]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "region": {"type": "string"}
                },
                "required": ["text"]
            })),
            annotations: json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}),
            tasks: TaskSupport::Forbidden,
            input: None,
        }
    }

    fn invoke(&self, call: &Call<'_>) -> Result<Invocation> {
        let args = (|| Ok::<_, String>((call.args.text("text")?, call.args.text_opt("region")?)))();
        let (text, region) = match args {
            Ok(args) => args,
            Err(message) => return Ok(Invocation::Complete(ToolResult::error(message))),
        };
        let result = match region {
            Some(region) => ToolResult::text(format!("echo: {text} (served in {region})"))
                .with_structured(json!({"text": text, "region": region})),
            None => {
                ToolResult::text(format!("echo: {text}")).with_structured(json!({"text": text}))
            }
        };
        Ok(Invocation::Complete(result))
    }
}
