// Pure helpers of the Settings page (tested in settings.test.ts).
import type { Day } from "../../bindings/Day";
import type { SettingKey } from "../../bindings/SettingKey";
import type { CommandError } from "../../ipc";

/** Monday first, as the core's `Day::ALL`. */
export const DAYS: readonly Day[] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

const LABELS: Record<Day, string> = { mon: "Mon", tue: "Tue", wed: "Wed", thu: "Thu", fri: "Fri", sat: "Sat", sun: "Sun" };

export function dayLabel(d: Day): string {
  return LABELS[d];
}

/** The setting a refused save names (`dnd.from`, `poll_floor_ms`, …), if any. */
export function fieldOf(e: CommandError): SettingKey | undefined {
  return e.code === "invalid_input" ? e.field : undefined;
}
