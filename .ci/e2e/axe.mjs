// The accessibility checker's counts per view (numbers, no assertions): axe-core injected through
// WebDriver into the real window, in every view empty and then with data (a server, tasks, a
// question, an answer in the audit log). Prints one line per view; the E2E (e2e.mjs) asserts
// 0 critical and 0 serious in the same views. Run by .ci/e2e/axe.sh inside a private session.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_CLI (absolute paths), AXE_WORK (scratch dir).
import assert from "node:assert/strict";
import { join } from "node:path";
import { App, sleep, startServer, until } from "./wd.mjs";

const app = process.env.COUNTERSIGN_APP;
const cli = process.env.COUNTERSIGN_CLI;
const work = process.env.AXE_WORK;
assert.ok(app && cli && work, "run .ci/e2e/axe.sh");

const demo = await startServer(cli, ["demo-server", "--port", "0", "--speed", "10", "--poll-interval-ms", "200"]);
process.on("exit", () => demo.proc.kill());
const ui = await App.launch(app, ["--data-dir", join(work, "ledger")]);
const rows = [];
async function check(name, hash, ready) {
  if (hash) await ui.go(hash);
  if (ready) await until(`${name} ready`, ready, 20000);
  await sleep(500);
  const r = await ui.axe();
  rows.push({ name, ...r });
  console.log(`${name.padEnd(22)} critical ${r.critical}  serious ${r.serious}  moderate ${r.moderate}  minor ${r.minor}`);
  for (const rule of r.rules) console.log(`    ${rule}`);
}
try {
  for (const [name, hash] of [["inbox (empty)", "#/inbox"], ["tasks (empty)", "#/tasks"], ["servers (empty)", "#/servers"], ["call (empty)", "#/call"], ["audit (empty)", "#/audit"]]) {
    await check(name, hash);
  }
  await ui.go("#/servers");
  await ui.type('[data-testid="server-add"] input[name="name"]', "demo");
  await ui.type('[data-testid="server-add"] input[name="url"]', demo.url);
  await ui.click('[data-testid="server-add"] button[type="submit"]');
  await until("the server listed", () => ui.exists('article.server[data-server="demo"]'), 20000);
  await ui.go("#/call");
  await until("the call view", () => ui.exists('[data-testid="call-server"]'));
  await ui.choose('[data-testid="call-server"]', "demo");
  await until("tools", () => ui.js(`return document.querySelector('[data-testid="call-tool"]').options.length > 1;`));
  await ui.choose('[data-testid="call-tool"]', "deploy_service");
  await until("the argument form", () => ui.exists('[data-testid="args-form"]'));
  await check("call (form)", "#/call");
  await ui.type("#f-service", "billing-api");
  if (await ui.exists('[data-field="environment"] input[value="staging"]')) await ui.click('[data-field="environment"] input[value="staging"]');
  await ui.click('[data-testid="args-form"] button[type="submit"]');
  await until("the task handle", () => ui.exists('[data-testid="call-task-link"]'), 20000);
  await check("inbox (question)", "#/inbox", () => ui.exists(".inbox-item"));
  await check("tasks (data)", "#/tasks", () => ui.exists(".task-row"));
  await ui.click(".task-row");
  await check("task detail", null, () => ui.exists('[data-testid="task-status"]'));
  await check("servers (data)", "#/servers");
  await check("audit (data)", "#/audit");
} finally {
  await ui.quit();
  demo.proc.kill();
}
