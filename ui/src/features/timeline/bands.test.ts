import { describe, expect, it } from "vitest";
import type { EventView } from "../../bindings/EventView";
import type { EventKind } from "../../bindings/EventKind";
import { axis, offset, ticks } from "./bands";
import { describe as line } from "./describe";

let id = 0;
const ev = (atMs: number, fact: EventKind): EventView => ({ id: ++id, atMs, taskRow: 1, taskId: "t1", via: "poll", fact });
const form = { method: "elicitation/create", params: { message: "Deploy?", requestedSchema: {} } };

// A task that works, asks, is answered and completes: the path every approval takes.
const approval: EventView[] = [
  ev(1000, { kind: "task_created", task_id: "t1", status: "working", tool: "deploy", origin: "call" }),
  ev(1400, { kind: "task_updated", status: "input_required", previous_status: "working", status_message: "waiting" }),
  ev(1400, { kind: "input_requested", key: "k", request: form }),
  ev(5000, { kind: "input_answered", key: "k", action: "accept", response: { action: "accept", content: { approve: true } }, by: "ada" }),
  ev(5100, { kind: "update_acknowledged", keys: ["k"] }),
  ev(5600, { kind: "task_updated", status: "working", previous_status: "input_required", status_message: "rolling out" }),
  ev(6600, { kind: "task_updated", status: "completed", previous_status: "working", status_message: null }),
  ev(6600, { kind: "task_finished", status: "completed", result: { content: [{ type: "text", text: "done" }] }, error: null }),
];

describe("timeline axis", () => {
  it("bands follow the status through input_required to the terminal state", () => {
    const a = axis(approval, 1000, "completed", 99_999);
    expect(a.ended).toBe(true);
    expect(a.bands.map((b) => [b.status, b.from, b.to])).toEqual([
      ["working", 1000, 1400],
      ["input_required", 1400, 5600],
      ["working", 5600, 6600],
      ["completed", 6600, a.end],
    ]);
    expect(a.end).toBeGreaterThan(6600);
    expect(a.end, "an ended task does not grow with the clock").toBeLessThan(8000);
    expect(a.markers.map((m) => m.kind)).toEqual(["question", "answer", "delivered"]);
    expect(a.markers[0]?.label).toBe("Deploy?");
  });

  it("a running task's last band reaches now; errors and retries are marked", () => {
    const running = [
      ev(0, { kind: "task_created", task_id: "t", status: "working", tool: null, origin: "call" }),
      ev(2000, { kind: "poll_failed", code: "connect", message: "refused", retry_in_ms: 1500 }),
      ev(4000, { kind: "poll_recovered", failures: 2 }),
    ];
    const a = axis(running, 0, "working", 10_000);
    expect(a.ended).toBe(false);
    expect(a.bands).toEqual([{ phase: "working", status: "working", from: 0, to: 10_000 }]);
    expect(a.markers.map((m) => m.kind)).toEqual(["error", "recovered"]);
  });

  it("expired and lost tasks end in a terminal band of their own", () => {
    const a = axis(
      [ev(0, { kind: "task_created", task_id: "t", status: "working", tool: null, origin: "adopted" }), ev(3000, { kind: "task_lost", message: "unknown task" })],
      0,
      "lost",
      50_000,
    );
    expect(a.bands.at(-1)).toMatchObject({ phase: "terminal", status: "lost", from: 3000 });
  });

  it("ticks land on round steps", () => {
    expect(ticks(10_000)).toEqual([0, 2000, 4000, 6000, 8000, 10_000]);
    expect(ticks(95_000, 4)).toEqual([0, 30_000, 60_000, 90_000]);
    expect(offset(0)).toBe("+0 s");
    expect(offset(1500)).toBe("+1.5 s");
    expect(offset(150_000)).toBe("+2 min 30 s");
  });
});

describe("event lines", () => {
  it("say what happened in words, with server text verbatim", () => {
    expect(line({ kind: "task_updated", status: "input_required", previous_status: "working", status_message: "<b>x</b>" })).toEqual({
      label: "Working → Needs input",
      text: "<b>x</b>",
      tone: "warn",
    });
    expect(line({ kind: "input_answered", key: "k", action: "accept", response: { action: "accept", content: { ok: true } }, by: "ada" }).text).toBe(
      'by ada · {"ok":true}',
    );
    expect(line({ kind: "task_finished", status: "completed", result: { isError: true, content: [{ type: "text", text: "boom" }] }, error: null })).toEqual({
      label: "finished: Completed (isError)",
      text: "boom",
      tone: "bad",
    });
    expect(line({ kind: "task_finished", status: "failed", result: null, error: { code: -32603, message: "exploded" } }).text).toBe("-32603 exploded");
    expect(line({ kind: "input_requested", key: "k", request: { method: "sampling/createMessage", params: {} } }).text).toBe(
      "unsupported request sampling/createMessage",
    );
    expect(line({ kind: "input_requested", key: "k", request: "nonsense" }).text).toBe("unsupported request unknown");
  });
});
