// Smoke test of the AppImage (run by .ci/e2e/appimage.sh inside .ci/with-session.sh, with
// APPIMAGE_EXTRACT_AND_RUN=1: no FUSE here). The file is a type-2 AppImage (an ELF runtime with the
// "AI\x02" magic, then a SquashFS image); --appimage-extract unpacks the app, the CLI and the
// resident, the desktop entry with the countersign:// link handler and its icon; the CLI answers
// `--version` from inside the AppImage (through a link named `countersign`); the AppImage opens a
// window with the built-in demo, whose approval flows end to end, and the window started the
// resident from beside itself, inside the AppImage (and the resident maps no GTK or WebKit).
//
// Env: COUNTERSIGN_APPIMAGE, E2E_WORK (scratch dir), SCREENSHOTS.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, openSync, readSync, closeSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { App, until, stepper } from "./wd.mjs";
import { residentsOn, uiLibraries } from "./procs.mjs";

const image = process.env.COUNTERSIGN_APPIMAGE;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
for (const [k, v] of Object.entries({ COUNTERSIGN_APPIMAGE: image, E2E_WORK: work, SCREENSHOTS: shots })) {
  assert.ok(v, `${k} must be set (run .ci/e2e/appimage.sh)`);
}
const manifest = readFileSync(join(import.meta.dirname, "../../Cargo.toml"), "utf8");
const version = /\[workspace\.package\]\s*version = "([^"]+)"/.exec(manifest)?.[1];
assert.ok(version, "the workspace version in Cargo.toml");

const bytesAt = (file, offset, length) => {
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.alloc(length);
    assert.equal(readSync(fd, buf, 0, length, offset), length, `${length} bytes at ${offset} of ${file}`);
    return buf;
  } finally {
    closeSync(fd);
  }
};
// The runtime's own options, without extract-and-run (which would run the app instead).
const { APPIMAGE_EXTRACT_AND_RUN: _, ...plainEnv } = process.env;
const executable = (p) => {
  accessSync(p, constants.X_OK);
  return true;
};

const step = stepper(join(shots, "appimage-failure.png"));
const root = join(work, "squashfs-root");

await step("the file is a type-2 AppImage: the ELF runtime with its magic, then a SquashFS image", async () => {
  assert.deepEqual([...bytesAt(image, 0, 4)], [0x7f, 0x45, 0x4c, 0x46], "an ELF file");
  assert.deepEqual([...bytesAt(image, 8, 3)], [0x41, 0x49, 0x02], 'the AppImage type-2 magic "AI\\x02" at offset 8');
  const offset = Number(execFileSync(image, ["--appimage-offset"], { env: plainEnv }).toString().trim());
  assert.ok(offset > 0 && offset < statSync(image).size, `the image's offset (${offset}) inside the file`);
  assert.equal(bytesAt(image, offset, 4).toString("latin1"), "hsqs", "a SquashFS superblock at the offset");
});

await step("--appimage-extract unpacks the app, the CLI, the resident, the desktop entry and its icon", async () => {
  execFileSync(image, ["--appimage-extract"], { cwd: work, env: plainEnv, stdio: "ignore" });
  for (const bin of ["countersign-desktop", "countersign", "countersign-resident"]) {
    const p = join(root, "usr/bin", bin);
    assert.deepEqual([...bytesAt(p, 0, 4)], [0x7f, 0x45, 0x4c, 0x46], `${p} is a program`);
    assert.ok(executable(p));
  }
  assert.ok(executable(join(root, "AppRun")), "AppRun at the top");
  const entries = readdirSync(root).filter((f) => f.endsWith(".desktop"));
  assert.equal(entries.length, 1, `one desktop entry at the top: ${entries}`);
  const text = readFileSync(join(root, entries[0]), "utf8");
  assert.match(text, /^MimeType=x-scheme-handler\/countersign;?$/m);
  assert.match(text, /^Exec=countersign-desktop %u$/m, "the link reaches the app as its argument");
  const icon = /^Icon=(.+)$/m.exec(text)?.[1];
  assert.ok(icon && existsSync(join(root, `${icon}.png`)), `the entry's icon ${icon}.png at the top`);
  assert.ok(existsSync(join(root, ".DirIcon")), ".DirIcon at the top");
});

await step("the CLI runs from inside the AppImage", async () => {
  mkdirSync(join(work, "bin"));
  const cli = join(work, "bin/countersign");
  symlinkSync(image, cli);
  assert.equal(execFileSync(cli, ["--version"]).toString().trim(), `countersign ${version}`, "through a link named countersign");
  assert.equal(execFileSync(join(root, "usr/bin/countersign"), ["--version"]).toString().trim(), `countersign ${version}`, "unpacked");
});

const ledger = join(work, "ledger");
let ui;
await step("the AppImage opens its window with the demo; the demo's approval flows to completion", async () => {
  ui = await App.launch(image, ["--demo", "--data-dir", ledger]);
  await ui.go("#/inbox");
  const count = async () => Number(await ui.text('[data-testid="inbox-count"]'));
  await until("the demo deployment's question in the inbox", async () => (await count()) === 1, 30000);
  await ui.shot(join(shots, "appimage-inbox.png"));
  await ui.click('[data-testid="approve"]');
  await until("an empty inbox", async () => (await count()) === 0, 15000);
  await ui.go("#/tasks");
  await until("the approved deployment to complete", async () =>
    ui.js(`return [...document.querySelectorAll(".task-row")].some((r) =>
      r.querySelector(".tool code")?.textContent === "deploy_service" && r.querySelector(".status.s-completed"));`), 30000);
});

let windowExe;
await step("the window started the resident from beside itself, inside the AppImage; it maps no GTK or WebKit", async () => {
  const windows = readdirSync("/proc").filter((e) => /^\d+$/.test(e)).filter((pid) => {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      return readlinkSync(`/proc/${pid}/exe`).endsWith("/usr/bin/countersign-desktop") && args.includes(ledger);
    } catch {
      return false;
    }
  });
  assert.equal(windows.length, 1, `one window process on the ledger: ${windows}`);
  windowExe = readlinkSync(`/proc/${windows[0]}/exe`);
  assert.match(windowExe, /^\/tmp\/appimage_extracted_[0-9a-f]+\/usr\/bin\/countersign-desktop$/, "the window runs from the AppImage");
  const residents = residentsOn(ledger);
  assert.equal(residents.length, 1, `one resident on the ledger: ${residents}`);
  assert.equal(readlinkSync(`/proc/${residents[0]}/exe`), join(dirname(windowExe), "countersign-resident"), "the resident beside the window");
  assert.deepEqual(uiLibraries(residents[0]), [], "no GTK/WebKit in the resident");
});

// App.quit: the window through WebDriver, then the resident with `--quit` (the unpacked one).
process.env.COUNTERSIGN_RESIDENT = join(root, "usr/bin/countersign-resident");
await ui?.quit();
await step("quitting ends the window and the resident", async () => {
  await until("no process left from the AppImage", () => readdirSync("/proc").filter((e) => /^\d+$/.test(e)).every((pid) => {
    try {
      return !readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(ledger);
    } catch {
      return true;
    }
  }), 15000);
  // The runtime's extracted copy in /tmp outlives a WebDriver session (seen here; the runtime
  // removes it when the app it ran exits on its own): remove it.
  if (windowExe) rmSync(dirname(dirname(dirname(windowExe))), { recursive: true, force: true });
});
