import { describe, expect, it } from "vitest";
import { toCommandError } from "../../ipc";
import { DAYS, dayLabel, fieldOf } from "./settings";

describe("settings page helpers", () => {
  it("puts a refused value's message at the field the shell names", () => {
    const refused = toCommandError({ code: "invalid_input", message: "the poll floor is at least 250 ms", field: "poll_floor_ms" });
    expect(fieldOf(refused)).toBe("poll_floor_ms");
  });

  it("ignores a field that names no setting", () => {
    expect(fieldOf(toCommandError({ code: "invalid_input", message: "bad", field: "volume" }))).toBeUndefined();
  });

  it("keeps other failures for the page banner", () => {
    expect(fieldOf(toCommandError({ code: "internal", message: "disk full", field: "poll_floor_ms" }))).toBeUndefined();
    expect(fieldOf(toCommandError({ code: "invalid_input", message: "bad" }))).toBeUndefined();
  });

  it("lists the days Monday first with their labels", () => {
    expect(DAYS.map(dayLabel).join(" ")).toBe("Mon Tue Wed Thu Fri Sat Sun");
  });
});
