// What waits for a person, as one list: the servers' questions, the agents' calls held for a
// decision, and the approved calls whose upstream asks first. The inbox lists it and opens its
// entries one at a time; its length is the one count the window shows (the inbox header, the
// navigation badge), as the core's `waiting_count` gives the tray and the window title.
import type { GatedCallView } from "../bindings/GatedCallView";
import type { GatedQuestionsView } from "../bindings/GatedQuestionsView";
import type { InputRequestView } from "../bindings/InputRequestView";

export type WaitingItem =
  /** A server's question about a task. */
  | { kind: "question"; id: string; since: number; input: InputRequestView }
  /** An agent's call the gateway holds until someone approves or declines it. */
  | { kind: "call"; id: string; since: number; call: GatedCallView }
  /** An approved agent's call whose upstream asks questions before running it. */
  | { kind: "asking"; id: string; since: number; entry: GatedQuestionsView };

/** A question's entry id: keys are unique within a task only. */
export function questionItemId(i: { taskRow: number; key: string }): string {
  return `q/${i.taskRow}/${i.key}`;
}

/** An agent's call's entry id (Countersign's task id), whether it waits for a decision or for answers. */
export function callItemId(taskId: string): string {
  return `c/${taskId}`;
}

/** Countersign's task id of an agent's call's entry; `undefined` for a question. */
export function callOf(item: WaitingItem): string | undefined {
  return item.kind === "call" ? item.call.task_id : item.kind === "asking" ? item.entry.call.task_id : undefined;
}

/**
 * The three lists as one, oldest first (a question since it was asked, a held call since the
 * agent made it, an approved call with questions since it was approved). A call in both lists
 * (its approval seen before the held list caught up) is listed once, with its questions.
 */
export function waitingItems(inputs: readonly InputRequestView[], gated: readonly GatedCallView[], asking: readonly GatedQuestionsView[]): WaitingItem[] {
  const answering = new Set(asking.map((a) => a.call.task_id));
  const items: WaitingItem[] = [
    ...inputs.map((input): WaitingItem => ({ kind: "question", id: questionItemId(input), since: input.requestedAtMs, input })),
    ...gated
      .filter((c) => !answering.has(c.task_id))
      .map((call): WaitingItem => ({ kind: "call", id: callItemId(call.task_id), since: call.created_at, call })),
    ...asking.map((entry): WaitingItem => ({ kind: "asking", id: callItemId(entry.call.task_id), since: entry.call.decided_at ?? entry.call.created_at, entry })),
  ];
  // Array.prototype.sort is stable: equal times keep the order above.
  return items.sort((a, b) => a.since - b.since);
}
