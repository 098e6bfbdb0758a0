import { describe, expect, it } from "vitest";
import { inboxAction } from "./keys";

const k = (key: string, mods: Partial<{ ctrlKey: boolean; metaKey: boolean; altKey: boolean }> = {}) => ({
  key, ctrlKey: false, metaKey: false, altKey: false, ...mods,
});

describe("inboxAction", () => {
  it("maps j/k, Enter, a, n, d, Esc and ?", () => {
    expect(["j", "k", "Enter", "a", "n", "d", "Escape", "?", "ArrowDown", "ArrowUp"].map((x) => inboxAction(k(x), false))).toEqual([
      "next", "prev", "open", "accept", "deny", "decline", "back", "help", "next", "prev",
    ]);
  });

  it("leaves typing alone except Esc", () => {
    expect(inboxAction(k("a"), true)).toBeUndefined();
    expect(inboxAction(k("d"), true)).toBeUndefined();
    expect(inboxAction(k("Escape"), true)).toBe("back");
  });

  it("ignores shortcuts with modifiers", () => {
    expect(inboxAction(k("a", { ctrlKey: true }), false)).toBeUndefined();
    expect(inboxAction(k("d", { metaKey: true }), false)).toBeUndefined();
  });
});
