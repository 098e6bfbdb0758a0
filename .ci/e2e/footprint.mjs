// Background-mode footprint (numbers, not assertions). Run by footprint.sh inside a private
// session (Xvfb + D-Bus + dunst), the app started directly: 1,000 working tasks on a demo server
// (polled every 5 s); the app (the window process, which starts the resident) with its window
// open, then closed (WM_DELETE_WINDOW: the window process ends), then RSS and PSS summed over
// every Countersign process (the resident and all it started); then reopens from the tray's Open
// (dbusmenu over D-Bus → "window reopened, first paint N ms after it was asked for"), ten of
// them, and five from a second launch (handed to the resident, which starts the window process)
// interleaved with five where the launch is the window itself, each closed again. Then what
// holds the resident's memory (smaps by mapping and by stack), the resident started as at login
// (`--background`: no window ever), and the engine alone (`countersign watch`) on the same tasks.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_RESIDENT, COUNTERSIGN_CLI (absolute paths), MEASURE_WORK.
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { sleep, startServer, until } from "./wd.mjs";

const app = process.env.COUNTERSIGN_APP;
const residentExe = process.env.COUNTERSIGN_RESIDENT;
const cli = process.env.COUNTERSIGN_CLI;
const work = process.env.MEASURE_WORK;
assert.ok(app && residentExe && cli && work, "run .ci/e2e/footprint.sh");
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
/** MiB: RSS and PSS (proportional: shared pages split between their users) of the trees of `pids`. */
function footprint(...pids) {
  const ps = [...new Set(pids.flatMap((p) => tree(p)))];
  const sum = (f) => ps.reduce((s, p) => s + f(p), 0) / 1024;
  return {
    rss: sum((p) => field(`/proc/${p}/status`, /VmRSS:\s+(\d+) kB/)),
    pss: sum((p) => field(`/proc/${p}/smaps_rollup`, /^Pss:\s+(\d+) kB/m)),
    processes: ps.map(comm),
    each: ps.map((p) => `${comm(p)} ${(field(`/proc/${p}/status`, /VmRSS:\s+(\d+) kB/) / 1024).toFixed(1)}`),
  };
}
/**
 * What holds the memory of one process: /proc/PID/smaps summed by mapping (a library by its
 * file name, the executable, [heap], anonymous memory), largest PSS first, in MiB.
 */
