import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ServerView } from "../../bindings/ServerView";
import type { StdioProcessView } from "../../bindings/StdioProcessView";
import { click, render, settle } from "../../test/mount";

const calls: string[] = [];
let listed: ServerView[] = [];

vi.mock("../../ipc", async (original) => ({
  ...(await original<typeof import("../../ipc")>()),
  call: async (cmd: string) => {
    calls.push(cmd);
    if (cmd === "server_list") return listed;
    return null;
  },
}));

const { default: Servers } = await import("./Servers.svelte");

function stdioServer(process?: StdioProcessView): ServerView {
  return {
    id: 7,
    name: "files",
    url: "stdio:files",
    hasToken: false,
    pollFloorMs: 0,
    createdAtMs: 0,
    supportsTasks: false,
    health: { state: "unknown" },
    signedIn: false,
    stdio: { command: "node 'my server.js' stdio", cwd: "/srv", env: ["ROOT"], secretEnv: ["API_KEY"], ...(process ? { process } : {}) },
  };
}

const notStarted: StdioProcessView = { starts: 0, recentExits: 0, crashLoop: false, log: [] };
const crashing: StdioProcessView = {
  starts: 4,
  recentExits: 4,
  lastExit: "exit status: 1",
  crashLoop: true,
  log: ["[countersign] starting node 'my server.js' stdio", "Error: ROOT /srv/files does not exist", "<b>not html</b>"],
};

beforeEach(() => {
  calls.length = 0;
  listed = [];
});
afterEach(() => {
  document.body.innerHTML = "";
});

describe("a stdio server's page", () => {
  it("shows the command, directory and variables, secret ones as in the keyring, and no URL editing", async () => {
    listed = [stdioServer(notStarted)];
    const r = render(Servers, { servers: [stdioServer(notStarted)] });
    await settle();
    const q = (id: string) => r.target.querySelector(`[data-testid="${id}"]`)?.textContent?.trim();
    expect(q("stdio-command")).toBe("node 'my server.js' stdio");
    expect(q("stdio-cwd")).toBe("/srv");
    expect(q("stdio-env")).toMatch(/ROOT\s*API_KEY \(in the OS keyring\)/);
    expect(q("stdio-process")).toMatch(/^not started · starts when needed/);
    expect(r.target.querySelector('[data-testid="stdio-crash-loop"]'), "no warning for a process that never ran").toBeNull();
    expect([...r.target.querySelectorAll("button")].map((b) => b.textContent?.trim())).not.toContain("Edit");
    expect(r.target.textContent).not.toContain("stdio:files");
  });

  it("asks for the process while open and shows a crash loop and the log, newest last, as text", async () => {
    listed = [stdioServer(crashing)];
    const r = render(Servers, { servers: [stdioServer(notStarted)] });
    await settle();
    expect(calls).toContain("server_list");
    const warning = r.target.querySelector('[data-testid="stdio-crash-loop"]');
    expect(warning?.getAttribute("role")).toBe("alert");
    expect(warning?.textContent).toMatch(/keeps exiting.*4 exits in the last ten minutes/s);
    expect(r.target.querySelector('[data-testid="stdio-last-exit"]')?.textContent).toBe("exit status: 1");
    expect(r.target.querySelector('[data-testid="stdio-process"]')?.textContent).toMatch(/not running · starts again when needed.*started 4 times, 4 exits/s);
    const log = r.target.querySelector('[data-testid="stdio-log"]');
    expect([...(log?.querySelectorAll("li") ?? [])].map((l) => l.textContent)).toEqual(crashing.log);
    expect(log?.querySelector("b"), "server text is never HTML").toBeNull();
  });

  it("shows a running process by its pid", async () => {
    listed = [stdioServer({ pid: 4242, starts: 1, recentExits: 0, crashLoop: false, log: ["ready"] })];
    const r = render(Servers, { servers: [stdioServer()] });
    await settle();
    expect(r.target.querySelector('[data-testid="stdio-process"]')?.textContent).toMatch(/running · pid 4242/);
  });

  it("does not poll when no stdio server is listed", async () => {
    render(Servers, { servers: [] });
    await settle();
    expect(calls).toEqual([]);
  });

  it("offers the Command choice beside URL", () => {
    const r = render(Servers, { servers: [] });
    expect(r.target.querySelector('[data-testid="server-add-stdio"]')).toBeNull();
    click(r.target.querySelector('[data-testid="kind-command"]'));
    expect(r.target.querySelector('[data-testid="server-add-stdio"]')).not.toBeNull();
    expect(r.target.querySelector('[data-testid="server-add"]')).toBeNull();
  });
});
