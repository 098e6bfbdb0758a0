// A CallToolResult (or JSON-RPC error) from a server, read defensively into blocks to render.
// Everything here is untrusted data: the view renders text as text, images only as data: URLs
// of raster types.

export type Block =
  | { type: "text"; text: string }
  | { type: "image"; src: string; mimeType: string }
  | { type: "link"; uri: string; name: string }
  | { type: "resource"; uri: string; text?: string; mimeType?: string }
  | { type: "other"; json: string };

export interface ParsedResult {
  isError: boolean;
  blocks: Block[];
  structured?: string;
}

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function pretty(v: unknown): string {
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

function block(b: unknown): Block {
  if (!isRecord(b)) return { type: "other", json: pretty(b) };
  switch (b.type) {
    case "text":
      if (typeof b.text === "string") return { type: "text", text: b.text };
      break;
    case "image": {
      const mime = typeof b.mimeType === "string" ? b.mimeType.toLowerCase() : "";
      const data = typeof b.data === "string" ? b.data.replace(/\s+/g, "") : "";
      if (IMAGE_TYPES.includes(mime) && BASE64.test(data)) return { type: "image", src: `data:${mime};base64,${data}`, mimeType: mime };
      break;
    }
    case "resource_link":
      if (typeof b.uri === "string") return { type: "link", uri: b.uri, name: typeof b.name === "string" ? b.name : b.uri };
      break;
    case "resource":
      if (isRecord(b.resource) && typeof b.resource.uri === "string") {
        const r = b.resource;
        return {
          type: "resource",
          uri: r.uri as string,
          ...(typeof r.text === "string" ? { text: r.text } : {}),
          ...(typeof r.mimeType === "string" ? { mimeType: r.mimeType } : {}),
        };
      }
      break;
  }
  return { type: "other", json: pretty(b) };
}

export function parseResult(result: unknown): ParsedResult {
  if (!isRecord(result)) return { isError: false, blocks: [{ type: "other", json: pretty(result) }] };
  const content = Array.isArray(result.content) ? result.content : [];
  const parsed: ParsedResult = { isError: result.isError === true, blocks: content.map(block) };
  if (result.structuredContent !== undefined) parsed.structured = pretty(result.structuredContent);
  return parsed;
}

export interface ParsedError {
  code: string;
  message: string;
  data?: string;
}

export function parseError(error: unknown): ParsedError {
  if (!isRecord(error)) return { code: "", message: pretty(error) };
  return {
    code: typeof error.code === "number" || typeof error.code === "string" ? String(error.code) : "",
    message: typeof error.message === "string" ? error.message : "",
    ...(error.data !== undefined ? { data: pretty(error.data) } : {}),
  };
}
