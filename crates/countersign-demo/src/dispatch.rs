//! Method routing, once the transport has validated the envelope and headers.

use rand::RngCore;
use serde_json::{json, Map, Value};

use crate::app::App;
use crate::elicitation::{Answer, Answers};
use crate::error::{Error, Result};
use crate::request_state::{args_digest, RequestState, STATE_LIFETIME_SECS};
use crate::subscriptions::{self, Subscription};
use crate::tools::{Args, Call, Definition, InputNeed, Invocation, Resume, SyncRun, TaskSupport};
use crate::wire::{
    ack, ClientCaps, RequestMeta, RpcRequest, META_SERVER_INFO, PROTOCOL_VERSION, SERVER_NAME,
    SERVER_VERSION, TASKS_EXTENSION,
};

/// Methods this server implements (and `subscriptions/listen` unless push is off). Everything
/// else is -32601 (HTTP 404), including the removed `tasks/list` and `tasks/result` and the
/// legacy `initialize`.
const METHODS: [&str; 6] = [
    "server/discover",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

pub(crate) const INSTRUCTIONS: &str = "Countersign demo server. Long-running tools (run_ci_pipeline, deploy_service, \
batch_export, flaky_migration, lint_repository, provision_account, bench_job) run as tasks when the request \
declares the io.modelcontextprotocol/tasks extension: poll tasks/get, answer inputRequests with tasks/update, \
stop with tasks/cancel. deploy_service and provision_account ask questions mid-flight; connect_github asks the \
user to open a URL. get_time, echo and greet answer at once.";

/// The push method, served only when [`DemoConfig::push`](crate::DemoConfig::push) is on.
const LISTEN: &str = "subscriptions/listen";

pub(crate) fn is_known(app: &App, method: &str) -> bool {
    METHODS.contains(&method) || (method == LISTEN && app.config.push)
}

/// The body value the `Mcp-Name` header must mirror, for methods that have one.
pub(crate) fn routing_name<'a>(
    method: &str,
    params: Option<&'a Map<String, Value>>,
) -> Result<Option<&'a str>> {
    let field = match method {
        "tools/call" => "name",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return Ok(None),
    };
    params
        .and_then(|params| params.get(field))
        .and_then(Value::as_str)
        .map(Some)
        .ok_or_else(|| Error::invalid_params(format!("params.{field} must be a string")))
}

/// A successful outcome.
pub(crate) enum Reply {
    /// The `result` of the response.
    Result(Value),
    /// A synchronous tool run the transport paces (and streams) before the result.
    Sync(SyncRun),
    /// An open `subscriptions/listen` stream.
    Listen(Subscription),
}

pub(crate) fn dispatch(app: &App, request: &RpcRequest, meta: &RequestMeta) -> Result<Reply> {
    let params = request.params.as_ref();
    match request.method.as_str() {
        "server/discover" => Ok(Reply::Result(discover())),
        "tools/list" => Ok(Reply::Result(app.catalog.list().clone())),
        "tools/call" => call_tool(app, params, meta),
        "tasks/get" => {
            let task_id = task_id(params, meta)?;
            let task = app.store.get(task_id)?;
            app.poll_gaps.polled(task_id);
            Ok(Reply::Result(task))
        }
        "tasks/update" => {
            let task_id = task_id(params, meta)?;
            let responses = params
                .and_then(|params| params.get("inputResponses"))
                .and_then(Value::as_object)
                .ok_or_else(|| Error::invalid_params("params.inputResponses must be an object"))?;
            app.store.update(task_id, responses)?;
            app.hub.touched(task_id);
            Ok(Reply::Result(ack()))
        }
        "tasks/cancel" => {
            let task_id = task_id(params, meta)?;
            app.store.cancel(task_id)?;
            app.hub.touched(task_id);
            Ok(Reply::Result(ack()))
        }
        LISTEN if app.config.push => subscriptions::listen(
            &app.hub,
            |task| app.store.contains(task),
            &request.id,
            params,
            meta.caps.tasks,
        )
        .map(Reply::Listen),
        other => Err(Error::MethodNotFound {
            method: other.to_owned(),
        }),
    }
}

fn discover() -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": [PROTOCOL_VERSION],
        "capabilities": {
            "tools": {"listChanged": false},
            "logging": {},
            "extensions": {TASKS_EXTENSION: {}},
        },
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {META_SERVER_INFO: {"name": SERVER_NAME, "version": SERVER_VERSION}},
    })
}

fn tasks_required() -> Value {
    json!({"extensions": {TASKS_EXTENSION: {}}})
}

/// Gate of every `tasks/*` method, then the `taskId` parameter.
fn task_id<'a>(params: Option<&'a Map<String, Value>>, meta: &RequestMeta) -> Result<&'a str> {
    if !meta.caps.tasks {
        return Err(Error::MissingCapability {
            detail: format!(
                "this request targets the tasks extension ({TASKS_EXTENSION}); the client did not declare it \
                 for this request"
            ),
            required: tasks_required(),
        });
    }
    params
        .and_then(|params| params.get("taskId"))
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid_params("params.taskId must be a string"))
}

