// The Settings page in a real window (run by .ci/e2e/run.sh through tauri-driver, inside
// .ci/with-session.sh): each setting changed in the page and its effect checked where it lands:
// a refused value is shown at its field; start at login writes and removes the desktop's
// autostart entry (~/.config/autostart/Countersign.desktop under the app's HOME); the
// do-not-disturb schedule holds a question's notification in the real daemon (none reaches the
// bus while the question fills the inbox) and one summary follows when it ends, asking for
// silence with the sound off; the poll floor is saved (the page and the CLI read it back); the
// gateway starts and stops live. The page is checked with axe-core.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_CLI, E2E_WORK, SCREENSHOTS; HOME of the app: E2E_HOME.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { App, NotificationLog, screenshot, sleep, startServer, until, stepper } from "./wd.mjs";

const app = process.env.COUNTERSIGN_APP;
const cli = process.env.COUNTERSIGN_CLI;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
const home = process.env.E2E_HOME;
for (const [k, v] of Object.entries({ COUNTERSIGN_APP: app, COUNTERSIGN_CLI: cli, E2E_WORK: work, SCREENSHOTS: shots, E2E_HOME: home })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/run.sh)`);
}
mkdirSync(shots, { recursive: true });
const dataDir = join(work, "settings-ledger");
const autostartFile = join(home, ".config/autostart/Countersign.desktop");

const step = stepper(join(shots, "settings-failure.png"));

const notifications = new NotificationLog();
// The demo server as its own process (`--demo` would run the demo's gateway, which overrides the
// gateway setting for the run).
const demo = await startServer(cli, ["demo-server", "--port", "0", "--speed", "10", "--poll-interval-ms", "200"]);
execFileSync(cli, ["--data-dir", dataDir, "servers", "add", "demo", demo.url]);
const ui = await App.launch(app, ["--data-dir", dataDir]);
process.on("exit", () => {
  notifications.stop();
  demo.proc.kill();
});

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
async function check(css, on) {
  const now = await ui.js(`return document.querySelector(arguments[0]).checked;`, css);
  if (now !== on) await ui.js(`document.querySelector(arguments[0]).click(); return true;`, css);
}
/** Successful saves so far (the page counts them on its status line). */
const saves = async () => Number(await ui.js(`return document.querySelector('[data-testid="settings-status"]').dataset.saves;`));
let before = 0;
async function save() {
  before = await saves();
  await ui.click('[data-testid="settings-save"]');
}
const saved = () => until("the settings saved", async () => (await saves()) > before, 10000);
const hhmm = (minutes) => {
  const d = new Date(Date.now() + minutes * 60000);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
};
const cliJson = (...args) => JSON.parse(execFileSync(cli, ["--data-dir", dataDir, "--json", ...args]).toString());

await step("the Settings page opens from the nav key and the accessibility checker finds nothing critical or serious", async () => {
  await ui.keys("7");
  await until("the Settings page", () => ui.exists('[data-testid="settings-form"]'), 10000);
  assert.equal(await ui.js(`return location.hash;`), "#/settings");
  const dir = await ui.js(`return document.querySelector('[data-testid="data-dir"]').value;`);
  assert.equal(dir, dataDir, "the data directory is shown");
  const r = await ui.axe();
  assert.equal(r.critical + r.serious, 0, `axe in #/settings: ${r.rules.join("; ")}`);
  await ui.shot(join(shots, "settings.png"));
});

await step("a poll floor under 250 ms is refused at its field; 5 s is saved and read back", async () => {
  await fill('[data-testid="set-poll-floor"]', "100");
  await save();
  const msg = await until("the field's error", async () => {
    const t = await ui.text("#poll-floor-msg");
    return /at least 250 ms/.test(t) && t;
  });
  assert.ok(msg);
  assert.equal(await ui.js(`return document.querySelector('[data-testid="set-poll-floor"]').getAttribute("aria-invalid");`), "true");
  assert.equal(cliJson("settings").pollFloorMs, 250, "nothing was saved");
  await fill('[data-testid="set-poll-floor"]', "5000");
  await save();
  await saved();
  assert.equal(cliJson("settings").pollFloorMs, 5000, "the CLI reads what the page saved");
  await ui.go("#/inbox");
  await ui.go("#/settings");
  await until("the page again", () => ui.exists('[data-testid="set-poll-floor"]'));
  await until("the saved floor shown", async () => (await ui.js(`return document.querySelector('[data-testid="set-poll-floor"]').value;`)) === "5000");
});

