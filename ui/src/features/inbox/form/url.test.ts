import { describe, expect, it } from "vitest";
import { parseTarget } from "./url";

describe("parseTarget", () => {
  it("shows the full host, port and path of http(s) links", () => {
    expect(parseTarget("https://login.example.com:8443/a?b=c#d")).toMatchObject({
      ok: true, scheme: "https", host: "login.example.com", port: "8443", path: "/a?b=c#d",
    });
  });

  it("refuses every other scheme", () => {
    for (const bad of ["javascript:alert(1)", "file:///etc/passwd", "data:text/html,x", "ftp://h/x", "not a url"]) {
      expect(parseTarget(bad).ok, bad).toBe(false);
    }
  });

  it("shows look-alike Unicode hosts in punycode", () => {
    const t = parseTarget("https://аpple.com/");
    expect(t.ok && t.host).toBe("xn--pple-43d.com");
  });

  it("refuses links that hide the host behind credentials", () => {
    expect(parseTarget("https://bank.example@evil.example/").ok).toBe(false);
  });
});
