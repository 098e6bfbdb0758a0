import type { ComponentProps } from "svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { CallAnswer } from "../../bindings/CallAnswer";
import type { GatedQuestionsView } from "../../bindings/GatedQuestionsView";
import { buttonByText, click, render, settle, type } from "../../test/mount";
import GatedQuestions from "./GatedQuestions.svelte";
import Inbox from "./Inbox.svelte";
import { callItemId, waitingItems } from "../../app/waiting";

const nameForm = { type: "object", properties: { name: { type: "string", title: "Name" } }, required: ["name"] };

const asking = (questions: GatedQuestionsView["questions"]): GatedQuestionsView => ({
  call: {
    kind: "tool_call",
    task_id: "csg-1",
    agent: "ci-bot",
    server: "demo",
    tool: "test_tool_with_task",
    arguments: { env: "staging" },
    state: "running",
    mode: "task",
    reason: null,
    decided_by: "ada",
    created_at: Date.now() - 60_000,
    expires_at: Date.now() + 600_000,
    decided_at: Date.now() - 30_000,
    upstream_task: null,
    tool_info: null,
  },
  questions,
  round: 1,
});

/** The inbox with no server questions, and `extra` (agents' calls, what to focus). */
const renderInbox = (extra: Partial<ComponentProps<typeof Inbox>>) =>
  render(Inbox, {
    items: [],
    selectedId: undefined,
    onselect: () => {},
    onanswer: async () => {},
    oncancel: async () => {},
    ...extra,
  });

let destroy: (() => void) | undefined;
afterEach(() => {
  destroy?.();
  destroy = undefined;
});

describe("GatedQuestions", () => {
  it("shows who, what, that it was approved, and sends every answer together once all are given", async () => {
    const sent: [string, CallAnswer[]][] = [];
    const onanswer = vi.fn(async (a: GatedQuestionsView, answers: CallAnswer[]) => void sent.push([a.call.task_id, answers]));
    const entry = asking([
      { key: "user_name", request: { mode: "form", message: "What is your name?", requestedSchema: nameForm } },
      { key: "proceed", request: { mode: "form", message: "Proceed?", requestedSchema: { type: "object", properties: {} } } },
    ]);
    const r = render(GatedQuestions, { entry, onanswer });
    destroy = r.destroy;
    const text = r.target.textContent ?? "";
    expect(text).toContain("ci-bot");
    expect(text).toContain("test_tool_with_task");
    expect(text).toContain("demo");
    expect(r.target.querySelector('[data-testid="gated-asks"]')?.textContent).toContain("You approved this call; demo asks before running it");
    expect(text, "the question comes from the schema-built form").toContain("What is your name?");

    type(r.target.querySelector("#f-name"), "Ada");
    click(buttonByText(r.target, "Review answer"));
    click(buttonByText(r.target, "Send"));
    await settle();
    expect(onanswer, "nothing goes upstream while a question is open").not.toHaveBeenCalled();
    expect(r.target.textContent).toContain("waiting for the other questions");

    click(buttonByText(r.target, "Decline this question"));
    await settle();
    expect(sent).toEqual([
      [
        "csg-1",
        [
          { key: "user_name", response: { action: "accept", content: { name: "Ada" } } },
          { key: "proceed", response: { action: "decline" } },
        ],
      ],
    ]);
  });

  it("is an entry of the inbox, counted, and opens in its detail pane", () => {
    const entry = asking([{ key: "user_name", request: { mode: "form", message: "What is your name?", requestedSchema: nameForm } }]);
    const r = renderInbox({ items: waitingItems([], [], [entry]), onanswercall: async () => {} });
    destroy = r.destroy;
    expect(r.target.querySelector('[data-testid="inbox-count"]')?.textContent).toBe("1");
    expect(r.target.querySelector('.inbox-item.selected[data-kind="asking"]')?.getAttribute("data-task-id")).toBe("csg-1");
    expect(r.target.querySelector('.inbox-detail [data-testid="gated-questions"][data-task-id="csg-1"]')).not.toBeNull();
    expect(r.target.querySelector(".inbox-detail")?.textContent).toContain("What is your name?");
    expect(r.target.textContent).not.toContain("Nothing waits for you.");
  });
});

describe("an agent's call opened from its notification (#/inbox/call/ID)", () => {
  const waiting = (task_id: string, tool: string): GatedQuestionsView["call"] => ({ ...asking([]).call, task_id, tool, state: "pending", decided_by: null, decided_at: null });
  // As the app routes it: the route's call is both the entry opened and the one focused.
  const inbox = (focusCall: string | undefined, callsLoaded = true) =>
    renderInbox({
      items: waitingItems(
        [],
        [waiting("csg-a", "first_tool"), waiting("csg-b", "second_tool")],
        [asking([{ key: "user_name", request: { mode: "form", message: "What is your name?", requestedSchema: nameForm } }])],
      ),
      selectedId: focusCall === undefined ? undefined : callItemId(focusCall),
      ondecide: async () => {},
      onanswercall: async () => {},
      focusCall,
      callsLoaded,
    });
  const shown = (root: HTMLElement) => root.querySelector<HTMLElement>(".inbox-detail .gated-call");
  const item = (root: HTMLElement, id: string) => root.querySelector<HTMLElement>(`.inbox-item[data-task-id="${id}"]`);

  it("opens that call in the detail pane, selected in the list, its card focused", async () => {
    const r = inbox("csg-b");
    destroy = r.destroy;
    await settle();
    const b = shown(r.target);
    expect(b?.dataset.taskId, "the asked-for call is open").toBe("csg-b");
    expect(b?.textContent).toContain("second_tool");
    expect(item(r.target, "csg-b")?.getAttribute("aria-current")).toBe("true");
    expect(item(r.target, "csg-a")?.getAttribute("aria-current"), "another call is not selected").toBe("false");
    expect(document.activeElement, "focus moves to the call's card").toBe(b);
    expect(r.target.querySelector('[data-testid="call-gone"]')).toBeNull();
  });

  it("finds a call whose upstream asks questions too", async () => {
    const r = inbox("csg-1");
    destroy = r.destroy;
    await settle();
    const asked = shown(r.target);
    expect(asked?.dataset.testid).toBe("gated-questions");
    expect(asked?.dataset.taskId).toBe("csg-1");
    expect(document.activeElement).toBe(asked);
  });

  it("says so when the call no longer waits, once the lists are read", async () => {
    const early = inbox("csg-decided", false);
    await settle();
    expect(early.target.querySelector('[data-testid="call-gone"]'), "not before the lists are read").toBeNull();
    early.destroy();
    const r = inbox("csg-decided");
    destroy = r.destroy;
    await settle();
    expect(r.target.querySelector('[data-testid="call-gone"]')?.textContent).toContain("no longer waits");
    expect(r.target.querySelector('[data-testid="inbox-count"]')?.textContent, "the calls still waiting").toBe("3");
    expect(shown(r.target)?.dataset.taskId, "the first entry is open instead").toBe("csg-a");
  });
});
