import { describe, expect, it } from "vitest";
import { clientOptions, registrationText, signInLine } from "./signIn";

const now = Date.UTC(2026, 11, 3, 13, 23, 0);

describe("signInLine", () => {
  it("names who is signed in and when a renewing token renews", () => {
    expect(signInLine({ account: "ada@example.com", expiresAtMs: now + 42 * 60_000, renews: true }, now)).toBe(
      "Signed in as ada@example.com · token renews in 42 min",
    );
  });

  it("gives the expiry time of a token nothing renews, and says when it has expired", () => {
    expect(signInLine({ expiresAtMs: Date.UTC(2026, 11, 3, 14, 5, 0), renews: false }, now)).toBe("Signed in · token expires 14:05 UTC");
    expect(signInLine({ expiresAtMs: now - 1000, renews: false }, now)).toBe("Signed in · token expired");
    expect(signInLine({ expiresAtMs: Date.UTC(2026, 11, 9, 8, 0, 0), renews: false }, now)).toBe("Signed in · token expires 2026-12-09 08:00 UTC");
  });

  it("says only 'Signed in' when the server said neither who nor until when", () => {
    expect(signInLine({ renews: true }, now)).toBe("Signed in");
    expect(signInLine(undefined, now)).toBe("Signed in");
  });
});

describe("registrationText", () => {
  it("has words for every way of registering", () => {
    for (const r of ["pre_registered", "kept", "metadata_document", "dynamic"] as const) {
      expect(registrationText(r)).toMatch(/client|Countersign/);
    }
  });
});

describe("clientOptions", () => {
  it("is nothing when no client is given (the server registers Countersign itself)", () => {
    expect(clientOptions("  ", "", "")).toBeUndefined();
  });

  it("carries the client id, its secret and the fixed redirect port", () => {
    expect(clientOptions(" my-client ", "s3cr3t", " 8765 ")).toEqual({ clientId: "my-client", clientSecret: "s3cr3t", redirectPort: 8765 });
    expect(clientOptions("my-client", "", "")).toEqual({ clientId: "my-client" });
  });

  it("refuses a secret or port without a client id, and a port out of range", () => {
    expect(clientOptions("", "s3cr3t", "")).toMatch(/needs the client ID/);
    expect(clientOptions("", "", "8765")).toMatch(/needs the client ID/);
    for (const bad of ["0", "65536", "80.5", "http"]) expect(clientOptions("c", "", bad)).toMatch(/1 to 65535/);
  });
});
