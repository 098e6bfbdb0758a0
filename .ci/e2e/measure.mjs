// Measurements of the desktop app (numbers, not assertions): cold start to first paint, idle RSS
// with 1,000 tracked tasks, and frame times while scrolling 10,000 tasks. Run by measure.sh inside
// a private session (Xvfb + D-Bus + dunst + gnome-keyring), with tauri-driver on port 4444.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_CLI, COUNTERSIGN_RESIDENT (absolute paths), MEASURE_WORK
// (scratch dir).
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { App, sleep, startServer, until } from "./wd.mjs";

const app = process.env.COUNTERSIGN_APP;
const cli = process.env.COUNTERSIGN_CLI;
const resident = process.env.COUNTERSIGN_RESIDENT;
const work = process.env.MEASURE_WORK;
assert.ok(app && cli && resident && work, "run .ci/e2e/measure.sh");
const results = {};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

/** Launches the app directly; resolves when it reports its first paint. */
function launch(dataDir) {
  return new Promise((resolve, reject) => {
    const spawnedAt = Date.now();
    const proc = spawn(app, ["--data-dir", dataDir], { stdio: ["ignore", "ignore", "pipe"] });
    const timer = setTimeout(() => reject(new Error("no first paint within 60 s")), 60000);
    createInterface({ input: proc.stderr }).on("line", (line) => {
      const m = /first paint (\d+) ms after launch \(unix_ms=(\d+)\)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, mainToPaint: Number(m[1]), spawnToPaint: Number(m[2]) - spawnedAt });
      }
    });
    proc.once("exit", (code) => reject(new Error(`the app exited (${code}) before painting`)));
  });
}

/** Ends the window and the resident it started (as the tray's Quit), so the next launch on
 * `dataDir` starts both afresh: a launch while a resident runs would hand the window to it. */
async function stop(proc, dataDir) {
  const exited = new Promise((r) => proc.once("exit", r));
  proc.kill("SIGTERM");
  await Promise.race([exited, sleep(5000).then(() => proc.kill("SIGKILL"))]);
  await exited;
  spawnSync(resident, ["--quit", "--data-dir", dataDir], { timeout: 10000 });
  await until("the resident to end", () => !existsSync(join(dataDir, "resident.sock")), 15000);
}

/** RSS in MiB of a process and of all its descendants (the WebKit web and network processes). */
function rss(pid) {
  const parents = new Map();
  for (const p of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      parents.set(Number(p), ppid);
    } catch {}
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) for (const [p, pp] of parents) if (pp === tree[i]) tree.push(p);
  const kib = (p) => {
    try {
      return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, "utf8"))?.[1] ?? 0);
    } catch {
      return 0;
    }
  };
  const names = tree.map((p) => {
    try {
      return readFileSync(`/proc/${p}/comm`, "utf8").trim();
    } catch {
      return "?";
    }
  });
  return { app: kib(pid) / 1024, total: tree.reduce((s, p) => s + kib(p), 0) / 1024, processes: names };
}

const countersign = (...args) => execFileSync(cli, args, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });

// 1. Cold start to first paint: a new process each time, an empty ledger the first time.
{
  const dir = join(work, "start");
  const runs = [];
  for (let i = 0; i < 5; i++) {
    const r = await launch(dir);
    runs.push(r);
    await sleep(500);
    await stop(r.proc, dir);
  }
  results.coldStart = {
    runs: runs.map((r) => r.spawnToPaint),
    first_ms: runs[0].spawnToPaint,
    median_ms: median(runs.map((r) => r.spawnToPaint)),
    median_main_to_paint_ms: median(runs.map((r) => r.mainToPaint)),
  };
  console.log("cold start to first paint (ms, spawn → first frame):", JSON.stringify(results.coldStart));
}

// 2. Idle RSS while the engine tracks 1,000 unfinished tasks.
{
  const dir = join(work, "thousand");
  const demo = await startServer(cli, ["demo-server", "--port", "0", "--poll-interval-ms", "5000", "--ttl-ms", "0"]);
  try {
    countersign("--data-dir", dir, "servers", "add", "demo", demo.url);
    // The same app with nothing to track: what the window itself (GTK, WebKit) costs.
    const idle = async (settleMs) => {
      const r = await launch(dir);
      await sleep(settleMs);
      const samples = [];
      for (let i = 0; i < 5; i++) {
        samples.push(rss(r.proc.pid));
        await sleep(2000);
      }
      await stop(r.proc, dir);
      return samples;
    };
    const empty = await idle(10000);
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
    assert.equal(working, 1000);
    // Resumed, then polled every 5 s (the demo's pollIntervalMs) for a while: idle.
    const samples = await idle(30000);
    const mib = (xs, f) => Number(median(xs.map(f)).toFixed(1));
    results.idleRss1000 = {
      tasks: working,
      app_mib: mib(samples, (s) => s.app),
      with_webview_mib: mib(samples, (s) => s.total),
      empty_ledger_app_mib: mib(empty, (s) => s.app),
      empty_ledger_with_webview_mib: mib(empty, (s) => s.total),
      processes: samples[0].processes,
      poll_interval_ms: 5000,
    };
    console.log("idle RSS with 1,000 tracked tasks:", JSON.stringify(results.idleRss1000));
  } finally {
    demo.proc.kill();
  }
}

