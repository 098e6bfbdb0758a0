import { describe, expect, it } from "vitest";

// Server-provided strings are untrusted: they are rendered as text only. This keeps it so.
const sources = Object.entries(
  import.meta.glob<string>(["./**/*.svelte", "./**/*.ts", "!./**/*.test.ts"], { query: "?raw", import: "default", eager: true }),
);

describe("rendering", () => {
  it("scans the sources", () => {
    expect(sources.length).toBeGreaterThan(20);
  });

  it("never injects HTML", () => {
    const offenders = sources
      .filter(([, text]) => /\{@html|innerHTML|outerHTML|insertAdjacentHTML|document\.write/.test(text))
      .map(([path]) => path);
    expect(offenders, "use text interpolation; server strings must never become markup").toEqual([]);
  });

  it("imports @tauri-apps only from src/ipc", () => {
    const offenders = sources
      .filter(([path, text]) => !path.startsWith("./ipc/") && /from "@tauri-apps\//.test(text))
      .map(([path]) => path);
    expect(offenders).toEqual([]);
  });
});
