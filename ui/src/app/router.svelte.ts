// Hash routes: #/inbox[/row/key], #/tasks, #/tasks/ROW, #/adopt, #/servers, #/call, #/audit.

export type Route =
  | { page: "inbox"; row?: number; key?: string }
  | { page: "tasks" }
  | { page: "task"; row: number }
  | { page: "adopt" }
  | { page: "servers" }
  | { page: "call" }
  | { page: "audit" };

export function parseRoute(hash: string): Route {
  const parts = hash
    .replace(/^#\/?/, "")
    .split("/")
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
  const row = Number(parts[1]);
  switch (parts[0]) {
    case "tasks":
      return parts[1] && Number.isInteger(row) ? { page: "task", row } : { page: "tasks" };
    case "adopt":
    case "servers":
    case "call":
    case "audit":
      return { page: parts[0] };
    default:
      return parts[0] === "inbox" && Number.isInteger(row) && parts[2] !== undefined
        ? { page: "inbox", row, key: parts.slice(2).join("/") }
        : { page: "inbox" };
  }
}

export function href(route: Route): string {
  switch (route.page) {
    case "inbox":
      return route.row !== undefined && route.key !== undefined ? `#/inbox/${route.row}/${encodeURIComponent(route.key)}` : "#/inbox";
    case "task":
      return `#/tasks/${route.row}`;
    default:
      return `#/${route.page}`;
  }
}

class Router {
  route: Route = $state(parseRoute(typeof location === "undefined" ? "" : location.hash));

  constructor() {
    if (typeof window !== "undefined") {
      window.addEventListener("hashchange", () => (this.route = parseRoute(location.hash)));
    }
  }

  go(route: Route) {
    const h = href(route);
    if (typeof location !== "undefined" && location.hash !== h) location.hash = h;
    this.route = route;
  }
}

export const router = new Router();
