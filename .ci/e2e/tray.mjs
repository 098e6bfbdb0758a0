// The tray's menu in a real session (run by .ci/e2e/run.sh inside .ci/with-session.sh), driven as
// a tray host drives it: the resident (countersign-resident) exports a StatusNotifierItem and its
// menu over D-Bus (com.canonical.dbusmenu at /MenuBar, through ksni: no GTK), and a host sends
// `Event(id, "clicked")` when a person picks an item. The resident is started as the autostart
// entry starts it (`--background`: no window). "Open Countersign" starts the window process;
// "Quit" ends the resident and every process of the app (the window's and WebKit's).
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_RESIDENT (absolute paths), E2E_WORK (scratch dir),
// SCREENSHOTS, E2E_LOGS.
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { sleep, until, stepper } from "./wd.mjs";
import { alive, descendants, trayMenuOf, uiLibraries, webkit, windowProcesses, windows } from "./procs.mjs";

const app = process.env.COUNTERSIGN_APP;
const residentExe = process.env.COUNTERSIGN_RESIDENT;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
for (const [k, v] of Object.entries({ COUNTERSIGN_APP: app, COUNTERSIGN_RESIDENT: residentExe, E2E_WORK: work, SCREENSHOTS: shots })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/run.sh)`);
}
const logs = process.env.E2E_LOGS ?? work;
mkdirSync(logs, { recursive: true });
mkdirSync(shots, { recursive: true });

const step = stepper(join(shots, "tray-failure.png"));

const dataDir = join(work, "tray-ledger");
const proc = spawn(residentExe, ["--background", "--demo", "--data-dir", dataDir], {
  env: { ...process.env, RUST_LOG: "info", COUNTERSIGN_DESKTOP: app },
  stdio: ["ignore", "ignore", "pipe"],
});
const log = [];
createInterface({ input: proc.stderr }).on("line", (line) => log.push(line));
const exited = new Promise((r) => proc.once("exit", (code, signal) => r({ code, signal })));
process.on("exit", () => {
  writeFileSync(join(logs, "tray-app.log"), `${log.join("\n")}\n`);
  for (const p of [proc.pid, ...windowProcesses(proc.pid).map((w) => w.pid)]) if (alive(p)) process.kill(p, "SIGKILL");
});
const ourWindows = () => windows(...windowProcesses(proc.pid).map((p) => p.pid));
const logged = (re) => log.find((l) => re.test(l));

/** The app's tray menu on the session bus: its connection, the object path, and item ids by label. */
let menu;
const findMenu = () => trayMenuOf(proc.pid);
function layout() {
  const out = execFileSync("gdbus", ["call", "--session", "--dest", menu.name, "--object-path", menu.path, "--method", "com.canonical.dbusmenu.GetLayout", "--", "0", "-1", "[]"]).toString();
  const items = {};
  for (const m of out.matchAll(/\((\d+), \{[^}]*'label': <'([^']*)'>/g)) items[m[2]] = Number(m[1]);
  return items;
}
/** What a tray host sends when the person picks the item. */
function pick(label) {
  const id = layout()[label];
  assert.ok(id !== undefined, `the tray menu has "${label}": ${JSON.stringify(layout())}`);
  execFileSync("gdbus", ["call", "--session", "--dest", menu.name, "--object-path", menu.path, "--method", "com.canonical.dbusmenu.Event", "--", String(id), "clicked", "<int32 0>", "0"]);
}

await step("the resident's tray menu is on the session bus with Open, Do not disturb and Quit; no window, no GTK", async () => {
  await until("the resident", () => logged(/countersign: resident \d+ on /), 30000);
  menu = await until("the tray menu (com.canonical.dbusmenu)", findMenu, 15000);
  const items = layout();
  for (const label of ["Open Countersign", "Do not disturb", "Quit"]) assert.ok(label in items, `"${label}" in ${JSON.stringify(items)}`);
  assert.deepEqual(windowProcesses(proc.pid), [], "no window process in the background");
  assert.deepEqual(uiLibraries(proc.pid), [], "the resident maps no GTK/WebKit library");
});

await step("a second start (the app --background, the resident --background) hands over and opens no window", async () => {
  for (const [exe, who] of [[app, "the app"], [residentExe, "the resident"]]) {
    const second = spawnSync(exe, ["--background", "--data-dir", dataDir], { timeout: 30000 });
    assert.equal(second.status, 0, `${who}'s second start exits: ${second.stderr}`);
  }
  await sleep(2000);
  assert.equal(ourWindows().length, 0, "no window for a start at login");
  assert.equal(log.filter((l) => /countersign: resident \d+ on /.test(l)).length, 1, "one resident");
});

