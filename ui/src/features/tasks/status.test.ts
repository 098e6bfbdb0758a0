import { describe, expect, it } from "vitest";
import { endedAgainst, statusText } from "./status";

describe("statusText", () => {
  it("puts the core's outcome beside the status", () => {
    expect(statusText({ status: "completed", outcome: "denied by you" })).toBe("Completed · denied by you");
    expect(statusText({ status: "completed", outcome: "tool reported an error · approved by you" })).toBe(
      "Completed · tool reported an error · approved by you",
    );
    expect(statusText({ status: "cancelled", outcome: "by you" })).toBe("Cancelled by you");
    expect(statusText({ status: "completed" })).toBe("Completed");
  });
});

describe("endedAgainst", () => {
  it("marks denials and declines, not approvals", () => {
    expect(endedAgainst({ lastDecision: "denied", resultIsError: false })).toBe(true);
    expect(endedAgainst({ lastDecision: "declined", resultIsError: false })).toBe(true);
    expect(endedAgainst({ lastDecision: "approved", resultIsError: false })).toBe(false);
    expect(endedAgainst({ resultIsError: false })).toBe(false);
  });

  it("marks a tool error whatever was decided", () => {
    expect(endedAgainst({ lastDecision: "approved", resultIsError: true })).toBe(true);
    expect(endedAgainst({ resultIsError: true })).toBe(true);
  });
});
