// Smoke test of the installed .deb (run by .ci/e2e/deb.sh inside .ci/with-session.sh): the
// package's own binaries, not the build tree's. The CLI answers `--version`; the package holds the
// resident, which the installed app starts (and which maps no GTK or WebKit); the desktop entry
// registers the countersign:// link handler; the app opens a window with the built-in demo and a
// demo task flows end to end: the demo's deployment asks for approval, Approve in the window
// answers it, and the task completes.
//
// Env: COUNTERSIGN_APP, COUNTERSIGN_CLI, COUNTERSIGN_RESIDENT (the installed binaries), E2E_WORK (scratch dir),
// SCREENSHOTS.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { App, demoApprovalCompletes, stepper } from "./wd.mjs";
import { uiLibraries } from "./procs.mjs";

const app = process.env.COUNTERSIGN_APP;
const cli = process.env.COUNTERSIGN_CLI;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
for (const [k, v] of Object.entries({ COUNTERSIGN_APP: app, COUNTERSIGN_CLI: cli, E2E_WORK: work, SCREENSHOTS: shots })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/deb.sh)`);
}

const step = stepper(join(shots, "installed-failure.png"));

await step("the packaged CLI prints its version", async () => {
  const out = execFileSync(cli, ["--version"]).toString().trim();
  const manifest = readFileSync(join(import.meta.dirname, "../../Cargo.toml"), "utf8");
  const version = /\[workspace\.package\]\s*version = "([^"]+)"/.exec(manifest)?.[1];
  assert.ok(version, "the workspace version in Cargo.toml");
  assert.equal(out, `countersign ${version}`);
});

await step("the desktop entry opens countersign:// links with the app", async () => {
  const entries = execFileSync("dpkg-query", ["-L", "countersign"]).toString().split("\n");
  const desktop = entries.find((p) => p.startsWith("/usr/share/applications/") && p.endsWith(".desktop"));
  assert.ok(desktop, `a desktop entry in the package: ${entries.join(" ")}`);
  const text = readFileSync(desktop, "utf8");
  assert.match(text, /^MimeType=x-scheme-handler\/countersign;?$/m);
  assert.match(text, /^Exec=countersign-desktop %u$/m, "the link reaches the app as its argument");
  const resident = process.env.COUNTERSIGN_RESIDENT;
  assert.ok(entries.includes(app) && entries.includes(cli) && entries.includes(resident), "the three binaries come from the package");
});

let ui;
await step("the installed app opens its window with the demo; the demo's approval flows to completion", async () => {
  ui = await App.launch(app, ["--demo", "--data-dir", join(work, "ledger")]);
  await demoApprovalCompletes(ui, join(shots, "installed-inbox.png"));
});
await step("the installed app started the installed resident, which maps no GTK or WebKit", async () => {
  const residents = readdirSync("/proc").filter((e) => /^\d+$/.test(e)).filter((pid) => {
    try {
      return readlinkSync(`/proc/${pid}/exe`) === process.env.COUNTERSIGN_RESIDENT;
    } catch {
      return false;
    }
  });
  assert.equal(residents.length, 1, `one resident runs: ${residents}`);
  assert.deepEqual(uiLibraries(Number(residents[0])), [], "no GTK/WebKit in the resident");
});
await ui?.quit();
