// Keyboard-first inbox: j/k move, Enter opens the form, a approves (review, then send),
// d declines, Esc steps back and, with nothing left to step back from, cancels the task (after
// a second Esc), ? toggles help. Keys typed into a text field are left alone, except Esc.

export type InboxAction = "next" | "prev" | "open" | "accept" | "decline" | "back" | "help";

export function inboxAction(e: Pick<KeyboardEvent, "key" | "ctrlKey" | "metaKey" | "altKey">, typing: boolean): InboxAction | undefined {
  if (e.ctrlKey || e.metaKey || e.altKey) return undefined;
  if (e.key === "Escape") return "back";
  if (typing) return undefined;
  switch (e.key) {
    case "j":
    case "ArrowDown":
      return "next";
    case "k":
    case "ArrowUp":
      return "prev";
    case "Enter":
      return "open";
    case "a":
      return "accept";
    case "d":
      return "decline";
    case "?":
      return "help";
    default:
      return undefined;
  }
}

export const INBOX_KEYS: readonly [string, string][] = [
  ["j / ↓", "next request"],
  ["k / ↑", "previous request"],
  ["Enter", "open the form (focus first field)"],
  ["a", "approve: review the answer (a yes/no is set to yes); press again to send"],
  ["d", "decline"],
  ["Esc", "back: leave the field, the review, or this help; otherwise cancel the task (Esc again confirms)"],
  ["?", "show or hide this help"],
];
