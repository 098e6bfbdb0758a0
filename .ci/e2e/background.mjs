// Background mode in a real session (run by .ci/e2e/run.sh inside .ci/with-session.sh), with the
// app started directly (no WebDriver: closing the window must really destroy it). The app is two
// processes: the resident (countersign-resident: engine, tray, notifications; no GTK or WebKit),
// which the first launch starts, and the window process (countersign-desktop), which ends when
// its window closes. Checked: closing the window ends the window process and WebKit's, and no
// process left maps GTK or WebKit; the resident's engine still polls (a question of a task called
// meanwhile is recorded and notified); clicking that notification starts a window on the
// question; a second launch on the same ledger asks the resident for the window (no second
// engine; the resident starts a window process) and ends, and later launches with a link go
// the same way to the window up (single instance); countersign:// links handed over that way open
// the page they lead to (task detail, the adopt form to confirm, or the server to add);
// Approve on a notification (the daemon's context menu) answers without opening the window.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_CLI, COUNTERSIGN_RESIDENT (absolute paths), E2E_WORK (scratch
// dir), SCREENSHOTS, E2E_LOGS (where the app's log goes; default E2E_WORK).
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { NotificationLog, sleep, until, stepper } from "./wd.mjs";
import { alive, descendants, uiLibraries, webkit, windowProcesses, windows } from "./procs.mjs";

