import { describe, expect, it } from "vitest";
import { DEFAULT_GATEWAY_URL, shellWord, snippets } from "./snippets";

const TOKEN = "csa_0123abcd";

describe("agent config snippets", () => {
  const all = snippets({ server: "demo", gatewayUrl: "http://127.0.0.1:41234/mcp/", token: TOKEN, dataDir: "/home/me/.local/share/countersign" });
  const by = (id: string) => all.find((s) => s.id === id)?.text ?? "";

  it("gives Claude Code its `claude mcp add` line with the header", () => {
    expect(by("claude-code")).toBe(`claude mcp add --transport http demo http://127.0.0.1:41234/mcp/demo --header 'Authorization: Bearer ${TOKEN}'`);
  });

  it("gives Cursor and VS Code their mcp.json shapes", () => {
    expect(JSON.parse(by("cursor"))).toEqual({ mcpServers: { demo: { url: "http://127.0.0.1:41234/mcp/demo", headers: { Authorization: `Bearer ${TOKEN}` } } } });
    expect(JSON.parse(by("vscode"))).toEqual({
      servers: { demo: { type: "http", url: "http://127.0.0.1:41234/mcp/demo", headers: { Authorization: `Bearer ${TOKEN}` } } },
    });
  });

  it("points stdio hosts at `countersign connect` on this app's data directory", () => {
    expect(JSON.parse(by("stdio"))).toEqual({
      mcpServers: {
        demo: {
          command: "countersign",
          args: ["--data-dir", "/home/me/.local/share/countersign", "connect", "demo"],
          env: { COUNTERSIGN_AGENT_TOKEN: TOKEN },
        },
      },
    });
  });

  it("uses the README's port when this app does not run the gateway", () => {
    const text = snippets({ server: "demo", gatewayUrl: undefined, token: TOKEN, dataDir: undefined }).find((s) => s.id === "cursor")?.text ?? "";
    expect(JSON.parse(text).mcpServers.demo.url).toBe(`${DEFAULT_GATEWAY_URL}demo`);
  });

  it("quotes what a shell would split or expand, and encodes the server in the URL", () => {
    expect(shellWord("plain-name")).toBe("plain-name");
    expect(shellWord("it's $HOME")).toBe(`'it'\\''s $HOME'`);
    const text = snippets({ server: "my server", gatewayUrl: "http://127.0.0.1:1/mcp/", token: TOKEN, dataDir: undefined })[0]?.text;
    expect(text).toBe(`claude mcp add --transport http 'my server' http://127.0.0.1:1/mcp/my%20server --header 'Authorization: Bearer ${TOKEN}'`);
  });
});
