import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ServerView } from "../../bindings/ServerView";
import { buttonByText, click, render, settle, type } from "../../test/mount";

const calls: [string, unknown][] = [];
let answer: (cmd: string, req: unknown) => Promise<unknown> = async () => null;

vi.mock("../../ipc", async (original) => ({
  ...(await original<typeof import("../../ipc")>()),
  call: (cmd: string, req: unknown) => {
    calls.push([cmd, req]);
    return answer(cmd, req);
  },
}));

const { default: AddStdio } = await import("./AddStdio.svelte");

const SECRET = "sk-live-do-not-show-4711";

const added: ServerView = {
  id: 3,
  name: "files",
  url: "stdio:files",
  hasToken: false,
  pollFloorMs: 0,
  createdAtMs: 0,
  supportsTasks: false,
  health: { state: "unknown" },
  signedIn: false,
  stdio: { command: "node 'my server.js' stdio", env: ["ROOT"], secretEnv: ["API_KEY"] },
};

function setup() {
  const got: ServerView[] = [];
  const r = render(AddStdio, { onadded: (s: ServerView) => got.push(s) });
  const q = (sel: string) => r.target.querySelector(sel);
  return { r, q, got };
}

beforeEach(() => {
  calls.length = 0;
  answer = async () => added;
});
afterEach(() => {
  document.body.innerHTML = "";
});

describe("the Add server form's Command choice", () => {
  it("shows how a quoted command line will run, word by word", () => {
    const { q, r } = setup();
    type(q('input[name="command"]'), `node 'my server.js' "--root=/srv/a b" stdio`);
    expect(q('[data-testid="stdio-preview"]')?.textContent).toBe("node 'my server.js' '--root=/srv/a b' stdio");
    const args = [...r.target.querySelectorAll("code.arg")].map((c) => c.textContent);
    expect(args).toEqual(["my server.js", "--root=/srv/a b", "stdio"]);
  });

  it("refuses a line only a shell would understand, and keeps Add disabled", () => {
    const { q, r } = setup();
    type(q('input[name="name"]'), "files");
    type(q('input[name="command"]'), "server | tee log");
    expect(q('[data-testid="stdio-split-error"]')?.textContent).toMatch(/without a shell: \| is not understood/);
    expect(buttonByText(r.target, "Add server").disabled).toBe(true);
  });

  it("refuses a bad variable name before anything is sent", () => {
    const { q, r } = setup();
    type(q('input[name="name"]'), "files");
    type(q('input[name="command"]'), "node s.js");
    click(q('[data-testid="add-env"]'));
    type(q('input[aria-label="Name"]'), "2BAD");
    expect(q('[data-testid="stdio-env-error"]')?.textContent).toMatch(/2BAD is not a variable name/);
    expect(buttonByText(r.target, "Add server").disabled).toBe(true);
    expect(calls).toEqual([]);
  });

  it("sends program, arguments, variables and directory once, then forgets the secret value", async () => {
    const { q, r, got } = setup();
    type(q('input[name="name"]'), "files");
    type(q('input[name="command"]'), `node 'my server.js' stdio`);
    type(q('input[name="cwd"]'), " /srv ");
    click(q('[data-testid="add-env"]'));
    type(q('input[aria-label="Name"]'), "ROOT");
    type(q('input[aria-label="Value of ROOT"]'), "/srv/files");
    click(q('[data-testid="add-secret"]'));
    type(q('input[aria-label="Secret name"]'), "API_KEY");
    const secret = q('input[aria-label="Secret value of API_KEY"]') as HTMLInputElement;
    expect(secret.type, "a secret value is masked").toBe("password");
    type(secret, SECRET);
    expect(r.target.textContent, "the preview shows no secret value").not.toContain(SECRET);
    click(buttonByText(r.target, "Add server"));
    await settle();
    expect(calls).toEqual([
      [
        "server_add_stdio",
        { name: "files", program: "node", args: ["my server.js", "stdio"], env: [["ROOT", "/srv/files"]], secretEnv: [["API_KEY", SECRET]], cwd: "/srv", discover: true },
      ],
    ]);
    expect(got.map((s) => s.id)).toEqual([3]);
    // Nothing on the page holds the secret any more: not an input, not a text.
    const values = [...r.target.querySelectorAll("input")].map((i) => i.value);
    expect(values.join("|")).not.toContain(SECRET);
    expect(r.target.innerHTML).not.toContain(SECRET);
    expect(r.target.querySelectorAll('input[type="password"]').length, "the secret rows are gone").toBe(0);
  });

  it("shows why a command that does not answer was refused, and offers to add it without starting it", async () => {
    answer = async (cmd, req) => {
      if ((req as { discover: boolean }).discover) throw { code: "invalid_input", message: "the server process ended; it said: Error: Cannot find module 'nope.js'" };
      return added;
    };
    const { q, r, got } = setup();
    type(q('input[name="name"]'), "files");
    type(q('input[name="command"]'), "node nope.js");
    click(q('[data-testid="add-secret"]'));
    type(q('input[aria-label="Secret name"]'), "API_KEY");
    type(q('input[aria-label="Secret value of API_KEY"]'), SECRET);
    click(buttonByText(r.target, "Add server"));
    await settle();
    expect(q('[data-testid="add-error"]')?.textContent).toMatch(/Cannot find module 'nope.js'/);
    expect(r.target.innerHTML, "an error shows no secret value").not.toContain(SECRET);
    click(q('[data-testid="add-unchecked"]'));
    await settle();
    expect(calls.map(([, req]) => (req as { discover: boolean }).discover)).toEqual([true, false]);
    expect(got.length).toBe(1);
  });
});
