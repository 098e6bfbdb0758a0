// The UI's view of the engine: lists fetched once, then kept current by events.
import type { AppInfo } from "../bindings/AppInfo";
import type { AuditEntry } from "../bindings/AuditEntry";
import type { InputRequestView } from "../bindings/InputRequestView";
import type { InputResponse } from "../bindings/InputResponse";
import type { ServerView } from "../bindings/ServerView";
import type { ShellState } from "../bindings/ShellState";
import type { TaskView } from "../bindings/TaskView";
import { call, listen, type CommandError } from "../ipc";

export class ConsoleStore {
  info: AppInfo | undefined = $state();
  shell: ShellState = $state({ pending: 0, dnd: false, notificationActions: false });
  inputs: InputRequestView[] = $state([]);
  tasks: TaskView[] = $state([]);
  servers: ServerView[] = $state([]);
  audit: AuditEntry[] = $state([]);
  /** Set when the engine cannot be reached (e.g. running outside the app). */
  offline: CommandError | undefined = $state();
  /** Key the user asked to see from a notification. */
  focusKey: string | undefined = $state();

  private stops: (() => void)[] = [];

  async start(): Promise<void> {
    this.stops.push(
      listen("input_requested", (i) => {
        if (!this.inputs.some((x) => x.key === i.key)) this.inputs.push(i);
      }),
      listen("input_answered", (a) => {
        this.inputs = this.inputs.filter((x) => x.key !== a.key);
      }),
      listen("task_updated", (t) => {
        const at = this.tasks.findIndex((x) => x.taskId === t.taskId);
        if (at >= 0) this.tasks[at] = t;
        else this.tasks.unshift(t);
      }),
      listen("audit_appended", (e) => {
        if (!this.audit.some((x) => x.seq === e.seq)) this.audit.push(e);
      }),
      listen("shell_state_changed", (s) => (this.shell = s)),
      listen("input_focus_requested", (f) => (this.focusKey = f.key)),
      listen("events_dropped", () => void this.reload()),
    );
    await this.reload();
  }

  async reload(): Promise<void> {
    try {
      const [info, inputs, tasks, servers, audit] = await Promise.all([
        call("app_info"),
        call("input_list"),
        call("task_list"),
        call("server_list"),
        call("audit_list", { limit: 5000 }),
      ]);
      this.info = info;
      this.shell = info.shell;
      this.inputs = inputs;
      this.tasks = tasks;
      this.servers = servers;
      this.audit = audit;
      this.offline = undefined;
    } catch (e) {
      this.offline = e as CommandError;
    }
  }

  async answer(key: string, response: InputResponse): Promise<void> {
    await call("input_answer", { key, response });
    // The event removes it too; doing it now keeps the inbox snappy.
    this.inputs = this.inputs.filter((x) => x.key !== key);
  }

  async setDnd(enabled: boolean): Promise<void> {
    this.shell = await call("notify_dnd_set", { enabled });
  }

  stop() {
    for (const s of this.stops.splice(0)) s();
  }
}

export const consoleStore = new ConsoleStore();
