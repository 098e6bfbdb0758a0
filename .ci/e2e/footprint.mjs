// Background-mode footprint (numbers, not assertions; issue 12's targets: ≤ 60 MB for all
// Countersign processes with 1,000 tracked tasks, window reopen to first paint ≤ 300 ms in a
// release build). Run by footprint.sh inside a private session (Xvfb + D-Bus + dunst), the app
// started directly: 1,000 working tasks on a demo server (polled every 5 s), the window closed
// (WM_DELETE_WINDOW), then RSS and PSS of the app and every descendant; then three reopens
// (second launch → "window reopened, first paint N ms"), each closed again.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_CLI (absolute paths), MEASURE_WORK (scratch dir).
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { sleep, startServer, until } from "./wd.mjs";

const app = process.env.COUNTERSIGN_APP;
const cli = process.env.COUNTERSIGN_CLI;
const work = process.env.MEASURE_WORK;
assert.ok(app && cli && work, "run .ci/e2e/footprint.sh");
const dir = join(work, "thousand");
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const countersign = (...args) => execFileSync(cli, args, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });

/** pid → ppid for every process. */
function parents() {
  const m = new Map();
  for (const p of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      m.set(Number(p), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {}
  }
  return m;
}
/** The process and all its descendants. */
function tree(pid) {
  const all = parents();
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [p, pp] of all) if (pp === out[i]) out.push(p);
  return out;
}
const field = (file, re) => {
  try {
    return Number(re.exec(readFileSync(file, "utf8"))?.[1] ?? 0);
  } catch {
    return 0;
  }
};
const comm = (p) => {
  try {
    return readFileSync(`/proc/${p}/comm`, "utf8").trim();
  } catch {
    return "?";
  }
};
/** MiB: RSS and PSS (proportional: shared pages split between their users) of the whole tree. */
function footprint(pid) {
  const ps = tree(pid);
  const sum = (f) => ps.reduce((s, p) => s + f(p), 0) / 1024;
  return {
    rss: sum((p) => field(`/proc/${p}/status`, /VmRSS:\s+(\d+) kB/)),
    pss: sum((p) => field(`/proc/${p}/smaps_rollup`, /^Pss:\s+(\d+) kB/m)),
    processes: ps.map(comm),
  };
}
const windows = (pid) => {
  const r = spawnSync("xdotool", ["search", "--onlyvisible", "--pid", String(pid), "--name", "^Countersign"]);
  return r.status === 0 ? r.stdout.toString().trim().split("\n").filter(Boolean) : [];
};
const webkit = (pid) => tree(pid).slice(1).map(comm).filter((c) => c.startsWith("WebKit"));
const close = async (pid) => {
  const [id] = windows(pid);
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), id]);
  await until("WebKit's processes gone", () => webkit(pid).length === 0, 20000);
};

const demo = await startServer(cli, ["demo-server", "--port", "0", "--poll-interval-ms", "5000", "--ttl-ms", "0"]);
let proc;
try {
  countersign("--data-dir", dir, "servers", "add", "demo", demo.url);
  const t0 = Date.now();
  const make = async (n) => {
    for (let i = 0; i < n; i++) {
      await new Promise((resolve, reject) => {
        const p = spawn(cli, ["--data-dir", dir, "call", "demo", "bench_job", '{"duration_ms": 3600000}', "--no-follow"], { stdio: "ignore" });
        p.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`call exited ${code}`))));
      });
    }
  };
  await Promise.all(Array.from({ length: 8 }, () => make(125)));
  const working = JSON.parse(countersign("--data-dir", dir, "--json", "tasks", "--status", "working")).length;
  console.log(`created ${working} working tasks in ${((Date.now() - t0) / 1000).toFixed(0)} s`);

  proc = spawn(app, ["--data-dir", dir], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, RUST_LOG: "info" } });
  const log = [];
  createInterface({ input: proc.stderr }).on("line", (l) => log.push(l));
  await until("the first paint", () => log.some((l) => /first paint \d+ ms after launch/.test(l)), 60000);
  await sleep(5000);
  const open = footprint(proc.pid);
  await close(proc.pid);
  await sleep(20000); // resumed and polled a few rounds (every 5 s) in the background
  const samples = [];
  for (let i = 0; i < 5; i++) {
    samples.push(footprint(proc.pid));
    await sleep(2000);
  }
  const mib = (f) => Number(median(samples.map(f)).toFixed(1));
  console.log(
    "background footprint with %d tracked tasks: RSS %s MiB, PSS %s MiB (processes: %s); with the window open: RSS %s MiB, PSS %s MiB (%s)",
    working,
    mib((s) => s.rss),
    mib((s) => s.pss),
    samples[0].processes.join(", "),
    open.rss.toFixed(1),
    open.pss.toFixed(1),
    open.processes.join(", "),
  );

  const reopens = [];
  for (let i = 0; i < 3; i++) {
    log.length = 0;
    const asked = Date.now();
    const second = spawnSync(app, ["--data-dir", dir], { timeout: 30000 });
    assert.equal(second.status, 0);
    const line = await until("the reopened window's first paint", () => log.find((l) => /window reopened, first paint (\d+) ms/.test(l)), 30000);
    reopens.push({ inApp: Number(/first paint (\d+) ms/.exec(line)[1]), fromSecondLaunch: Date.now() - asked });
    await sleep(1000);
    await close(proc.pid);
    await sleep(2000);
  }
  console.log(
    "window reopen to first paint: median %d ms in the app (runs %s); %d ms from a second launch (runs %s)",
    median(reopens.map((r) => r.inApp)),
    reopens.map((r) => r.inApp).join(", "),
    median(reopens.map((r) => r.fromSecondLaunch)),
    reopens.map((r) => r.fromSecondLaunch).join(", "),
  );
} finally {
  proc?.kill("SIGKILL");
  demo.proc.kill();
}
