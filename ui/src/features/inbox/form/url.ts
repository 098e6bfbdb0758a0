// URL-mode elicitation: what the user must see before consenting to open a link.

export type UrlTarget =
  | { ok: true; href: string; scheme: "http" | "https"; host: string; port: string; path: string }
  | { ok: false; reason: string };

/**
 * Parses the server's URL. Only absolute http(s) URLs are ever opened. `host` is the punycode
 * (ASCII) form, so look-alike Unicode hosts are visible as `xn--…`; credentials in the URL are
 * refused because they disguise the real host (`https://bank.com@evil.example`).
 */
export function parseTarget(raw: string): UrlTarget {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { ok: false, reason: "The link is not a valid absolute URL." };
  }
  const scheme = u.protocol.slice(0, -1).toLowerCase();
  if (scheme !== "http" && scheme !== "https") {
    return { ok: false, reason: `Links of type “${scheme}:” are never opened; only http and https.` };
  }
  if (!u.hostname) return { ok: false, reason: "The link has no host." };
  if (u.username || u.password) {
    return { ok: false, reason: "The link hides its real host behind a user name; it will not be opened." };
  }
  return { ok: true, href: u.href, scheme, host: u.hostname, port: u.port, path: `${u.pathname}${u.search}${u.hash}` };
}
