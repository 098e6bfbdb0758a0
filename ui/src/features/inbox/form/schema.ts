// Elicitation form mode: turns a server's `requestedSchema` (untrusted JSON) into field specs,
// pre-fills defaults, validates drafts and builds the `content` to send.
// What the schema may contain: shared/spec/tasks-on-the-wire.md §4 (flat object of primitives).

export type StringFormat = "email" | "uri" | "date" | "date-time";

export interface Option {
  value: string;
  label: string;
}

interface Common {
  name: string;
  /** `title`, or the property name. */
  label: string;
  description?: string;
  required: boolean;
  /** Looks like it asks for a password, token or key. */
  secret: boolean;
}

export type Field =
  | (Common & { kind: "string"; minLength?: number; maxLength?: number; format?: StringFormat; default?: string })
  | (Common & { kind: "number"; integer: boolean; minimum?: number; maximum?: number; default?: number })
  | (Common & { kind: "boolean"; default?: boolean })
  | (Common & { kind: "select"; options: Option[]; default?: string })
  | (Common & { kind: "multiselect"; options: Option[]; minItems?: number; maxItems?: number; default?: string[] })
  | (Common & { kind: "unsupported"; reason: string });

export interface ParsedForm {
  fields: Field[];
  /** Why the schema (or a required part of it) cannot be rendered; accept is then impossible. */
  blocking: string[];
}

/** What the user is editing: strings for text and numbers (raw text), etc. */
export type Draft = string | boolean | string[] | undefined;
export type Drafts = Record<string, Draft>;
export type Content = Record<string, string | number | boolean | string[]>;

const FORMATS: readonly string[] = ["email", "uri", "date", "date-time"];
const SECRET_NAME = /(pass(word|phrase|wd)?|secret|token|api[-_ ]?key|private[-_ ]?key|credential|\botp\b|\bpin\b|\bcvv\b|\bssn\b|(^|[-_ ])key$)/i;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

function count(v: unknown): number | undefined {
  const n = num(v);
  return n !== undefined && Number.isInteger(n) && n >= 0 ? n : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** `[{const,title}]` (oneOf/anyOf) or `enum` (+ legacy `enumNames`) → options; undefined if neither. */
function options(p: Record<string, unknown>): Option[] | undefined {
  const titled = Array.isArray(p.oneOf) ? p.oneOf : Array.isArray(p.anyOf) ? p.anyOf : undefined;
  if (titled) {
    return titled.filter(isRecord).flatMap((o) => {
      const value = str(o.const);
      return value === undefined ? [] : [{ value, label: str(o.title) ?? value }];
    });
  }
  if (Array.isArray(p.enum)) {
    const names = Array.isArray(p.enumNames) ? p.enumNames : [];
    return p.enum.flatMap((v, i) => (typeof v === "string" ? [{ value: v, label: str(names[i]) ?? v }] : []));
  }
  return undefined;
}

function looksSecret(name: string, p: Record<string, unknown>): boolean {
  const format = str(p.format)?.toLowerCase();
  if (format === "password") return true;
  return [name, str(p.title) ?? ""].some((s) => SECRET_NAME.test(s));
}

function field(name: string, p: unknown, required: boolean): Field {
  if (!isRecord(p)) return { kind: "unsupported", name, label: name, required, secret: false, reason: "not a schema object" };
  const common: Common = {
    name,
    label: str(p.title)?.trim() || name,
    required,
    secret: looksSecret(name, p),
  };
  const description = str(p.description);
  if (description) common.description = description;
  const type = str(p.type);
  const opts = options(p);

  if ((type === "string" || type === undefined) && opts) {
    const def = str(p.default);
    return { ...common, kind: "select", options: opts, ...(def !== undefined && opts.some((o) => o.value === def) ? { default: def } : {}) };
  }
  switch (type) {
    case "string": {
      const f: Field = { ...common, kind: "string" };
      const minLength = count(p.minLength);
      const maxLength = count(p.maxLength);
      const format = str(p.format);
      const def = str(p.default);
      if (minLength !== undefined) f.minLength = minLength;
      if (maxLength !== undefined) f.maxLength = maxLength;
      if (format && FORMATS.includes(format)) f.format = format as StringFormat;
      if (def !== undefined) f.default = def;
      return f;
    }
    case "number":
    case "integer": {
      const f: Field = { ...common, kind: "number", integer: type === "integer" };
      const minimum = num(p.minimum);
      const maximum = num(p.maximum);
      const def = num(p.default);
      if (minimum !== undefined) f.minimum = minimum;
      if (maximum !== undefined) f.maximum = maximum;
      if (def !== undefined && (type === "number" || Number.isInteger(def))) f.default = def;
      return f;
    }
    case "boolean": {
      const def = p.default;
      return { ...common, kind: "boolean", ...(typeof def === "boolean" ? { default: def } : {}) };
    }
    case "array": {
      const items = isRecord(p.items) ? options(p.items) : undefined;
      if (!items) return { ...common, kind: "unsupported", reason: "a list without a fixed set of choices" };
      const f: Field = { ...common, kind: "multiselect", options: items };
      const minItems = count(p.minItems);
      const maxItems = count(p.maxItems);
      if (minItems !== undefined) f.minItems = minItems;
      if (maxItems !== undefined) f.maxItems = maxItems;
      if (Array.isArray(p.default)) {
        f.default = p.default.filter((v): v is string => typeof v === "string" && items.some((o) => o.value === v));
      }
      return f;
    }
    default:
      return { ...common, kind: "unsupported", reason: `type ${JSON.stringify(p.type ?? null)} is not allowed in forms` };
  }
}

/** Parses `requestedSchema` defensively: anything unexpected becomes an `unsupported` field. */
export function parseSchema(schema: unknown): ParsedForm {
  if (!isRecord(schema)) return { fields: [], blocking: ["The request has no form schema."] };
  if (schema.type !== undefined && schema.type !== "object") {
    return { fields: [], blocking: ["The form schema is not an object."] };
  }
  const props = isRecord(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === "string") : []);
  const fields = Object.entries(props).map(([name, p]) => field(name, p, required.has(name)));
  const blocking = fields
    .filter((f): f is Extract<Field, { kind: "unsupported" }> => f.kind === "unsupported" && f.required)
    .map((f) => `Required field “${f.label}” cannot be shown: ${f.reason}.`);
  for (const r of required) {
    if (!(r in props)) blocking.push(`Required field “${r}” is not described by the server.`);
  }
  return { fields, blocking };
}

