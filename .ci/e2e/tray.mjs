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
import { alive, descendants, environOf, hotLibraries, trayMenuOf, uiLibraries, waitingWindows, waitState, webkit, windowProcesses, windows } from "./procs.mjs";

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

await step("the resident keeps a window process started ahead, waiting: stdin, no window, no WebKit, small", async () => {
  // Started 5 s after the resident (core/src/resident/ready.rs, resident window.rs).
  const [ready] = await until("a window process started ahead", () => waitingWindows(proc.pid).length === 1 && waitingWindows(proc.pid), 20000);
  // It may still be linking and trimming: settled once it blocks on its stdin.
  const state = await until("it waits on its stdin", () => { const s = waitState(ready.pid); return s.readsStdin && s; }, 10000);
  assert.deepEqual(state.children, [], "no WebKit process (nor any other) while it waits");
  assert.deepEqual(state.windows, [], "no window while it waits");
  assert.ok(state.rssKiB < 40 * 1024, `it holds ${state.rssKiB} KiB RSS while it waits (trimmed)`);
  console.log(`     waiting window process ${ready.pid}: RSS ${(state.rssKiB / 1024).toFixed(1)} MiB`);
});

await step("Open in the tray menu hands the request to that process: it becomes the window", async () => {
  const [ready] = waitingWindows(proc.pid);
  log.length = 0;
  pick("Open Countersign");
  await until("the window", () => ourWindows().length === 1, 15000);
  const painted = await until("its first paint", () => logged(/window reopened, first paint (\d+) ms/), 15000);
  console.log(`     ${painted.replace(/^.*countersign: /, "")}`);
  assert.deepEqual(windowProcesses(proc.pid).map((p) => p.pid), [ready.pid], "the waiting process is the window, by its own name again");
  console.log(`     ${(logged(/launched \d+ ms after the window was asked for/) ?? "").replace(/^.*startup: /, "")} (no process start between)`);
  // The window process and WebKit's processes start with the flite voice preloaded (where this
  // system's WebKit links it, as the dynamic linker lists the window executable's libraries); the
  // resident, which links no WebKit, never has it (core/src/resident/preload.rs).
  const hot = hotLibraries(app);
  const [win] = windowProcesses(proc.pid);
  const helpers = webkit(win.pid);
  assert.ok(helpers.length >= 2, `WebKit's web and network processes: ${JSON.stringify(helpers)}`);
  for (const p of [win, ...helpers]) {
    const env = environOf(p.pid);
    if (hot.length) {
      assert.equal(env.LD_PRELOAD, hot.join(":"), `${p.comm} starts with ${hot} preloaded`);
      assert.equal(env.COUNTERSIGN_PRELOAD, hot.join(":"), `${p.comm} knows which preload is ours`);
    } else {
      assert.equal(env.COUNTERSIGN_PRELOAD, undefined, `nothing to preload here, nothing preloaded in ${p.comm}`);
    }
  }
  assert.equal(environOf(proc.pid).LD_PRELOAD, undefined, "the resident preloads nothing");
  console.log(`     preloaded in the window and WebKit's processes: ${hot.join(", ") || "nothing (no flite voice in this WebKit)"}`);
  // Open again with the window up: it is focused, not duplicated. A process started with the
  // request on its command line hands it to the window (single instance) and ends; one waiting
  // is kept for the next reopen (its request would come on its stdin, which the single-instance
  // plugin does not forward).
  const [kept] = await until("a window process started ahead again", () => waitingWindows(proc.pid).length === 1 && waitingWindows(proc.pid), 20000);
  pick("Open Countersign");
  await sleep(1000);
  // The second window process hands over to the first (single instance) and ends.
  await until("one window process", () => windowProcesses(proc.pid).length === 1, 15000);
  assert.equal(ourWindows().length, 1, "still one window");
  assert.deepEqual(waitingWindows(proc.pid).map((p) => p.pid), [kept.pid], "the process started ahead still waits");
});

await step("closed, then opened again: the next process started ahead takes the Open", async () => {
  // The keeper starts another one 5 s after the last Open; each hand-over is a fresh process.
  const [before] = windowProcesses(proc.pid);
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), ourWindows()[0]]);
  await until("the window process ended", () => !alive(before.pid), 15000);
  const [ready] = await until("the next window process started ahead", () => waitingWindows(proc.pid).length === 1 && waitingWindows(proc.pid), 20000);
  await until("it waits on its stdin", () => waitState(ready.pid).readsStdin, 10000);
  log.length = 0;
  pick("Open Countersign");
  const painted = await until("its first paint", () => logged(/window reopened, first paint (\d+) ms/), 15000);
  console.log(`     ${painted.replace(/^.*countersign: /, "")}`);
  assert.deepEqual(windowProcesses(proc.pid).map((p) => p.pid), [ready.pid], "the second waiting process is the window");
  assert.equal(ourWindows().length, 1, "one window");
  assert.ok(webkit(ready.pid).length >= 2, "with WebKit's web and network processes");
});

await step("Quit in the tray menu ends the resident, the window and every process they started", async () => {
  // A window process waits again (5 s after the last Open): Quit ends it too.
  await until("a window process started ahead again", () => waitingWindows(proc.pid).length === 1, 20000);
  const family = descendants(proc.pid);
  assert.ok(family.some((p) => p.comm.startsWith("WebKit")), `WebKit runs with the window: ${JSON.stringify(family)}`);
  assert.ok(family.some((p) => p.comm === "countersign-rdy"), `a window process waits: ${JSON.stringify(family)}`);
  pick("Quit");
  const end = await Promise.race([exited, sleep(15000).then(() => null)]);
  assert.ok(end, "the resident ended within 15 s");
  assert.equal(end.code, 0, `a clean exit: ${JSON.stringify(end)}`);
  await until("no process of the app left", () => family.every((p) => !alive(p.pid)), 10000).catch((e) => {
    throw new Error(`${e.message}: ${JSON.stringify(family.filter((p) => alive(p.pid)))}`);
  });
});
