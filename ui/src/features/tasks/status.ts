import type { Decision } from "../../bindings/Decision";
import type { TaskStatus } from "../../bindings/TaskStatus";
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
 * "Completed" after a denial the server treats as an ordinary result; "Cancelled by you".
 * The person's part is shown once the task has ended (while it runs, the status is what matters).
 */
export function statusText(t: Pick<TaskView, "status" | "lastDecision" | "cancelledByYou">): string {
  const label = STATUS_LABEL[t.status];
  if (!isTerminal(t.status)) return label;
  if (t.status === "cancelled" && t.cancelledByYou) return "Cancelled by you";
  if (t.lastDecision) return `${label} · ${t.lastDecision} by you`;
  return label;
}

/** A decision the task ended on that the person should not mistake for success. */
export function endedAgainst(d: Decision | undefined): boolean {
  return d === "denied" || d === "declined" || d === "dismissed";
}
