import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { PAINT_WAIT_MS, beforeData } from "./paint";

describe("beforeData", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("waits for the first frame when one comes", async () => {
    let paint: () => void = () => {};
    const painted = new Promise<void>((resolve) => (paint = resolve));
    let ready = false;
    void beforeData(painted).then(() => (ready = true));
    await vi.advanceTimersByTimeAsync(PAINT_WAIT_MS / 2);
    expect(ready).toBe(false);
    paint();
    await vi.advanceTimersByTimeAsync(0);
    expect(ready).toBe(true);
  });

  it("loads the data anyway when no frame comes (a window started hidden)", async () => {
    const never = new Promise<void>(() => {});
    let ready = false;
    void beforeData(never).then(() => (ready = true));
    await vi.advanceTimersByTimeAsync(PAINT_WAIT_MS - 1);
    expect(ready).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(ready).toBe(true);
  });
});
