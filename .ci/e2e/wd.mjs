// A small W3C WebDriver client for tauri-driver (no client library), plus what the E2E and the
// measurements share: waiting, screenshots of the X screen, and the notification log.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** axe-core, pinned in ui/package.json (devDependencies), injected into the page as a script. */
const AXE_SOURCE = join(import.meta.dirname, "../../ui/node_modules/axe-core/axe.min.js");
let axeSource;

const DRIVER = process.env.TAURI_DRIVER_URL ?? "http://127.0.0.1:4444";
const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function wd(method, path, body) {
  const res = await fetch(`${DRIVER}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json.value).slice(0, 400)}`);
  return json.value;
}

/** Polls `fn` until it returns something truthy; throws with the last error on timeout. */
export async function until(what, fn, timeoutMs = 15000, everyMs = 150) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

/** One app window driven through WebDriver: launching a session launches the app (the window
 * process, which starts the resident on that data directory if it does not run). */
export class App {
  static async launch(application, args = []) {
    const session = await until(
      "a WebDriver session (the app starting)",
      () => wd("POST", "/session", { capabilities: { alwaysMatch: { "tauri:options": { application, args } } } }),
      30000,
      500,
    );
    const app = new App(session.sessionId);
    const i = args.indexOf("--data-dir");
    app.dataDir = i >= 0 ? args[i + 1] : null;
    await until("the UI to render", () => app.exists(".frame"), 20000);
    return app;
  }

  constructor(sid) {
    this.sid = sid;
  }

  path(p) {
    return `/session/${this.sid}${p}`;
  }

  /** Ends the app as the tray's Quit does: the window, and the resident with its engine
   * (COUNTERSIGN_RESIDENT --quit), so the next launch starts afresh on the ledger. */
  async quit() {
    await wd("DELETE", this.path("")).catch(() => {});
    const resident = process.env.COUNTERSIGN_RESIDENT;
    if (resident && this.dataDir) {
      spawnSync(resident, ["--quit", "--data-dir", this.dataDir], { timeout: 10000 });
      // Gone once its socket is (it removes it last, after releasing nothing else it holds
      // but the lock, which the OS releases with the process).
      await until("the resident to end", () => !existsSync(join(this.dataDir, "resident.sock")), 15000);
      await sleep(300);
    }
  }

  async find(css) {
    const v = await wd("POST", this.path("/element"), { using: "css selector", value: css });
    const id = v?.[ELEMENT] ?? v?.ELEMENT;
    if (!id) throw new Error(`no element for ${css}`);
    return id;
  }

  async exists(css) {
    const v = await wd("POST", this.path("/elements"), { using: "css selector", value: css });
    return Array.isArray(v) && v.length > 0;
  }

  async text(css) {
    return wd("GET", this.path(`/element/${await this.find(css)}/text`));
  }

  async click(css) {
    await wd("POST", this.path(`/element/${await this.find(css)}/click`), {});
  }

  /** Types into an element (focusing it first). */
  async type(css, value) {
    await wd("POST", this.path(`/element/${await this.find(css)}/value`), { text: value });
  }

  /** Presses keys as the user would on the page (the app's shortcuts listen on the window). */
  async keys(value) {
    await wd("POST", this.path(`/element/${await this.find("body")}/value`), { text: value });
  }

  /**
   * Presses keys on whatever has focus, as a keyboard would (WebDriver actions, not "send keys
   * to an element", which would move focus first). Names: Enter, Escape, Tab, or one character.
   */
  async press(...names) {
    const codes = { Enter: "\uE007", Escape: "\uE00C", Tab: "\uE004", ShiftTab: null };
    const actions = [];
    for (const n of names) {
      const value = codes[n] ?? n;
      actions.push({ type: "keyDown", value }, { type: "keyUp", value });
    }
    await wd("POST", this.path("/actions"), { actions: [{ type: "key", id: "keyboard", actions }] });
    await wd("DELETE", this.path("/actions")).catch(() => {});
  }

