import { describe, expect, it } from "vitest";
import { href, parseRoute } from "./router.svelte";

describe("routes", () => {
  it("round-trip through the hash", () => {
    for (const r of [
      { page: "inbox" },
      { page: "inbox", row: 3, key: "task-9:approval/1" },
      { page: "tasks" },
      { page: "task", row: 42 },
      { page: "adopt" },
      { page: "servers" },
      { page: "call" },
      { page: "audit" },
    ] as const) {
      expect(parseRoute(href(r))).toEqual(r);
    }
    expect(parseRoute("#/nonsense")).toEqual({ page: "inbox" });
    expect(parseRoute("#/tasks/abc")).toEqual({ page: "tasks" });
  });
});
