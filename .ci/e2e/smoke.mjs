// E2E smoke test of the built app through tauri-driver (W3C WebDriver, no client library).
// Run inside a private session: .ci/e2e/run.sh (starts tauri-driver and this script).
// Env: COUNTERSIGN_APP (absolute path of the built binary), COUNTERSIGN_SEED (seed inbox),
// E2E_OUT (directory for screenshots).
import { execFileSync } from "node:child_process";
import assert from "node:assert/strict";

const DRIVER = process.env.TAURI_DRIVER_URL ?? "http://127.0.0.1:4444";
const app = process.env.COUNTERSIGN_APP;
const out = process.env.E2E_OUT ?? "/tmp";
assert.ok(app, "COUNTERSIGN_APP must name the built app");

async function wd(method, path, body) {
  const res = await fetch(`${DRIVER}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json.value)}`);
  return json.value;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(150);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

const results = [];
async function step(name, fn) {
  try {
    await fn();
    results.push([name, true]);
    console.log(`ok   ${name}`);
  } catch (e) {
    results.push([name, false]);
    console.log(`FAIL ${name}: ${e.message}`);
  }
}

const session = await until("a WebDriver session", () =>
  wd("POST", "/session", { capabilities: { alwaysMatch: { "tauri:options": { application: app } } } }),
);
const sid = session.sessionId;
const S = (p) => `/session/${sid}${p}`;
const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";
const find = async (css) => {
  const v = await wd("POST", S("/element"), { using: "css selector", value: css });
  const id = v?.[ELEMENT] ?? v?.ELEMENT;
  if (!id) throw new Error(`no element id for ${css}: ${JSON.stringify(v)}`);
  return id;
};
const text = async (css) => wd("GET", S(`/element/${await find(css)}/text`));
const keys = async (value) =>
  wd("POST", S(`/element/${await find("body")}/value`), { text: value });
// WebKitWebDriver's own screenshot renders a fresh snapshot that can miss the live state, so take
// what the X server shows, as a person would see it.
const shot = async (name) => execFileSync("import", ["-window", "root", `${out}/${name}.png`]);
// The native window title (set by the shell), as the X server sees it.
const windowTitled = (t) => {
  try {
    return execFileSync("xdotool", ["search", "--name", `^${t}$`]).toString().trim().length > 0;
  } catch {
    return false;
  }
};
const dunstDisplayed = () => Number(execFileSync("dunstctl", ["count", "displayed"]).toString().trim());

try {
  await step("the seeded inbox renders with the requesting server", async () => {
    await until("4 waiting inputs", async () => (await text('[data-testid="inbox-count"]')) === "4");
    assert.equal(await text('[data-testid="requesting-server"]'), "peer-fastmcp-tasks");
    await until("window title with the count", () => windowTitled("Countersign — 4 waiting"));
  });

  await step("one desktop notification per input", async () => {
    await until("4 notifications", () => dunstDisplayed() === 4, 10000);
  });

  await step("server markup is shown as text", async () => {
    await keys("j");
    await until("second input", async () => (await text('[data-testid="requesting-server"]')) === "peer-rmcp");
    assert.equal(await text(".question"), "Choose the parameters for the new cluster <b>prod-eu</b>.");
    await keys("k");
  });

  await step("keyboard: a reviews, a sends, the inbox shrinks", async () => {
    await until("first input selected", async () => (await text('[data-testid="requesting-server"]')) === "peer-fastmcp-tasks");
    await keys("a");
    await until("review step", async () => (await text(".review-lead")).includes("peer-fastmcp-tasks"));
    await shot("e2e-review");
    await keys("a");
    await until("3 waiting inputs", async () => (await text('[data-testid="inbox-count"]')) === "3");
    await until("window title follows", () => windowTitled("Countersign — 3 waiting"));
  });

  await step("tasks view lists the ledger", async () => {
    await keys("2");
    await until("6 tasks", async () => (await text('[data-testid="task-count"]')) === "6");
    await shot("e2e-tasks");
  });
} finally {
  await wd("DELETE", S("")).catch(() => {});
}

const failed = results.filter(([, ok]) => !ok).length;
console.log(`e2e: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