/**
 * The field of a yes/no confirmation: exactly one required field, a boolean (other fields are
 * optional). "Approve" sets it to yes; the desktop notification offers Approve/Decline for the
 * same forms (`single_confirmation` in
 * crates/countersign-core/src/console/notifications.rs).
 */
export function confirmationField(form: ParsedForm): string | undefined {
  const required = form.fields.filter((f) => f.required);
  const [only] = required;
  return required.length === 1 && only?.kind === "boolean" ? only.name : undefined;
}

/** Whether any field looks like it asks for a secret. */
export function asksForSecrets(form: ParsedForm): boolean {
  return form.fields.some((f) => f.secret);
}

/** RFC 3339 date-time → the value of a `datetime-local` input, in local time. */
export function toLocalInput(iso: string): string | undefined {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime()) || !DATE_TIME.test(iso)) return undefined;
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A `datetime-local` value → RFC 3339 with the local offset. */
export function fromLocalInput(local: string): string | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?$/.exec(local);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1).map((x) => Number(x ?? 0)) as [number, number, number, number, number, number];
  const date = new Date(y, mo - 1, d, h, mi, s);
  if (date.getMonth() !== mo - 1 || date.getDate() !== d) return undefined;
  const off = -date.getTimezoneOffset();
  const pad = (n: number) => String(Math.trunc(Math.abs(n))).padStart(2, "0");
  const zone = off === 0 ? "Z" : `${off > 0 ? "+" : "-"}${pad(off / 60)}:${pad(off % 60)}`;
  return `${local.length === 16 ? `${local}:00` : local.slice(0, 19)}${zone}`;
}

