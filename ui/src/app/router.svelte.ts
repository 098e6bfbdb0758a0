// Hash routes: #/inbox[/row/key | /call/TASK_ID], #/tasks, #/tasks/ROW, #/adopt[/SERVER/TASK | /url/URL/TASK],
// #/servers, #/call, #/audit, #/agents, #/settings. The adopt forms come from countersign:// links (the shell builds them).

export type Route =
  /** `call`: one agent's held call (Countersign's task id), its card focused (a notification's click). */
  | { page: "inbox"; row?: number; key?: string; call?: string }
  | { page: "tasks" }
  | { page: "task"; row: number }
  | { page: "adopt"; serverId?: number; serverUrl?: string; taskId?: string }
  | { page: "servers" }
  | { page: "call" }
  | { page: "audit" }
  | { page: "agents" }
  | { page: "settings" };

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
      if (parts[1] === "url" && parts[2] && parts[3]) return { page: "adopt", serverUrl: parts[2], taskId: parts[3] };
      if (parts[1] && Number.isInteger(row) && parts[2]) return { page: "adopt", serverId: row, taskId: parts[2] };
      return { page: "adopt" };
    case "servers":
    case "call":
    case "audit":
    case "agents":
    case "settings":
      return { page: parts[0] };
    default:
      if (parts[0] === "inbox" && parts[1] === "call" && parts[2]) return { page: "inbox", call: parts.slice(2).join("/") };
      return parts[0] === "inbox" && Number.isInteger(row) && parts[2] !== undefined
        ? { page: "inbox", row, key: parts.slice(2).join("/") }
        : { page: "inbox" };
  }
}

export function href(route: Route): string {
  switch (route.page) {
    case "inbox":
      if (route.call !== undefined) return `#/inbox/call/${encodeURIComponent(route.call)}`;
      return route.row !== undefined && route.key !== undefined ? `#/inbox/${route.row}/${encodeURIComponent(route.key)}` : "#/inbox";
    case "task":
      return `#/tasks/${route.row}`;
    case "adopt":
      if (route.taskId !== undefined && route.serverUrl !== undefined) return `#/adopt/url/${encodeURIComponent(route.serverUrl)}/${encodeURIComponent(route.taskId)}`;
      if (route.taskId !== undefined && route.serverId !== undefined) return `#/adopt/${route.serverId}/${encodeURIComponent(route.taskId)}`;
      return "#/adopt";
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