function byMapping(pid) {
  const totals = new Map();
  let current = "?";
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const name = head[1].trim();
      current = name === "" ? "[anon]" : name.startsWith("/") ? name.split("/").pop().replace(/\.so[.\d]*$/, ".so") : name;
      if (!totals.has(current)) totals.set(current, { rss: 0, pss: 0 });
      continue;
    }
    const m = /^(Rss|Pss):\s+(\d+) kB/.exec(line);
    if (m) totals.get(current)[m[1].toLowerCase()] += Number(m[2]) / 1024;
  }
  return [...totals].map(([name, v]) => ({ name, ...v })).sort((a, b) => b.pss - a.pss);
}
/** Sums mappings by what they belong to (GTK/GDK/WebKit/GLib stacks vs. our own). */
function byStack(rows) {
  const stacks = [
    ["WebKitGTK + JavaScriptCore", /webkit|javascriptcore|libsoup|gstreamer|libgst|libicu|libxslt|libxml|libwoff|libwebp|libavif|libjxl|libhyphen|libmanette|libenchant|libsecret|libseccomp|libwpe|libepoxy|libEGL|libGL|libgbm|libdrm|libharfbuzz-icu/i],
    ["GTK/GDK/cairo/pango + X11 + fonts", /libgtk|libgdk|libcairo|libpango|libharfbuzz|libfreetype|libfontconfig|libpixman|libX|libxcb|libxkb|libatk|libat-spi|librsvg|libpng|libjpeg|libtiff|libepoxy|libayatana|libdbusmenu|libappindicator|\.ttf|\.otf|fonts|\.cache|icon-theme|gschemas|mime\.cache|locale-archive/i],
    ["Mesa software GL (llvmpipe) and flite speech, loaded for WebKit", /libLLVM|_dri\.so|libgallium|libglapi|libflite|libasound|SYSV/i],
    ["GLib/GIO/gobject", /libglib|libgio|libgobject|libgmodule|libffi|libpcre/i],
    ["the executable", /countersign/],
    ["heap and anonymous memory", /^\[(heap|anon)\]$/],
  ];
  const out = new Map(stacks.map(([n]) => [n, 0]));
  out.set("everything else (libc, ssl, sqlite, stacks…)", 0);
  for (const r of rows) {
    const hit = stacks.find(([, re]) => re.test(r.name));
    const key = hit ? hit[0] : "everything else (libc, ssl, sqlite, stacks…)";
    out.set(key, out.get(key) + r.pss);
  }
  return out;
}
const windows = (pid) => {
  const r = spawnSync("xdotool", ["search", "--onlyvisible", "--pid", String(pid), "--name", "^Countersign"]);
  return r.status === 0 ? r.stdout.toString().trim().split("\n").filter(Boolean) : [];
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

  const log = [];
  const follow = (p) => createInterface({ input: p.stderr }).on("line", (l) => log.push(l));
  const env = { ...process.env, RUST_LOG: "info" };
  proc = spawn(app, ["--data-dir", dir], { stdio: ["ignore", "ignore", "pipe"], env });
  follow(proc);
  await until("the first paint", () => log.some((l) => /first paint \d+ ms after launch/.test(l)), 60000);
  const resident = Number(/resident (\d+) on/.exec(log.find((l) => /countersign: resident \d+ on /.test(l)))[1]);
  await sleep(5000);
  const open = footprint(proc.pid, resident);
  const closeWindow = async (pid) => {
    const [id] = windows(pid);
    execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), id]);
    await until("the window process gone", () => !tree(resident).includes(pid) && !parents().has(pid), 20000);
  };
  await closeWindow(proc.pid);
  await sleep(20000); // polled a few rounds (every 5 s) in the background
  const samples = [];
  for (let i = 0; i < 5; i++) {
    samples.push(footprint(resident));
    await sleep(2000);
  }
  const mib = (f) => Number(median(samples.map(f)).toFixed(1));
  console.log(
    "background footprint with %d tracked tasks: RSS %s MiB, PSS %s MiB (RSS MiB by process: %s); with the window open: RSS %s MiB, PSS %s MiB (%s)",
    working,
    mib((s) => s.rss),
    mib((s) => s.pss),
    samples.at(-1).each.join(", "),
    open.rss.toFixed(1),
    open.pss.toFixed(1),
    open.processes.join(", "),
  );

  const rows = byMapping(resident);
  console.log("what holds the resident's memory (PSS by mapping, MiB; top 12):");
  for (const r of rows.slice(0, 12)) console.log(`  ${r.pss.toFixed(1).padStart(7)}  (RSS ${r.rss.toFixed(1)})  ${r.name}`);
  console.log("the same, by stack:");
  for (const [name, pss] of byStack(rows)) console.log(`  ${pss.toFixed(1).padStart(7)}  ${name}`);

  // The tray's Open, as a tray host sends it (dbusmenu Event "clicked" on the resident's menu).
  const busName = execFileSync("busctl", ["--user", "list", "--no-legend"]).toString().split("\n")
    .map((l) => l.trim().split(/\s+/)).find(([n, p]) => n?.startsWith(":") && Number(p) === resident)?.[0];
  const layout = execFileSync("gdbus", ["call", "--session", "--dest", busName, "--object-path", "/MenuBar", "--method", "com.canonical.dbusmenu.GetLayout", "--", "0", "-1", "[]"]).toString();
  const openId = /\((\d+), \{[^}]*'label': <'Open Countersign'>/.exec(layout)[1];
  const windowProcess = () => tree(resident).slice(1).find((p) => comm(p).startsWith("countersign-des"));
  const fromTray = [];
  const reopen = async (into) => {
    log.length = 0;
    execFileSync("gdbus", ["call", "--session", "--dest", busName, "--object-path", "/MenuBar", "--method", "com.canonical.dbusmenu.Event", "--", openId, "clicked", "<int32 0>", "0"]);
    const line = await until("the window's first paint", () => log.find((l) => /window reopened, first paint (\d+) ms/.test(l)), 30000);
    into.push(Number(/first paint (\d+) ms/.exec(line)[1]));
    await sleep(1000);
    await closeWindow(windowProcess());
  };
  for (let i = 0; i < 10; i++) {
    await sleep(2000);
    await reopen(fromTray);
  }
  // A second launch (the desktop entry, a link) asks the resident, which starts the window
  // process: from the launch's spawn to the first paint the window reports. Interleaved with a
  // second launch that is the window itself (a launch under WebDriver is:
  // TAURI_WEBVIEW_AUTOMATION=true makes it so here, which also lets WebKit be automated: not
  // exactly a first launch, the closest one with a resident running).
  const fromLaunch = [];
  const fromLaunchItself = [];
  const launchOnce = async (into, itself) => {
    log.length = 0;
    const asked = Date.now();
    const second = spawn(app, ["--data-dir", dir], { stdio: ["ignore", "ignore", "pipe"], env: itself ? { ...env, TAURI_WEBVIEW_AUTOMATION: "true" } : env });
    follow(second);
    const line = await until("the window's first paint", () => log.find((l) => /first paint \d+ ms after launch \(unix_ms=\d+\)/.test(l)), 30000);
    into.push(Number(/unix_ms=(\d+)/.exec(line)[1]) - asked);
    await sleep(1000);
    await closeWindow(itself ? second.pid : windowProcess());
  };
  for (let i = 0; i < 5; i++) {
    await sleep(2000);
    await launchOnce(fromLaunch, false);
    await sleep(2000);
    await launchOnce(fromLaunchItself, true);
  }
  console.log(
    "window reopen to first paint: median %d ms from the tray's Open (runs %s); from a second launch's spawn: median %d ms handed to the resident (runs %s), against %d ms with the launch itself the window, interleaved (runs %s)",
    median(fromTray),
    fromTray.join(", "),
    median(fromLaunch),
    fromLaunch.join(", "),
    median(fromLaunchItself),
    fromLaunchItself.join(", "),
  );

  // Started at login (`--background`): the resident alone, no window ever.
  spawnSync(residentExe, ["--quit", "--data-dir", dir], { timeout: 10000 });
  await until("the resident ended", () => !parents().has(resident), 15000);
  proc = spawn(residentExe, ["--background", "--data-dir", dir], { stdio: ["ignore", "ignore", "pipe"], env });
  await sleep(25000);
  const bg = [];
  for (let i = 0; i < 5; i++) {
    bg.push(footprint(proc.pid));
    await sleep(2000);
  }
  console.log(
    "started with --background (as at login; no window ever): RSS %s MiB, PSS %s MiB (%s)",
    median(bg.map((s) => s.rss)).toFixed(1),
    median(bg.map((s) => s.pss)).toFixed(1),
    bg.at(-1).each.join(", "),
  );
  proc.kill("SIGTERM");
  await new Promise((r) => (proc.exitCode !== null ? r() : proc.once("exit", r)));

  // The engine without GTK or WebKit: `countersign watch` runs the same core engine on the same
  // 1,000 tasks (what the engine process of a split design would cost, before a tray helper).
  proc = spawn(cli, ["--data-dir", dir, "watch"], { stdio: ["ignore", "ignore", "ignore"] });
  await sleep(25000);
  const engine = [];
  for (let i = 0; i < 5; i++) {
    engine.push(footprint(proc.pid));
    await sleep(2000);
  }
  console.log(
    "the engine alone (countersign watch, no GTK/WebKit), same 1,000 tasks: RSS %s MiB, PSS %s MiB",
    median(engine.map((s) => s.rss)).toFixed(1),
    median(engine.map((s) => s.pss)).toFixed(1),
  );
} finally {
  proc?.kill("SIGKILL");
  demo.proc.kill();
}