  /**
   * Runs axe-core on the page as it is now (WCAG 2.0-2.2 A/AA and best practices) and returns the
   * violations by impact with the rule ids, e.g. { critical: 0, serious: 1, moderate: 0, minor: 0,
   * rules: ["color-contrast (serious) x3"] }.
   */
  async axe() {
    axeSource ??= readFileSync(AXE_SOURCE, "utf8");
    if (!(await this.js(`return typeof window.axe === "object";`))) {
      await this.js(`${axeSource}\n;window.axe = window.axe ?? axe; return true;`);
    }
    const result = await this.js(`return window.axe
      .run(document, { resultTypes: ["violations"], runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"] } })
      .then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, where: v.nodes.slice(0, 2).map((n) => n.target.join(" ")) })));`);
    const counts = { critical: 0, serious: 0, moderate: 0, minor: 0, rules: [] };
    for (const v of result) {
      counts[v.impact ?? "minor"] += 1;
      counts.rules.push(`${v.id} (${v.impact}) x${v.nodes}: ${v.where.join(", ")}`);
    }
    return counts;
  }

  /** The window's size in CSS pixels; `setSize` resizes it (WebDriver Set Window Rect). */
  async size() {
    return wd("GET", this.path("/window/rect"));
  }
  async setSize(width, height) {
    return wd("POST", this.path("/window/rect"), { width, height });
  }

  /** What has focus: its data-testid, id, aria-label or tag, for focus assertions. */
  async focused() {
    return this.js(`const el = document.activeElement;
      if (!el || el === document.body) return "body";
      return el.dataset.testid ?? (el.id || el.getAttribute("aria-label") || el.tagName.toLowerCase());`);
  }

  /** Runs a script in the page; `args` are passed as `arguments`. */
  async js(script, ...args) {
    return wd("POST", this.path("/execute/sync"), { script, args });
  }

  /** Picks the <option> whose text contains `label` in the <select> at `css`. */
  async choose(css, label) {
    const ok = await this.js(
      `const s = document.querySelector(arguments[0]);
       if (!s) return false;
       const o = [...s.options].find((o) => o.textContent.includes(arguments[1]));
       if (!o) return false;
       s.value = o.value; s.selectedIndex = o.index;
       s.dispatchEvent(new Event("change", { bubbles: true }));
       s.dispatchEvent(new Event("input", { bubbles: true }));
       return true;`,
      css,
      label,
    );
    if (!ok) throw new Error(`no option "${label}" in ${css}`);
  }

  /** A screenshot once the page has painted its current state. */
  async shot(file) {
    await this.js(`return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))));`);
    await sleep(400);
    screenshot(file);
  }

  async go(hash) {
    await this.js(`location.hash = arguments[0]; return true;`, hash);
  }

  async bodyText() {
    return this.js(`return document.body.innerText;`);
  }
}

/** Saves what the X server shows (the window and any notification), as a person would see it. */
/**
 * The step runner every E2E script uses: runs `fn`, prints `ok   NAME (s)` or `FAIL NAME: …`
 * (then a screenshot of the screen into `failureShot`, and rethrows), and tells `onPass` the
 * name of each step that passed.
 */
/**
 * The demo's deployment question, in a window started with `--demo`: it reaches the inbox (beside
 * the demo agent's held call), opens, is approved there (a screenshot to `shot` first), and its
 * task completes.
 */
export async function demoApprovalCompletes(ui, shot) {
  await ui.go("#/inbox");
  const question = '.inbox-item[data-kind="question"]';
  const questions = () => ui.js(`return document.querySelectorAll(arguments[0]).length;`, question);
  await until("the demo deployment's question in the inbox", async () => (await questions()) === 1, 30000);
  await ui.click(question);
  await until("the question open", () => ui.exists('.inbox-detail [data-testid="approve"]'));
  await ui.shot(shot);
  await ui.click('.inbox-detail [data-testid="approve"]');
  await until("no question left in the inbox", async () => (await questions()) === 0, 15000);
  await ui.go("#/tasks");
  await until("the approved deployment to complete", async () =>
    ui.js(`return [...document.querySelectorAll(".task-row")].some((r) =>
      r.querySelector(".tool code")?.textContent === "deploy_service" && r.querySelector(".status.s-completed"));`), 30000);
}

