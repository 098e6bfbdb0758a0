// The window as a whole, its shell replaced by a fake one: what waits (questions, agents' held
// calls) is one list in the store, opened in the inbox's detail pane and counted once, the same
// number in the inbox's header and the navigation's badge.
import { flushSync } from "svelte";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { GatedCallView } from "../bindings/GatedCallView";
import type { InputRequestView } from "../bindings/InputRequestView";
import { render, settle } from "../test/mount";

/** The fake shell: what its lists hold, the commands it was sent, the window's listeners. */
const shell = vi.hoisted(() => ({
  inputs: [] as unknown[],
  gated: [] as unknown[],
  sent: [] as [string, unknown][],
  listeners: new Map<string, (payload: unknown) => void>(),
}));

vi.mock("../ipc", async (importOriginal) => {
  const real = await importOriginal<typeof import("../ipc")>();
  const idle = { pending: 0, dnd: false, notificationActions: false, dndScheduled: false, resident: { state: "connected" } };
  const replies: Record<string, (req: unknown) => unknown> = {
    app_info: () => ({ version: "0.0.0", dataDir: "/tmp/x", user: "ada", engine: { state: "running", resumed: 0 }, shell: idle }),
    input_list: () => shell.inputs,
    task_list: () => [],
    server_list: () => [],
    gated_list: () => shell.gated,
    gated_questions_list: () => [],
    gated_decide: (req) => {
      // As the shell does: the decision is recorded, then the feed sends the new list.
      const id = (req as { taskId: string }).taskId;
      const decided = shell.gated.find((c) => (c as GatedCallView).task_id === id);
      shell.gated = shell.gated.filter((c) => c !== decided);
      setTimeout(() => shell.listeners.get("gated_changed")?.(shell.gated), 0);
      return { ...(decided as GatedCallView), state: "approved" };
    },
  };
  return {
    ...real,
    inTauri: () => false,
    call: async (cmd: string, req?: unknown) => {
      shell.sent.push([cmd, req]);
      return replies[cmd]?.(req) ?? null;
    },
    listen: (event: string, cb: (payload: unknown) => void) => {
      shell.listeners.set(event, cb);
      return () => shell.listeners.delete(event);
    },
  };
});

// The lists are read as soon as the window mounts (no first frame to wait for in jsdom).
vi.mock("./paint", () => ({ beforeData: () => Promise.resolve() }));

// Imported after the mock is declared (vi.mock is hoisted above every import anyway).
const { default: App } = await import("./App.svelte");
const { consoleStore } = await import("./console.svelte");

const held = (task_id: string, tool: string, ageMs: number): GatedCallView => ({
  kind: "tool_call",
  task_id,
  agent: "ci-bot",
  server: "demo",
  tool,
  arguments: { rows: 3 },
  state: "pending",
  mode: "task",
  reason: null,
  decided_by: null,
  created_at: Date.now() - ageMs,
  expires_at: Date.now() + 600_000,
  decided_at: null,
  upstream_task: null,
  tool_info: { title: "Batch export", description: "Exports rows to object storage.", readOnlyHint: false, destructiveHint: false, idempotentHint: null, openWorldHint: true },
});

const question = (row: number, ageMs: number): InputRequestView => ({
  taskRow: row,
  key: "approval",
  taskId: `t-${row}`,
  serverName: "alpha",
  toolName: "deploy",
  requestedAtMs: Date.now() - ageMs,
  expiresAtMs: Date.now() + 600_000,
  request: { mode: "form", message: `Deploy ${row}?`, requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] } },
});

function press(key: string) {
  window.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
  flushSync();
}

let destroy: (() => void) | undefined;
beforeEach(() => {
  location.hash = "#/inbox";
  shell.inputs = [];
  shell.gated = [];
  shell.sent = [];
});
afterEach(() => {
  destroy?.();
  destroy = undefined;
});

/** The window opened on the inbox, once its lists are read. */
async function open() {
  const r = render(App, {});
  destroy = r.destroy;
  // This window's own reading of the lists (the store outlives an earlier test's window).
  await vi.waitFor(() => expect(shell.sent.map(([cmd]) => cmd)).toContain("gated_questions_list"), { timeout: 3000 });
  await vi.waitFor(() => expect([consoleStore.inputs, consoleStore.gated]).toEqual([shell.inputs, shell.gated]));
  await settle();
  const $ = (sel: string) => r.target.querySelector<HTMLElement>(sel);
  return {
    $,
    count: () => $('[data-testid="inbox-count"]')?.textContent,
    badge: () => $('[data-testid="nav-pending"]')?.textContent,
    /** The entry open in the detail pane: a held call's task id, or a question's server. */
    detail: () => $(".inbox-detail .gated-call")?.dataset.taskId ?? $('.inbox-detail [data-testid="requesting-server"]')?.textContent,
    selected: () => [...r.target.querySelectorAll<HTMLElement>('.inbox-item[aria-current="true"]')].map((e) => e.dataset.taskId),
    text: () => r.target.textContent ?? "",
  };
}

