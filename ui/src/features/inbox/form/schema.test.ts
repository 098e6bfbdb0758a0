import { describe, expect, it } from "vitest";
import { display, fieldError, fromLocalInput, initialDrafts, parseSchema, toLocalInput, validate, type Field } from "./schema";

// Every form-mode type of shared/spec/tasks-on-the-wire.md §4 in one schema.
const FULL = {
  type: "object",
  properties: {
    name: { type: "string", title: "Cluster name", description: "Shown in the console", minLength: 3, maxLength: 8, default: "prod" },
    email: { type: "string", format: "email" },
    site: { type: "string", format: "uri" },
    day: { type: "string", format: "date", default: "2026-12-24" },
    at: { type: "string", format: "date-time", default: "2026-12-02T09:30:00Z" },
    ratio: { type: "number", minimum: 0, maximum: 1, default: 0.5 },
    nodes: { type: "integer", minimum: 1, maximum: 64 },
    ok: { type: "boolean", default: true },
    color: { type: "string", enum: ["red", "green"], enumNames: ["Red", "Green"] },
    region: { type: "string", oneOf: [{ const: "eu", title: "Europe" }, { const: "us", title: "Americas" }], default: "us" },
    tags: { type: "array", items: { type: "string", enum: ["a", "b", "c"] }, minItems: 1, maxItems: 2, default: ["b"] },
    addons: { type: "array", items: { anyOf: [{ const: "m", title: "Metrics" }, { const: "g", title: "GPU" }] } },
  },
  required: ["name", "email", "nodes", "color", "tags"],
};

const byName = (fields: Field[], name: string) => {
  const f = fields.find((x) => x.name === name);
  if (!f) throw new Error(`no field ${name}`);
  return f;
};

describe("parseSchema", () => {
  it("maps every form-mode type to a field kind", () => {
    const { fields, blocking } = parseSchema(FULL);
    expect(blocking).toEqual([]);
    expect(Object.fromEntries(fields.map((f) => [f.name, f.kind]))).toEqual({
      name: "string", email: "string", site: "string", day: "string", at: "string", ratio: "number", nodes: "number",
      ok: "boolean", color: "select", region: "select", tags: "multiselect", addons: "multiselect",
    });
  });

  it("keeps title, description, required, bounds and formats", () => {
    const { fields } = parseSchema(FULL);
    expect(byName(fields, "name")).toMatchObject({ label: "Cluster name", description: "Shown in the console", required: true, minLength: 3, maxLength: 8 });
    expect(byName(fields, "email")).toMatchObject({ label: "email", required: true, format: "email" });
    expect(byName(fields, "nodes")).toMatchObject({ integer: true, minimum: 1, maximum: 64 });
    expect(byName(fields, "ratio")).toMatchObject({ integer: false, minimum: 0, maximum: 1 });
    expect(byName(fields, "tags")).toMatchObject({ minItems: 1, maxItems: 2 });
  });

  it("reads enum (with enumNames), oneOf and anyOf {const,title} options", () => {
    const { fields } = parseSchema(FULL);
    expect(byName(fields, "color")).toMatchObject({ options: [{ value: "red", label: "Red" }, { value: "green", label: "Green" }] });
    expect(byName(fields, "region")).toMatchObject({ options: [{ value: "eu", label: "Europe" }, { value: "us", label: "Americas" }] });
    expect(byName(fields, "addons")).toMatchObject({ options: [{ value: "m", label: "Metrics" }, { value: "g", label: "GPU" }] });
  });

  it("blocks accept when a required field cannot be rendered, but not for optional ones", () => {
    const nested = parseSchema({ type: "object", properties: { deep: { type: "object" }, opt: { type: "object" } }, required: ["deep"] });
    expect(nested.blocking).toHaveLength(1);
    expect(byName(nested.fields, "opt").kind).toBe("unsupported");
    expect(parseSchema({ type: "object", properties: {}, required: ["ghost"] }).blocking[0]).toContain("ghost");
    expect(parseSchema("not a schema").blocking).toHaveLength(1);
    expect(parseSchema({ type: "array" }).blocking).toHaveLength(1);
  });

  it("flags secret-looking fields by name, title or format", () => {
    const { fields } = parseSchema({
      type: "object",
      properties: {
        password: { type: "string" }, api_key: { type: "string" }, t: { type: "string", title: "Access token" },
        p: { type: "string", format: "password" }, monkey: { type: "string" }, keyboard: { type: "string" }, reason: { type: "string" },
      },
    });
    expect(fields.filter((f) => f.secret).map((f) => f.name)).toEqual(["password", "api_key", "t", "p"]);
  });

  it("ignores defaults that do not fit the field", () => {
    const { fields } = parseSchema({
      type: "object",
      properties: {
        s: { type: "string", enum: ["a"], default: "zzz" },
        n: { type: "integer", default: 1.5 },
        b: { type: "boolean", default: "yes" },
        m: { type: "array", items: { enum: ["x"] }, default: ["x", "nope", 3] },
      },
    });
    const d = initialDrafts({ fields, blocking: [] });
    expect(d).toEqual({ s: undefined, n: "", b: false, m: ["x"] });
  });
});

