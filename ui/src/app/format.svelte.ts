// Small display helpers shared by features. Times are Unix milliseconds.

/** "12 s", "5 min", "3 h 05 min", "2 d 4 h". */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${String(m % 60).padStart(2, "0")} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** "just now", "5 min ago", "3 h ago", else a short date. */
export function ago(at: number, now: number = Date.now()): string {
  const s = Math.round((now - at) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(at).toISOString().slice(0, 10);
}

/** "2026-12-02 09:36:04" (UTC). */
export function stamp(at: number): string {
  return new Date(at).toISOString().replace("T", " ").slice(0, 19);
}

/** "09:36:04.120" (UTC): event lists within one task. */
export function clock(at: number): string {
  return new Date(at).toISOString().slice(11, 23);
}

/** True when the event target is a text field (keyboard shortcuts then stay out of the way). */
export function typing(e: KeyboardEvent): boolean {
  const el = e.target as HTMLElement | null;
  if (!el || !("tagName" in el)) return false;
  const tag = el.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable) return true;
  if (tag !== "INPUT") return false;
  const type = (el as HTMLInputElement).type;
  return !["checkbox", "radio", "button", "submit"].includes(type);
}

/** A live clock for "how long ago" labels: re-renders every `everyMs`. */
export class Ticker {
  now = $state(Date.now());
  private timer: ReturnType<typeof setInterval> | undefined;
  start(everyMs = 1000) {
    this.stop();
    this.timer = setInterval(() => (this.now = Date.now()), everyMs);
  }
  stop() {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
