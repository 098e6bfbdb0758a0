//! The typed calls: each method's params built, its result read into the wire types.

use super::*;

/// The arguments of one `tools/call`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Option<Map<String, Value>>,
    /// MRTR: answers to the `inputRequests` of the previous attempt.
    pub input_responses: Option<Map<String, Value>>,
    /// MRTR: the `requestState` of the previous attempt, echoed unchanged.
    pub request_state: Option<String>,
}

impl ToolCall {
    /// A first attempt with these arguments.
    pub fn new(name: impl Into<String>, arguments: Option<Map<String, Value>>) -> Self {
        Self {
            name: name.into(),
            arguments,
            ..Self::default()
        }
    }

    /// The retry that answers an MRTR `input_required`: same name and arguments, the answers,
    /// and the server's state byte-for-byte (or none if it sent none).
    pub fn retry_with(&self, answered: &InputRequired, responses: Map<String, Value>) -> Self {
        Self {
            name: self.name.clone(),
            arguments: self.arguments.clone(),
            input_responses: Some(responses),
            request_state: answered.request_state.clone(),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct ToolHeaders {
    pub(super) params: HashMap<String, Vec<HeaderParam>>,
    pub(super) excluded: HashMap<String, String>,
}

impl Client {
    /// `server/discover`: versions, capabilities, instructions and identity.
    pub async fn discover(&self) -> Result<Discovery> {
        let result = self
            .request("server/discover", Map::new(), None, Vec::new())
            .await?;
        reject_task_handle("server/discover", &result)?;
        Discovery::parse(&result).map_err(|reason| invalid("server/discover", reason))
    }

    /// `tools/list`, all pages. Tools with invalid `x-mcp-header` annotations are excluded (and
    /// logged); the result says which and why.
    pub async fn list_tools(&self) -> Result<ToolList> {
        const MAX_PAGES: usize = 1000;
        let mut list = ToolList::default();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut params = Map::new();
            if let Some(c) = &cursor {
                params.insert("cursor".into(), Value::String(c.clone()));
            }
            let result = self.request("tools/list", params, None, Vec::new()).await?;
            reject_task_handle("tools/list", &result)?;
            let tools = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("tools/list", "the result has no `tools` array"))?;
            for tool in tools {
                match parse_tool(tool) {
                    Ok(tool) => list.tools.push(tool),
                    Err(excluded) => {
                        tracing::warn!(tool = %excluded.name, reason = %excluded.reason, "excluding tool");
                        list.excluded.push(excluded);
                    }
                }
            }
            cursor = match result.get("nextCursor") {
                Some(Value::String(c)) if !c.is_empty() => Some(c.clone()),
                _ => None,
            };
            if cursor.is_none() {
                break;
            }
        }
        if let Ok(mut cache) = self.inner.tools.write() {
            for tool in &list.tools {
                cache.excluded.remove(&tool.name);
                cache
                    .params
                    .insert(tool.name.clone(), tool.header_params.clone());
            }
            for tool in &list.excluded {
                cache.params.remove(&tool.name);
                cache
                    .excluded
                    .insert(tool.name.clone(), tool.reason.clone());
            }
        }
        Ok(list)
    }

    /// `tools/call`: a result, an MRTR question, or a task handle. Arguments declared with
    /// `x-mcp-header` (as learnt from the last `tools/list`) are mirrored into headers.
    pub async fn call_tool(&self, call: &ToolCall) -> Result<CallOutcome> {
        let header_params = {
            let cache = self
                .inner
                .tools
                .read()
                .map_err(|_| Error::InvalidRequest("tool cache poisoned".into()))?;
            if let Some(reason) = cache.excluded.get(&call.name) {
                return Err(Error::InvalidRequest(format!(
                    "tool {:?} was excluded: {reason}",
                    call.name
                )));
            }
            cache.params.get(&call.name).cloned().unwrap_or_default()
        };
        let mut params = Map::new();
        params.insert("name".into(), Value::String(call.name.clone()));
        if let Some(arguments) = &call.arguments {
            params.insert("arguments".into(), Value::Object(arguments.clone()));
        }
        if let Some(responses) = &call.input_responses {
            params.insert("inputResponses".into(), Value::Object(responses.clone()));
        }
        if let Some(state) = &call.request_state {
            params.insert("requestState".into(), Value::String(state.clone()));
        }
        let extra = param_headers(&header_params, call.arguments.as_ref());
        let result = self
            .request("tools/call", params, Some(&call.name), extra)
            .await?;
        interpret_call_result(&result).map_err(|reason| invalid("tools/call", reason))
    }

    /// `resources/list` (first page), verbatim.
    pub async fn list_resources(&self) -> Result<Value> {
        self.plain_request("resources/list", Map::new(), None).await
    }

    /// `resources/read` of one URI, verbatim (`Mcp-Name` carries the URI).
    pub async fn read_resource(&self, uri: &str) -> Result<Value> {
        let mut params = Map::new();
        params.insert("uri".into(), Value::String(uri.into()));
        self.plain_request("resources/read", params, Some(uri))
            .await
    }

    /// `prompts/list` (first page), verbatim.
    pub async fn list_prompts(&self) -> Result<Value> {
        self.plain_request("prompts/list", Map::new(), None).await
    }

    /// `prompts/get` with arguments, verbatim (`Mcp-Name` carries the prompt name).
    pub async fn get_prompt(&self, name: &str, arguments: Map<String, Value>) -> Result<Value> {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.into()));
        params.insert("arguments".into(), Value::Object(arguments));
        self.plain_request("prompts/get", params, Some(name)).await
    }

    async fn plain_request(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
    ) -> Result<Value> {
        let result = self.request(method, params, name, Vec::new()).await?;
        reject_task_handle(method, &result)?;
        Ok(result)
    }

    /// `tasks/get`: the task's current state with its payload.
    pub async fn get_task(&self, task_id: &str) -> Result<Task> {
        let result = self.task_request("tasks/get", task_id, Map::new()).await?;
        interpret_task_result(task_id, &result).map_err(|reason| invalid("tasks/get", reason))
    }

    /// `tasks/update`: delivers answers keyed by input-request key.
    pub async fn update_task(&self, task_id: &str, responses: Map<String, Value>) -> Result<()> {
        let mut params = Map::new();
        params.insert("inputResponses".into(), Value::Object(responses));
        let result = self.task_request("tasks/update", task_id, params).await?;
        expect_ack("tasks/update", &result)
    }

    /// `tasks/cancel`: asks the server to stop (cooperative: the task may still complete).
    pub async fn cancel_task(&self, task_id: &str) -> Result<()> {
        let result = self
            .task_request("tasks/cancel", task_id, Map::new())
            .await?;
        expect_ack("tasks/cancel", &result)
    }

    async fn task_request(
        &self,
        method: &str,
        task_id: &str,
        mut params: Map<String, Value>,
    ) -> Result<Value> {
        params.insert("taskId".into(), Value::String(task_id.into()));
        self.request(method, params, Some(task_id), Vec::new())
            .await
    }
}

