// Hash routes: #/inbox[/key], #/tasks[/id], #/servers, #/call, #/audit.

export type Route =
  | { page: "inbox"; key?: string }
  | { page: "tasks" }
  | { page: "task"; id: string }
  | { page: "servers" }
  | { page: "call" }
  | { page: "audit" };

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  switch (parts[0]) {
    case "tasks":
      return parts[1] ? { page: "task", id: parts[1] } : { page: "tasks" };
    case "servers":
      return { page: "servers" };
    case "call":
      return { page: "call" };
    case "audit":
      return { page: "audit" };
    default:
      return parts[0] === "inbox" && parts[1] ? { page: "inbox", key: parts[1] } : { page: "inbox" };
  }
}

export function href(route: Route): string {
  switch (route.page) {
    case "inbox":
      return route.key ? `#/inbox/${encodeURIComponent(route.key)}` : "#/inbox";
    case "task":
      return `#/tasks/${encodeURIComponent(route.id)}`;
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
