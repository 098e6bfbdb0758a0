import { describe, expect, it } from "vitest";
import type { ImportItem } from "../../bindings/ImportItem";
import { how, outcome } from "./importView";

describe("import wording", () => {
  it("says where a token goes and never shows one", () => {
    const item: ImportItem = { name: "docs", server: { transport: "http", url: "https://d.example/mcp", has_token: true }, action: "register", rewritten: true };
    expect(how(item)).toBe("https://d.example/mcp (its token goes to the OS keyring)");
    expect(outcome(item)).toContain("through the gateway");
  });

  it("shows a stdio server's command line and what happens to it", () => {
    const item: ImportItem = { name: "fs", server: { transport: "stdio", command: "npx", args: ["-y", "server-filesystem"], env_keys: ["TOKEN"] }, action: "register", rewritten: true };
    expect(how(item)).toBe("npx -y server-filesystem");
    expect(outcome(item)).toBe("Registered with Countersign, then reached through the gateway");
    expect(outcome({ ...item, action: "unsupported", reason: "it sends a X-Api-Key header" })).toBe("Left as it is: it sends a X-Api-Key header");
  });
});
