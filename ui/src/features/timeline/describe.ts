// One line per ledger event for the event list: a label, plain text (server text included
// verbatim: it is rendered as text), and a tone.
import type { EventKind } from "../../bindings/EventKind";
import { questionText } from "./request";
import { STATUS_LABEL } from "../tasks/status";

export type Tone = "info" | "ok" | "warn" | "bad" | "user";

export interface Line {
  label: string;
  text: string;
  tone: Tone;
}

function compact(v: unknown): string {
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

function firstText(result: unknown): string {
  if (typeof result !== "object" || result === null) return "";
  const content = (result as { content?: unknown }).content;
  if (!Array.isArray(content)) return "";
  for (const b of content) {
    if (typeof b === "object" && b !== null && (b as { type?: unknown }).type === "text") {
      const t = (b as { text?: unknown }).text;
      if (typeof t === "string") return t;
    }
  }
  return "";
}

export function describe(f: EventKind): Line {
  switch (f.kind) {
    case "server_added":
      return { label: "server added", text: `${f.name} → ${f.url}`, tone: "user" };
    case "server_removed":
      return { label: "server removed", text: f.name, tone: "user" };
    case "call_started":
      return { label: "call sent", text: `tools/call ${f.tool}`, tone: "user" };
    case "call_outcome_unknown":
      return { label: "call outcome unknown", text: `${f.tool}: the app stopped while the call was in flight`, tone: "warn" };
    case "call_finished":
      return { label: "call finished", text: `${f.tool}: ${f.outcome}`, tone: f.outcome === "failed" ? "bad" : "info" };
    case "task_created":
      return { label: "task created", text: `${STATUS_LABEL[f.status]}${f.tool ? ` · ${f.tool}` : ""}${f.origin === "adopted" ? " (adopted by id)" : ""}`, tone: "info" };
    case "task_updated":
      return {
        label: f.status === f.previous_status ? "status message" : `${STATUS_LABEL[f.previous_status]} → ${STATUS_LABEL[f.status]}`,
        text: f.status_message ?? "",
        tone: f.status === "input_required" ? "warn" : "info",
      };
    case "input_requested":
      return {
        label: "question",
        text: questionText(f.request),
        tone: "warn",
      };
    case "input_answered": {
      const content = (f.response as { content?: unknown } | null)?.content;
      // The decision in the person's words first, then the exact elicitation action and content.
      const said = f.decision ? `${f.decision} (answered: ${f.action})` : `answered: ${f.action}`;
      return { label: said, text: `by ${f.by}${content !== undefined ? ` · ${compact(content)}` : ""}`, tone: "user" };
    }
    case "input_superseded":
      return { label: "question withdrawn", text: `the server no longer asks ${f.key}`, tone: "info" };
    case "update_acknowledged":
      return { label: "answer delivered", text: `tasks/update acknowledged (${f.keys.join(", ")})`, tone: "ok" };
    case "update_failed":
      return { label: "answer refused", text: f.message, tone: "bad" };
    case "cancel_requested":
      return { label: "cancelled the task", text: `by ${f.by} (cancel requested)`, tone: "user" };
    case "cancel_acknowledged":
      return { label: "cancel delivered", text: "tasks/cancel acknowledged", tone: "ok" };
    case "cancel_failed":
      return { label: "cancel refused", text: f.message, tone: "bad" };
    case "delivery_retrying":
      return {
        label: f.delivery === "cancel" ? "cancel retrying" : "answer retrying",
        text: `${f.message} · retrying in ${(f.retry_in_ms / 1000).toFixed(1)} s`,
        tone: "bad",
      };
    case "poll_failed":
      return { label: `poll failed (${f.code})`, text: `${f.message} · retrying in ${(f.retry_in_ms / 1000).toFixed(1)} s`, tone: "bad" };
    case "poll_recovered":
      return { label: "polling recovered", text: `after ${f.failures} failed poll(s)`, tone: "ok" };
    case "task_finished": {
      const error = f.error as { code?: unknown; message?: unknown } | undefined;
      const text = f.status === "failed" && error ? `${String(error.code ?? "")} ${String(error.message ?? "")}`.trim() : firstText(f.result);
      const isError = (f.result as { isError?: unknown } | undefined)?.isError === true;
      return { label: `finished: ${STATUS_LABEL[f.status]}${isError ? " (isError)" : ""}`, text, tone: f.status === "completed" && !isError ? "ok" : "bad" };
    }
    case "task_expired":
      return { label: "expired", text: `outlived its TTL of ${Math.round(f.ttl_ms / 1000)} s`, tone: "bad" };
    case "task_lost":
      return { label: "lost", text: f.message, tone: "bad" };
    case "server_updated":
      return { label: "server updated", text: `${f.name} → ${f.url}`, tone: "user" };
    case "server_discovered":
      return { label: "server described itself", text: `${f.name}${f.supports_tasks ? "" : " (no tasks extension)"}`, tone: "info" };
    case "server_data_ignored":
      return { label: "server sent an unusable value", text: f.message, tone: "bad" };
    case "server_unreachable":
      return { label: "server unreachable", text: f.message, tone: "bad" };
    case "server_recovered":
      return { label: "server reachable again", text: "", tone: "ok" };
    case "sign_in_needed":
      return { label: "sign-in needed", text: `${f.message}; polling paused until you sign in again`, tone: "bad" };
    case "signed_in":
      return { label: "signed in", text: "", tone: "user" };
    case "signed_out":
      return { label: "signed out", text: "", tone: "user" };
    case "engine_started":
      return { label: "engine started", text: `resumed ${f.resumed} task(s)`, tone: "info" };
    case "settings_changed":
      return { label: "settings changed", text: f.keys.join(", "), tone: "user" };
    case "gated_call_changed": {
      // One step of an agent's call through the gateway, in the order they happen.
      const steps: Record<typeof f.state, [string, Tone]> = {
        pending: ["agent asked", "warn"],
        approved: ["approved", "user"],
        declined: ["declined", "bad"],
        denied: ["denied by a rule", "bad"],
        expired: ["expired undecided", "bad"],
        cancelled: ["withdrawn by the agent", "bad"],
        running: ["sent upstream", "user"],
        done: ["upstream answered", "ok"],
        outcome_unknown: ["outcome unknown", "bad"],
      };
      const [label, tone] = steps[f.state];
      return { label, text: `${f.agent} · ${f.tool} (${f.task_id})`, tone };
    }
  }
}