describe("an agent's held call in the window", () => {
  it("alone: the inbox counts 1, the badge says 1, and the detail pane shows it selected", async () => {
    shell.gated = [held("csg-1", "batch_export", 60_000)];
    const w = await open();
    expect(w.count()).toBe("1");
    expect(w.badge()).toBe("1");
    expect(w.selected()).toEqual(["csg-1"]);
    expect(w.detail()).toBe("csg-1");
    expect(w.text()).not.toContain("Select a request");
    const card = w.$(".inbox-detail .gated-call")!;
    expect(card.textContent).toContain("ci-bot wants to run batch_export on demo");
    expect(w.$('.inbox-detail [data-testid="gated-description"]')?.textContent).toBe("Exports rows to object storage.");
    expect(w.$('.inbox-detail [data-testid="gated-args"]')?.textContent).toBe(JSON.stringify({ rows: 3 }, null, 2));
    expect(w.$('.inbox-detail [data-testid="gated-approve"]')).not.toBeNull();
    expect(w.$('.inbox-detail [data-testid="gated-decline"]')).not.toBeNull();
    expect(w.$('.inbox-detail [data-testid="gated-always"]')).not.toBeNull();
  });

  it("with a question: both count, 2 in the header and the badge, and j/k move between them", async () => {
    shell.inputs = [question(7, 30_000)];
    shell.gated = [held("csg-1", "batch_export", 60_000)];
    const w = await open();
    expect(w.count()).toBe("2");
    expect(w.badge()).toBe("2");
    expect(w.selected(), "the oldest first").toEqual(["csg-1"]);
    expect(w.detail()).toBe("csg-1");
    press("j");
    await settle();
    expect(w.selected()).toEqual(["t-7"]);
    expect(w.detail()).toBe("alpha");
    expect(location.hash).toBe("#/inbox/7/approval");
    press("k");
    await settle();
    expect(w.detail()).toBe("csg-1");
    expect(location.hash).toBe("#/inbox/call/csg-1");
  });

  it("deciding it (a, then a again) removes it and opens the next; the counts follow", async () => {
    shell.inputs = [question(7, 30_000)];
    shell.gated = [held("csg-1", "batch_export", 60_000), held("csg-2", "get_time", 10_000)];
    const w = await open();
    expect([w.count(), w.badge()]).toEqual(["3", "3"]);
    expect(w.detail()).toBe("csg-1");

    press("a");
    expect(w.$('[data-testid="armed"]')?.dataset.armed, "one a only asks").toBe("approve");
    expect(shell.sent.filter(([cmd]) => cmd === "gated_decide")).toEqual([]);
    press("a");
    await settle();
    await settle();
    expect(shell.sent.filter(([cmd]) => cmd === "gated_decide")).toEqual([["gated_decide", { taskId: "csg-1", decision: { approve: true, reason: null, always_allow: false } }]]);
    expect([w.count(), w.badge()]).toEqual(["2", "2"]);
    expect(w.detail(), "the next entry opens").toBe("alpha");
    expect(w.selected()).toEqual(["t-7"]);
    expect(w.$('[data-testid="announce"]')?.textContent).toBe("Approved: ci-bot · demo · batch_export. Next: alpha.");

    // The last call, declined with the button; then only the question is left.
    press("j");
    await settle();
    expect(w.detail()).toBe("csg-2");
    w.$('.inbox-detail [data-testid="gated-decline"]')!.click();
    await settle();
    await settle();
    expect(shell.sent.filter(([cmd]) => cmd === "gated_decide").at(-1)).toEqual(["gated_decide", { taskId: "csg-2", decision: { approve: false, reason: null, always_allow: false } }]);
    expect([w.count(), w.badge()]).toEqual(["1", "1"]);
    expect(w.detail()).toBe("alpha");
    expect(w.$('[data-testid="call-gone"]'), "a call decided here is not reported gone").toBeNull();
  });

  it("opened from its notification, then decided elsewhere: the counts follow and the window says it no longer waits", async () => {
    shell.inputs = [question(7, 30_000)];
    shell.gated = [held("csg-1", "batch_export", 60_000), held("csg-2", "get_time", 10_000)];
    location.hash = "#/inbox/call/csg-2";
    const w = await open();
    expect(w.detail()).toBe("csg-2");
    expect(w.selected()).toEqual(["csg-2"]);
    expect([w.count(), w.badge()]).toEqual(["3", "3"]);
    shell.listeners.get("gated_changed")?.([]);
    await settle();
    expect([w.count(), w.badge()]).toEqual(["1", "1"]);
    expect(w.$('[data-testid="call-gone"]')).not.toBeNull();
    expect(w.detail(), "what is left opens").toBe("alpha");
    shell.inputs = [];
    shell.listeners.get("inbox_changed")?.([]);
    await settle();
    shell.listeners.get("gated_changed")?.([]);
    await settle();
    expect(w.count()).toBe("0");
    expect(w.badge(), "no badge with nothing waiting").toBeUndefined();
    expect(w.$('[data-testid="call-gone"]')).not.toBeNull();
    expect(w.text()).toContain("Nothing waits for you.");
  });
});