// 3. Frame times while scrolling the task list with 10,000 tasks.
{
  const dir = join(work, "ten-thousand");
  mkdirSync(dir, { recursive: true });
  countersign("--data-dir", dir, "servers", "add", "archive", "http://127.0.0.1:9/mcp", "--no-discover");
  // Finished tasks, written straight into the ledger's schema (nothing to poll).
  execFileSync("python3", [
    "-c",
    `import sqlite3, sys, json, time
db = sqlite3.connect(sys.argv[1])
now = int(time.time() * 1000)
tools = ["run_ci_pipeline", "deploy_service", "batch_export", "lint_repository", "flaky_migration"]
statuses = ["completed", "completed", "completed", "failed", "cancelled"]
rows = []
for i in range(10000):
    s = statuses[i % 5]
    rows.append((1, "task-%05d" % i, tools[i % 5], "call", s, "step %d of the archive" % i, json.dumps({"taskId": "task-%05d" % i, "status": s}), now - (10000 - i) * 60000, now - (10000 - i) * 60000, now - (10000 - i) * 60000 + 30000))
db.executemany("INSERT INTO tasks (server_id, task_id, tool, origin, status, status_message, state, created_at, updated_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
db.commit()`,
    join(dir, "ledger.sqlite3"),
  ]);
  const ui = await App.launch(app, ["--data-dir", dir]);
  try {
    await ui.go("#/tasks");
    await until("10,000 tasks listed", async () => (await ui.text('[data-testid="task-count"]')) === "10000", 20000);
    await sleep(1000);
    const frames = await ui.js(`
      const v = document.querySelector(".vlist");
      const gaps = [];
      let last;
      return new Promise((resolve) => {
        function frame(t) {
          if (last !== undefined) gaps.push(t - last);
          last = t;
          v.scrollTop += 440; // ten rows a frame: a fast fling
          if (gaps.length < 300) requestAnimationFrame(frame);
          else resolve({ gaps, rows: v.querySelectorAll(".vlist-row").length, top: v.scrollTop });
        }
        requestAnimationFrame(frame);
      });`);
    const g = frames.gaps;
    results.scroll10k = {
      frames: g.length,
      p50_ms: Number(pct(g, 50).toFixed(1)),
      p95_ms: Number(pct(g, 95).toFixed(1)),
      p99_ms: Number(pct(g, 99).toFixed(1)),
      max_ms: Number(Math.max(...g).toFixed(1)),
      over_16_7_ms: g.filter((x) => x > 16.7 + 1).length,
      rows_in_dom: frames.rows,
      scrolled_px: frames.top,
    };
    // The same rows as static content (no virtual list, no DOM changes) scrolled the same way:
    // what this renderer costs per frame for the scroll itself.
    const baseline = await ui.js(`
      const v = document.querySelector(".vlist");
      const s = document.createElement("div");
      s.className = "vlist static-baseline";
      for (let i = 0; i < 2000; i++) {
        const r = v.querySelector(".vlist-row").cloneNode(true);
        r.style.position = "static";
        s.appendChild(r);
      }
      v.replaceWith(s);
      const gaps = [];
      let last;
      return new Promise((resolve) => {
        function frame(t) {
          if (last !== undefined) gaps.push(t - last);
          last = t;
          s.scrollTop += 440;
          if (gaps.length < 150) requestAnimationFrame(frame);
          else resolve(gaps);
        }
        requestAnimationFrame(frame);
      });`);
    results.scroll10k.static_content_p50_ms = Number(pct(baseline, 50).toFixed(1));
    results.scroll10k.static_content_p95_ms = Number(pct(baseline, 95).toFixed(1));
    console.log("frame times scrolling 10,000 tasks:", JSON.stringify(results.scroll10k));
  } finally {
    await ui.quit();
  }
}

console.log(`MEASUREMENTS ${JSON.stringify(results)}`);