describe("defaults and validation", () => {
  const form = parseSchema(FULL);

  it("pre-fills every default", () => {
    expect(initialDrafts(form)).toEqual({
      name: "prod", email: "", site: "", day: "2026-12-24", at: "2026-12-02T09:30:00", ratio: "0.5", nodes: "",
      ok: true, color: undefined, region: "us", tags: ["b"], addons: [],
    });
  });

  it("reports every missing required value", () => {
    const v = validate(form, initialDrafts(form));
    expect(v.content).toBeUndefined();
    expect(v.errors).toEqual({ email: "Required", nodes: "Required", color: "Choose one" });
  });

  it("builds typed content from valid drafts, omitting empty optional fields", () => {
    const d = { ...initialDrafts(form), email: "ops@example.com", nodes: "3", color: "green" };
    const v = validate(form, d);
    expect(v.errors).toEqual({});
    expect(v.content).toEqual({
      name: "prod", email: "ops@example.com", day: "2026-12-24", at: "2026-12-02T09:30:00Z", ratio: 0.5, nodes: 3,
      ok: true, color: "green", region: "us", tags: ["b"],
    });
  });

  const f = (name: string) => byName(form.fields, name);

  it("checks string length in characters, not UTF-16 units", () => {
    expect(fieldError(f("name"), "ab")).toBe("At least 3 characters");
    expect(fieldError(f("name"), "abcdefghi")).toBe("At most 8 characters");
    expect(fieldError(f("name"), "😀😀😀")).toBeUndefined();
  });

  it("checks formats: email, uri, date, date-time", () => {
    expect(fieldError(f("email"), "nope")).toBe("Not an email address");
    expect(fieldError(f("email"), "a@b.co")).toBeUndefined();
    expect(fieldError(f("site"), "example.com")).toMatch(/absolute URI/);
    expect(fieldError(f("site"), "https://example.com/x")).toBeUndefined();
    expect(fieldError(f("day"), "2026-02-30")).toBe("Not a date (YYYY-MM-DD)");
    expect(fieldError(f("day"), "2028-02-29")).toBeUndefined();
    expect(fieldError(f("at"), "yesterday")).toBe("Not a date and time");
    expect(fieldError(f("at"), "2026-12-02T10:00")).toBeUndefined();
    expect(fieldError(f("at"), "2026-12-02T10:00:00+02:00")).toBeUndefined();
  });

  it("checks numbers: syntax, integers and bounds", () => {
    expect(fieldError(f("nodes"), "abc")).toBe("Not a number");
    expect(fieldError(f("nodes"), "1e")).toBe("Not a number");
    expect(fieldError(f("nodes"), "2.5")).toBe("Must be a whole number");
    expect(fieldError(f("nodes"), "0")).toBe("Must be at least 1");
    expect(fieldError(f("nodes"), "65")).toBe("Must be at most 64");
    expect(fieldError(f("nodes"), " 64 ")).toBeUndefined();
    expect(fieldError(f("ratio"), "1.01")).toBe("Must be at most 1");
    expect(fieldError(f("ratio"), "")).toBeUndefined();
  });

  it("checks selections: membership and item counts", () => {
    expect(fieldError(f("color"), "blue")).toBe("Not one of the choices");
    expect(fieldError(f("tags"), [])).toBe("Choose at least 1");
    expect(fieldError(f("tags"), ["a", "b", "c"])).toBe("Choose at most 2");
    const v = validate(form, { ...initialDrafts(form), email: "a@b.co", nodes: "1", color: "red", tags: ["c", "a"], addons: ["g"] });
    expect(v.content?.tags).toEqual(["a", "c"]);
    expect(v.content?.addons).toEqual(["g"]);
  });

  it("converts datetime-local input to RFC 3339 and back", () => {
    expect(fromLocalInput("2026-12-02T09:30")).toBe("2026-12-02T09:30:00Z");
    expect(fromLocalInput("2026-02-31T09:30")).toBeUndefined();
    expect(toLocalInput("2026-12-02T11:30:00+02:00")).toBe("2026-12-02T09:30:00");
    expect(toLocalInput("garbage")).toBeUndefined();
  });

  it("shows values on the review step in the user's words", () => {
    expect(display(f("ok"), true)).toBe("Yes");
    expect(display(f("region"), "eu")).toBe("Europe");
    expect(display(f("addons"), ["m", "g"])).toBe("Metrics, GPU");
    expect(display(f("email"), undefined)).toBe("—");
  });
});
