// The tray's menu in a real session (run by .ci/e2e/run.sh inside .ci/with-session.sh), driven as
// a tray host drives it: the app's StatusNotifierItem exports its menu over D-Bus
// (com.canonical.dbusmenu, libayatana-appindicator), and a host sends `Event(id, "clicked")`
// when a person picks an item. "Open Countersign" rebuilds a closed window; "Quit" ends the app
// and every process it started (WebKit's). The app is started directly (no WebDriver), as in
// background.mjs.
//
// Env: COUNTERSIGN_APP (absolute path), E2E_WORK (scratch dir), SCREENSHOTS, E2E_LOGS.
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { screenshot, sleep, until, stepper } from "./wd.mjs";

const app = process.env.COUNTERSIGN_APP;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
for (const [k, v] of Object.entries({ COUNTERSIGN_APP: app, E2E_WORK: work, SCREENSHOTS: shots })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/run.sh)`);
}
const logs = process.env.E2E_LOGS ?? work;
mkdirSync(logs, { recursive: true });
mkdirSync(shots, { recursive: true });

const step = stepper(join(shots, "tray-failure.png"));

/** Every process under `pid` (children, grandchildren…), with its command name. */
function descendants(pid) {
  const parent = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      parent.set(Number(entry), { ppid: Number(stat.slice(close + 2).split(" ")[1]), comm: stat.slice(stat.indexOf("(") + 1, close) });
    } catch {}
  }
  const out = [];
  const walk = (p) => {
    for (const [child, { ppid, comm }] of parent) {
      if (ppid === p) {
        out.push({ pid: child, comm });
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
};
const windows = (pid) => {
  const r = spawnSync("xdotool", ["search", "--onlyvisible", "--pid", String(pid), "--name", "^Countersign"]);
  return r.status === 0 ? r.stdout.toString().trim().split("\n").filter(Boolean) : [];
};

const dataDir = join(work, "tray-ledger");
const proc = spawn(app, ["--demo", "--data-dir", dataDir], {
  env: { ...process.env, RUST_LOG: "info" },
  stdio: ["ignore", "ignore", "pipe"],
});
const log = [];
createInterface({ input: proc.stderr }).on("line", (line) => log.push(line));
const exited = new Promise((r) => proc.once("exit", (code, signal) => r({ code, signal })));
process.on("exit", () => {
  writeFileSync(join(logs, "tray-app.log"), `${log.join("\n")}\n`);
  if (alive(proc.pid)) proc.kill("SIGKILL");
});
const logged = (re) => log.find((l) => re.test(l));

/** The app's tray menu on the session bus: its connection, the object path, and item ids by label. */
let menu;
function findMenu() {
  const names = execFileSync("busctl", ["--user", "list", "--no-legend"]).toString().split("\n");
  for (const line of names) {
    const [name, pid] = line.trim().split(/\s+/);
    if (Number(pid) !== proc.pid || !name?.startsWith(":")) continue;
    const tree = spawnSync("busctl", ["--user", "tree", name, "--list"]).stdout?.toString() ?? "";
    const path = tree.split("\n").find((p) => /^\/org\/ayatana\/NotificationItem\/[^/]+\/Menu$/.test(p.trim()));
    if (path) return { name, path: path.trim() };
  }
  return null;
}
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

await step("the app's tray menu is on the session bus with Open, Do not disturb and Quit", async () => {
  await until("the first paint", () => logged(/first paint \d+ ms after launch/), 30000);
  menu = await until("the tray menu (com.canonical.dbusmenu)", findMenu, 15000);
  const items = layout();
  for (const label of ["Open Countersign", "Do not disturb", "Quit"]) assert.ok(label in items, `"${label}" in ${JSON.stringify(items)}`);
});

await step("a start at login (--background) while the app runs hands over and opens no window", async () => {
  const [id] = await until("the window", () => windows(proc.pid).length === 1 && windows(proc.pid), 10000).catch((e) => {
    const all = spawnSync("xdotool", ["search", "--pid", String(proc.pid)]).stdout.toString().trim().split("\n");
    const named = all.map((w) => `${w}: ${spawnSync("xdotool", ["getwindowname", w]).stdout.toString().trim()}`);
    throw new Error(`${e.message}; the app's X windows: ${named.join(" | ")}`);
  });
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), id]);
  await until("the window gone", () => windows(proc.pid).length === 0, 10000);
  await until("WebKit's processes gone", () => !descendants(proc.pid).some((p) => p.comm.startsWith("WebKit")), 15000);
  const second = spawnSync(app, ["--background", "--data-dir", dataDir], { timeout: 30000 });
  assert.equal(second.status, 0, `the second instance exits: ${second.stderr}`);
  await sleep(2000);
  assert.equal(windows(proc.pid).length, 0, "no window for a start at login");
});

await step("Open in the tray menu rebuilds the closed window", async () => {
  log.length = 0;
  pick("Open Countersign");
  await until("the window back", () => windows(proc.pid).length === 1, 15000);
  const painted = await until("its first paint", () => logged(/window reopened, first paint (\d+) ms/), 15000);
  console.log(`     ${painted.replace(/^.*countersign: /, "")}`);
  // Open again with the window up: it is focused, not duplicated.
  pick("Open Countersign");
  await sleep(1000);
  assert.equal(windows(proc.pid).length, 1, "still one window");
});

await step("Quit in the tray menu ends the app and every process it started", async () => {
  const family = descendants(proc.pid);
  assert.ok(family.some((p) => p.comm.startsWith("WebKit")), `WebKit runs with the window: ${JSON.stringify(family)}`);
  pick("Quit");
  const end = await Promise.race([exited, sleep(15000).then(() => null)]);
  assert.ok(end, "the app ended within 15 s");
  assert.equal(end.code, 0, `a clean exit: ${JSON.stringify(end)}`);
  await until("no process of the app left", () => family.every((p) => !alive(p.pid)), 10000).catch((e) => {
    throw new Error(`${e.message}: ${JSON.stringify(family.filter((p) => alive(p.pid)))}`);
  });
});
