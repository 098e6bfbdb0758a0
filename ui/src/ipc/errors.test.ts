import { describe, expect, it } from "vitest";
import { toCommandError } from "./index";

describe("toCommandError", () => {
  it("keeps a server failure's diagnosis, so the form can show the sentence and what to do", () => {
    const diagnosis = {
      problem: "nothing_listening",
      summary: "Nothing is listening at 127.0.0.1:9.",
      advice: "Check that the server is running and that the address and port are right.",
      detail: "cannot connect to http://127.0.0.1:9/mcp: tcp connect error",
      addAnyway: true,
    };
    expect(toCommandError({ code: "unavailable", message: "cannot connect", diagnosis })).toEqual({
      code: "unavailable",
      message: "cannot connect",
      diagnosis,
    });
  });

  it("drops a malformed diagnosis rather than showing half of one", () => {
    expect(toCommandError({ code: "server", message: "m", diagnosis: { summary: 1 } })).toEqual({ code: "server", message: "m" });
  });
});
