import { afterEach, describe, expect, it, vi } from "vitest";
import type { ResidentLink } from "../bindings/ResidentLink";
import { click, render, settle } from "../test/mount";
import ResidentBanner from "./ResidentBanner.svelte";

let destroy: (() => void) | undefined;
afterEach(() => {
  destroy?.();
  destroy = undefined;
});

function banner(link: ResidentLink, onretry = vi.fn(async () => {})) {
  const r = render(ResidentBanner, { link, onretry });
  destroy = r.destroy;
  return { r, onretry, el: () => r.target.querySelector<HTMLElement>('[data-testid="resident-lost"]') };
}

describe("the background service banner", () => {
  it("is absent while the background service is there", () => {
    expect(banner({ state: "connected" }).el()).toBeNull();
  });

  it("says the service stopped and is restarting, with no button to press", () => {
    const { el } = banner({ state: "restarting" });
    expect(el()?.textContent).toContain("Countersign's background service stopped — restarting…");
    expect(el()?.getAttribute("role")).toBe("status");
    expect(el()?.querySelector("button")).toBeNull();
  });

  it("says why a restart failed and retries on the button", async () => {
    const { el, onretry } = banner({ state: "failed", message: "Countersign's background process ended at start (exit status: 1); its log says why" });
    expect(el()?.getAttribute("role"), "a failure is announced").toBe("alert");
    expect(el()?.querySelector('[data-testid="resident-error"]')?.textContent).toContain("ended at start");
    click(el()?.querySelector('[data-testid="resident-retry"]') ?? null);
    await settle();
    expect(onretry).toHaveBeenCalledOnce();
  });

  it("shows a Retry that fails", async () => {
    const { el } = banner({ state: "failed", message: "x" }, vi.fn(async () => Promise.reject({ code: "unavailable", message: "still not there" })));
    click(el()?.querySelector('[data-testid="resident-retry"]') ?? null);
    await settle();
    expect(el()?.textContent).toContain("still not there");
  });
});
