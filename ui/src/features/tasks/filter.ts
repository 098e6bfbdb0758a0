import type { TaskView } from "../../bindings/TaskView";

export type StatusFilter = "all" | "active" | "input_required" | "completed" | "failed" | "ended";

export interface TaskFilter {
  status: StatusFilter;
  /** Server name, or "" for all. */
  server: string;
  /** Tool name, or "" for all. */
  tool: string;
  /** Case-insensitive text over tool, server, task id and last message. */
  text: string;
}

export const NO_FILTER: TaskFilter = { status: "all", server: "", tool: "", text: "" };

function statusMatches(t: TaskView, s: StatusFilter): boolean {
  switch (s) {
    case "all":
      return true;
    case "active":
      return t.status === "working" || t.status === "input_required";
    case "input_required":
    case "completed":
      return t.status === s;
    case "failed":
      return t.status === "failed" || t.status === "lost" || t.status === "expired";
    case "ended":
      return t.status !== "working" && t.status !== "input_required";
  }
}

/** Filters in one pass (10,000 rows take well under a frame). */
export function filterTasks(tasks: readonly TaskView[], f: TaskFilter): TaskView[] {
  const q = f.text.trim().toLowerCase();
  return tasks.filter((t) => {
    if (!statusMatches(t, f.status)) return false;
    if (f.server && t.serverName !== f.server) return false;
    if (f.tool && (t.toolName ?? "") !== f.tool) return false;
    if (!q) return true;
    return (
      (t.toolName ?? "").toLowerCase().includes(q) ||
      t.serverName.toLowerCase().includes(q) ||
      t.taskId.toLowerCase().includes(q) ||
      (t.statusMessage ?? "").toLowerCase().includes(q)
    );
  });
}

/** The distinct tool names, sorted (for the tool filter). */
export function toolNames(tasks: readonly TaskView[]): string[] {
  const names = new Set<string>();
  for (const t of tasks) if (t.toolName) names.add(t.toolName);
  return [...names].sort();
}
