// Processes and windows of the two Countersign processes (the resident, and the window process it
// or a person starts), read from /proc and the X server, for background.mjs and tray.mjs.
import { readdirSync, readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { createConnection } from "node:net";
import { join } from "node:path";

/** Every process as pid → {ppid, comm} (comm: at most 15 characters, as /proc has it). */
function table() {
  const out = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid …; comm may hold spaces and parentheses.
      const close = stat.lastIndexOf(")");
      const [state, ppid] = stat.slice(close + 2).split(" ");
      if (state !== "Z") out.set(Number(entry), { ppid: Number(ppid), comm: stat.slice(stat.indexOf("(") + 1, close) });
    } catch {}
  }
  return out;
}

/** Every living process under each of `pids` (children, grandchildren…), with its command name. */
export function descendants(...pids) {
  const all = table();
  const out = [];
  const walk = (p) => {
    for (const [child, { ppid, comm }] of all) {
      if (ppid === p) {
        out.push({ pid: child, comm });
        walk(child);
      }
    }
  };
  for (const pid of pids) walk(pid);
  return out;
}

export const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
};

/** WebKit's processes under `pids`. */
export const webkit = (...pids) => descendants(...pids).filter((p) => p.comm.startsWith("WebKit"));

/** The GTK, WebKit and JavaScriptCore libraries a process has mapped (its /proc/PID/maps). */
export function uiLibraries(pid) {
  let maps = "";
  try {
    maps = readFileSync(`/proc/${pid}/maps`, "utf8");
  } catch {
    return [];
  }
  const libs = new Set();
  for (const line of maps.split("\n")) {
    const m = line.match(/\/(lib(?:gtk|gdk|webkit|javascriptcore)[^/\s]*)$/);
    if (m) libs.add(m[1]);
  }
  return [...libs];
}

/** The visible "Countersign" X windows of the processes `pids` (GTK sets _NET_WM_PID). */
export function windows(...pids) {
  const ids = [];
  for (const pid of pids) {
    const r = spawnSync("xdotool", ["search", "--onlyvisible", "--pid", String(pid), "--name", "^Countersign"]);
    if (r.status === 0) ids.push(...r.stdout.toString().trim().split("\n").filter(Boolean));
  }
  return ids;
}

/** The window processes (`countersign-des…`) under `pids`. */
export const windowProcesses = (...pids) => descendants(...pids).filter((p) => p.comm.startsWith("countersign-des"));

/** The residents (`countersign-resident`) running on `dataDir`, by their command line. */
export function residentsOn(dataDir) {
  const out = [];
  for (const [pid, { comm }] of table()) {
    if (!comm.startsWith("countersign-res")) continue;
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const i = args.indexOf("--data-dir");
      if (i >= 0 && args[i + 1] === dataDir && !args.includes("--quit")) out.push(pid);
    } catch {}
  }
  return out;
}

/** The tray menu (com.canonical.dbusmenu at /MenuBar) that process `pid` exports on the session bus. */
export function trayMenuOf(pid) {
  const names = spawnSync("busctl", ["--user", "list", "--no-legend"]).stdout?.toString() ?? "";
  for (const line of names.split("\n")) {
    const [name, owner] = line.trim().split(/\s+/);
    if (Number(owner) !== pid || !name?.startsWith(":")) continue;
    // A name that never answers introspection (the resident owns several) would hold this 25 s.
    const tree = spawnSync("busctl", ["--user", "--timeout=2", "tree", name, "--list"]).stdout?.toString() ?? "";
    const path = tree.split("\n").find((p) => p.trim() === "/MenuBar");
    if (path) return { name, path: path.trim() };
  }
  return null;
}

/** Asks the resident on `dataDir` one thing over its control socket (`resident.sock`, one JSON
 * line each way; `core/src/resident.rs`), e.g. `{ ask: "state" }`; resolves with its reply. */
export function askResident(dataDir, request) {
  return new Promise((resolve, reject) => {
    const socket = createConnection(join(dataDir, "resident.sock"));
    let buffer = "";
    socket.setTimeout(5000, () => socket.destroy(new Error("the resident did not answer in 5 s")));
    socket.on("connect", () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on("data", (d) => {
      buffer += d;
      const end = buffer.indexOf("\n");
      if (end >= 0) {
        socket.end();
        try {
          resolve(JSON.parse(buffer.slice(0, end)));
        } catch (e) {
          reject(e);
        }
      }
    });
    socket.on("error", reject);
    socket.on("close", () => reject(new Error("the resident closed the connection without answering")));
  });
}
