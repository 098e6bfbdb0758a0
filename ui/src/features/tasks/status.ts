import type { TaskStatus } from "../../bindings/TaskStatus";

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