const app = process.env.COUNTERSIGN_APP;
const cli = process.env.COUNTERSIGN_CLI;
const residentExe = process.env.COUNTERSIGN_RESIDENT;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
for (const [k, v] of Object.entries({ COUNTERSIGN_APP: app, COUNTERSIGN_CLI: cli, COUNTERSIGN_RESIDENT: residentExe, E2E_WORK: work, SCREENSHOTS: shots })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/run.sh)`);
}
const dataDir = join(work, "background-ledger");
mkdirSync(shots, { recursive: true });
// The app's log (RUST_LOG=info, never a token) beside the other E2E logs.
const logs = process.env.E2E_LOGS ?? work;
mkdirSync(logs, { recursive: true });

const step = stepper(join(shots, "background-failure.png"));
const env = { ...process.env, RUST_LOG: "info", COUNTERSIGN_DEMO_SPEED: "10" };

const log = [];
/** Starts a launch of the app whose log (and its resident's, and their windows') joins `log`. */
function launch(args) {
  const p = spawn(app, args, { env, stdio: ["ignore", "ignore", "pipe"] });
  createInterface({ input: p.stderr }).on("line", (line) => log.push(line));
  p.exited = new Promise((r) => p.once("exit", (code, signal) => r({ code, signal })));
  return p;
}
const logged = (re) => log.find((l) => re.test(l));

const notifications = new NotificationLog();
const proc = launch(["--demo", "--data-dir", dataDir]);
let resident = 0;
let second = null;
/** The window process the resident started for a second launch. */
let shownBy = 0;
process.on("exit", () => {
  writeFileSync(join(logs, "background-app.log"), `${log.join("\n")}\n`);
  notifications.stop();
  for (const p of [proc.pid, second?.pid, resident]) if (p && alive(p)) process.kill(p, "SIGKILL");
});
/** Every window process: the first launch, the second, and those the resident started. */
const windowPids = () => [proc.pid, second?.pid, ...windowProcesses(resident).map((p) => p.pid)].filter((p) => p && alive(p));
const ourWindows = () => windows(...windowPids());
const ourWebkit = () => webkit(resident, ...windowPids()).map((p) => p.comm);

await step("the app starts the resident, its window and WebKit's processes", async () => {
  await until("the first paint", () => logged(/first paint \d+ ms after launch/), 30000);
  resident = Number(logged(/countersign: resident (\d+) on /).match(/resident (\d+)/)[1]);
  assert.ok(alive(resident), "the resident runs");
  await until("the window", () => ourWindows().length === 1, 10000);
  const kids = ourWebkit();
  assert.ok(kids.some((c) => c.startsWith("WebKitWebProces")), `a web process: ${kids}`);
  assert.ok(kids.some((c) => c.startsWith("WebKitNetworkPr")), `a network process: ${kids}`);
});

await step("closing the window ends the window process and WebKit's; the resident maps no GTK or WebKit", async () => {
  const [id] = ourWindows();
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), id]);
  const end = await Promise.race([proc.exited, sleep(15000).then(() => null)]);
  assert.ok(end, "the window process ended with its window");
  assert.equal(end.code, 0, `a clean exit: ${JSON.stringify(end)}`);
  await until("WebKit's processes gone", () => ourWebkit().length === 0, 15000).catch((e) => {
    throw new Error(`${e.message}; still running: ${ourWebkit()}`);
  });
  await sleep(1000);
  assert.ok(alive(resident), "the resident still runs");
  assert.deepEqual(ourWebkit(), [], "no WebKit process came back");
  // What makes a small background footprint possible: the resident holds no GTK or WebKit, and
  // no other process of the app runs.
  assert.deepEqual(uiLibraries(resident), [], `the resident (${resident}) maps no GTK/WebKit library`);
  assert.deepEqual(descendants(resident), [], "no process under the resident");
});

await step("in the background the engine still polls: a new task's question is recorded and notified", async () => {
  // Only the new question's notification on screen, for the click of the next step (the demo's
  // own, and its agent's call, were told at launch).
  execFileSync("dunstctl", ["close-all"]);
  const before = notifications.fresh("demo · deploy_service").length;
  execFileSync(cli, ["--data-dir", dataDir, "call", "demo", "deploy_service", JSON.stringify({ service: "background", environment: "staging" }), "--no-follow"]);
  await until("a notification for the new question", () => notifications.calls.some((c) => c.replacesId === 0 && c.body.includes("background")), 30000);
  assert.ok(notifications.fresh("demo · deploy_service").length > before);
  assert.equal(ourWindows().length, 0, "a notification does not open the window by itself");
  assert.deepEqual(ourWebkit(), []);
});

await step("clicking the notification starts a window on that question", async () => {
  const dunst = await until("the notification on screen", () => {
    const r = spawnSync("xdotool", ["search", "--onlyvisible", "--class", "Dunst"]);
    return r.status === 0 ? r.stdout.toString().trim().split("\n")[0] : null;
  });
  execFileSync("xdotool", ["mousemove", "--window", dunst, "30", "15", "click", "1"]);
  await until("the window back", () => ourWindows().length === 1, 15000);
  await until("the question's route", () => logged(/opening the window at #\/inbox\/\d+\/\S+/), 5000).catch((e) => {
    throw new Error(`${e.message}: ${log.filter((l) => /window|notif/.test(l)).join("\n")}`);
  });
  const painted = await until("its first paint", () => logged(/window reopened, first paint (\d+) ms/), 15000);
  console.log(`     ${painted.replace(/^.*countersign: /, "")}`);
  // Background again for the next step.
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), ourWindows()[0]]);
  await until("the window process gone", () => windowProcesses(resident).length === 0, 15000);
  await until("WebKit's processes gone again", () => ourWebkit().length === 0, 15000);
  log.length = 0;
});

await step("a second launch on the same ledger asks the running resident for the window (no second engine) and ends", async () => {
  // The resident starts a window process for it, as for the tray's Open.
  assert.deepEqual(windowProcesses(resident), [], "no window process before the launch");
  const t0 = Date.now();
  second = launch(["--data-dir", dataDir]);
  const end = await Promise.race([second.exited, sleep(15000).then(() => null)]);
  assert.ok(end, "the second launch ends once the resident took its request");
  assert.equal(end.code, 0, `a clean exit: ${JSON.stringify(end)}`);
  await until("the second launch saying where the window comes from", () => logged(/Countersign runs in the background on .*: it opens the window/), 5000);
  await until("the window back", () => ourWindows().length === 1, 15000);
  const painted = await until("its first paint", () => logged(/first paint \d+ ms after launch \(unix_ms=(\d+)\)/), 15000);
  const paintedAt = Number(/unix_ms=(\d+)/.exec(painted)[1]);
  console.log(`     a window in ${paintedAt - t0} ms from the second launch's start to its first paint`);
  const shown = windowProcesses(resident);
  assert.equal(shown.length, 1, `one window process, the resident's: ${JSON.stringify(shown)}`);
  shownBy = shown[0].pid;
  assert.ok(webkit(shownBy).some((c) => c.comm.startsWith("WebKitWebProces")), "with a new web process");
  assert.equal(log.filter((l) => /countersign: resident \d+ on /.test(l)).length, 0, "no second resident");
  assert.ok(alive(resident));
});
await step("links: a tracked task opens its detail, an untracked one the adopt form, an unknown server is named, a hostile link opens nothing", async () => {
  const shown = JSON.parse(execFileSync(cli, ["--data-dir", dataDir, "--json", "task", "show", "#1"]).toString());
  const row = shown.task.id;
  const serverUrl = shown.task.server_url;
  assert.match(shown.link, /^countersign:\/\/task\/http/);
  const follow = async (link, expected) => {
    log.length = 0;
    const r = spawnSync(app, ["--data-dir", dataDir, link], { timeout: 30000 });
    assert.equal(r.status, 0, `the second instance hands the link over: ${r.stderr}`);
    return until(`the running app to act on ${expected}`, () => logged(expected), 15000);
  };
  await follow(shown.link, new RegExp(`opening the window at #/tasks/${row}$`));
  const untracked = `countersign://task/${encodeURIComponent(serverUrl)}/${encodeURIComponent("not-tracked/1")}`;
  await follow(untracked, new RegExp(`opening the window at #/adopt/${shown.task.server_id}/not-tracked%2F1$`));
  await follow("countersign://task/demo/not-tracked", new RegExp(`opening the window at #/adopt/${shown.task.server_id}/not-tracked$`));
  await follow(`countersign://task/${encodeURIComponent("https://elsewhere.example/mcp")}/t1`, /opening the window at #\/adopt\/url\/https%3A%2F%2Felsewhere\.example%2Fmcp\/t1$/);
  await follow("countersign://task/demo/a%0A%1B%5B2J", /cannot open the link: the link's task id holds a control character/);
  assert.ok(alive(shownBy), "a hostile link does not end the window");
  // Each link's launch asked the resident, whose new window process handed the link to the
  // window up (single instance) and ended: still one window, one window process.
  await until("one window process, the same", () => windowProcesses(resident).map((p) => p.pid).join() === String(shownBy), 15000);
  assert.equal(ourWindows().length, 1, "one window");
  assert.ok(alive(resident));
});
await step("Approve on a notification answers the question without opening the window; the server gets the answer", async () => {
  if (ourWindows().length) execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), ourWindows()[0]]);
  await until("WebKit's processes gone", () => ourWebkit().length === 0, 15000);
  execFileSync("dunstctl", ["close-all"]);
  execFileSync(cli, ["--data-dir", dataDir, "call", "demo", "deploy_service", JSON.stringify({ service: "approve-from-notification", environment: "staging" }), "--no-follow"]);
  await until("its notification", () => notifications.calls.some((c) => c.replacesId === 0 && c.body.includes("approve-from-notification")), 30000);
  await until("the notification on screen", () => execFileSync("dunstctl", ["count", "displayed"]).toString().trim() === "1");
  // The daemon's context menu, answered by .ci/e2e/dunst-pick.sh with the line holding "Approve".
  writeFileSync(join(process.env.XDG_RUNTIME_DIR, "dunst-pick"), "Approve");
  execFileSync("dunstctl", ["context"]);
  const task = await until("the task completed on the server", () => {
    const tasks = JSON.parse(execFileSync(cli, ["--data-dir", dataDir, "--json", "tasks"]).toString());
    const t = tasks.find((t) => JSON.stringify(t.arguments ?? {}).includes("approve-from-notification"));
    return t && t.status === "completed" ? t : null;
  }, 30000);
  const shown = JSON.parse(execFileSync(cli, ["--data-dir", dataDir, "--json", "task", "show", String(task.task_id)]).toString());
  const kinds = shown.timeline.map((e) => e.kind);
  assert.ok(kinds.includes("input_answered") && kinds.includes("update_acknowledged"), `the answer delivered and acknowledged: ${kinds}`);
  assert.equal(ourWindows().length, 0, "answered without opening the window");
  assert.deepEqual(ourWebkit(), []);
});
// The resident ends on request (as the tray's Quit does; tray.mjs checks that one).
spawnSync(residentExe, ["--quit", "--data-dir", dataDir], { timeout: 10000 });
await until("the resident ended", () => !alive(resident), 10000).catch(() => process.kill(resident, "SIGKILL"));
// dbus-monitor would keep node running.
notifications.stop();