await step("start at login writes the desktop's autostart entry, and turning it off removes it", async () => {
  assert.ok(!existsSync(autostartFile), "no entry before it is asked for");
  await check('[data-testid="set-autostart"]', true);
  await save();
  await saved();
  await until("the autostart entry", () => existsSync(autostartFile), 5000);
  const entry = readFileSync(autostartFile, "utf8");
  // The resident starts at login (tray, engine, notifications; no window).
  const resident = process.env.COUNTERSIGN_RESIDENT;
  assert.match(entry, new RegExp(`^Exec=${resident.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} --background --data-dir \\S*settings-ledger`, "m"), entry);
  assert.match(await ui.text('[data-testid="autostart-state"]'), /starts Countersign at login/);
  await check('[data-testid="set-autostart"]', false);
  await save();
  await saved();
  await until("the entry removed", () => !existsSync(autostartFile), 5000);
  assert.match(await ui.text('[data-testid="autostart-state"]'), /does not start at login/);
});

await step("do-not-disturb on a schedule holds a question's notification; one silent summary follows when it ends", async () => {
  await check('[data-testid="set-sound"]', false);
  await check('[data-testid="set-dnd-enabled"]', true);
  await fill('[data-testid="set-dnd-from"]', hhmm(-60));
  await fill('[data-testid="set-dnd-to"]', hhmm(60));
  await save();
  await saved();
  await until("held now", () => ui.exists('[data-testid="dnd-active"]'), 5000);
  const mark = notifications.calls.length;
  execFileSync(cli, ["--data-dir", dataDir, "call", "demo", "deploy_service", JSON.stringify({ service: "held-by-dnd", environment: "staging" }), "--no-follow"]);
  await until("the question in the inbox", () => cliJson("inbox").some((q) => JSON.stringify(q).includes("held-by-dnd")), 30000);
  await sleep(3000);
  const during = notifications.calls.slice(mark).filter((c) => c.replacesId === 0);
  assert.deepEqual(during.map((c) => c.summary), [], "no new notification reaches the daemon while do-not-disturb holds them");
  // Ends (the schedule turned off in the page): one summary of what waits, without sound.
  await check('[data-testid="set-dnd-enabled"]', false);
  await save();
  await saved();
  const summary = await until("the summary notification", () => notifications.calls.slice(mark).find((c) => /new question/.test(c.summary)), 10000);
  assert.match(summary.summary, /\d+ new question/, summary.summary);
  assert.match(summary.raw, /suppress-sound/, "the sound setting is off: the daemon is asked for silence");
  assert.equal(notifications.calls.slice(mark).filter((c) => c.replacesId === 0).length, 1, "one summary, not one per question");
  assert.ok(!(await ui.exists('[data-testid="dnd-active"]')));
});

await step("the gateway starts and stops live from the page", async () => {
  await check('[data-testid="set-gateway"]', true);
  await fill('[data-testid="set-gateway-port"]', "0");
  await save();
  await saved();
  const url = await until("the gateway URL", async () => (await ui.exists('[data-testid="settings-gateway-url"]')) && (await ui.text('[data-testid="settings-gateway-url"]')), 10000);
  const base = url.replace(/<server>$/, "");
  const res = await fetch(`${base}demo`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  assert.equal(res.status, 401, "the gateway answers (and wants an agent's token)");
  await check('[data-testid="set-gateway"]', false);
  await save();
  await saved();
  await until("the gateway stopped", async () => /not running/.test(await ui.text('[data-testid="gateway-state"]')), 10000);
  await assert.rejects(fetch(`${base}demo`, { method: "POST", body: "{}" }), "nothing listens any more");
});

await ui.quit();
notifications.stop();
demo.proc.kill();
