import { describe, expect, it } from "vitest";
import { parseError, parseResult } from "./result";

describe("tool results", () => {
  it("reads text, images, links, resources and structured content", () => {
    const r = parseResult({
      content: [
        { type: "text", text: "hello <b>" },
        { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" },
        { type: "resource_link", uri: "file:///x", name: "x" },
        { type: "resource", resource: { uri: "mem://a", text: "body", mimeType: "text/plain" } },
        { type: "audio", data: "AAA", mimeType: "audio/wav" },
      ],
      structuredContent: { ok: true },
    });
    expect(r.isError).toBe(false);
    expect(r.blocks.map((b) => b.type)).toEqual(["text", "image", "link", "resource", "other"]);
    expect(r.blocks[1]).toEqual({ type: "image", src: "data:image/png;base64,iVBORw0KGgo=", mimeType: "image/png" });
    expect(r.structured).toBe('{\n  "ok": true\n}');
  });

  it("never builds an image URL from anything but base64 raster data", () => {
    const r = parseResult({
      content: [
        { type: "image", mimeType: "image/svg+xml", data: "PHN2Zz4=" },
        { type: "image", mimeType: "image/png", data: 'x" onerror="alert(1)' },
        { type: "image", mimeType: "text/html", data: "AAAA" },
      ],
    });
    expect(r.blocks.every((b) => b.type === "other")).toBe(true);
  });

  it("flags isError and reads JSON-RPC errors", () => {
    expect(parseResult({ isError: true, content: [] }).isError).toBe(true);
    expect(parseResult("nonsense").blocks[0]?.type).toBe("other");
    expect(parseError({ code: -32603, message: "boom", data: { attempt: 1 } })).toEqual({
      code: "-32603",
      message: "boom",
      data: '{\n  "attempt": 1\n}',
    });
  });
});
