import { describe, expect, it } from "vitest";
import { parseArgs, planArgs } from "./args";

describe("tool argument forms", () => {
  it("renders flat schemas as a form", () => {
    const plan = planArgs({
      type: "object",
      properties: { service: { type: "string" }, environment: { type: "string", enum: ["staging", "production"] }, replicas: { type: "integer" } },
      required: ["service", "environment"],
    });
    expect(plan.why).toBeUndefined();
    expect(plan.form?.fields.map((f) => [f.name, f.kind])).toEqual([
      ["service", "string"],
      ["environment", "select"],
      ["replicas", "number"],
    ]);
  });

  it("falls back to JSON for what a form cannot express", () => {
    const plan = planArgs({ type: "object", properties: { labels: { type: "object" }, name: { type: "string" } } });
    expect(plan.form).toBeUndefined();
    expect(plan.why).toContain("labels");
    expect(planArgs({ type: "array" }).why).toBeDefined();
  });

  it("parses the JSON editor's text into an object", () => {
    expect(parseArgs('{"a": 1}')).toEqual({ args: { a: 1 } });
    expect(parseArgs("")).toEqual({ args: {} });
    expect(parseArgs("[1]")).toEqual({ error: "Arguments must be a JSON object." });
    expect("error" in parseArgs("{")).toBe(true);
  });
});
