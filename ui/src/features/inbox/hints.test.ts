import { describe, expect, it } from "vitest";
import type { ToolInfo } from "../../bindings/ToolInfo";
import { hints } from "./hints";

const none: ToolInfo = { title: null, description: null, readOnlyHint: null, destructiveHint: null, idempotentHint: null, openWorldHint: null };
const keys = (info: Partial<ToolInfo>) => hints({ ...none, ...info }).map((h) => h.key);

describe("tool annotations in words", () => {
  it("shows a tool that says nothing as one that may write, destroy and reach out (the schema's defaults)", () => {
    expect(keys({})).toEqual(["writes", "destructive", "open-world"]);
  });

  it("ignores destructive and idempotent hints on a read-only tool", () => {
    expect(keys({ readOnlyHint: true, destructiveHint: true, idempotentHint: true, openWorldHint: false })).toEqual(["read-only", "closed-world"]);
  });

  it("tells an additive, idempotent writer apart", () => {
    expect(keys({ readOnlyHint: false, destructiveHint: false, idempotentHint: true })).toEqual(["writes", "additive", "idempotent", "open-world"]);
  });
});
