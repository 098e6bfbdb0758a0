import { describe, expect, it } from "vitest";
import { href, parseRoute } from "./router.svelte";

describe("routes", () => {
  it("round-trip through the hash", () => {
    for (const r of [
      { page: "inbox" },
      { page: "inbox", row: 3, key: "task-9:approval/1" },
      { page: "inbox", call: "csg-0a1b" },
      { page: "inbox", call: "odd/id #1" },
      { page: "tasks" },
      { page: "task", row: 42 },
      { page: "adopt" },
      { page: "adopt", serverId: 2, taskId: "a/b c" },
      { page: "adopt", serverUrl: "https://h.example/mcp?x=1", taskId: "t#1" },
      { page: "servers" },
      { page: "call" },
      { page: "audit" },
      { page: "agents" },
      { page: "settings" },
    ] as const) {
      expect(parseRoute(href(r))).toEqual(r);
    }
    expect(parseRoute("#/nonsense")).toEqual({ page: "inbox" });
    expect(parseRoute("#/tasks/abc")).toEqual({ page: "tasks" });
    // The shell's link routes (src-tauri/src/window.rs, `Page::route`) read the same way.
    expect(parseRoute("#/adopt/2/a%2Fb")).toEqual({ page: "adopt", serverId: 2, taskId: "a/b" });
    expect(parseRoute("#/adopt/url/https%3A%2F%2Fh.example%2Fmcp/t")).toEqual({ page: "adopt", serverUrl: "https://h.example/mcp", taskId: "t" });
    expect(parseRoute("#/adopt/x")).toEqual({ page: "adopt" });
    // A notification's click on an agent's call (`Page::GatedCall::route`).
    expect(parseRoute("#/inbox/call/csg-0a1b")).toEqual({ page: "inbox", call: "csg-0a1b" });
    expect(parseRoute("#/inbox/call/x%2F'%3Balert(1)%2F%2F%23")).toEqual({ page: "inbox", call: "x/';alert(1)//#" });
    expect(parseRoute("#/inbox/call/")).toEqual({ page: "inbox" });
  });
});