await step("in the background the resident starts no process of its own: no window process, no WebKit", async () => {
  // Longer than a window start takes: a process started meanwhile would be seen.
  await sleep(6000);
  assert.deepEqual(descendants(proc.pid), [], "nothing runs under the resident while no window is open");
});

await step("Open in the tray menu starts a window process, which paints", async () => {
  log.length = 0;
  pick("Open Countersign");
  await until("the window", () => ourWindows().length === 1, 15000);
  const painted = await until("its first paint", () => logged(/window reopened, first paint (\d+) ms/), 15000);
  console.log(`     ${painted.replace(/^.*countersign: /, "")}`);
  console.log(`     ${(logged(/launched \d+ ms after the window was asked for/) ?? "").replace(/^.*startup: /, "")}`);
  const [win] = windowProcesses(proc.pid);
  assert.ok(win, "the window process is the resident's child");
  const helpers = webkit(win.pid);
  assert.ok(helpers.length >= 2, `WebKit's web and network processes: ${JSON.stringify(helpers)}`);
  // Open again with the window up: it is focused, not duplicated. The process started with the
  // request on its command line hands it to the window (single instance) and ends.
  pick("Open Countersign");
  await sleep(1000);
  await until("one window process", () => windowProcesses(proc.pid).length === 1, 15000);
  assert.deepEqual(windowProcesses(proc.pid).map((p) => p.pid), [win.pid], "the same window process");
  assert.equal(ourWindows().length, 1, "still one window");
});

await step("closed, then opened again: a new window process takes the Open", async () => {
  const [before] = windowProcesses(proc.pid);
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), ourWindows()[0]]);
  await until("the window process ended", () => !alive(before.pid), 15000);
  await until("WebKit's processes ended", () => descendants(proc.pid).length === 0, 15000).catch((e) => {
    throw new Error(`${e.message}: ${JSON.stringify(descendants(proc.pid))}`);
  });
  log.length = 0;
  pick("Open Countersign");
  const painted = await until("its first paint", () => logged(/window reopened, first paint (\d+) ms/), 15000);
  console.log(`     ${painted.replace(/^.*countersign: /, "")}`);
  const [win] = windowProcesses(proc.pid);
  assert.ok(win && win.pid !== before.pid, "a new window process");
  assert.equal(ourWindows().length, 1, "one window");
  assert.ok(webkit(win.pid).length >= 2, "with WebKit's web and network processes");
});

await step("Quit in the tray menu ends the resident, the window and every process they started", async () => {
  const family = descendants(proc.pid);
  assert.ok(family.some((p) => p.comm.startsWith("WebKit")), `WebKit runs with the window: ${JSON.stringify(family)}`);
  assert.ok(family.some((p) => p.comm.startsWith("countersign-des")), `the window process runs: ${JSON.stringify(family)}`);
  pick("Quit");
  const end = await Promise.race([exited, sleep(15000).then(() => null)]);
  assert.ok(end, "the resident ended within 15 s");
  assert.equal(end.code, 0, `a clean exit: ${JSON.stringify(end)}`);
  await until("no process of the app left", () => family.every((p) => !alive(p.pid)), 10000).catch((e) => {
    throw new Error(`${e.message}: ${JSON.stringify(family.filter((p) => alive(p.pid)))}`);
  });
});
