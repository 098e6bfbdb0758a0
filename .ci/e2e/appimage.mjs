// Smoke test of the AppImage (run by .ci/e2e/appimage.sh inside .ci/with-session.sh, with
// APPIMAGE_EXTRACT_AND_RUN=1: no FUSE here). The file is a type-2 AppImage (an ELF runtime with the
// "AI\x02" magic, then a SquashFS image); --appimage-extract unpacks the app, the CLI and the
// resident, the desktop entry with the countersign:// link handler and its icon; the CLI answers
// `--version` from inside the AppImage (through a link named `countersign`); the AppImage opens a
// window with the built-in demo, whose approval flows end to end, and the window started the
// resident from beside itself, inside the AppImage (and the resident maps no GTK or WebKit).
// Then the window is closed (WM_DELETE_WINDOW): its process ends, the runtime deletes the copy it
// extracted (the resident's own executable with it), and the tray's Open (dbusmenu over D-Bus)
// starts the window again through the AppImage ($APPIMAGE), which extracts a new copy: a new
// window process runs from it and paints, beside the one resident.
//
// Env: COUNTERSIGN_APPIMAGE, E2E_WORK (scratch dir), SCREENSHOTS, E2E_LOG (the app's stderr:
// the resident's, and the windows' it starts).
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, openSync, readSync, closeSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { App, demoApprovalCompletes, until, stepper } from "./wd.mjs";
import { alive, residentsOn, uiLibraries, windows } from "./procs.mjs";

const image = process.env.COUNTERSIGN_APPIMAGE;
const work = process.env.E2E_WORK;
const shots = process.env.SCREENSHOTS;
const log = process.env.E2E_LOG;
for (const [k, v] of Object.entries({ COUNTERSIGN_APPIMAGE: image, E2E_WORK: work, SCREENSHOTS: shots, E2E_LOG: log })) {
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

const execFileAsync = promisify(execFile);
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
  await demoApprovalCompletes(ui, join(shots, "appimage-inbox.png"));
});

/** The window processes (countersign-desktop) on `dataDir`, by their executable and arguments. */
const windowsOn = (dataDir) => readdirSync("/proc").filter((e) => /^\d+$/.test(e)).filter((pid) => {
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return readlinkSync(`/proc/${pid}/exe`).endsWith("/usr/bin/countersign-desktop") && args.includes(dataDir);
  } catch {
    return false;
  }
}).map(Number);
const ppidOf = (pid) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
};
const extractedExe = /^\/tmp\/appimage_extracted_[0-9a-f]+\/usr\/bin\/countersign-desktop$/;

let windowExe, firstWindow, firstCopy, resident;
await step("the window started the resident from beside itself, inside the AppImage; it maps no GTK or WebKit", async () => {
  const found = windowsOn(ledger);
  assert.equal(found.length, 1, `one window process on the ledger: ${found}`);
  firstWindow = found[0];
  windowExe = readlinkSync(`/proc/${firstWindow}/exe`);
  firstCopy = statSync(`/proc/${firstWindow}/exe`);
  assert.match(windowExe, extractedExe, "the window runs from the AppImage");
  const residents = residentsOn(ledger);
  assert.equal(residents.length, 1, `one resident on the ledger: ${residents}`);
  resident = residents[0];
  assert.equal(readlinkSync(`/proc/${resident}/exe`), join(dirname(windowExe), "countersign-resident"), "the resident beside the window");
  assert.deepEqual(uiLibraries(resident), [], "no GTK/WebKit in the resident");
});

/** Closes the window of process `pid` as a person does (WM_DELETE_WINDOW) and waits for the
 * process to end, then for the runtime to delete the copy it extracted. */
const closeWindow = async (pid, exe) => {
  const id = await until(`the visible window of process ${pid}`, () => windows(pid)[0], 10000);
  execFileSync("python3", [join(import.meta.dirname, "wm_close.py"), id]);
  await until(`the window process ${pid} to end`, () => !alive(pid), 20000);
  await until(`the runtime to delete the copy the window ran from (${exe})`, () => !existsSync(exe), 15000);
};

