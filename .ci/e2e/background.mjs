// Background mode in a real session (run by .ci/e2e/run.sh inside .ci/with-session.sh), with the
// app started directly (no WebDriver: closing the window must really destroy it):
// closing the window (WM_DELETE_WINDOW, as a window manager sends for the close button) ends
// WebKit's web and network processes while the app keeps running; its engine still polls (a
// question of a task called meanwhile is recorded and notified); clicking that notification
// rebuilds the window on the question; a second launch on the same ledger hands over to the
// running app (single instance) and exits; countersign:// links handed over that way open the
// page they lead to (task detail, the adopt form to confirm, or the server to add); Approve on a
// notification (the daemon's context menu) answers without opening the window.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_CLI (absolute paths), E2E_WORK (scratch dir), SCREENSHOTS,
// E2E_LOGS (where the app's log goes; default E2E_WORK).
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { NotificationLog, screenshot, sleep, until, stepper } from "./wd.mjs";

const app = process.env.COUNTERSIGN_APP;
const cli = process.env.COUNTERSIGN_CLI;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
for (const [k, v] of Object.entries({ COUNTERSIGN_APP: app, COUNTERSIGN_CLI: cli, E2E_WORK: work, SCREENSHOTS: shots })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/run.sh)`);
}
const dataDir = join(work, "background-ledger");
mkdirSync(shots, { recursive: true });
// The app's log (RUST_LOG=info, never a token) beside the other E2E logs.
const logs = process.env.E2E_LOGS ?? work;
mkdirSync(logs, { recursive: true });

const step = stepper(join(shots, "background-failure.png"));

/** The direct children of `pid` by command name (as /proc has it: at most 15 characters). */
function children(pid) {
  const out = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid …; comm may hold spaces and parentheses.
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const ppid = Number(stat.slice(close + 2).split(" ")[1]);
      if (ppid === pid) out.push(comm);
    } catch {}
  }
  return out;
}
const webkit = (pid) => children(pid).filter((c) => c.startsWith("WebKit"));
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
/** The app's X windows (GTK sets _NET_WM_PID); [] when it has none. */
const windows = (pid) => {
  const r = spawnSync("xdotool", ["search", "--onlyvisible", "--pid", String(pid), "--name", "^Countersign"]);
  return r.status === 0 ? r.stdout.toString().trim().split("\n").filter(Boolean) : [];
};

const notifications = new NotificationLog();
const proc = spawn(app, ["--demo", "--data-dir", dataDir], {
  env: { ...process.env, RUST_LOG: "info", COUNTERSIGN_DEMO_SPEED: "10" },
  stdio: ["ignore", "ignore", "pipe"],
});
const log = [];
createInterface({ input: proc.stderr }).on("line", (line) => log.push(line));
process.on("exit", () => {
  writeFileSync(join(logs, "background-app.log"), `${log.join("\n")}\n`);
  notifications.stop();
  if (alive(proc.pid)) proc.kill("SIGKILL");
});
const logged = (re) => log.find((l) => re.test(l));

await step("the app starts with its window and WebKit's processes", async () => {
  await until("the first paint", () => logged(/first paint \d+ ms after launch/), 30000);
  await until("the window", () => windows(proc.pid).length === 1, 10000);
  const kids = webkit(proc.pid);
  assert.ok(kids.some((c) => c.startsWith("WebKitWebProces")), `a web process: ${kids}`);
  assert.ok(kids.some((c) => c.startsWith("WebKitNetworkPr")), `a network process: ${kids}`);
});

await step("closing the window frees the webview: WebKit's processes end, the app keeps running", async () => {
  const [id] = windows(proc.pid);
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), id]);
  await until("the window gone", () => windows(proc.pid).length === 0, 10000);
  await until("WebKit's processes gone", () => webkit(proc.pid).length === 0, 15000).catch((e) => {
    throw new Error(`${e.message}; still running: ${webkit(proc.pid)}`);
  });
  await sleep(1000);
  assert.ok(alive(proc.pid), "the app still runs");
  assert.deepEqual(webkit(proc.pid), [], "no WebKit process came back");
});

await step("in the background the engine still polls: a new task's question is recorded and notified", async () => {
  const before = notifications.fresh("demo · deploy_service").length;
  execFileSync(cli, ["--data-dir", dataDir, "call", "demo", "deploy_service", JSON.stringify({ service: "background", environment: "staging" }), "--no-follow"]);
  await until("a notification for the new question", () => notifications.calls.some((c) => c.replacesId === 0 && c.body.includes("background")), 30000);
  assert.ok(notifications.fresh("demo · deploy_service").length > before);
  assert.equal(windows(proc.pid).length, 0, "a notification does not open the window by itself");
  assert.deepEqual(webkit(proc.pid), []);
});

await step("clicking the notification rebuilds the window on that question", async () => {
  const dunst = await until("the notification on screen", () => {
    const r = spawnSync("xdotool", ["search", "--onlyvisible", "--class", "Dunst"]);
    return r.status === 0 ? r.stdout.toString().trim().split("\n")[0] : null;
  });
  execFileSync("xdotool", ["mousemove", "--window", dunst, "30", "15", "click", "1"]);
  await until("the window back", () => windows(proc.pid).length === 1, 15000);
  await until("the question's route", () => logged(/opening the window at #\/inbox\/\d+\/\S+/), 5000).catch((e) => {
    throw new Error(`${e.message}: ${log.filter((l) => /window|notif/.test(l)).join("\n")}`);
  });
  const painted = await until("its first paint", () => logged(/window reopened, first paint (\d+) ms/), 15000);
  console.log(`     ${painted.replace(/^.*countersign: /, "")}`);
  // Background again for the next step.
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), windows(proc.pid)[0]]);
  await until("WebKit's processes gone again", () => webkit(proc.pid).length === 0, 15000);
  log.length = 0;
});

await step("a second launch on the same ledger hands over to the running app, which rebuilds its window", async () => {
  const t0 = Date.now();
  const second = spawnSync(app, ["--data-dir", dataDir], { env: { ...process.env, RUST_LOG: "warn" }, timeout: 30000 });
  assert.equal(second.status, 0, `the second instance exits at once: ${second.stderr}`);
  await until("the window back", () => windows(proc.pid).length === 1, 15000);
  const painted = await until("its first paint", () => logged(/window reopened, first paint (\d+) ms/), 15000);
  console.log(`     reopened in ${Date.now() - t0} ms from the second launch; ${painted.replace(/^.*countersign: /, "")}`);
  assert.ok(webkit(proc.pid).some((c) => c.startsWith("WebKitWebProces")), "a new web process");
  assert.ok(alive(proc.pid));
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
  assert.ok(alive(proc.pid), "a hostile link does not end the app");
});
await step("Approve on a notification answers the question without opening the window; the server gets the answer", async () => {
  if (windows(proc.pid).length) execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), windows(proc.pid)[0]]);
  await until("WebKit's processes gone", () => webkit(proc.pid).length === 0, 15000);
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
  assert.equal(windows(proc.pid).length, 0, "answered without opening the window");
  assert.deepEqual(webkit(proc.pid), []);
});
const exited = new Promise((r) => proc.once("exit", r));
proc.kill("SIGTERM");
await Promise.race([exited, sleep(5000)]);
// dbus-monitor would keep node running.
notifications.stop();
