// A task's timeline as a time axis: status bands (working, input required, terminal) and
// markers for questions, answers, errors and retries, computed from the ledger's events.
import type { EventView } from "../../bindings/EventView";
import type { LedgerStatus as TaskStatus } from "../../bindings/LedgerStatus";
import { questionText } from "./request";

export type Phase = "working" | "input_required" | "terminal";

export interface Band {
  phase: Phase;
  status: TaskStatus;
  from: number;
  to: number;
}

export type MarkerKind = "question" | "answer" | "delivered" | "error" | "recovered" | "cancel";

export interface Marker {
  at: number;
  kind: MarkerKind;
  label: string;
}

export interface Axis {
  start: number;
  end: number;
  bands: Band[];
  markers: Marker[];
  /** Whether the task has ended (the last band is terminal). */
  ended: boolean;
}

function phaseOf(s: TaskStatus): Phase {
  return s === "working" ? "working" : s === "input_required" ? "input_required" : "terminal";
}

/**
 * Bands from `events` (oldest first). A running task's last band reaches `now`; an ended task's
 * terminal band gets a short tail so it stays visible.
 */
export function axis(events: readonly EventView[], createdAtMs: number, status: TaskStatus, now: number): Axis {
  const created = events.find((e) => e.fact.kind === "task_created");
  const start = created?.atMs ?? createdAtMs;
  let current: TaskStatus = created?.fact.kind === "task_created" ? created.fact.status : status;
  let from = start;
  let endedAt: number | undefined;
  const bands: Band[] = [];
  const markers: Marker[] = [];
  const close = (at: number, next: TaskStatus) => {
    if (at > from || bands.length === 0) bands.push({ phase: phaseOf(current), status: current, from, to: Math.max(at, from) });
    current = next;
    from = Math.max(at, from);
  };
  for (const e of events) {
    const f = e.fact;
    switch (f.kind) {
      case "task_updated":
        if (f.status !== current && endedAt === undefined) {
          close(e.atMs, f.status);
          if (phaseOf(f.status) === "terminal") endedAt = e.atMs;
        }
        break;
      case "task_finished":
        if (endedAt === undefined) {
          close(e.atMs, f.status);
          endedAt = e.atMs;
        }
        break;
      case "task_expired":
        if (endedAt === undefined || current !== "expired") {
          close(e.atMs, "expired");
          endedAt = e.atMs;
        }
        break;
      case "task_lost":
        if (endedAt === undefined || current !== "lost") {
          close(e.atMs, "lost");
          endedAt = e.atMs;
        }
        break;
      case "input_requested":
        markers.push({ at: e.atMs, kind: "question", label: questionText(f.request) });
        break;
      case "input_answered":
        markers.push({ at: e.atMs, kind: "answer", label: `${f.action} by ${f.by}` });
        break;
      case "update_acknowledged":
        markers.push({ at: e.atMs, kind: "delivered", label: "answer delivered" });
        break;
      case "poll_failed":
        markers.push({ at: e.atMs, kind: "error", label: `poll failed: ${f.message}` });
        break;
      case "delivery_retrying":
        markers.push({ at: e.atMs, kind: "error", label: `${f.delivery === "cancel" ? "cancel" : "answer"} retrying: ${f.message}` });
        break;
      case "update_failed":
      case "cancel_failed":
        markers.push({ at: e.atMs, kind: "error", label: f.message });
        break;
      case "poll_recovered":
        markers.push({ at: e.atMs, kind: "recovered", label: `polling recovered after ${f.failures} failure(s)` });
        break;
      case "cancel_requested":
        markers.push({ at: e.atMs, kind: "cancel", label: `cancel requested by ${f.by}` });
        break;
      default:
        break;
    }
  }
  const last = events.length ? events[events.length - 1]!.atMs : start;
  if (endedAt !== undefined) {
    const span = Math.max(endedAt - start, 1000);
    const end = Math.max(endedAt, last) + Math.max(span * 0.04, 250);
    bands.push({ phase: "terminal", status: current, from, to: end });
    return { start, end, bands, markers, ended: true };
  }
  const end = Math.max(now, last, start + 1000);
  bands.push({ phase: phaseOf(current), status: current, from, to: end });
  return { start, end, bands, markers, ended: false };
}

/** Evenly spaced tick offsets (ms from start) at a "nice" step, about `count` of them. */
export function ticks(spanMs: number, count = 5): number[] {
  if (spanMs <= 0) return [0];
  const raw = spanMs / count;
  const steps = [250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000];
  const step = steps.find((s) => s >= raw) ?? Math.ceil(raw / 86_400_000) * 86_400_000;
  const out: number[] = [];
  for (let t = 0; t <= spanMs + 1; t += step) out.push(t);
  return out;
}

/** "+0 s", "+1.5 s", "+2 min 30 s". */
export function offset(ms: number): string {
  if (ms < 10_000 && ms % 1000 !== 0) return `+${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `+${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `+${m} min ${s % 60} s` : `+${m} min`;
  return `+${Math.floor(m / 60)} h ${m % 60} min`;
}
