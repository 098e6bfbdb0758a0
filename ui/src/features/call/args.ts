// The argument form of a tool from its `inputSchema`: the flat subset the elicitation form
// renders (strings, numbers, booleans, enums). Anything else (nested objects, arrays of objects,
// $ref, …) falls back to a JSON editor.
import { parseSchema, type ParsedForm } from "../inbox/form/schema";

export interface ArgsPlan {
  /** The form, when the whole schema fits one. */
  form?: ParsedForm;
  /** Why a JSON editor is used instead. */
  why?: string;
}

export function planArgs(schema: unknown): ArgsPlan {
  const form = parseSchema(schema ?? { type: "object" });
  const unsupported = form.fields.filter((f) => f.kind === "unsupported");
  if (form.blocking.length) return { why: form.blocking.join(" ") };
  if (unsupported.length) {
    return { why: `A form cannot express ${unsupported.map((f) => `“${f.label}”`).join(", ")}.` };
  }
  return { form };
}

/** Parses the JSON editor's text into an arguments object, or says why not. */
export function parseArgs(text: string): { args: Record<string, unknown> } | { error: string } {
  try {
    const v: unknown = JSON.parse(text.trim() || "{}");
    if (typeof v === "object" && v !== null && !Array.isArray(v)) return { args: v as Record<string, unknown> };
    return { error: "Arguments must be a JSON object." };
  } catch (e) {
    return { error: `Not valid JSON: ${e instanceof Error ? e.message : String(e)}` };
  }
}
