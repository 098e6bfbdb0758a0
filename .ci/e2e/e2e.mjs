// End-to-end tests of the built app in a real window, against real servers: the independent
// fastmcp peer (Python) and our demo server behind a bearer token, driven through tauri-driver
// and WebKitWebDriver inside a private session (Xvfb, D-Bus, dunst, unlocked gnome-keyring).
// Run by .ci/e2e/run.sh. Fails loudly on the first broken expectation (later steps build on
// earlier ones), after a screenshot of the moment it broke.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_CLI, PEER_PYTHON (absolute paths), E2E_WORK (scratch dir),
// SCREENSHOTS (where the views are saved).
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { App, NotificationLog, screenshot, sleep, startServer, until, waitingCounts, windowTitled, stepper } from "./wd.mjs";
import { alive, askResident, residentsOn, trayMenuOf } from "./procs.mjs";

const root = resolve(import.meta.dirname, "../..");
const app = process.env.COUNTERSIGN_APP;
const cli = process.env.COUNTERSIGN_CLI;
const python = process.env.PEER_PYTHON;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS ?? join(root, ".ci/artifacts/screenshots");
for (const [k, v] of Object.entries({ COUNTERSIGN_APP: app, COUNTERSIGN_CLI: cli, PEER_PYTHON: python, E2E_WORK: work })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/run.sh)`);
}
mkdirSync(shots, { recursive: true });
const dataDir = join(work, "ledger");
const KEYRING_SERVICE = "dev.countersign.app";
const peerToken = `e2e-fastmcp-${randomBytes(12).toString("hex")}`;
const demoToken = `e2e-demo-${randomBytes(12).toString("hex")}`;
// Script and markup in every kind of server string the app shows.
const XSS = `<img src=x onerror="window.__xss='img'"><script>window.__xss='script'</script><b>bold</b>`;
const XSS_SERVER = `peer <svg onload="window.__xss='svg'"></svg>`;

const started = Date.now();
const passed = [];
const step = stepper(join(shots, "failure.png"), (name) => passed.push(name));

const cleanups = [];
process.on("exit", () => cleanups.reverse().forEach((f) => f()));

const notifications = new NotificationLog();
cleanups.push(() => notifications.stop());

const peer = await startServer(python, [join(root, "tests/peers/fastmcp_server.py"), "--port", "0"], {
  PEER_STEP_SECONDS: "0.2",
  PEER_POLL_INTERVAL_MS: "200",
});
cleanups.push(() => peer.proc.kill());
const demo = await startServer(cli, ["demo-server", "--port", "0", "--speed", "10", "--poll-interval-ms", "200"], {
  COUNTERSIGN_DEMO_TOKEN: demoToken,
});
cleanups.push(() => demo.proc.kill());
console.log(`fastmcp peer at ${peer.url}; token-protected demo server at ${demo.url}`);

let ui = await App.launch(app, ["--data-dir", dataDir]);
cleanups.push(() => void ui.quit());

const keyringLookup = (serverId) => {
  try {
    return execFileSync("secret-tool", ["lookup", "service", KEYRING_SERVICE, "username", `${serverId}@${dataDir}`]).toString();
  } catch {
    return "";
  }
};
const ledgerBytes = () =>
  ["ledger.sqlite3", "ledger.sqlite3-wal", "ledger.sqlite3-shm"]
    .map((f) => join(dataDir, f))
    .filter(existsSync)
    .map((f) => readFileSync(f));

async function addServer(name, url, token) {
  await ui.go("#/servers");
  await ui.type('[data-testid="server-add"] input[name="name"]', name);
  await ui.type('[data-testid="server-add"] input[name="url"]', url);
  if (token) await ui.type('[data-testid="server-add"] input[name="token"]', token);
  await ui.click('[data-testid="server-add"] button[type="submit"]');
  // The form clears when server_add returned (the token is then in the keyring).
  await until(`server_add of ${name} to return`, async () => {
    const state = await ui.js(`return { name: document.querySelector('[data-testid="server-add"] input[name="name"]').value,
      error: document.querySelector('[data-testid="server-add"] .banner.error')?.innerText ?? null };`);
    if (state.error) throw new Error(`adding ${name} failed: ${state.error}`);
    return state.name === "";
  }, 20000);
  const card = await until(`server ${name} listed`, () =>
    ui.js(`const c = [...document.querySelectorAll("article.server")].find((a) => a.dataset.server === arguments[0]);
           return c ? { id: Number(c.dataset.serverId), token: c.querySelector('[data-testid="token"]').textContent, health: c.querySelector('[data-testid="health"]').textContent } : null;`, name),
  );
  return card;
}

/** Calls a tool through the Call view's generated form; returns the new task's id. */
async function callTool(server, tool, fields) {
  await ui.go("#/call");
  await until("the call view", () => ui.exists('[data-testid="call-server"]'));
  await ui.choose('[data-testid="call-server"]', server);
  await until(`tools of ${server}`, () => ui.js(`return document.querySelector('[data-testid="call-tool"]').options.length > 1;`));
  await ui.choose('[data-testid="call-tool"]', tool);
  await until("the argument form", () => ui.exists('[data-testid="args-form"]'));
  for (const [name, value] of Object.entries(fields)) {
    // Text fields are typed into; a few choices are radio buttons, clicked as a person would.
    const radio = `[data-field="${name}"] input[type="radio"][value="${CSS_escape(value)}"]`;
    if (await ui.exists(`[data-field="${name}"] input[type="radio"]`)) await ui.click(radio);
    else await ui.type(`#f-${name}`, value);
  }
  await ui.click('[data-testid="args-form"] button[type="submit"]');
  const link = await until("the task handle", () => ui.text('[data-testid="call-task-link"]'), 20000);
  return link.replace(/^task /, "");
}

