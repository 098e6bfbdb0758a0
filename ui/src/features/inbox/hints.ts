// A tool's annotations (MCP ToolAnnotations) in a person's words, for the card of an agent's
// held call. They are the server's hints, not guarantees; absent ones take the schema's
// defaults (not read-only, destructive, not idempotent, open world), so a tool that says nothing
// is shown as possibly destructive, never as safe.
import type { ToolInfo } from "../../bindings/ToolInfo";

export interface Hint {
  /** Stable key (tests, styling). */
  key: "read-only" | "writes" | "destructive" | "additive" | "idempotent" | "open-world" | "closed-world";
  text: string;
  /** Whether the hint argues for care. */
  caution: boolean;
}

export function hints(info: ToolInfo): Hint[] {
  const readOnly = info.readOnlyHint ?? false;
  const out: Hint[] = [];
  if (readOnly) {
    out.push({ key: "read-only", text: "says it only reads", caution: false });
  } else {
    out.push({ key: "writes", text: "may change things", caution: true });
    // destructiveHint and idempotentHint mean something only for a tool that writes.
    if (info.destructiveHint ?? true) out.push({ key: "destructive", text: "may delete or overwrite", caution: true });
    else out.push({ key: "additive", text: "says it only adds", caution: false });
    if (info.idempotentHint ?? false) out.push({ key: "idempotent", text: "says repeating it changes nothing more", caution: false });
  }
  if (info.openWorldHint ?? true) out.push({ key: "open-world", text: "reaches outside systems", caution: true });
  else out.push({ key: "closed-world", text: "stays within its own system", caution: false });
  return out;
}
