// Keyboard-first inbox: j/k move, Enter opens the form, a accepts (review, then send),
// d declines, Esc steps back, ? toggles help. Keys typed into a text field are left alone,
// except Esc.

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
  ["a", "review the answer; press again to send"],
  ["d", "decline"],
  ["Esc", "back: leave the field, the review, or this help"],
  ["?", "show or hide this help"],
];
