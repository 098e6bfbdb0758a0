import { flushSync } from "svelte";
import { afterEach, describe, expect, it } from "vitest";
import type { InputRequestView } from "../../bindings/InputRequestView";
import type { InputResponse } from "../../bindings/InputResponse";
import { questionItemId, waitingItems, type WaitingItem } from "../../app/waiting";
import { render, settle } from "../../test/mount";
import Inbox from "./Inbox.svelte";

const confirm = (row: number, server: string): InputRequestView => ({
  taskRow: row,
  key: "approval",
  taskId: `t-${row}`,
  serverName: server,
  toolName: "deploy",
  requestedAtMs: Date.now() - 90_000,
  expiresAtMs: Date.now() + 600_000,
  request: {
    mode: "form",
    message: `Deploy ${row}?`,
    requestedSchema: { type: "object", properties: { ok: { type: "boolean" }, why: { type: "string" } }, required: ["ok"] },
  },
});

function press(key: string) {
  window.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
  flushSync();
}

type Props = {
  items: WaitingItem[];
  selectedId: string | undefined;
  onselect: (i: WaitingItem | undefined) => void;
  onanswer: (i: InputRequestView, r: InputResponse) => Promise<void>;
  oncancel: (row: number) => Promise<void>;
};

function setup(inputs: InputRequestView[]) {
  const sent: [number, InputResponse][] = [];
  const cancelled: number[] = [];
  const props: Props = $state({
    items: waitingItems(inputs, [], []),
    selectedId: inputs[0] ? questionItemId(inputs[0]) : undefined,
    onselect: (i) => {
      props.selectedId = i?.id;
    },
    onanswer: async (i, r) => {
      sent.push([i.taskRow, r]);
      props.items = props.items.filter((x) => x.kind !== "question" || x.input.taskRow !== i.taskRow);
    },
    oncancel: async (row) => {
      cancelled.push(row);
    },
  });
  const r = render(Inbox, props);
  const server = () => r.target.querySelector('[data-testid="requesting-server"]')?.textContent;
  return { r, props, sent, cancelled, server };
}

describe("Inbox keyboard", () => {
  let destroy: (() => void) | undefined;
  afterEach(() => destroy?.());

  it("moves with j/k; a, n and d each ask once and act on the second press", async () => {
    const { r, props, sent, server } = setup([confirm(1, "alpha"), confirm(2, "beta"), confirm(3, "gamma"), confirm(4, "delta")]);
    destroy = r.destroy;
    expect(server()).toBe("alpha");
    press("j");
    expect(server()).toBe("beta");
    press("k");
    expect(server()).toBe("alpha");

    press("a");
    expect(r.target.querySelector('[data-testid="armed"]'), "first a asks").not.toBeNull();
    expect(sent).toEqual([]);
    press("a");
    await settle();
    expect(sent).toEqual([[1, { action: "accept", content: { ok: true } }]]);
    expect(props.selectedId, "the next request is selected after answering").toBe("q/2/approval");
    expect(r.target.querySelector('[data-testid="announce"]')?.textContent).toMatch(/^Approved: answer sent\. Next: beta\./);
    expect(document.activeElement?.id, "focus moves to the next question's first field").toBe("f-why");

    (document.activeElement as HTMLElement).blur();
    press("n");
    expect(sent.length).toBe(1);
    press("n");
    await settle();
    expect(sent[1]).toEqual([2, { action: "accept", content: { ok: false } }]);
    expect(r.target.querySelector('[data-testid="announce"]')?.textContent).toMatch(/^Denied/);

    (document.activeElement as HTMLElement).blur();
    press("d");
    await settle();
    expect(sent.length, "one d sends nothing").toBe(2);
    press("d");
    await settle();
    expect(sent[2]).toEqual([3, { action: "decline" }]);

    press("?");
    await settle();
    expect(r.target.querySelector('[role="dialog"]')).not.toBeNull();
    expect(r.target.querySelector('[role="dialog"]')?.contains(document.activeElement), "the help dialog takes focus").toBe(true);
    press("Escape");
    expect(r.target.querySelector('[role="dialog"]')).toBeNull();
  });

  it("the last answer moves focus to the inbox list", async () => {
    const { r } = setup([confirm(1, "alpha")]);
    destroy = r.destroy;
    (r.target.querySelector('[data-testid="deny"]') as HTMLElement).click();
    await settle();
    expect(document.activeElement?.getAttribute("aria-label")).toBe("Waiting for you");
  });

  it("shows how long a question waited and the TTL left", () => {
    const { r } = setup([confirm(1, "alpha")]);
    destroy = r.destroy;
    expect(r.target.querySelector('[data-testid="waited"]')?.textContent).toBe("waiting 1 min");
    expect(r.target.querySelector('[data-testid="ttl"]')?.textContent?.trim()).toMatch(/^TTL (9|10) min left$/);
  });

  it("Esc asks whether to cancel the whole task; only the Cancel the task button does it", async () => {
    const { r, cancelled } = setup([confirm(7, "alpha")]);
    destroy = r.destroy;
    press("a");
    press("Escape");
    expect(r.target.querySelector('[data-testid="armed"]'), "Esc first steps back from the pending approve").toBeNull();
    expect(r.target.querySelector('[data-testid="confirm-cancel"]')).toBeNull();
    press("Escape");
    expect(r.target.querySelector('[data-testid="confirm-cancel"]')?.textContent).toContain("t-7");
    await settle();
    expect(document.activeElement?.getAttribute("data-testid"), "focus lands on the safe choice").toBe("cancel-task-keep");
    press("Escape");
    await settle();
    expect(cancelled, "a second Esc keeps the task").toEqual([]);
    expect(r.target.querySelector('[data-testid="confirm-cancel"]')).toBeNull();

    press("Escape");
    await settle();
    (r.target.querySelector('[data-testid="cancel-task-confirm"]') as HTMLElement).click();
    await settle();
    expect(cancelled).toEqual([7]);
    expect(r.target.querySelector('[data-testid="announce"]')?.textContent).toBe("Task cancellation requested");
  });

  it("keys other than Esc do nothing while the cancel question is open", async () => {
    const { r, cancelled, sent } = setup([confirm(7, "alpha")]);
    destroy = r.destroy;
    press("Escape");
    press("a");
    press("a");
    press("d");
    press("d");
    await settle();
    expect(cancelled).toEqual([]);
    expect(sent).toEqual([]);
  });
});
