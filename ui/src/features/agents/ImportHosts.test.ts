import { afterEach, describe, expect, it, vi } from "vitest";
import type { ImportReport } from "../../bindings/ImportReport";
import { buttonByText, click, render, settle, type } from "../../test/mount";
import ImportHosts, { type ImportActions } from "./ImportHosts.svelte";

const PATH = "/home/me/project/.mcp.json";

const planned: ImportReport = {
  path: PATH,
  host: "claude-code",
  items: [
    { name: "docs", server: { transport: "http", url: "https://docs.example/mcp", has_token: true }, action: "register", rewritten: true },
    { name: "fs", server: { transport: "stdio", command: "npx", args: ["server-filesystem"], env_keys: [] }, action: "register", rewritten: true },
  ],
  diff: `--- ${PATH}\n+++ ${PATH}\n-      "url": "https://docs.example/mcp",\n+      "url": "http://127.0.0.1:8788/mcp/docs",\n`,
  applied: false,
};

const applied: ImportReport = {
  ...planned,
  items: [{ ...planned.items[0]!, action: "registered" }, planned.items[1]!],
  applied: true,
  backup: `${PATH}.countersign-backup`,
  agent: "claude-code",
};

let destroy: (() => void) | undefined;
afterEach(() => {
  destroy?.();
  destroy = undefined;
});

describe("ImportHosts", () => {
  it("previews a file's servers and diff, applies, then undoes, with the path the person gave", async () => {
    const actions: ImportActions = {
      preview: vi.fn(async () => planned),
      apply: vi.fn(async () => applied),
      undo: vi.fn(async () => ({ path: PATH, agent_revoked: "claude-code" })),
    };
    const onchanged = vi.fn();
    const r = render(ImportHosts, { onchanged, actions });
    destroy = r.destroy;

    type(r.target.querySelector('input[name="host-file"]'), `  ${PATH} `);
    click(buttonByText(r.target, "Preview"));
    await settle();
    expect(actions.preview).toHaveBeenCalledWith(PATH);
    expect(r.target.textContent).toContain("Claude Code's file");
    const docs = r.target.querySelector('[data-import-item="docs"]');
    expect(docs?.textContent).toContain("its token goes to the OS keyring");
    expect(r.target.querySelector('[data-import-item="fs"]')?.textContent).toContain("Registered with Countersign, then reached through the gateway");
    expect(r.target.querySelector('[data-testid="import-diff"]')?.textContent).toContain("+      \"url\": \"http://127.0.0.1:8788/mcp/docs\"");
    expect(onchanged, "a preview changes nothing").not.toHaveBeenCalled();

    click(buttonByText(r.target, "Apply"));
    await settle();
    expect(actions.apply).toHaveBeenCalledWith(PATH);
    expect(onchanged).toHaveBeenCalledTimes(1);
    expect(r.target.textContent).toContain("as agent claude-code");
    expect(r.target.textContent).toContain(`${PATH}.countersign-backup`);
    expect(r.target.querySelector('[data-import-item="docs"]')?.getAttribute("data-action")).toBe("registered");

    click(buttonByText(r.target, "Undo"));
    await settle();
    expect(actions.undo).toHaveBeenCalledWith(PATH);
    expect(r.target.querySelector('[data-testid="import-undone"]')?.textContent).toContain("agent claude-code is revoked");
    expect(r.target.querySelector('[data-testid="import-report"]')).toBeNull();
  });

  it("offers Undo, not Apply, for a file imported before, and shows a refusal as an alert", async () => {
    const actions: ImportActions = {
      preview: vi.fn(async () => ({ ...planned, backup: `${PATH}.countersign-backup` })),
      apply: vi.fn(async () => applied),
      undo: vi.fn(async () => {
        throw { code: "invalid_input", message: `${PATH} changed after Countersign rewrote it; not restoring over those changes` };
      }),
    };
    const r = render(ImportHosts, { onchanged: () => {}, actions });
    destroy = r.destroy;
    type(r.target.querySelector('input[name="host-file"]'), PATH);
    click(buttonByText(r.target, "Preview"));
    await settle();
    expect(() => buttonByText(r.target, "Apply")).toThrow();
    expect(r.target.textContent).toContain("put behind Countersign before");
    click(buttonByText(r.target, "Undo"));
    await settle();
    expect(r.target.querySelector('[role="alert"]')?.textContent).toContain("changed after Countersign rewrote it");
  });

  it("says so when nothing in the file can go through Countersign", async () => {
    const actions: ImportActions = {
      preview: vi.fn(async (): Promise<ImportReport> => ({
        ...planned,
        items: [{ name: "odd", server: { transport: "http", url: "https://odd.example/mcp", has_token: false }, action: "unsupported", reason: "it sends a X-Api-Key header", rewritten: false }],
        diff: "",
      })),
      apply: vi.fn(async () => applied),
      undo: vi.fn(async () => ({ path: PATH })),
    };
    const r = render(ImportHosts, { onchanged: () => {}, actions });
    destroy = r.destroy;
    type(r.target.querySelector('input[name="host-file"]'), PATH);
    click(buttonByText(r.target, "Preview"));
    await settle();
    expect(r.target.textContent).toContain("Nothing in this file can go through Countersign now.");
    expect(() => buttonByText(r.target, "Apply")).toThrow();
  });
});
