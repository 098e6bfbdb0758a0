// The official TypeScript SDK's client (@modelcontextprotocol/sdk 1.32.2, pinned in
// .ci/tools/package.json) against the demo server's 2025-11-25 era: initialize, tools/list, a
// plain call, a task polled to its result (callToolStream), and a task whose question arrives on
// tasks/result and is accepted by the client's elicitation handler.
//
//   node ts_sdk_client.mjs URL
//
// The SDK is loaded from $COUNTERSIGN_CI_TOOLS (default: <repo>/.ci/tools, installed by
// .ci/setup-tools.sh). Prints one JSON line with what it saw, or {"error"} (exit 2).
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [url] = process.argv.slice(2);
if (!url) {
  console.error("usage: ts_sdk_client.mjs URL");
  process.exit(64);
}
const tools = process.env.COUNTERSIGN_CI_TOOLS || resolve(dirname(fileURLToPath(import.meta.url)), "../../../../.ci/tools");
const require = createRequire(join(tools, "package.json"));
const load = (spec) => import(pathToFileURL(require.resolve(spec)).href);
const { Client } = await load("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = await load("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ElicitRequestSchema } = await load("@modelcontextprotocol/sdk/types.js");

const textOf = (result) => (result?.content ?? []).map((b) => b.text ?? "").join(" ");

async function drain(stream) {
  const seen = { statuses: [], text: null, error: null };
  for await (const message of stream) {
    if (message.type === "taskCreated" || message.type === "taskStatus") seen.statuses.push(message.task.status);
    if (message.type === "result") seen.text = textOf(message.result);
    if (message.type === "error") seen.error = String(message.error?.message ?? message.error);
  }
  return seen;
}

const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "countersign-demo-test-ts", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const questions = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  questions.push(request.params.message);
  return { action: "accept", content: { confirm: true } };
});
try {
  await client.connect(transport);
  const listed = await client.listTools();
  const benchSupport = listed.tools.find((t) => t.name === "bench_job")?.execution?.taskSupport ?? null;
  const greeting = textOf(await client.callTool({ name: "greet", arguments: { name: "SDK" } }));
  const bench = await drain(
    client.experimental.tasks.callToolStream({ name: "bench_job", arguments: { duration_ms: 20 } }, undefined, { task: { ttl: 60000 } }),
  );
  const confirm = await drain(
    client.experimental.tasks.callToolStream({ name: "confirm_delete", arguments: { filename: "a.txt" } }, undefined, { task: { ttl: 60000 } }),
  );
  console.log(
    JSON.stringify({
      protocolVersion: transport.protocolVersion,
      sessionId: Boolean(transport.sessionId),
      serverName: client.getServerVersion()?.name,
      tasksCapability: client.getServerCapabilities()?.tasks ?? null,
      benchSupport,
      greeting,
      bench,
      confirm,
      questions,
    }),
  );
  await transport.terminateSession();
  await client.close();
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.stack ?? error) }));
  process.exit(2);
}
