// The UI's view of the ledger: lists fetched once, then kept current by the shell's events.
import type { AppInfo } from "../bindings/AppInfo";
import type { EventView } from "../bindings/EventView";
import type { GatedCallView } from "../bindings/GatedCallView";
import type { GatedDecision } from "../bindings/GatedDecision";
import type { GatedQuestionsView } from "../bindings/GatedQuestionsView";
import type { CallAnswer } from "../bindings/CallAnswer";
import type { InputFocusRequested } from "../bindings/InputFocusRequested";
import type { InputRequestView } from "../bindings/InputRequestView";
import type { InputResponse } from "../bindings/InputResponse";
import type { ServerView } from "../bindings/ServerView";
import type { ShellState } from "../bindings/ShellState";
import type { TaskView } from "../bindings/TaskView";
import type { ViewRequest } from "../bindings/ViewRequest";
import { call, listen, type CommandError } from "../ipc";
import { waitingItems, type WaitingItem } from "./waiting";

/** The identity of a question: keys are unique within a task only. */
export function inputId(i: { taskRow: number; key: string }): string {
  return `${i.taskRow}/${i.key}`;
}

export class ConsoleStore {
  info: AppInfo | undefined = $state();
  shell: ShellState = $state({ pending: 0, dnd: false, notificationActions: false, dndScheduled: false, resident: { state: "connected" } });
  inputs: InputRequestView[] = $state([]);
  /** Newest first. Replaced wholesale on reload; rows are replaced in place on updates. */
  tasks: TaskView[] = $state([]);
  servers: ServerView[] = $state([]);
  /** Agents' calls the gateway holds for a decision, oldest first. */
  gated: GatedCallView[] = $state([]);
  /** Approved agents' calls whose upstream asks questions before running them, oldest first. */
  asking: GatedQuestionsView[] = $state([]);
  /**
   * Everything that waits for a person, oldest first: the inbox lists these, and their number is
   * the one count the window shows (the inbox's header, the navigation badge).
   */
  readonly items: WaitingItem[] = $derived(waitingItems(this.inputs, this.gated, this.asking));
  /** The lists were read once (a call missing from them after that is not waiting). */
  loaded = $state(false);
  /** Set when the shell cannot be reached (e.g. running outside the app). */
  offline: CommandError | undefined = $state();
  /** The question the user asked to see from a notification. */
  focus: InputFocusRequested | undefined = $state();

  /** How many entries wait for a person: the inbox's header and the navigation badge show this. */
  get waiting(): number {
    return this.items.length;
  }

  private stops: (() => void)[] = [];
  private rowIndex = new Map<number, number>();
  private eventListeners = new Set<(e: EventView) => void>();

  async start(): Promise<void> {
    this.stops.push(
      listen("inbox_changed", (list) => (this.inputs = list)),
      listen("task_updated", (t) => this.upsert(t)),
      listen("servers_changed", (list) => (this.servers = list)),
      listen("shell_state_changed", (s) => (this.shell = s)),
      listen("input_focus_requested", (f) => (this.focus = f)),
      listen("gated_changed", (list) => (this.gated = list)),
      listen("gated_questions_changed", (list) => (this.asking = list)),
      listen("event_recorded", (e) => {
        for (const cb of this.eventListeners) cb(e);
        if (e.fact.kind === "server_removed") void this.reloadTasks();
      }),
    );
    await this.reload();
  }

  /** Calls `cb` with every ledger event from now on; returns the unsubscribe. */
  onEvent(cb: (e: EventView) => void): () => void {
    this.eventListeners.add(cb);
    return () => this.eventListeners.delete(cb);
  }

  private upsert(t: TaskView) {
    const at = this.rowIndex.get(t.row);
    if (at !== undefined && this.tasks[at]?.row === t.row) {
      this.tasks[at] = t;
    } else {
      this.tasks.unshift(t);
      this.reindex();
    }
  }

  private reindex() {
    this.rowIndex = new Map(this.tasks.map((t, i) => [t.row, i]));
  }

  task(row: number): TaskView | undefined {
    const at = this.rowIndex.get(row);
    return at === undefined ? undefined : this.tasks[at];
  }

  async reloadTasks(): Promise<void> {
    this.tasks = await call("task_list", {});
    this.reindex();
  }

  async reload(): Promise<void> {
    try {
      const [info, inputs, tasks, servers, gated, asking] = await Promise.all([
        call("app_info"),
        call("input_list"),
        call("task_list", {}),
        call("server_list"),
        call("gated_list"),
        call("gated_questions_list"),
      ]);
      this.gated = gated;
      this.asking = asking;
      this.info = info;
      this.shell = info.shell;
      this.inputs = inputs;
      this.tasks = tasks;
      this.reindex();
      this.servers = servers;
      this.offline = undefined;
      this.loaded = true;
    } catch (e) {
      this.offline = e as CommandError;
    }
  }

  async answer(input: InputRequestView, response: InputResponse): Promise<void> {
    await call("input_answer", { taskRow: input.taskRow, key: input.key, response });
    // The inbox event removes it too; doing it now keeps the inbox snappy.
    this.inputs = this.inputs.filter((x) => inputId(x) !== inputId(input));
  }

  /** Approves or declines an agent's held call; it leaves the list at once. */
  async decide(call_: GatedCallView, decision: GatedDecision): Promise<void> {
    await call("gated_decide", { taskId: call_.task_id, decision });
    this.gated = this.gated.filter((c) => c.task_id !== call_.task_id);
  }

  /** Answers the questions an approved call's upstream asked; the call leaves the list at once. */
  async answerCall(entry: GatedQuestionsView, answers: CallAnswer[]): Promise<void> {
    await call("gated_answer", { taskId: entry.call.task_id, answers });
    this.asking = this.asking.filter((a) => a.call.task_id !== entry.call.task_id);
  }

  async cancel(row: number): Promise<void> {
    await call("task_cancel", { row });
  }

  async setDnd(enabled: boolean): Promise<void> {
    this.shell = await call("notify_dnd_set", { enabled });
  }

  /** The banner's Retry: the shell starts the background service again. */
  async restartResident(): Promise<void> {
    this.shell = await call("resident_restart");
  }

  /** Tells the shell what is on screen (no notification for a question already shown). */
  viewing(view: ViewRequest): void {
    void call("view_set", view).catch(() => {});
  }

  stop() {
    for (const s of this.stops.splice(0)) s();
  }
}

export const consoleStore = new ConsoleStore();
