// The command and event map: one entry per Rust command/event, typed by the ts-rs bindings.
// Keep in sync with src-tauri/src/commands.rs and src-tauri/src/ipc.rs (`event` module).
import type { AppInfo } from "../bindings/AppInfo";
import type { AuditEntry } from "../bindings/AuditEntry";
import type { AuditQuery } from "../bindings/AuditQuery";
import type { DndRequest } from "../bindings/DndRequest";
import type { InputAnswered } from "../bindings/InputAnswered";
import type { InputAnswerRequest } from "../bindings/InputAnswerRequest";
import type { InputFocusRequested } from "../bindings/InputFocusRequested";
import type { InputRequestView } from "../bindings/InputRequestView";
import type { ServerRef } from "../bindings/ServerRef";
import type { ServerView } from "../bindings/ServerView";
import type { ShellState } from "../bindings/ShellState";
import type { TaskDetail } from "../bindings/TaskDetail";
import type { TaskRef } from "../bindings/TaskRef";
import type { TaskView } from "../bindings/TaskView";
import type { ToolCallOutcome } from "../bindings/ToolCallOutcome";
import type { ToolCallRequest } from "../bindings/ToolCallRequest";
import type { ToolView } from "../bindings/ToolView";
import type { UrlOpenRequest } from "../bindings/UrlOpenRequest";

/** `req: void` means the command takes no argument. */
export interface Commands {
  app_info: { req: void; res: AppInfo };
  notify_dnd_set: { req: DndRequest; res: ShellState };
  input_list: { req: void; res: InputRequestView[] };
  input_answer: { req: InputAnswerRequest; res: null };
  task_list: { req: void; res: TaskView[] };
  task_get: { req: TaskRef; res: TaskDetail };
  task_cancel: { req: TaskRef; res: null };
  server_list: { req: void; res: ServerView[] };
  tool_list: { req: ServerRef; res: ToolView[] };
  tool_call: { req: ToolCallRequest; res: ToolCallOutcome };
  audit_list: { req: AuditQuery; res: AuditEntry[] };
  url_open: { req: UrlOpenRequest; res: null };
}

export interface Events {
  input_requested: InputRequestView;
  input_answered: InputAnswered;
  task_updated: TaskView;
  audit_appended: AuditEntry;
  input_focus_requested: InputFocusRequested;
  shell_state_changed: ShellState;
  events_dropped: number;
}

export type CommandName = keyof Commands;
export type Req<K extends CommandName> = Commands[K]["req"];
export type Res<K extends CommandName> = Commands[K]["res"];
export type EventName = keyof Events;
