import { describe, expect, it } from "vitest";
import type { GatedCallView } from "../bindings/GatedCallView";
import type { GatedQuestionsView } from "../bindings/GatedQuestionsView";
import type { InputRequestView } from "../bindings/InputRequestView";
import { callItemId, callOf, questionItemId, waitingItems } from "./waiting";

const call = (task_id: string, created_at: number, decided_at: number | null = null): GatedCallView => ({
  kind: "tool_call",
  task_id,
  agent: "bot",
  server: "demo",
  tool: "t",
  arguments: {},
  state: decided_at === null ? "pending" : "running",
  mode: "task",
  reason: null,
  decided_by: null,
  created_at,
  expires_at: created_at + 600_000,
  decided_at,
  upstream_task: null,
  tool_info: null,
});
const question = (taskRow: number, requestedAtMs: number): InputRequestView => ({
  taskRow,
  key: "k",
  taskId: `t-${taskRow}`,
  serverName: "s",
  requestedAtMs,
  request: { mode: "form", message: "?", requestedSchema: {} },
});
const asking = (c: GatedCallView): GatedQuestionsView => ({ call: c, questions: [], round: 1 });

describe("waitingItems", () => {
  it("is the three lists as one, oldest first, an approved call counted from its approval", () => {
    const items = waitingItems([question(1, 300), question(2, 100)], [call("csg-a", 200)], [asking(call("csg-b", 50, 250))]);
    expect(items.map((i) => i.id)).toEqual([questionItemId({ taskRow: 2, key: "k" }), callItemId("csg-a"), callItemId("csg-b"), "q/1/k"]);
    expect(items.map((i) => i.kind)).toEqual(["question", "call", "asking", "question"]);
    expect(items.map(callOf)).toEqual([undefined, "csg-a", "csg-b", undefined]);
  });

  it("lists a call once when both lists hold it (its approval seen before the held list caught up)", () => {
    const items = waitingItems([], [call("csg-a", 100)], [asking(call("csg-a", 100, 150))]);
    expect(items.map((i) => [i.kind, i.id])).toEqual([["asking", "c/csg-a"]]);
  });
});
