import type { TaskView } from "../../bindings/TaskView";

export type StatusFilter = "all" | "active" | "input_required" | "ended";

/** Filters by status group and a case-insensitive text match on tool, server, id and message. */
export function filterTasks(tasks: readonly TaskView[], status: StatusFilter, text: string): TaskView[] {
  const q = text.trim().toLowerCase();
  return tasks.filter((t) => {
    if (status === "active" && !(t.status === "working" || t.status === "input_required")) return false;
    if (status === "input_required" && t.status !== "input_required") return false;
    if (status === "ended" && (t.status === "working" || t.status === "input_required")) return false;
    if (!q) return true;
    return (
      t.toolName.toLowerCase().includes(q) ||
      t.serverName.toLowerCase().includes(q) ||
      t.taskId.toLowerCase().includes(q) ||
      (t.statusMessage ?? "").toLowerCase().includes(q)
    );
  });
}
