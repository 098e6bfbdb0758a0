// A stdio server added from the window (run by .ci/e2e/run.sh through tauri-driver, inside
// .ci/with-session.sh): the Add server form's Command choice with a quoted command line, a plain
// and a secret variable; the real server-everything on stdio answers the check, and its card
// shows the command as it runs, the variables (the secret one as in the keyring) and its process
// as the resident tells it. The secret value is in neither the page nor the ledger's files. The
// page with the form open is checked with axe-core.
//
// Env: COUNTERSIGN_APP, E2E_WORK, SCREENSHOTS; E2E_CI_TOOLS (the Node tools of
// .ci/setup-tools.sh: server-everything and the pinned node).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { App, until, stepper } from "./wd.mjs";

const app = process.env.COUNTERSIGN_APP;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
const tools = process.env.E2E_CI_TOOLS;
for (const [k, v] of Object.entries({ COUNTERSIGN_APP: app, E2E_WORK: work, SCREENSHOTS: shots, E2E_CI_TOOLS: tools })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/run.sh)`);
}
mkdirSync(shots, { recursive: true });
const script = join(tools, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
assert.ok(existsSync(script), `server-everything is not installed at ${script}: run .ci/setup-tools.sh`);
const pinned = join(tools, "node_modules/.bin/node");
const node = existsSync(pinned) ? pinned : "node";
const dataDir = join(work, "stdio-ledger");
const secret = `sk-e2e-stdio-${process.pid}-never-shown`;

const step = stepper(join(shots, "stdio-failure.png"));
const ui = await App.launch(app, ["--data-dir", dataDir]);

/** Sets an input's value as typing would (Svelte's bind listens to `input`). */
async function fill(css, value) {
  await ui.js(
    `const el = document.querySelector(arguments[0]);
     el.value = arguments[1];
     el.dispatchEvent(new Event("input", { bubbles: true }));
     return true;`,
    css,
    value,
  );
}

const card = '[data-server="everything"]';

await step("the Command choice shows how a quoted command line will run", async () => {
  await ui.go("#/servers");
  await ui.click('[data-testid="kind-command"]');
  await until("the Command form", () => ui.exists('[data-testid="server-add-stdio"]'));
  await fill('[data-testid="server-add-stdio"] input[name="name"]', "everything");
  // The last argument quoted, as a person would type a word with a space.
  await fill('[data-testid="server-add-stdio"] input[name="command"]', `${node} ${script} 'stdio'`);
  assert.equal(await ui.text('[data-testid="stdio-preview"]'), `${node} ${script} stdio`, "the line as it will run");
  await ui.click('[data-testid="add-env"]');
  await fill('[data-testid="server-add-stdio"] input[aria-label="Name"]', "EVERYTHING_MODE");
  await fill('[data-testid="server-add-stdio"] input[aria-label="Value of EVERYTHING_MODE"]', "plain");
  await ui.click('[data-testid="add-secret"]');
  await fill('[data-testid="server-add-stdio"] input[aria-label="Secret name"]', "EVERYTHING_API_KEY");
  await fill('[data-testid="server-add-stdio"] input[aria-label="Secret value of EVERYTHING_API_KEY"]', secret);
  const r = await ui.axe();
  assert.equal(r.critical + r.serious, 0, `axe in #/servers (Command form): ${r.rules.join("; ")}`);
  await ui.shot(join(shots, "servers-command-form.png"));
});

await step("Add server starts it, asks what it is, and its card shows what runs and the resident's process", async () => {
  await ui.click('[data-testid="server-add-stdio"] button[type="submit"]');
  await until("the stdio server's card", () => ui.exists(`${card} [data-testid="stdio-command"]`), 30000);
  assert.equal(await ui.text(`${card} [data-testid="stdio-command"]`), `${node} ${script} stdio`);
  const env = await ui.text(`${card} [data-testid="stdio-env"]`);
  assert.match(env, /EVERYTHING_MODE/);
  assert.match(env, /EVERYTHING_API_KEY \(in the OS keyring\)/);
  // The window runs no engine: this line comes from the resident, over its control socket.
  const proc = await until("the process from the resident", async () => {
    const t = await ui.text(`${card} [data-testid="stdio-process"]`);
    return /not started · starts when needed/.test(t) && t;
  });
  assert.match(proc, /started 0 times/);
  const html = await ui.js(`return document.documentElement.outerHTML;`);
  assert.ok(!html.includes(secret), "the secret value is nowhere on the page");
  const inputs = await ui.js(`return [...document.querySelectorAll("input")].map((i) => i.value).join("|");`);
  assert.ok(!inputs.includes(secret), "no field holds the secret value after the add");
  for (const file of ["ledger.sqlite3", "ledger.sqlite3-wal"]) {
    const path = join(dataDir, file);
    if (existsSync(path)) assert.ok(!readFileSync(path).includes(secret), `the secret value is not in ${file}`);
  }
  await ui.shot(join(shots, "servers-stdio.png"));
});

await ui.quit();