await step("closing the window ends its process; the runtime deletes its extracted copy; the resident runs on", async () => {
  await closeWindow(firstWindow, windowExe);
  assert.deepEqual(residentsOn(ledger), [resident], "the same one resident on the ledger");
  assert.equal(readlinkSync(`/proc/${resident}/exe`), `${dirname(windowExe)}/countersign-resident (deleted)`, "the resident's executable went with the copy");
});

await step("the tray's Open starts the window again through the AppImage, from a new copy; it paints", async () => {
  // As a tray host does (and footprint.mjs): the resident's menu (com.canonical.dbusmenu at
  // /MenuBar) on its unique bus name, then Event "clicked" on "Open Countersign". The resident
  // owns more than one name, and one of them may not answer: all are asked at once.
  const gdbus = (name, method, ...args) => execFileAsync("gdbus", ["call", "--session", "--timeout", "5", "--dest", name,
    "--object-path", "/MenuBar", "--method", `com.canonical.dbusmenu.${method}`, "--", ...args]).then(({ stdout }) => stdout);
  const [busName, layout] = await until("the resident's tray menu on the session bus", () => {
    const names = execFileSync("busctl", ["--user", "list", "--no-legend"]).toString().split("\n")
      .map((l) => l.trim().split(/\s+/)).filter(([n, p]) => n?.startsWith(":") && Number(p) === resident).map(([n]) => n);
    return Promise.any(names.map((name) => gdbus(name, "GetLayout", "0", "-1", "[]").then((out) => [name, out]))).catch(() => null);
  }, 15000);
  const openId = /\((\d+), \{[^}]*'label': <'Open Countersign'>/.exec(layout)?.[1];
  assert.ok(openId, `an Open Countersign item in the tray menu: ${layout}`);
  const logFrom = statSync(log).size;
  const since = () => readFileSync(log).subarray(logFrom).toString();
  await gdbus(busName, "Event", openId, "clicked", "<int32 0>", "0");
  // The window's stderr is the resident's: its first-paint line, or the resident's failure.
  const outcome = await until("the window's first paint after the tray's Open", () =>
    /window reopened, first paint \d+ ms after it was asked for.*|could not start the window.*/.exec(since())?.[0], 90000)
    .catch((e) => assert.fail(`${e.message}; the log since the click:\n${since()}`));
  assert.match(outcome, /^window reopened/, `the tray's Open started no window: ${outcome}`);
  const found = windowsOn(ledger);
  assert.equal(found.length, 1, `one window process on the ledger: ${found}`);
  const second = found[0];
  assert.notEqual(second, firstWindow, "a new window process");
  const exe = readlinkSync(`/proc/${second}/exe`);
  assert.match(exe, extractedExe, "the new window runs from a copy the runtime extracted");
  // The runtime names its directory after the image's MD5, so the path is the first one's: the
  // file is not (the first was deleted above; this one was written since).
  const copy = statSync(`/proc/${second}/exe`);
  assert.ok(copy.ctimeMs > firstCopy.ctimeMs, `a new copy: written at ${new Date(copy.ctimeMs).toISOString()}, the first at ${new Date(firstCopy.ctimeMs).toISOString()}`);
  const runtime = ppidOf(second);
  assert.equal(readlinkSync(`/proc/${runtime}/exe`), realpathSync(image), "the new window's parent is the AppImage's runtime");
  assert.equal(ppidOf(runtime), resident, "which the resident started");
  await until("the new window on screen", () => windows(second).length > 0, 10000);
  assert.deepEqual(residentsOn(ledger), [resident], "still the one resident on the ledger");
  console.log(`     ${outcome}; ${exe} (inode ${copy.ino}, the first's ${firstCopy.ino})`);
  await closeWindow(second, exe);
});

// App.quit: the WebDriver session (its window is closed already), then the resident with `--quit`
// (the unpacked one).
process.env.COUNTERSIGN_RESIDENT = join(root, "usr/bin/countersign-resident");
await ui?.quit();
await step("quitting ends the resident", async () => {
  await until("no process left from the AppImage", () => readdirSync("/proc").filter((e) => /^\d+$/.test(e)).every((pid) => {
    try {
      return !readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(ledger);
    } catch {
      return true;
    }
  }), 15000);
});
