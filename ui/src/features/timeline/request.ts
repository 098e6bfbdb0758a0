// A question as the ledger stores it: the server's `{method, params}` verbatim. The timeline
// shows its message (server text, rendered as text), or says it is a request we cannot answer.
export function questionText(request: unknown): string {
  const r = (typeof request === "object" && request !== null ? request : {}) as { method?: unknown; params?: unknown };
  const method = typeof r.method === "string" ? r.method : "unknown";
  if (method !== "elicitation/create") return `unsupported request ${method}`;
  const params = (typeof r.params === "object" && r.params !== null ? r.params : {}) as { message?: unknown };
  return typeof params.message === "string" ? params.message : "";
}
