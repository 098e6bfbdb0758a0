// What a person pastes into their agent's configuration to connect it through the gateway: one
// snippet per common agent, made from the new agent's token (shown once) and the gateway's URL
// for one server. Pure, so the exact text is tested (snippets.test.ts).

export interface Snippet {
  /** Stable id (tests, data-testid). */
  id: "claude-code" | "cursor" | "vscode" | "stdio";
  /** Which agent it is for, and where it goes. */
  label: string;
  /** The text to paste. */
  text: string;
}

export interface SnippetInput {
  /** The upstream server's registered name (the gateway path's last segment). */
  server: string;
  /** The gateway's base URL (`http://127.0.0.1:P/mcp/`), or undefined when this app does not run it. */
  gatewayUrl: string | undefined;
  /** The agent's bearer token. */
  token: string;
  /** The app's data directory, so `countersign connect` finds this app's gateway. */
  dataDir: string | undefined;
}

/** Where the gateway listens when this app does not run it: the README's port. */
export const DEFAULT_GATEWAY_URL = "http://127.0.0.1:8788/mcp/";

/** `s` as one POSIX shell word (quoted only when it needs to be). */
export function shellWord(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The gateway's URL for `server`. */
export function serverUrl(gatewayUrl: string | undefined, server: string): string {
  return `${gatewayUrl ?? DEFAULT_GATEWAY_URL}${encodeURIComponent(server)}`;
}

export function snippets({ server, gatewayUrl, token, dataDir }: SnippetInput): Snippet[] {
  const url = serverUrl(gatewayUrl, server);
  const auth = `Bearer ${token}`;
  const json = (v: unknown) => JSON.stringify(v, null, 2);
  const connectArgs = [...(dataDir ? ["--data-dir", dataDir] : []), "connect", server];
  return [
    {
      id: "claude-code",
      label: "Claude Code (run in a terminal)",
      text: `claude mcp add --transport http ${shellWord(server)} ${shellWord(url)} --header ${shellWord(`Authorization: ${auth}`)}`,
    },
    {
      id: "cursor",
      label: "Cursor (~/.cursor/mcp.json)",
      text: json({ mcpServers: { [server]: { url, headers: { Authorization: auth } } } }),
    },
    {
      id: "vscode",
      label: "VS Code (.vscode/mcp.json)",
      text: json({ servers: { [server]: { type: "http", url, headers: { Authorization: auth } } } }),
    },
    {
      id: "stdio",
      label: "Hosts that only start stdio servers, e.g. Claude Desktop (countersign connect)",
      text: json({ mcpServers: { [server]: { command: "countersign", args: connectArgs, env: { COUNTERSIGN_AGENT_TOKEN: token } } } }),
    },
  ];
}