/** A string as a CSS attribute value inside double quotes. */
const CSS_escape = (v) => v.replace(/["\\]/g, "\\$&");

/** Clears the screen of notifications before a screenshot of a view (the log keeps them). */
const closeNotifications = () => execFileSync("dunstctl", ["close-all"]);

const inboxCount = async () => Number(await ui.text('[data-testid="inbox-count"]'));

let peerServer, demoServer, deployTask;

/** axe-core in the view as it is: no critical or serious violation (issue 14). */
async function assertAccessible(where) {
  const r = await ui.axe();
  assert.equal(r.critical + r.serious, 0, `accessibility checker in ${where}: ${r.critical} critical, ${r.serious} serious:\n  ${r.rules.join("\n  ")}`);
}
const VIEWS = ["#/inbox", "#/tasks", "#/servers", "#/call", "#/audit", "#/agents", "#/settings"];

await step("the accessibility checker finds nothing critical or serious in the empty views", async () => {
  for (const v of VIEWS) {
    await ui.go(v);
    await sleep(300);
    await assertAccessible(`${v} (empty)`);
  }
  await ui.go("#/inbox");
  assert.match(await ui.text(".inbox-list .empty"), /Nothing waits for you/);
  // With no server yet, every empty view offers the built-in demo server (one click).
  assert.ok(await ui.exists('.inbox-list [data-testid="try-demo"]'), "the empty inbox offers the demo server");
  await ui.go("#/servers");
  assert.ok(await ui.exists('[data-testid="try-demo"]'), "the empty server list offers the demo server");
});

await step("adds the fastmcp peer with a token: the token is in the OS keyring, not in the ledger", async () => {
  peerServer = await addServer("fastmcp", peer.url, peerToken);
  assert.equal(peerServer.token, "stored in the OS keyring");
  assert.match(peerServer.health, /^reachable/, "discovered on add");
  assert.equal(keyringLookup(peerServer.id), peerToken, "secret-tool must find the token in the Secret Service");
  const bytes = ledgerBytes();
  assert.ok(bytes.length >= 1, "the ledger exists");
  for (const b of bytes) assert.equal(b.indexOf(peerToken), -1, "the token must never be written to the SQLite files");
});

await step("adds the token-protected demo server (its token, too, only in the keyring)", async () => {
  demoServer = await addServer("secure-demo", demo.url, demoToken);
  assert.equal(demoServer.token, "stored in the OS keyring");
  assert.equal(keyringLookup(demoServer.id), demoToken);
  for (const b of ledgerBytes()) assert.equal(b.indexOf(demoToken), -1);
});

await step("calls approve_deploy: the question reaches the inbox and exactly one notification", async () => {
  deployTask = await callTool("fastmcp", "approve_deploy", { service: "web-frontend" });
  await ui.shot(join(shots, "call.png"));
  await ui.go("#/inbox");
  await until("1 question in the inbox", async () => (await inboxCount()) === 1, 20000);
  assert.equal(await ui.text('[data-testid="requesting-server"]'), "fastmcp");
  assert.equal(await ui.text(".question"), "Approve deployment of 'web-frontend'?");
  assert.match(await ui.text(".inbox-item .item-top"), /fastmcp · approve_deploy/);
  assert.match(await ui.text('[data-testid="ttl"]'), /TTL .* left/);
  await until("the window title with the count", () => windowTitled("Countersign — 1 waiting"), 10000);
  await until("the notification", () => notifications.fresh("fastmcp · approve_deploy").length >= 1, 10000);
  await sleep(1500); // several polls later: still one
  const fresh = notifications.fresh("fastmcp · approve_deploy");
  assert.equal(fresh.length, 1, `exactly one notification per question, got ${JSON.stringify(fresh)}`);
  assert.equal(fresh[0].app, "Countersign");
  assert.equal(fresh[0].body, "Approve deployment of 'web-frontend'?");
  await ui.shot(join(shots, "inbox.png"));
});

await step("restarted mid-question: still pending, not notified again, tokens read back from the keyring", async () => {
  await ui.quit();
  // From here on the app also runs the local MCP gateway (issue 13), on any free port.
  ui = await App.launch(app, ["--data-dir", dataDir, "--gateway", "0"]);
  await ui.go("#/inbox");
  await until("the question after the restart", async () => (await inboxCount()) === 1, 15000);
  assert.equal(await ui.text(".question"), "Approve deployment of 'web-frontend'?");
  await sleep(2500); // the resumed engine has polled the task several times by now
  assert.equal(notifications.fresh("fastmcp · approve_deploy").length, 1, "a restart must not notify again");
  // The demo server answers 401 without its token: a task that completes proves the engine's
  // polls carried the token read from the keyring at launch.
  const id = await callTool("secure-demo", "run_ci_pipeline", { repo: "acme/web" });
  await ui.go("#/tasks");
  await ui.click(`.task-row[data-task-id="${id}"]`);
  await until("the pipeline to complete with the keyring's token", async () => (await ui.text('[data-testid="task-status"]')) === "Completed", 30000);
});

await step("answers through the form: the task completes and the timeline shows every step", async () => {
  await ui.go("#/inbox");
  await until("the question", async () => (await inboxCount()) === 1);
  assert.equal(await ui.js(`return document.querySelector(".elicitation").dataset.kind;`), "approval", "a yes/no question is an approval");
  await ui.type("#f-reason", "e2e approval");
  await ui.keys("a"); // typed on the page, not in the field: the shortcut, which asks first
  await until("a asks before approving", async () => (await ui.js(`return document.querySelector('[data-testid="armed"]')?.dataset.armed ?? null;`)) === "approve");
  assert.equal(await inboxCount(), 1, "one a sends nothing");
  await ui.keys("a");
  await until("an empty inbox", async () => (await inboxCount()) === 0);
  await until("the title without a count", () => windowTitled("Countersign"), 10000);
  closeNotifications();
  await ui.go("#/tasks");
  await ui.click(`.task-row[data-task-id="${deployTask}"]`);
  await until("the task to complete", async () => (await ui.text('[data-testid="task-status"]')) === "Completed", 20000);
  const kinds = await until("the full timeline", async () => {
    const k = await ui.js(`return [...document.querySelectorAll('[data-testid="event-list"] li')].map((li) => li.dataset.kind);`);
    return k.includes("task_finished") && k.includes("update_acknowledged") ? k : null;
  });
  for (const kind of ["task_created", "task_updated", "input_requested", "input_answered", "update_acknowledged", "task_finished"]) {
    assert.ok(kinds.includes(kind), `the timeline must show ${kind}: ${kinds.join(", ")}`);
  }
  const bands = await ui.js(`return [...document.querySelectorAll('[data-testid="timeline-axis"] .tl-band')].map((b) => b.dataset.status);`);
  assert.ok(bands.includes("input_required") && bands.at(-1) === "completed", `status bands: ${bands}`);
  assert.match(await ui.text('[data-testid="result"]'), /approved, DEPLOYED \(reason='e2e approval'\)/);
  assert.match(await ui.text('[data-testid="event-list"]'), /answered: accept/);
  // "Copy link" gives the same link as the CLI's `task show`.
  await ui.click('[data-testid="copy-link"]');
  const link = await until("the task's link", () => ui.js(`return document.querySelector('[data-testid="task-link"]')?.value ?? null;`));
  const shown = JSON.parse(execFileSync(cli, ["--data-dir", dataDir, "--json", "task", "show", deployTask]).toString());
  assert.equal(link, shown.link);
  assert.match(link, /^countersign:\/\/task\/http/);
  await ui.shot(join(shots, "task-detail.png"));
});

await step("the audit log records the decision and exports it as CSV and JSON", async () => {
  closeNotifications();
  await ui.go("#/audit");
  const row = await until("the answer in the audit log", () =>
    ui.js(`const r = document.querySelector('tr[data-action="answer_accept"]'); return r ? r.innerText : null;`),
  );
  assert.match(row, /Approve deployment of 'web-frontend'\?/);
  assert.match(row, /"reason":"e2e approval"/);
  assert.match(row, /^.*\bapproved\b/m, "the decision in the person's terms");
  for (const [button, ext] of [["export-csv", "csv"], ["export-json", "json"]]) {
    await ui.click(`[data-testid="${button}"]`);
    const done = await until("the export", () => ui.text('[data-testid="export-done"]'));
    const path = /written to (.+)$/.exec(done)?.[1];
    assert.ok(path?.endsWith(`.${ext}`) && existsSync(path), `exported file: ${done}`);
    assert.match(readFileSync(path, "utf8"), /answer_accept/);
  }
  await ui.shot(join(shots, "audit.png"));
});

/** The status cell of a task's row in the task list. */
const rowStatus = (id) =>
  ui.js(`const r = [...document.querySelectorAll(".task-row")].find((r) => r.dataset.taskId === arguments[0]);
    return r ? r.querySelector(".status").textContent.trim() : "(no row " + arguments[0] + " among " + document.querySelectorAll(".task-row").length + ")";`, id);

/** What the polite live region says (visually hidden, so read as text content, not rendered text). */
const announced = () => ui.js(`return document.querySelector('[data-testid="announce"]')?.textContent ?? "";`);

/** Waits for one question in the inbox and for the app to focus its first field or decision. */
async function nextQuestion(what) {
  await ui.go("#/inbox");
  await until(what, async () => (await inboxCount()) === 1, 30000);
  await until(`${what}: its form`, () => ui.exists('.elicitation[data-kind="approval"]'));
  // Its notification is closed: notifications still waiting count against the live limit, and
  // later steps expect their own questions to be notified one by one.
  await sleep(500);
  closeNotifications();
}

await step("the demo deployment question: the primary path cannot deny without choosing (issue 14)", async () => {
  const id = await callTool("secure-demo", "deploy_service", { service: "billing-api", environment: "staging" });
  await nextQuestion("the deployment question");
  const primaries = await ui.js(`return [...document.querySelectorAll(".inbox-detail button.primary")].map((b) => b.innerText.replace(/\\s+/g, " ").trim());`);
  assert.deepEqual(primaries, ["Approve a", "Deny n"], "Approve and Deny are the two primary actions");
  assert.equal(await ui.exists('.inbox-detail input[type="checkbox"]'), false, "no consent switch that starts off");
  const labels = await ui.js(`return [...document.querySelectorAll(".inbox-detail button")].map((b) => b.innerText);`);
  assert.ok(!labels.some((l) => /Review answer|^Send/.test(l)), `no generic Send path: ${labels}`);
  // Keyboard only from here (focus off the reason field, where n would be typed).
  await ui.js(`document.activeElement?.blur(); return true;`);
  await ui.press("n");
  assert.equal(await ui.focused(), "deny", "n asks and moves focus to Deny");
  assert.equal(await inboxCount(), 1, "one n sends nothing");
  await ui.press("Enter");
  await until("the denial sent", async () => (await inboxCount()) === 0);
  // The answer call resolves after the list has already changed: wait for its announcement.
  await until("the denial announced", async () => /^Denied: answer sent/.test(await announced()));
  assert.equal(await ui.focused(), "Waiting for you", "with nothing left, focus goes to the inbox list");
  await ui.go("#/tasks");
  const row = `.task-row[data-task-id="${id}"]`;
  await until("the list to say it was denied", async () => {
    const status = await rowStatus(id);
    if (status !== "Completed · denied by you") throw new Error(`the row says ${JSON.stringify(status)}`);
    return true;
  }, 30000);
  await ui.click(row);
  await until("the result", () => ui.exists('[data-testid="is-error"]'), 10000);
  assert.equal(await ui.text('[data-testid="task-outcome"]'), "denied by you");
  assert.match(await ui.text('[data-testid="event-list"]'), /denied \(answered: accept\)/);
  await ui.go("#/audit");
  const audit = await until("the denial in the audit log", () =>
    ui.js(`const r = [...document.querySelectorAll('tr[data-action="answer_accept"]')].find((r) => r.innerText.includes(arguments[0])); return r ? r.innerText : null;`, "billing-api"),
  );
  assert.match(audit, /\bdenied\b/, "recorded as denied");
  assert.match(audit, /"approve":false/, "next to the exact content sent");
});

await step("keyboard only: approve, then cancel a task, with focus asserted after each step", async () => {
  await callTool("secure-demo", "deploy_service", { service: "search-api", environment: "staging" });
  await nextQuestion("the second deployment question");
  await ui.js(`document.activeElement?.blur(); return true;`);
  await ui.press("a");
  assert.equal(await ui.focused(), "approve", "a asks and moves focus to Approve");
  await ui.press("a");
  await until("the approval sent", async () => (await inboxCount()) === 0);
  await until("the approval announced", async () => /^Approved: answer sent/.test(await announced()));
  assert.equal(await ui.focused(), "Waiting for you");

  const id = await callTool("secure-demo", "deploy_service", { service: "cart-api", environment: "staging" });
  await nextQuestion("the third deployment question");
  await ui.js(`document.activeElement?.blur(); return true;`);
  await ui.press("Escape");
  await until("the cancel question", () => ui.exists('[data-testid="confirm-cancel"]'));
  assert.equal(await ui.focused(), "cancel-task-keep", "the safe choice has focus");
  await ui.press("Tab");
  assert.equal(await ui.focused(), "cancel-task-confirm");
  await ui.press("Enter");
  await until("the cancel announced", async () => (await announced()) === "Task cancellation requested");
  assert.equal(await ui.focused(), "Waiting for you");
  await ui.go("#/tasks");
  await until("the list to say who cancelled", async () => {
    const status = await rowStatus(id);
    if (status !== "Cancelled by you") throw new Error(`the row says ${JSON.stringify(status)}`);
    return true;
  }, 30000);
  closeNotifications();
  await ui.shot(join(shots, "tasks-decisions.png"));
});

await step("the accessibility checker finds nothing critical or serious with data, in light, dark and high contrast, at 150 % and 200 % text; screenshots", async () => {
  closeNotifications();
  const question = await callTool("secure-demo", "deploy_service", { service: "ledger-api", environment: "staging" });
  await nextQuestion("a question to check");
  for (const theme of ["light", "dark", "contrast"]) {
    await ui.choose('[data-testid="theme"]', { light: "Light", dark: "Dark", contrast: "High contrast" }[theme]);
    for (const v of VIEWS) {
      await ui.go(v);
      await sleep(300);
      await assertAccessible(`${v} (${theme})`);
    }
    await ui.go("#/tasks");
    await ui.click(`.task-row[data-task-id="${question}"]`);
    await until("the task detail", () => ui.exists('[data-testid="task-status"]'));
    await assertAccessible(`the task detail (${theme})`);
    if (theme !== "light") {
      await ui.go("#/inbox");
      await ui.shot(join(shots, `inbox-${theme}.png`));
    }
  }
  await ui.choose('[data-testid="theme"]', "Light");
  // 150 % text: a 1200 px window at 150 % lays out 800 CSS px; the window is made that narrow
  // (WebDriver cannot set the system's text scale). The inbox stacks the list above the question
  // and the question keeps a readable measure.
  const before = await ui.size();
  await ui.setSize(800, before.height);
  await ui.go("#/inbox");
  const fits = await until("the narrow layout", async () => {
    const f = await ui.js(`return { width: innerWidth, questionWidth: document.querySelector(".question").offsetWidth,
      stacked: getComputedStyle(document.querySelector(".inbox")).gridTemplateColumns.split(" ").length === 1 };`);
    return f.width <= 820 ? f : null;
  });
  await ui.shot(join(shots, "inbox-800.png"));
  await ui.setSize(before.width, before.height);
  assert.ok(fits.stacked && fits.questionWidth > 300, `at 800 px the inbox stacks and the question keeps a readable width: ${JSON.stringify(fits)}`);
  // 150 % and 200 % text for real: the window's own text size (the webview's page zoom, as a
  // person with low vision sets it). The question keeps a readable measure, nothing needs
  // sideways scrolling, Approve can be reached, and the checker still finds nothing.
  await until("the window back at full width", async () => (await ui.js("return innerWidth;")) > 1000);
  const base = await ui.js("return innerWidth;");
  for (const percent of [150, 200]) {
    await ui.choose('[data-testid="zoom"]', `${percent} %`);
    await ui.go("#/inbox");
    const layout = await until(`the inbox at ${percent} %`, async () => {
      const f = await ui.js(`const q = document.querySelector(".question"), a = document.querySelector('[data-testid="approve"]');
        if (!q || !a) return null;
        a.scrollIntoView({ block: "nearest" });
        const r = a.getBoundingClientRect(), pane = document.querySelector(".inbox-detail").getBoundingClientRect();
        // Within a pixel: zoomed layout rounds to fractions of a CSS pixel.
        return { width: innerWidth, height: innerHeight, questionWidth: q.offsetWidth,
          overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
          approve: [r.top, r.bottom].map(Math.round), pane: [pane.top, pane.bottom].map(Math.round),
          approveReachable: r.top >= 0 && r.bottom <= innerHeight + 1 && r.left >= 0 && r.right <= innerWidth + 1 };`);
      // The zoom applies after the command returns: wait until the CSS width has shrunk.
      return f && f.width <= Math.ceil((base * 100) / percent) + 24 ? f : null;
    });
    await ui.shot(join(shots, `inbox-${percent}.png`));
    await assertAccessible(`#/inbox at ${percent} % text`);
    assert.ok(
      layout.overflow <= 0 && layout.questionWidth > 250 && layout.approveReachable,
      `at ${percent} % text the question is readable, nothing scrolls sideways and Approve can be reached: ${JSON.stringify(layout)}`,
    );
  }
  await ui.choose('[data-testid="zoom"]', "100 %");
  await until("the text size back to 100 %", async () => (await ui.js("return innerWidth;")) >= base - 2);
  // Leave the question answered so later steps start from an empty inbox.
  await ui.click('[data-testid="approve"]');
  await until("the inbox empty again", async () => (await inboxCount()) === 0);
});

await step("server strings are shown as text: nothing in them executes", async () => {
  closeNotifications();
  const xssServer = await addServer(XSS_SERVER, peer.url);
  assert.ok(xssServer.id > 0);
  // status messages, an elicitation message and tool output from the demo server …
  const demoTask = await callTool("secure-demo", "deploy_service", { service: XSS, environment: "staging" });
  // … and from the peer, under a server name full of markup (titles: inbox, notification).
  await callTool(XSS_SERVER, "approve_deploy", { service: XSS });
  await ui.go("#/inbox");
  await until("both hostile questions", async () => (await inboxCount()) === 2, 30000);
  const pageText = await ui.bodyText();
  assert.ok(pageText.includes(`<img src=x onerror="window.__xss='img'">`), "the payload is visible as text in the inbox");
  assert.ok(pageText.includes(XSS_SERVER), "the server name is visible as text");
  const views = ["#/inbox", "#/tasks", "#/servers", "#/audit"];
  const check = async (where) => {
    const r = await ui.js(`return {
      xss: window.__xss ?? null,
      imgs: document.querySelectorAll('img[src="x"]').length,
      svgs: document.querySelectorAll("svg").length,
      inline: [...document.scripts].filter((s) => !s.src).length,
      bold: document.querySelectorAll("b").length,
    };`);
    assert.deepEqual(r, { xss: null, imgs: 0, svgs: 0, inline: 0, bold: 0 }, `markup from a server became DOM in ${where}`);
  };
  for (const v of views) {
    await ui.go(v);
    await sleep(300);
    await check(v);
  }
  // Decline both so the tool output (with the payload) is rendered too.
  await ui.go("#/inbox");
  for (let left = 2; left > 0; left--) {
    await ui.keys("d");
    await until("d to ask first", () => ui.exists('[data-testid="armed"][data-armed="decline"]'));
    await ui.keys("d");
    await until(`${left - 1} question(s) left`, async () => (await inboxCount()) === left - 1);
  }
  await ui.go("#/tasks");
  await ui.click(`.task-row[data-task-id="${demoTask}"]`);
  await until("the declined deployment to finish", async () => (await ui.text('[data-testid="task-status"]')) === "Completed", 20000);
  await until("the result", () => ui.exists('[data-testid="is-error"]'), 10000);
  assert.ok((await ui.text('[data-testid="result"]')).includes("<img src=x"), "tool output with markup is shown as text");
  assert.ok((await ui.text('[data-testid="event-list"]')).includes("<script>window.__xss"), "status messages too");
  await check("the task detail");
  // The notification: the title is plain text by the spec (sent verbatim, shown as text); the
  // body is markup for dunst, so the server's tags arrive escaped.
  const hostile = notifications.calls.filter((c) => c.replacesId === 0 && c.summary.includes("svg"));
  assert.equal(hostile.length, 1, "one notification for the hostile question");
  assert.equal(hostile[0].summary.replaceAll('\\"', '"'), `${XSS_SERVER} · approve_deploy`, "the title, verbatim");
  assert.ok(hostile[0].body.includes("&lt;img src=x") && !hostile[0].body.includes("<img"), `escaped body: ${hostile[0].body}`);
});

let peerOAuthUrl;
const signInLookup = (serverId) => {
  try {
    return execFileSync("secret-tool", ["lookup", "service", KEYRING_SERVICE, "username", `oauth:${serverId}@${dataDir}`]).toString();
  } catch {
    return "";
  }
};
const serverCard = (name) =>
  ui.js(
    `const c = [...document.querySelectorAll("article.server")].find((a) => a.dataset.server === arguments[0]);
     return c ? { health: c.querySelector('[data-testid="health"]').textContent, token: c.querySelector('[data-testid="token"]').textContent,
                  signIn: !!c.querySelector('[data-testid="sign-in"]'), signOut: !!c.querySelector('[data-testid="sign-out"]') } : null;`,
    name,
  );

/** Confirms the sign-in shown in `scope` (a server card or the banner): the authorization server's host is shown before anything opens; Continue opens the browser there. */
async function confirmSignIn(scope, expectedHost) {
  const plan = `${scope} [data-testid="sign-in-plan"]`;
  const host = await until("where the sign-in leads, shown before the browser opens", async () => {
    if (await ui.exists(`${plan} [data-testid="sign-in-error"]`)) throw new Error(`sign-in plan failed: ${await ui.text(`${plan} [data-testid="sign-in-error"]`)}`);
    return (await ui.exists(`${plan} [data-testid="sign-in-host"]`)) ? ui.text(`${plan} [data-testid="sign-in-host"]`) : null;
  }, 15000);
  assert.equal(host, expectedHost, "the host shown is the authorization server's");
  await ui.click(`${plan} [data-testid="sign-in-continue"]`);
}

await step("adds an OAuth-protected server: its authorization server's host shown first, then the browser ($BROWSER, as core::browser opens every link), the sign-in only in the Secret Service, who/expiry shown, a task completes", async () => {
  const oauthPeer = await startServer(python, [join(root, "tests/peers/fastmcp_server.py"), "--port", "0"], {
    PEER_OAUTH: "1",
    PEER_STEP_SECONDS: "0.2",
    PEER_POLL_INTERVAL_MS: "200",
  });
  cleanups.push(() => oauthPeer.proc.kill());
  peerOAuthUrl = oauthPeer.url;
  const added = await addServer("oauth-peer", oauthPeer.url);
  await until("the new server waiting for a sign-in", async () => (await serverCard("oauth-peer"))?.health.startsWith("sign-in needed"));
  assert.equal(signInLookup(added.id), "", "nothing signed in before the person continues");
  await ui.shot(join(shots, "sign-in-plan.png"));
  await confirmSignIn('article.server[data-server="oauth-peer"]', new URL(oauthPeer.url).host);
  const card = await until("signed in", async () => {
    const c = await serverCard("oauth-peer");
    return c?.signOut ? c : null;
  }, 20000);
  assert.equal(card.token, "signed in (OAuth; kept in the OS keyring)");
  const line = await ui.text('article.server[data-server="oauth-peer"] [data-testid="signed-in-as"]');
  // fastmcp's tokens live an hour: "… renews in 59 min" or, rounded, "… in 1 h 00 min".
  assert.match(line, /^Signed in · token renews in (\d+ min|1 h \d\d min)$/, "fastmcp names nobody; its refresh token renews the token");
  const blob = signInLookup(added.id);
  assert.ok(blob, "secret-tool must find the sign-in in the Secret Service");
  const { access_token: access, refresh_token: refresh } = JSON.parse(blob);
  assert.ok(access, "the sign-in holds an access token");
  for (const b of ledgerBytes()) {
    assert.equal(b.indexOf(access), -1, "the access token must never be written to the SQLite files");
    if (refresh) assert.equal(b.indexOf(refresh), -1, "nor the refresh token");
  }
  const id = await callTool("oauth-peer", "long_job", { steps: "3" });
  await ui.go("#/tasks");
  await ui.click(`.task-row[data-task-id="${id}"]`);
  await until("the task on the OAuth server to complete", async () => (await ui.text('[data-testid="task-status"]')) === "Completed", 20000);
});

await step("a revoked sign-in while a task runs: sign-in needed on Servers, the inbox banner, the task's timeline and one notification; Sign in from the banner resumes the task", async () => {
  const serverId = await addServerId("oauth-peer");
  // Typed after the form's default 5: 50 steps of 0.2 s, running through the revocation.
  const id = await callTool("oauth-peer", "long_job", { steps: "0" });
  // The authorization server revokes the sign-in (the access token and its refresh token).
  const signIn = JSON.parse(signInLookup(serverId));
  const revoked = await fetch(new URL("/revoke", signIn.resource ?? peerOAuthUrl).href, {
    method: "POST",
    body: new URLSearchParams({ token: signIn.access_token, client_id: signIn.client_id, client_secret: signIn.client_secret ?? "" }),
  });
  assert.ok(revoked.ok, `revocation: HTTP ${revoked.status}`);
  // The running task's next poll is refused and the refresh too: recorded once, told once.
  await until("one sign-in notification", () => notifications.fresh("oauth-peer: sign in again").length === 1, 15000);
  await ui.go("#/tasks");
  await ui.click(`.task-row[data-task-id="${id}"]`);
  await until("sign-in needed on the task's timeline", () =>
    ui.js(`return [...document.querySelectorAll('[data-testid="event-list"] li')].some((li) => li.dataset.kind === "sign_in_needed");`),
  );
  assert.notEqual(await ui.text('[data-testid="task-status"]'), "Completed", "the task keeps its state, unpolled");
  await assertAccessible("the task view (sign-in needed)");
  await ui.go("#/servers");
  const card = await until("sign-in needed on the server", async () => {
    const c = await serverCard("oauth-peer");
    return c?.health.startsWith("sign-in needed") ? c : null;
  });
  assert.ok(card.signIn, "a Sign in button");
  await assertAccessible("#/servers (sign-in needed)");
  await ui.go("#/inbox");
  await until("the sign-in banner above the inbox", () => ui.exists('[data-testid="sign-in-needed"][data-server="oauth-peer"]'));
  await assertAccessible("#/inbox (sign-in banner)");
  closeNotifications();
  await ui.shot(join(shots, "sign-in-needed.png"));
  await ui.click('[data-testid="sign-in-needed"][data-server="oauth-peer"] [data-testid="sign-in-banner-button"]');
  await confirmSignIn('[data-testid="sign-in-needed"][data-server="oauth-peer"]', new URL(peerOAuthUrl).host);
  await until("the banner gone after signing in again", async () => !(await ui.exists('[data-testid="sign-in-needed"]')), 20000);
  await ui.go("#/tasks");
  await ui.click(`.task-row[data-task-id="${id}"]`);
  await until("the task to resume and complete after signing in", async () => (await ui.text('[data-testid="task-status"]')) === "Completed", 30000);
  assert.equal(notifications.fresh("oauth-peer: sign in again").length, 1, "told once, not once per poll");
});

await step("signing out shows sign-in needed and deletes the tokens but keeps the client; Sign in on the Servers view signs in again as the same client", async () => {
  await ui.go("#/servers");
  const before = JSON.parse(signInLookup(await addServerId("oauth-peer")));
  await until("the Sign out button", async () => (await serverCard("oauth-peer"))?.signOut);
  await ui.click('article.server[data-server="oauth-peer"] [data-testid="sign-out"]');
  const card = await until("sign-in needed on the server", async () => {
    const c = await serverCard("oauth-peer");
    return c?.health.startsWith("sign-in needed") ? c : null;
  });
  assert.ok(card.signIn, "a Sign in button");
  const kept = JSON.parse(signInLookup(await addServerId("oauth-peer")));
  assert.equal(kept.access_token ?? null, null, "signing out deletes the access token from the keyring");
  assert.equal(kept.refresh_token ?? null, null, "and the refresh token");
  assert.equal(kept.client_id, before.client_id, "the client registration stays");
  await ui.click('article.server[data-server="oauth-peer"] [data-testid="sign-in"]');
  await confirmSignIn('article.server[data-server="oauth-peer"]', new URL(peerOAuthUrl).host);
  await until("signed in again", async () => (await serverCard("oauth-peer"))?.signOut, 20000);
  const again = JSON.parse(signInLookup(await addServerId("oauth-peer")));
  assert.ok(again.access_token, "the tokens are back in the keyring");
  assert.equal(again.client_id, before.client_id, "signed in again as the same client");
});

/** The row id of a listed server. */
async function addServerId(name) {
  await ui.go("#/servers");
  return until(`server ${name} listed`, () =>
    ui.js(`const c = [...document.querySelectorAll("article.server")].find((a) => a.dataset.server === arguments[0]); return c ? Number(c.dataset.serverId) : null;`, name),
  );
}

await step("an agent's call through the app's gateway waits in the inbox with a notification; Approve runs it (issue 13)", async () => {
  closeNotifications();
  const info = await ui.js(`return window.__TAURI_INTERNALS__.invoke("app_info");`);
  assert.ok(info.gatewayUrl, `the app runs the gateway: ${JSON.stringify(info)}`);
  // The agent is added in the Agents view: its token is shown once, with the snippets to paste.
  await ui.go("#/agents");
  await ui.type('[data-testid="add-agent"] input[name="agent-name"]', "e2e-agent");
  await ui.click('[data-testid="add-agent"] button[type="submit"]');
  const token = (await until("the new agent's token", () => ui.text('[data-testid="agent-token"]'), 10000)).trim();
  assert.match(token, /^csa_[0-9a-f]{64}$/, "a fresh token, shown once");
  await ui.choose('[data-testid="snippet-server"]', "secure-demo");
  const claude = await ui.text('[data-snippet="claude-code"] pre');
  assert.equal(claude, `claude mcp add --transport http secure-demo ${info.gatewayUrl}secure-demo --header 'Authorization: Bearer ${token}'`);
  assert.match(await ui.text('[data-snippet="cursor"] pre'), new RegExp(`"url": "${info.gatewayUrl}secure-demo"`));
  await assertAccessible("the Agents view with a new token");
  await ui.click('[data-testid="agent-created-done"]');
  assert.equal(await ui.exists('[data-testid="agent-token"]'), false, "the token is gone from the window");
  assert.match(await ui.text('[data-testid="agents"] tr[data-agent="e2e-agent"]'), /active/);
  for (const b of ledgerBytes()) assert.equal(b.indexOf(token), -1, "the token is not in the ledger");
  // The fastmcp 4.1.4 client (not ours) with the tasks extension: it gets Countersign's task and
  // polls it until a person decides.
  const agent = spawn(python, [join(root, "tests/peers/gateway_agent.py"), "fastmcp", `${info.gatewayUrl}secure-demo`, token, "get_time", JSON.stringify({ why: "e2e <b>audit</b>" }), "--timeout", "90"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.push(() => agent.kill());
  let out = "";
  agent.stdout.on("data", (d) => (out += d));
  const exited = new Promise((r) => agent.on("exit", (code) => r(code)));
  await ui.go("#/inbox");
  const item = '.inbox-item[data-kind="call"]';
  await until("the agent's call in the inbox", () => ui.exists(item), 30000);
  // Opened like a question: selected in the list, its card in the detail pane.
  await ui.click(item);
  await until("the call open in the detail pane", () => ui.exists('.inbox-detail [data-testid="gated-call"] [data-testid="gated-approve"]'));
  assert.equal(await ui.js(`return document.querySelector(arguments[0]).getAttribute("aria-current");`, item), "true");
  assert.equal(await until("the counts to agree", () => waitingCounts(ui), 10000), 1, "header, badge, list and window title: 1");
  const card = await ui.text(".inbox-detail .gated-call");
  assert.match(card, /e2e-agent wants to run get_time on secure-demo/, card);
  assert.match(card, /e2e <b>audit<\/b>/, "the exact arguments, shown as text");
  assert.equal(await ui.js(`return document.querySelector(".gated-call b") === null;`), true, "agent text never becomes markup");
  await until("its notification", () => notifications.fresh("e2e-agent wants to run secure-demo · get_time").length >= 1, 10000);
  await assertAccessible("the inbox with an agent's call");
  await ui.shot(join(shots, "inbox-agent-call.png"));
  await ui.click('.gated-call input[type="checkbox"]'); // "Always allow get_time for e2e-agent"
  await ui.click('[data-testid="gated-approve"]');
  const code = await Promise.race([exited, sleep(60000).then(() => "still running after 60 s")]);
  assert.equal(code, 0, `the agent's call ends once approved: ${out}`);
  const result = JSON.parse(out.trim().split("\n").pop());
  assert.equal(result.isError, false, `the tool ran and answered: ${out}`);
  await until("the call gone", async () => !(await ui.exists(item)));
  await until("every count to say 0 (header, badge, list, window title)", async () => (await waitingCounts(ui)) === 0, 10000);
  assert.equal(notifications.fresh("e2e-agent wants to run secure-demo · get_time").length, 1, "one notification for the call");
  // The Agents view: the agent, the rule "Always allow" created (visible, removable), the call
  // with its decision; revoking the agent.
  await ui.go("#/agents");
  await until("the Agents view", () => ui.exists('[data-testid="agents"] tr[data-agent="e2e-agent"]'));
  assert.equal(await ui.text('[data-testid="gateway-url"]'), `${info.gatewayUrl}<server>`);
  const rule = await until("the always-allow rule", () =>
    ui.js(`const r = [...document.querySelectorAll('[data-testid="rules"] tbody tr')].find((r) => r.innerText.includes("get_time")); return r ? r.innerText : null;`),
  );
  assert.match(rule, /e2e-agent[\s\S]*secure-demo[\s\S]*get_time[\s\S]*allow/, rule);
  assert.match(await ui.text('[data-testid="agent-calls"]'), /e2e-agent[\s\S]*get_time[\s\S]*(approved|running|done) · decided by/);
  await assertAccessible("the Agents view");
  await ui.shot(join(shots, "agents.png"));
  await ui.click('[data-testid="rule-remove"]');
  await until("the rule removed", async () => !(await ui.exists('[data-testid="rules"]')));
  await ui.click('tr[data-agent="e2e-agent"] button');
  await until("the agent revoked", async () => /revoked/.test(await ui.text('tr[data-agent="e2e-agent"]')));
  const refused = spawnSync(python, [join(root, "tests/peers/gateway_agent.py"), "fastmcp", `${info.gatewayUrl}secure-demo`, token, "get_time", "{}", "--timeout", "20"]);
  assert.notEqual(refused.status, 0, `a revoked agent is refused: ${refused.stdout}`);
});

await step("screenshots of the main views", async () => {
  closeNotifications();
  await ui.go("#/tasks");
  await ui.shot(join(shots, "tasks.png"));
  await ui.go("#/servers");
  await ui.shot(join(shots, "servers.png"));
});

await step("removing a server removes its token from the keyring", async () => {
  await ui.go("#/servers");
  await ui.js(
    `[...document.querySelectorAll("article.server")].find((a) => a.dataset.server === "fastmcp").querySelector("button.danger").click(); return true;`,
  );
  await ui.click('[data-testid="remove-confirm"]');
  await until("the server gone", () => ui.js(`return ![...document.querySelectorAll("article.server")].some((a) => a.dataset.server === "fastmcp");`));
  assert.equal(keyringLookup(peerServer.id), "", "the keyring entry must be deleted with the server");
  assert.equal(keyringLookup(demoServer.id), demoToken, "other servers keep theirs");
});

await step("with `countersign watch` holding the ledger: a banner, no notifications, answers still delivered", async () => {
  await ui.quit();
  // The closed app releases the lock when its process is gone: retry until `watch` gets it.
  let watch;
  await until(
    "the CLI engine to take the lock",
    async () => {
      watch = spawn(cli, ["--data-dir", dataDir, "watch"], { stdio: "ignore" });
      const exited = await Promise.race([new Promise((r) => watch.once("exit", () => r(true))), sleep(1500).then(() => false)]);
      return !exited && readFileSync(join(dataDir, "engine.lock"), "utf8").trim() === String(watch.pid);
    },
    20000,
    100,
  );
  cleanups.push(() => watch.kill());
  ui = await App.launch(app, ["--data-dir", dataDir]);
  assert.match(await until("the banner", () => ui.text('[data-testid="engine-elsewhere"]')), new RegExp(`pid ${watch.pid}`));
  const before = notifications.calls.length;
  const id = await callTool(XSS_SERVER, "approve_deploy", { service: "via-watch" });
  await ui.go("#/inbox");
  await until("the question, polled by the CLI's engine", async () => (await inboxCount()) === 1, 20000);
  await ui.keys("a");
  await until("a to ask first", () => ui.exists('[data-testid="armed"][data-armed="approve"]'));
  await ui.keys("a");
  await until("the answer recorded", async () => (await inboxCount()) === 0);
  await ui.go("#/tasks");
  await ui.click(`.task-row[data-task-id="${id}"]`);
  await until("the CLI's engine to deliver the answer and the task to complete", async () => (await ui.text('[data-testid="task-status"]')) === "Completed", 20000);
  assert.match(await ui.text('[data-testid="result"]'), /approved, DEPLOYED/);
  assert.equal(notifications.calls.length, before, "only the engine's own app notifies");
  watch.kill();
});

/**
 * Issue 12: a click on an agent's call's notification opens the window on THAT call. The click
 * goes through the notification daemon (dunst's context menu, answered by .ci/e2e/dunst-pick.sh
 * with the call's "Open in Countersign" line, i.e. its default action, as a click on the body
 * runs it); the resident starts the window process at the call's page, which hands it over to
 * this window (single instance). The window starts elsewhere, so only the click can bring it to
 * the inbox.
 */
async function step_notificationOpensTheCall(taskId, card) {
  await ui.go("#/settings");
  await until("the Settings page", () => ui.js(`return location.hash === "#/settings" && !document.querySelector(".gated-call");`));
  await until("the call's notification on screen", () => Number(execFileSync("dunstctl", ["count", "displayed"]).toString().trim()) >= 1, 10000);
  writeFileSync(join(process.env.XDG_RUNTIME_DIR, "dunst-pick"), "Open in Countersign (demo-agent wants to run demo · batch_export)");
  execFileSync("dunstctl", ["context"]);
  const want = `#/inbox/call/${encodeURIComponent(taskId)}`;
  await until(`the window on ${want}`, async () => (await ui.js(`return location.hash;`)) === want, 20000).catch(async (e) => {
    const menu = readFileSync(join(process.env.XDG_RUNTIME_DIR, "dunst-menu.log"), "utf8");
    throw new Error(`${e.message}; the window is at ${await ui.js(`return location.hash;`)}; the daemon offered:\n${menu}`);
  });
  const shown = await until("the call open in the detail pane, its card focused", () =>
    ui.js(
      `const c = document.querySelector(".inbox-detail " + arguments[0]);
       if (!c || document.activeElement !== c) return null;
       const r = c.getBoundingClientRect();
       return { selected: [...document.querySelectorAll('.inbox-item[aria-current="true"]')].map((i) => i.dataset.taskId),
                inView: r.top >= 0 && r.top < window.innerHeight };`,
      card,
    ),
    10000,
  );
  assert.deepEqual(shown, { selected: [taskId], inView: true }, "that call, and only it, is selected, open, focused and in view");
  await ui.shot(join(shots, "inbox-call-from-notification.png"));
}

await step("the first-launch demo: its agent's call waits in the inbox with a notification; Approve runs it (issue 13)", async () => {
  await ui.quit();
  closeNotifications();
  // A fresh ledger, as a newcomer's: --demo runs the demo server, the gateway and the demo
  // agent, which calls get_time (allowed by the demo's rule) and batch_export (waits).
  const t0 = Date.now();
  ui = await App.launch(app, ["--demo", "--data-dir", join(work, "demo-ledger")]);
  await ui.go("#/inbox");
  const card = '.gated-call[aria-label="demo-agent wants to run batch_export on demo"]';
  // The demo's deployment question and its agent's held call: two entries, and every count says 2.
  const item = '.inbox-item[data-kind="call"]';
  await until("the demo agent's call in the inbox", () => ui.exists(item), 60000);
  await until("the deployment's question in the inbox", () => ui.exists('.inbox-item[data-kind="question"]'), 60000);
  assert.equal(await until("the counts to agree", () => waitingCounts(ui), 10000), 2, "header, badge, list and window title: 2");
  await ui.click(item);
  await until("the call open in the detail pane", () => ui.exists(`.inbox-detail ${card}`), 10000);
  assert.equal(await ui.exists(".inbox-detail .empty"), false, "no \"Select a request\" beside a held call");
  assert.match(await ui.text(card), /"rows": 20000/, "its exact arguments");
  // What the demo server's tools/list says about batch_export, with its annotations in words.
  assert.match(await ui.text(`${card} [data-testid="gated-description"]`), /^Exports `rows` rows to object storage/);
  assert.match(await ui.text(`${card} [data-testid="gated-hints"]`), /says it only reads[\s\S]*reaches outside systems/);
  await assertAccessible("the inbox with the demo agent's call");
  await ui.shot(join(shots, "inbox-demo-agent.png"));
  await until("its notification", () => notifications.fresh("demo-agent wants to run demo · batch_export").length >= 1, 10000);
  console.log(`     the demo agent's call waited in the inbox ${((Date.now() - t0) / 1000).toFixed(1)} s after launch`);
  const taskId = await ui.js(`return document.querySelector(arguments[0]).dataset.taskId;`, card);
  assert.match(taskId, /^csg-/, "the card names Countersign's task id");
  await step_notificationOpensTheCall(taskId, card);
  await ui.keys("a"); // the shortcut asks first, as on a question
  await until("a to ask first", () => ui.exists(`${card} [data-testid="armed"][data-armed="approve"]`));
  await ui.keys("a");
  await until("the card gone", async () => !(await ui.exists(card)));
  await until("the question open next", () => ui.exists('.inbox-item[data-kind="question"][aria-current="true"]'), 10000);
  assert.equal(await ui.exists(".inbox-detail .elicitation"), true, "the next entry, the question, is open");
  assert.equal(await until("the counts to agree", () => waitingCounts(ui), 10000), 1, "header, badge, list and window title: 1");
  await ui.shot(join(shots, "inbox-demo-after-approve.png"));
  await ui.go("#/agents");
  await until("the demo agent listed", () => ui.exists('[data-testid="agents"] tr[data-agent="demo-agent"]'));
  const rule = await ui.text('[data-testid="rules"]');
  assert.match(rule, /demo-agent[\s\S]*demo[\s\S]*get_time[\s\S]*allow/, `the demo's rule is visible: ${rule}`);
  await until(
    "the approved call to run upstream and end",
    async () => /demo-agent[\s\S]*batch_export[\s\S]*done · decided by/.test(await ui.text('[data-testid="agent-calls"]')),
    60000,
  );
  // Its timeline: asked → approved → sent upstream → the upstream's task → its end.
  await ui.click('[data-testid="agent-calls"] [data-testid="gated-timeline-toggle"]');
  const steps = await until(
    "the call's timeline to reach the upstream task's end",
    async () => {
      const kinds = await ui.js(`return [...document.querySelectorAll('[data-testid="gated-timeline"] li .kind')].map((k) => k.textContent);`);
      return kinds.some((k) => k.startsWith("finished")) ? kinds : null;
    },
    60000,
    500,
  );
  const at = (label) => steps.findIndex((k) => k.startsWith(label));
  assert.ok(
    at("agent asked") >= 0 && at("agent asked") < at("approved") && at("approved") < at("sent upstream") && at("sent upstream") < at("task created") && at("task created") < at("finished"),
    `request → decision → upstream → its task → its end: ${steps.join(" | ")}`,
  );
  await assertAccessible("the Agents view with a call's timeline");
  await ui.shot(join(shots, "agents-call-timeline.png"));
});

await step("the resident killed (kill -9) with the window open: a banner, one new resident, the banner gone, the tray and a demo task resume (issue 12)", async () => {
  const demoDir = join(work, "demo-ledger");
  const state = async () => (await askResident(demoDir, { ask: "state" })).state;
  const killed = (await state()).pid;
  assert.deepEqual(residentsOn(demoDir), [killed], "one resident before");
  await ui.go("#/tasks");
  // Every banner the window shows, in order: a restart can be quicker than a poll of the DOM.
  await ui.js(`window.__banners = [];
    new MutationObserver(() => {
      const b = document.querySelector('[data-testid="resident-lost"]');
      const text = b?.textContent.replace(/\\s+/g, " ").trim();
      if (text && window.__banners.at(-1) !== text) window.__banners.push(text);
    }).observe(document.body, { childList: true, subtree: true, characterData: true });
    return true;`);
  process.kill(killed, "SIGKILL");
  const banners = await until("the banner", () => ui.js(`return window.__banners.length ? window.__banners : null;`), 10000);
  assert.match(banners[0], /^Countersign's background service stopped — restarting…/, `the window says so at once: ${banners}`);
  const pid = await until("a new resident answering", async () => {
    const now = await state().catch(() => null);
    return now && now.pid !== killed ? now.pid : null;
  }, 60000);
  await until("the banner gone", async () => !(await ui.exists('[data-testid="resident-lost"]')), 20000);
  assert.ok(!alive(killed), "the killed one is gone");
  assert.deepEqual(residentsOn(demoDir), [pid], "one resident: the new one holds the lock");
  console.log(`     banners shown: ${JSON.stringify(await ui.js(`return window.__banners;`))}; resident ${killed} → ${pid}`);
  // The tray is back (its menu on the bus, from the new process), and the window's toggle
  // reaches the new resident and comes back through the new watch.
  await until("the new resident's tray menu", () => trayMenuOf(pid), 15000);
  // The switch's input is visually hidden behind its track: clicked as the label passes it on.
  const toggleDnd = () => ui.js(`document.querySelector('[data-testid="dnd"]').click(); return true;`);
  await toggleDnd();
  await until("do-not-disturb on in the new resident", async () => (await state()).dnd === true, 10000);
  await until("the window shows it", () => ui.js(`return document.querySelector('[data-testid="dnd"]').checked;`), 10000);
  await toggleDnd();
  await until("do-not-disturb off again", async () => (await state()).dnd === false, 10000);
  // A demo task flows through the new resident: asked, notified, approved in the window, done.
  closeNotifications();
  execFileSync(cli, ["--data-dir", demoDir, "call", "demo", "deploy_service", JSON.stringify({ service: "after-crash", environment: "staging" }), "--no-follow"]);
  const taskOf = () => JSON.parse(execFileSync(cli, ["--data-dir", demoDir, "--json", "tasks"]).toString()).find((t) => JSON.stringify(t.arguments ?? {}).includes("after-crash"));
  const task = await until("the task recorded", taskOf, 20000);
  await ui.go("#/inbox");
  const item = `.inbox-item[data-task-id="${task.task_id}"]`;
  await until("its question in the window's inbox", () => ui.exists(item), 60000);
  await until("its notification, from the new resident", () => notifications.calls.some((c) => c.replacesId === 0 && c.body.includes("after-crash")), 20000);
  await ui.click(item);
  await ui.keys("a");
  await until("a to ask first", () => ui.exists('[data-testid="armed"][data-armed="approve"]'));
  await ui.keys("a");
  await until("the task completed", () => taskOf()?.status === "completed", 60000);
});

await step("a teammate's countersign:// link, given to a launch of the app, opens the adopt form in this window; Adopt tracks the task (issue 12)", async () => {
  const demoDir = join(work, "demo-ledger");
  const json = (...args) => JSON.parse(execFileSync(cli, ["--json", ...args]).toString());
  // A teammate with a ledger of their own starts a task on the same demo server, and copies
  // its link (the CLI's `task show` gives the same link as the app's "Copy link").
  const teammate = join(work, "teammate-ledger");
  const demoUrl = json("--data-dir", demoDir, "servers", "list").find((s) => s.name === "demo").url;
  execFileSync(cli, ["--data-dir", teammate, "servers", "add", "demo", demoUrl]);
  execFileSync(cli, ["--data-dir", teammate, "call", "demo", "bench_job", JSON.stringify({ duration_ms: 600000 }), "--no-follow"]);
  const theirs = json("--data-dir", teammate, "task", "show", "#1");
  const taskId = theirs.task.task_id;
  assert.match(theirs.link, /^countersign:\/\/task\/http/, "a link naming the server by its URL");
  const ours = () => json("--data-dir", demoDir, "tasks").find((t) => t.task_id === taskId);
  assert.equal(ours(), undefined, "not tracked here before");
  // As the desktop entry runs it for a clicked link: the launch asks the resident, whose window
  // process hands the link to this window (single instance), and ends.
  const env = { ...process.env };
  delete env.TAURI_WEBVIEW_AUTOMATION;
  const launch = spawnSync(app, ["--data-dir", demoDir, theirs.link], { env, timeout: 30000 });
  assert.equal(launch.status, 0, `the launch hands the link over: ${launch.stderr}`);
  await until("the adopt form, asking to confirm", () => ui.exists('[data-testid="link-adopt"]'), 20000);
  assert.equal(await ui.js(`return document.querySelector(".adopt input[type=text]").value;`), taskId, "the task id filled in");
  assert.equal(ours(), undefined, "nothing adopted before the person confirms");
  await ui.click('.adopt button[type="submit"]');
  const adopted = await until("the task tracked in this ledger", ours, 20000);
  assert.equal(adopted.status, "working");
  await until("its detail shown", async () => (await ui.js("return location.hash;")) === `#/tasks/${adopted.id}`, 10000);
});

await ui.quit();
console.log(`e2e: ${passed.length} passed in ${((Date.now() - started) / 1000).toFixed(0)} s; screenshots in ${shots}`);
process.exit(0);
