import { describe, expect, it } from "vitest";
import { endedAgainst, statusText } from "./status";

describe("statusText", () => {
  it("says how a task ended in the person's terms", () => {
    expect(statusText({ status: "completed", lastDecision: "denied", cancelledByYou: false })).toBe("Completed · denied by you");
    expect(statusText({ status: "completed", lastDecision: "approved", cancelledByYou: false })).toBe("Completed · approved by you");
    expect(statusText({ status: "cancelled", lastDecision: "approved", cancelledByYou: true })).toBe("Cancelled by you");
    expect(statusText({ status: "completed", cancelledByYou: false })).toBe("Completed");
  });

  it("shows only the status while the task runs", () => {
    expect(statusText({ status: "working", lastDecision: "approved", cancelledByYou: false })).toBe("Working");
  });

  it("marks denials and declines, not approvals", () => {
    expect(endedAgainst("denied")).toBe(true);
    expect(endedAgainst("declined")).toBe(true);
    expect(endedAgainst("approved")).toBe(false);
    expect(endedAgainst(undefined)).toBe(false);
  });
});
