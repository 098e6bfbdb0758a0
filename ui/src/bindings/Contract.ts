// Generated from src-tauri/src/ipc.rs (contract!). Do not edit: run
// `COUNTERSIGN_BLESS=1 cargo test -p countersign-desktop bindings`.
import type { AdoptableTasks } from "./AdoptableTasks";
import type { AgentCreated } from "./AgentCreated";
import type { AgentRef } from "./AgentRef";
import type { AgentView } from "./AgentView";
import type { AgentsPage } from "./AgentsPage";
import type { AppInfo } from "./AppInfo";
import type { AuditEntry } from "./AuditEntry";
import type { AuditExport } from "./AuditExport";
import type { AuditExportRequest } from "./AuditExportRequest";
import type { DndRequest } from "./DndRequest";
import type { EventView } from "./EventView";
import type { GatedAnswerRequest } from "./GatedAnswerRequest";
import type { GatedCallView } from "./GatedCallView";
import type { GatedDecideRequest } from "./GatedDecideRequest";
import type { GatedQuestionsView } from "./GatedQuestionsView";
import type { GatedRef } from "./GatedRef";
import type { GatedTimeline } from "./GatedTimeline";
import type { InputAnswerRequest } from "./InputAnswerRequest";
import type { InputFocusRequested } from "./InputFocusRequested";
import type { InputRequestView } from "./InputRequestView";
import type { PaintedRequest } from "./PaintedRequest";
import type { RuleRef } from "./RuleRef";
import type { ServerAddRequest } from "./ServerAddRequest";
import type { ServerRef } from "./ServerRef";
import type { ServerUpdateRequest } from "./ServerUpdateRequest";
import type { ServerView } from "./ServerView";
import type { Settings } from "./Settings";
import type { SettingsPage } from "./SettingsPage";
import type { ShellState } from "./ShellState";
import type { SignInPlan } from "./SignInPlan";
import type { SignInPlanRequest } from "./SignInPlanRequest";
import type { SignInRequest } from "./SignInRequest";
import type { StdioAddRequest } from "./StdioAddRequest";
import type { TaskAdoptRequest } from "./TaskAdoptRequest";
import type { TaskDetail } from "./TaskDetail";
import type { TaskListRequest } from "./TaskListRequest";
import type { TaskRef } from "./TaskRef";
import type { TaskView } from "./TaskView";
import type { ToolCallAnswerRequest } from "./ToolCallAnswerRequest";
import type { ToolCallOutcome } from "./ToolCallOutcome";
import type { ToolCallRequest } from "./ToolCallRequest";
import type { ToolView } from "./ToolView";
import type { UrlOpenRequest } from "./UrlOpenRequest";
import type { ViewRequest } from "./ViewRequest";
import type { ZoomRequest } from "./ZoomRequest";

/** Every command: `req` is `null` when it takes no argument. */
export interface Commands {
  app_info: { req: null; res: AppInfo };
  ui_mounted: { req: null; res: null };
  ui_painted: { req: PaintedRequest; res: null };
  notify_dnd_set: { req: DndRequest; res: ShellState };
  view_set: { req: ViewRequest; res: null };
  view_zoom_set: { req: ZoomRequest; res: null };
  input_list: { req: null; res: Array<InputRequestView> };
  input_answer: { req: InputAnswerRequest; res: null };
  task_list: { req: TaskListRequest; res: Array<TaskView> };
  task_get: { req: TaskRef; res: TaskDetail };
  task_cancel: { req: TaskRef; res: null };
  task_adopt: { req: TaskAdoptRequest; res: TaskView };
  task_adoptable: { req: ServerRef; res: AdoptableTasks };
  task_link: { req: TaskRef; res: string };
  server_list: { req: null; res: Array<ServerView> };
  server_add: { req: ServerAddRequest; res: ServerView };
  server_add_stdio: { req: StdioAddRequest; res: ServerView };
  server_update: { req: ServerUpdateRequest; res: ServerView };
  server_remove: { req: ServerRef; res: null };
  server_check: { req: ServerRef; res: ServerView };
  server_sign_in_plan: { req: SignInPlanRequest; res: SignInPlan };
  server_sign_in: { req: SignInRequest; res: ServerView };
  server_sign_out: { req: ServerRef; res: ServerView };
  server_check_cancel: { req: null; res: null };
  demo_start: { req: null; res: ServerView };
  gated_list: { req: null; res: Array<GatedCallView> };
  gated_decide: { req: GatedDecideRequest; res: GatedCallView };
  gated_timeline: { req: GatedRef; res: GatedTimeline };
  gated_questions_list: { req: null; res: Array<GatedQuestionsView> };
  gated_answer: { req: GatedAnswerRequest; res: GatedCallView };
  agents_get: { req: null; res: AgentsPage };
  agent_add: { req: AgentRef; res: AgentCreated };
  agent_remove: { req: AgentRef; res: AgentView };
  rule_remove: { req: RuleRef; res: null };
  tool_list: { req: ServerRef; res: Array<ToolView> };
  tool_call: { req: ToolCallRequest; res: ToolCallOutcome };
  tool_call_answer: { req: ToolCallAnswerRequest; res: ToolCallOutcome };
  audit_list: { req: null; res: Array<AuditEntry> };
  audit_export: { req: AuditExportRequest; res: AuditExport };
  url_open: { req: UrlOpenRequest; res: null };
  settings_get: { req: null; res: SettingsPage };
  settings_set: { req: Settings; res: SettingsPage };
  resident_restart: { req: null; res: ShellState };
}

/** Every event and its payload. */
export interface Events {
  event_recorded: EventView;
  task_updated: TaskView;
  inbox_changed: Array<InputRequestView>;
  servers_changed: Array<ServerView>;
  shell_state_changed: ShellState;
  input_focus_requested: InputFocusRequested;
  gated_changed: Array<GatedCallView>;
  gated_questions_changed: Array<GatedQuestionsView>;
}
