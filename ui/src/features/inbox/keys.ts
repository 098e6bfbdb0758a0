// Keyboard-first inbox: j/k move between questions and agents' calls alike, Enter opens the form,
// a approves and n denies an approval question (each asks for the same key again before sending),
// a reviews then sends other forms, d declines the question (after a second d); on an agent's
// held call a approves and d (or n) declines it, each after a second press, Esc steps back and, with nothing left to step back
// from, asks whether to cancel the whole task (a button confirms; Esc again keeps it), ? toggles
// help. Keys typed into a text field are left alone, except Esc.

export type InboxAction = "next" | "prev" | "open" | "accept" | "deny" | "decline" | "back" | "help";

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
    case "n":
      return "deny";
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
  ["a", "Approve (press again to send); on other forms: review the answer, press again to send; on an agent's call: Approve (press again)"],
  ["n", "Deny an approval question (press again to send)"],
  ["d", "Decline this question (press again to confirm); the task goes on; on an agent's call: Decline (press again)"],
  ["Esc", "back: leave the field, the review, or this help; otherwise ask whether to cancel the whole task"],
  ["?", "show or hide this help"],
];
