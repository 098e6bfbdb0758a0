// An agent that is not ours: the official MCP TypeScript SDK's client (@modelcontextprotocol/sdk,
// pinned in .ci/tools/package.json and its lock; the 2025-11-25 session protocol: `initialize`,
// `Mcp-Session-Id`, no tasks), calling one tool through the Countersign gateway with its bearer
// token, with the SDK's own request time-out (60 s unless --timeout says otherwise). With --list it
// lists the tools first, as agents do (the SDK then refuses by itself a tool listed as task-only).
//
//   node ts_session_agent.mjs URL TOKEN TOOL ARGS_JSON [--timeout SECONDS] [--list] [--task]
//
// With --task the client declares `tasks` and calls the tool as a 2025-11-25 task (SEP-1686, the
// SDK's `experimental.tasks.callToolStream`: `params.task`, then `tasks/get` and `tasks/result`):
// the output adds `taskId` and `statuses` (each status the SDK reported, in order).
//
// The SDK is loaded from $COUNTERSIGN_CI_TOOLS (default: <repo>/.ci/tools, installed by
// .ci/setup-tools.sh). Prints one JSON line: {"isError", "text", "meta", "protocolVersion",
// "sdkVersion", "tools"} for a result (`tools`: the names listed, with --list), or {"error"}
// (exit 2) when the call raised.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [url, token, tool, argsJson, ...rest] = process.argv.slice(2);
if (!url || !token || !tool || argsJson === undefined) {
  console.error("usage: ts_session_agent.mjs URL TOKEN TOOL ARGS_JSON [--timeout SECONDS] [--list]");
  process.exit(64);
}
const timeoutAt = rest.indexOf("--timeout");
const timeoutMs = timeoutAt >= 0 ? Number(rest[timeoutAt + 1]) * 1000 : undefined;
const list = rest.includes("--list");
const asTask = rest.includes("--task");

const tools = process.env.COUNTERSIGN_CI_TOOLS || resolve(dirname(fileURLToPath(import.meta.url)), "../../.ci/tools");
const require = createRequire(join(tools, "package.json"));
const load = (spec) => import(pathToFileURL(require.resolve(spec)).href);
const { Client } = await load("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = await load("@modelcontextprotocol/sdk/client/streamableHttp.js");
const sdkVersion = JSON.parse(readFileSync(join(tools, "node_modules/@modelcontextprotocol/sdk/package.json"), "utf8")).version;

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client(
  { name: "countersign-test-ts-agent", version: "1.0.0" },
  asTask ? { capabilities: { tasks: {} } } : undefined,
);
try {
  await client.connect(transport);
  const tools = list ? (await client.listTools()).tools.map((t) => t.name) : undefined;
  const options = timeoutMs ? { timeout: timeoutMs } : {};
  let result;
  let taskId;
  const statuses = [];
  if (asTask) {
    const stream = client.experimental.tasks.callToolStream(
      { name: tool, arguments: JSON.parse(argsJson) },
      undefined,
      { ...options, task: { ttl: 600000 } },
    );
    for await (const message of stream) {
      if (message.type === "taskCreated") taskId = message.task.taskId;
      else if (message.type === "taskStatus") statuses.push(message.task.status);
      else if (message.type === "result") result = message.result;
      else if (message.type === "error") throw message.error;
    }
  } else {
    result = await client.callTool({ name: tool, arguments: JSON.parse(argsJson) }, undefined, timeoutMs ? { timeout: timeoutMs } : undefined);
  }
  const text = (result.content ?? []).map((b) => b.text ?? "").join(" ");
  console.log(
    JSON.stringify({ isError: Boolean(result.isError), text, meta: result._meta ?? {}, protocolVersion: transport.protocolVersion, sdkVersion, tools, taskId, statuses }),
  );
  await client.close();
  process.exit(0);
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.message ?? e), sdkVersion }));
  process.exit(2);
}