/**
 * Every count of what waits, once they agree: the inbox's header, the navigation's badge (none
 * for 0), the entries listed and the window title's. Null while they differ (a list in flight).
 */
export async function waitingCounts(ui) {
  const seen = await ui.js(
    `return { header: Number(document.querySelector('[data-testid="inbox-count"]')?.textContent ?? NaN),
              badge: Number(document.querySelector('[data-testid="nav-pending"]')?.textContent ?? 0),
              listed: document.querySelectorAll(".inbox-item").length };`,
  );
  const title = seen.header === 0 ? "Countersign" : `Countersign — ${seen.header} waiting`;
  return seen.header === seen.badge && seen.header === seen.listed && windowTitled(title) ? seen.header : null;
}

export function stepper(failureShot, onPass = () => {}) {
  return async function step(name, fn) {
    const t0 = Date.now();
    try {
      await fn();
    } catch (e) {
      console.log(`FAIL ${name}: ${e.stack ?? e.message}`);
      try {
        screenshot(failureShot);
        console.log(`     screenshot of the failure: ${failureShot}`);
      } catch {}
      throw e;
    }
    onPass(name);
    console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  };
}

export function screenshot(file) {
  execFileSync("import", ["-window", "root", file]);
}

/** True when an X window has exactly this title. */
export function windowTitled(title) {
  try {
    const ids = execFileSync("xdotool", ["search", "--name", `^${title}$`]).toString().trim();
    return ids.length > 0;
  } catch {
    return false;
  }
}

/**
 * Every `org.freedesktop.Notifications.Notify` call on the session bus, as the daemon received
 * it: `{ app, replacesId, summary, body }`. A notification replacing an earlier one has a
 * non-zero `replacesId`.
 */
export class NotificationLog {
  constructor() {
    this.done = [];
    this.proc = spawn("dbus-monitor", ["--session", "type='method_call',interface='org.freedesktop.Notifications',member='Notify'"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    // The last message has no line after it yet: `calls` parses it as it stands.
    this.block = undefined;
    const flush = () => {
      if (this.block) this.done.push(parseNotify(this.block));
      this.block = undefined;
    };
    createInterface({ input: this.proc.stdout }).on("line", (line) => {
      if (line.startsWith("method call") && line.includes("member=Notify")) {
        flush();
        this.block = [];
      } else if (/^\S/.test(line)) {
        flush();
      } else if (this.block) {
        this.block.push(line);
      }
    });
    this.proc.stdout.on("end", flush);
  }

  get calls() {
    return this.block ? [...this.done, parseNotify(this.block)] : this.done;
  }

  /** New notifications (not replacements) whose summary includes `summary`. */
  fresh(summary) {
    return this.calls.filter((c) => c.replacesId === 0 && c.summary.includes(summary));
  }

  stop() {
    this.proc.kill();
  }
}

function parseNotify(lines) {
  // Args in order: app_name, replaces_id, app_icon, summary, body, actions[], hints{}, timeout.
  const args = [];
  let current;
  for (const line of lines) {
    if (/^\s*array \[/.test(line)) break;
    const m = /^\s*(string|uint32|int32) (.*)$/.exec(line);
    if (m) {
      current = { type: m[1], raw: m[2] };
      args.push(current);
    } else if (current) {
      current.raw += `\n${line}`;
    }
  }
  const str = (a) => (a ? a.raw.replace(/^"/, "").replace(/"$/, "") : "");
  // `raw`: the whole call as dbus-monitor printed it (actions and hints, e.g. "sound-name").
  return { app: str(args[0]), replacesId: Number(args[1]?.raw ?? -1), summary: str(args[3]), body: str(args[4]), raw: lines.join("\n") };
}

/** Starts a process that prints its URL on the first stdout line; resolves { url, proc }. */
export function startServer(cmd, args, env = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
    const timer = setTimeout(() => reject(new Error(`${cmd} printed no URL in 60 s`)), 60000);
    createInterface({ input: proc.stdout }).once("line", (line) => {
      clearTimeout(timer);
      resolve({ url: line.trim(), proc });
    });
    proc.once("exit", (code) => reject(new Error(`${cmd} exited with ${code} before printing its URL`)));
  });
}
