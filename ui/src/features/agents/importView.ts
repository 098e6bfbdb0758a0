// What the "Put my servers behind Countersign" panel says about each entry of a host's file
// (ImportHosts.svelte). Pure, so the wording is tested (importView.test.ts).
import type { Host } from "../../bindings/Host";
import type { ImportItem } from "../../bindings/ImportItem";

/** Where each host keeps its servers: suggestions for the path field. */
export const HOST_FILES: { host: Host; label: string; path: string }[] = [
  { host: "claude-code", label: "Claude Code (project)", path: "~/PROJECT/.mcp.json" },
  { host: "cursor", label: "Cursor", path: "~/.cursor/mcp.json" },
  { host: "vscode", label: "VS Code (workspace)", path: "~/PROJECT/.vscode/mcp.json" },
  { host: "codex", label: "Codex", path: "~/.codex/config.toml" },
];

/** The host's name for a person. */
export function hostName(host: Host): string {
  switch (host) {
    case "claude-code": return "Claude Code";
    case "cursor": return "Cursor";
    case "vscode": return "VS Code";
    case "codex": return "Codex";
    case "goose": return "Goose";
    case "zed": return "Zed";
    case "stdio": return "a host that starts stdio servers";
  }
}

/** How the host reaches the server today (never a token or an environment value). */
export function how(item: ImportItem): string {
  const s = item.server;
  switch (s.transport) {
    case "http": return s.has_token ? `${s.url} (its token goes to the OS keyring)` : s.url;
    case "stdio": return [s.command, ...s.args].join(" ");
    case "other": return "";
  }
}

/** What happens (preview) or happened (applied) to the entry. */
export function outcome(item: ImportItem): string {
  switch (item.action) {
    case "register": return "Registered with Countersign, then reached through the gateway";
    case "registered": return "Registered; now reached through the gateway";
    case "reuse": return "Already registered; reached through the gateway";
    case "already_behind": return "Already goes through Countersign";
    case "conflict":
    case "unsupported":
    case "failed":
      return `Left as it is: ${item.reason}`;
  }
}
