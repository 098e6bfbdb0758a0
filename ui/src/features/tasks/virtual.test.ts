import { flushSync } from "svelte";
import { afterEach, describe, expect, it } from "vitest";
import type { TaskView } from "../../bindings/TaskView";
import { render } from "../../test/mount";
import { NO_FILTER, filterTasks, toolNames } from "./filter";
import TaskList from "./TaskList.svelte";
import { scrollToReveal, visibleRange } from "./virtual";

function tasks(n: number): TaskView[] {
  const statuses = ["working", "input_required", "completed", "failed", "cancelled"] as const;
  return Array.from({ length: n }, (_, i) => ({
    row: i + 1,
    taskId: `task-${String(i).padStart(5, "0")}`,
    serverName: i % 2 ? "peer-rmcp" : "peer-fastmcp-tasks",
    toolName: `tool_${i % 7}`,
    origin: "call",
    status: statuses[i % 5] ?? "working",
    statusMessage: `step ${i}`,
    createdAtMs: Date.UTC(2026, 11, 2, 9),
    updatedAtMs: Date.UTC(2026, 11, 2, 9),
    pendingInputs: 0,
    cancelledByYou: false,
    resultIsError: false,
  }));
}

describe("visibleRange", () => {
  it("renders the viewport plus overscan, never the whole list", () => {
    const r = visibleRange(0, 440, 44, 10_000, 6);
    expect(r).toEqual({ start: 0, end: 17, offset: 0, total: 440_000 });
  });

  it("follows the scroll position", () => {
    const r = visibleRange(44 * 5000 + 10, 440, 44, 10_000, 6);
    expect(r.start).toBe(4994);
    expect(r.end).toBe(5017);
    expect(r.offset).toBe(4994 * 44);
  });

  it("clamps at both ends and handles empty lists", () => {
    expect(visibleRange(-50, 440, 44, 10_000).start).toBe(0);
    const end = visibleRange(1e9, 440, 44, 10_000);
    expect(end.end).toBe(10_000);
    expect(end.start).toBeGreaterThan(9_980);
    expect(visibleRange(0, 440, 44, 0)).toEqual({ start: 0, end: 0, offset: 0, total: 0 });
    expect(visibleRange(0, 440, 44, 3)).toMatchObject({ start: 0, end: 3 });
  });

  it("reveals a row by scrolling the least", () => {
    expect(scrollToReveal(0, 100, 440, 44)).toBe(0);
    expect(scrollToReveal(20, 0, 440, 44)).toBe(21 * 44 - 440);
    expect(scrollToReveal(5, 0, 440, 44)).toBeUndefined();
  });
});

describe("TaskList with 10,000 rows", () => {
  let destroy: (() => void) | undefined;
  afterEach(() => destroy?.());

  it("keeps the DOM small and shows the rows under the scroll position", () => {
    const all = tasks(10_000);
    const t0 = performance.now();
    const r = render(TaskList, { tasks: all, servers: [], onopen: () => {}, onadopt: () => {}, height: 440 });
    const mounted = performance.now() - t0;
    destroy = r.destroy;
    const rows = () => [...r.target.querySelectorAll<HTMLElement>(".vlist-row")];
    expect(rows().length).toBeLessThanOrEqual(30);
    expect(rows()[0]?.textContent).toContain("step 0");
    expect(r.target.querySelector('[data-testid="task-count"]')?.textContent).toBe("10000");

    const viewport = r.target.querySelector<HTMLElement>(".vlist");
    if (!viewport) throw new Error("no viewport");
    const t1 = performance.now();
    viewport.scrollTop = 44 * 7000;
    viewport.dispatchEvent(new Event("scroll"));
    flushSync();
    const scrolled = performance.now() - t1;
    expect(rows().length).toBeLessThanOrEqual(30);
    const indices = rows().map((row) => Number(row.dataset.index));
    expect(indices).toContain(7000);
    expect(rows().find((row) => row.dataset.index === "7000")?.textContent).toContain("step 7000");
    // Numbers, not assertions: wall-clock limits make flaky tests (house style).
    console.log(`10k rows: mount ${mounted.toFixed(1)} ms, scroll to 7000 ${scrolled.toFixed(1)} ms, ${rows().length} rows in DOM`);
  });

  it("filters 10,000 rows by status, server, tool and text", () => {
    const all = tasks(10_000);
    const f = (over: Partial<typeof NO_FILTER>) => filterTasks(all, { ...NO_FILTER, ...over });
    expect(f({ status: "input_required" })).toHaveLength(2_000);
    expect(f({ status: "active" })).toHaveLength(4_000);
    expect(f({ status: "ended" })).toHaveLength(6_000);
    expect(f({ status: "failed" })).toHaveLength(2_000);
    expect(f({ text: "step 9999" }).map((t) => t.taskId)).toEqual(["task-09999"]);
    expect(f({ text: "PEER-RMCP" })).toHaveLength(5_000);
    expect(f({ server: "peer-rmcp", tool: "tool_3" }).every((t) => t.serverName === "peer-rmcp" && t.toolName === "tool_3")).toBe(true);
    expect(f({ server: "peer-rmcp", tool: "tool_3" }).length).toBeGreaterThan(600);
    expect(toolNames(all)).toEqual(["tool_0", "tool_1", "tool_2", "tool_3", "tool_4", "tool_5", "tool_6"]);
  });
});
