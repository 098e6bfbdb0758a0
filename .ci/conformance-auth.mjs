// Preloaded into the conformance suite's Node (NODE_OPTIONS=--import=…) by
// .ci/conformance-gateway.sh: the suite has no option for an Authorization header, and the
// gateway answers 401 without an agent's token. Adds `Authorization: Bearer <token>` (from the
// file $COUNTERSIGN_AGENT_TOKEN_FILE) to every request that carries none, through fetch (the
// SDK's client) and node:http (the suite's raw header checks).
import http from "node:http";
import { readFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";

const file = process.env.COUNTERSIGN_AGENT_TOKEN_FILE;
if (file) {
  const auth = `Bearer ${readFileSync(file, "utf8").trim()}`;
  const original = globalThis.fetch;
  globalThis.fetch = (input, init = {}) => {
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has("authorization")) headers.set("authorization", auth);
    return original(input, { ...init, headers });
  };
  const request = http.request;
  http.request = function (...args) {
    // (options[, cb]) or (url[, options][, cb]): add the header to the options object.
    const at = args.findIndex((a) => a && typeof a === "object" && !(a instanceof URL));
    if (at === -1) args.splice(typeof args[0] === "function" ? 0 : 1, 0, { headers: { authorization: auth } });
    else {
      const headers = { ...(args[at].headers ?? {}) };
      if (!Object.keys(headers).some((k) => k.toLowerCase() === "authorization")) headers.authorization = auth;
      args[at] = { ...args[at], headers };
    }
    return request.apply(this, args);
  };
  syncBuiltinESMExports();
}
