import type { Decision } from "../../bindings/Decision";
import type { LedgerStatus as TaskStatus } from "../../bindings/LedgerStatus";
import type { TaskView } from "../../bindings/TaskView";

export const STATUS_LABEL: Record<TaskStatus, string> = {
  working: "Working",
  input_required: "Needs input",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled",
  expired: "Expired",
  lost: "Lost",
};

export function isTerminal(s: TaskStatus): boolean {
  return s !== "working" && s !== "input_required";
}

/**
 * How a task stands in the person's terms: "Completed · denied by you" rather than a bare
 * "Completed" after a denial the server treats as an ordinary result; "Cancelled by you". The
 * outcome is the core's (`present::outcome`), the same words the CLI prints.
 */
export function statusText(t: Pick<TaskView, "status" | "outcome">): string {
  const label = STATUS_LABEL[t.status];
  if (t.status === "cancelled" && t.outcome === "by you") return "Cancelled by you";
  return t.outcome ? `${label} · ${t.outcome}` : label;
}

/**
 * A task that ended in a way the person should not mistake for success: on a denial or decline,
 * or with a tool result marked as an error.
 */
export function endedAgainst(t: Pick<TaskView, "lastDecision" | "resultIsError">): boolean {
  const d: Decision | undefined = t.lastDecision;
  return t.resultIsError || d === "denied" || d === "declined" || d === "dismissed";
}