fn reject_task_handle(method: &str, result: &Value) -> Result<()> {
    if !result.is_object() {
        return Err(invalid(method, "the result must be an object"));
    }
    match result_type(result).map_err(|r| invalid(method, r))? {
        "task" => Err(invalid(
            method,
            format!("a task handle in answer to {method}, which cannot create tasks"),
        )),
        _ => Ok(()),
    }
}

fn expect_ack(method: &str, result: &Value) -> Result<()> {
    reject_task_handle(method, result)?;
    match result_type(result).map_err(|r| invalid(method, r))? {
        "complete" => Ok(()),
        other => Err(invalid(method, format!("unexpected resultType {other:?}"))),
    }
}

fn parse_tool(value: &Value) -> std::result::Result<Tool, ExcludedTool> {
    let Some(definition) = value.as_object() else {
        return Err(ExcludedTool {
            name: String::new(),
            reason: "a tool definition must be an object".into(),
        });
    };
    let name = match definition.get("name") {
        Some(Value::String(n)) if !n.is_empty() => n.clone(),
        _ => {
            return Err(ExcludedTool {
                name: String::new(),
                reason: "a tool must have a non-empty string `name`".into(),
            })
        }
    };
    match header_params(definition.get("inputSchema")) {
        Ok(header_params) => Ok(Tool {
            name,
            definition: definition.clone(),
            header_params,
        }),
        Err(reason) => Err(ExcludedTool { name, reason }),
    }
}