/** Initial drafts: defaults pre-filled, everything else empty. */
export function initialDrafts(form: ParsedForm): Drafts {
  const drafts: Drafts = {};
  for (const f of form.fields) {
    switch (f.kind) {
      case "string":
        drafts[f.name] = f.format === "date-time" && f.default !== undefined ? toLocalInput(f.default) ?? f.default : f.default ?? "";
        break;
      case "number":
        drafts[f.name] = f.default === undefined ? "" : String(f.default);
        break;
      case "boolean":
        drafts[f.name] = f.default ?? false;
        break;
      case "select":
        drafts[f.name] = f.default;
        break;
      case "multiselect":
        drafts[f.name] = [...(f.default ?? [])];
        break;
      case "unsupported":
        break;
    }
  }
  return drafts;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function validDate(s: string): boolean {
  const m = DATE.exec(s);
  if (!m) return false;
  const [y, mo, d] = m.slice(1).map(Number) as [number, number, number];
  const date = new Date(Date.UTC(y, mo - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
}

function validUri(s: string): boolean {
  try {
    const u = new URL(s);
    return /^[a-z][a-z0-9+.-]*:$/i.test(u.protocol);
  } catch {
    return false;
  }
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`;

type Checked = { ok: true; value: string | number | boolean | string[] | undefined } | { ok: false; error: string };

function check(f: Field, draft: Draft): Checked {
  switch (f.kind) {
    case "string": {
      const s = typeof draft === "string" ? draft : "";
      if (s === "") return f.required ? { ok: false, error: "Required" } : { ok: true, value: undefined };
      const len = [...s].length;
      if (f.minLength !== undefined && len < f.minLength) return { ok: false, error: `At least ${plural(f.minLength, "character")}` };
      if (f.maxLength !== undefined && len > f.maxLength) return { ok: false, error: `At most ${plural(f.maxLength, "character")}` };
      switch (f.format) {
        case "email":
          return EMAIL.test(s) ? { ok: true, value: s } : { ok: false, error: "Not an email address" };
        case "uri":
          return validUri(s) ? { ok: true, value: s } : { ok: false, error: "Not an absolute URI (e.g. https://example.com/x)" };
        case "date":
          return validDate(s) ? { ok: true, value: s } : { ok: false, error: "Not a date (YYYY-MM-DD)" };
        case "date-time": {
          if (DATE_TIME.test(s) && !Number.isNaN(new Date(s).getTime())) return { ok: true, value: s };
          const iso = fromLocalInput(s);
          return iso ? { ok: true, value: iso } : { ok: false, error: "Not a date and time" };
        }
        default:
          return { ok: true, value: s };
      }
    }
    case "number": {
      const s = typeof draft === "string" ? draft.trim() : "";
      if (s === "") return f.required ? { ok: false, error: "Required" } : { ok: true, value: undefined };
      const n = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s) ? Number(s) : NaN;
      if (!Number.isFinite(n)) return { ok: false, error: "Not a number" };
      if (f.integer && !Number.isInteger(n)) return { ok: false, error: "Must be a whole number" };
      if (f.minimum !== undefined && n < f.minimum) return { ok: false, error: `Must be at least ${f.minimum}` };
      if (f.maximum !== undefined && n > f.maximum) return { ok: false, error: `Must be at most ${f.maximum}` };
      return { ok: true, value: n };
    }
    case "boolean":
      return { ok: true, value: draft === true };
    case "select": {
      const v = typeof draft === "string" ? draft : undefined;
      if (v === undefined) return f.required ? { ok: false, error: "Choose one" } : { ok: true, value: undefined };
      return f.options.some((o) => o.value === v) ? { ok: true, value: v } : { ok: false, error: "Not one of the choices" };
    }
    case "multiselect": {
      const picked = Array.isArray(draft) ? draft : [];
      // Keep the server's order, whatever order the user clicked in.
      const v = f.options.map((o) => o.value).filter((o) => picked.includes(o));
      if (f.minItems !== undefined && v.length < f.minItems) return { ok: false, error: `Choose at least ${f.minItems}` };
      if (f.maxItems !== undefined && v.length > f.maxItems) return { ok: false, error: `Choose at most ${f.maxItems}` };
      if (v.length === 0 && !f.required) return { ok: true, value: undefined };
      return { ok: true, value: v };
    }
    case "unsupported":
      return f.required ? { ok: false, error: `Cannot be answered here: ${f.reason}` } : { ok: true, value: undefined };
  }
}

export interface Validation {
  errors: Record<string, string>;
  /** Present only when there are no errors. */
  content?: Content;
}

/** Validates every field; on success also returns the `content` to send. */
export function validate(form: ParsedForm, drafts: Drafts): Validation {
  const errors: Record<string, string> = {};
  const content: Content = {};
  for (const f of form.fields) {
    const r = check(f, drafts[f.name]);
    if (!r.ok) errors[f.name] = r.error;
    else if (r.value !== undefined) content[f.name] = r.value;
  }
  if (form.blocking.length) errors[""] = form.blocking.join(" ");
  return Object.keys(errors).length ? { errors } : { errors, content };
}

/** One field's error, for inline validation while typing. */
export function fieldError(f: Field, draft: Draft): string | undefined {
  const r = check(f, draft);
  return r.ok ? undefined : r.error;
}

/** How a sent value reads on the review step. */
export function display(f: Field, value: Content[string] | undefined): string {
  if (value === undefined) return "—";
  if (f.kind === "boolean") return value ? "Yes" : "No";
  if (f.kind === "select") return f.options.find((o) => o.value === value)?.label ?? String(value);
  if (f.kind === "multiselect" && Array.isArray(value)) {
    return value.length ? value.map((v) => f.options.find((o) => o.value === v)?.label ?? v).join(", ") : "None";
  }
  return String(value);
}