/// The capabilities a call of this tool needs and the request did not declare.
fn missing_capabilities(definition: &Definition, caps: ClientCaps) -> Option<Error> {
    let mut required = Map::new();
    let mut reasons = Vec::new();
    if definition.tasks == TaskSupport::Required && !caps.tasks {
        required.insert("extensions".into(), json!({TASKS_EXTENSION: {}}));
        reasons.push(format!("runs only as a task ({TASKS_EXTENSION})"));
    }
    match definition.input {
        Some(InputNeed::Form) if !caps.elicitation_form => {
            required.insert("elicitation".into(), json!({"form": {}}));
            reasons.push("asks questions through form elicitation".to_owned());
        }
        Some(InputNeed::Url) if !caps.elicitation_url => {
            required.insert("elicitation".into(), json!({"url": {}}));
            reasons.push("asks the user to open a URL (URL-mode elicitation)".to_owned());
        }
        Some(InputNeed::Sampling) if !caps.sampling => {
            required.insert("sampling".into(), json!({}));
            reasons.push("asks the client's model for a completion (sampling)".to_owned());
        }
        _ => {}
    }
    (!required.is_empty()).then(|| Error::MissingCapability {
        detail: format!(
            "tool '{}' {}; the client did not declare that for this request",
            definition.name,
            reasons.join(" and ")
        ),
        required: Value::Object(required),
    })
}

fn call_tool(app: &App, params: Option<&Map<String, Value>>, meta: &RequestMeta) -> Result<Reply> {
    let empty = Map::new();
    let params = params.unwrap_or(&empty);
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid_params("params.name must be a string"))?;
    let entry = app
        .catalog
        .get(name)
        .ok_or_else(|| Error::invalid_params(format!("Unknown tool: {name}")))?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(args)) => args,
        Some(_) => return Err(Error::invalid_params("params.arguments must be an object")),
    };
    if let Some(error) = missing_capabilities(&entry.definition, meta.caps) {
        return Err(error);
    }
    let now = app.clock.now();
    let resume = resume(app, name, args, params, now.wall.unix_timestamp())?;
    let previous_round = resume.as_ref().map_or(0, |resume| resume.round);
    let call = Call {
        args: Args::new(args),
        caps: meta.caps,
        resume,
        call_id: short_id(),
        now: now.wall,
    };
    match entry.tool.invoke(&call)? {
        Invocation::Complete(result) => Ok(Reply::Result(
            serde_json::to_value(result).map_err(|error| Error::internal(error.to_string()))?,
        )),
        Invocation::Sync(run) => Ok(Reply::Sync(run)),
        Invocation::InputRequired(asks) => {
            let state = RequestState {
                tool: name.to_owned(),
                args: args_digest(args),
                round: previous_round + 1,
                asked: asks.iter().map(|(key, _)| key.clone()).collect(),
                exp: now.wall.unix_timestamp() + STATE_LIFETIME_SECS,
            };
            let requests: Map<String, Value> = asks
                .iter()
                .map(|(key, ask)| (key.clone(), ask.to_request()))
                .collect();
            Ok(Reply::Result(json!({
                "resultType": "input_required",
                "inputRequests": requests,
                "requestState": app.sealer.seal(&state),
            })))
        }
        Invocation::Task(program) if meta.caps.tasks => {
            let created = app.store.create(program);
            app.poll_gaps.created(&created);
            Ok(Reply::Result(created))
        }
        Invocation::Task(_) => Err(Error::internal(format!(
            "tool '{name}' tried to create a task for a client without the tasks extension"
        ))),
    }
}

/// Verifies an MRTR re-send: the `requestState` must open for this tool and these arguments,
/// and the responses to the keys it asked must be well-formed `ElicitResult`s. Without a
/// `requestState` the call is a fresh one and any `inputResponses` are ignored.
fn resume(
    app: &App,
    tool: &str,
    args: &Map<String, Value>,
    params: &Map<String, Value>,
    now_unix: i64,
) -> Result<Option<Resume>> {
    let responses = match params.get("inputResponses") {
        None => None,
        Some(Value::Object(responses)) => Some(responses),
        Some(_) => {
            return Err(Error::invalid_params(
                "params.inputResponses must be an object",
            ))
        }
    };
    let token = match params.get("requestState") {
        None => return Ok(None),
        Some(Value::String(token)) => token,
        Some(_) => {
            return Err(Error::invalid_params(
                "params.requestState must be a string",
            ))
        }
    };
    let state = app
        .sealer
        .open(token, tool, args, now_unix)
        .map_err(|error| Error::invalid_params(error.to_string()))?;
    let mut answers = Answers::new();
    for key in &state.asked {
        let Some(raw) = responses.and_then(|responses| responses.get(key)) else {
            continue;
        };
        let answer = Answer::parse(raw).map_err(|detail| {
            Error::invalid_params(format!("inputResponses[{key:?}]: {detail}"))
        })?;
        answers.insert(key.clone(), answer);
    }
    Ok(Some(Resume {
        round: state.round,
        answers,
    }))
}

pub(crate) fn short_id() -> String {
    let mut bytes = [0u8; 4];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
