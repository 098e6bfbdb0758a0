// The only module that imports @tauri-apps/*. Everything else calls `call` and `listen`, typed by
// the contract generated from src-tauri/src/ipc.rs (bindings/Contract.ts).
import { invoke } from "@tauri-apps/api/core";
import { listen as tauriListen, type UnlistenFn } from "@tauri-apps/api/event";
import type { CommandError } from "../bindings/CommandError";
import type { Diagnosis } from "../bindings/Diagnosis";
import type { Commands, Events } from "../bindings/Contract";
import type { ErrorCode } from "../bindings/ErrorCode";
import type { SettingKey } from "../bindings/SettingKey";

export type { CommandError, ErrorCode };
export type CommandName = keyof Commands;
export type Req<K extends CommandName> = Commands[K]["req"];
export type Res<K extends CommandName> = Commands[K]["res"];
export type EventName = keyof Events;
export type { Events };

/** True inside the Tauri webview; false in a plain browser (vite dev, tests). */
export function inTauri(): boolean {
  return typeof window !== "undefined" && "__TAURI_INTERNALS__" in window;
}

/** Every code, once: a code added on the Rust side fails the type check until it is listed. */
const ERROR_CODES = {
  not_found: true,
  already_answered: true,
  invalid_input: true,
  unavailable: true,
  server: true,
  keyring: true,
  sign_in: true,
  cancelled: true,
  internal: true,
} as const satisfies Record<ErrorCode, true>;

/** Every setting key, once, checked the same way. */
const SETTING_KEYS = {
  "dnd.enabled": true,
  "dnd.from": true,
  "dnd.to": true,
  "dnd.days": true,
  sound: true,
  start_at_login: true,
  poll_floor_ms: true,
  "gateway.enabled": true,
  "gateway.port": true,
} as const satisfies Record<SettingKey, true>;

/** Normalises whatever a rejected invoke carries into `{ code, message }`. */
function isDiagnosis(d: unknown): d is Diagnosis {
  if (typeof d !== "object" || d === null) return false;
  const x = d as Record<string, unknown>;
  return typeof x.summary === "string" && typeof x.advice === "string" && typeof x.detail === "string" && typeof x.addAnyway === "boolean";
}

export function toCommandError(e: unknown): CommandError {
  if (typeof e === "object" && e !== null && "code" in e && "message" in e) {
    const { code, message, diagnosis, field } = e as { code: unknown; message: unknown; diagnosis?: unknown; field?: unknown };
    if (typeof code === "string" && Object.hasOwn(ERROR_CODES, code)) {
      const out: CommandError = { code: code as ErrorCode, message: String(message) };
      if (isDiagnosis(diagnosis)) out.diagnosis = diagnosis;
      if (typeof field === "string" && Object.hasOwn(SETTING_KEYS, field)) out.field = field as SettingKey;
      return out;
    }
  }
  return { code: "internal", message: e instanceof Error ? e.message : String(e) };
}

/** The message of anything a failed call rejected with. */
export function messageOf(e: unknown): string {
  return toCommandError(e).message;
}

/** Calls a Rust command; rejects with a `CommandError`. Commands whose `req` is `null` take none. */
export async function call<K extends CommandName>(cmd: K, ...req: Req<K> extends null ? [] : [Req<K>]): Promise<Res<K>> {
  if (!inTauri()) {
    throw { code: "unavailable", message: "Not running inside the Countersign app." } satisfies CommandError;
  }
  try {
    return await invoke<Res<K>>(cmd, req.length ? { request: req[0] } : {});
  } catch (e) {
    throw toCommandError(e);
  }
}

/**
 * Subscribes to a Rust event. The returned function unsubscribes, and is safe to call before the
 * subscription is established (it then unsubscribes as soon as it is) and more than once.
 */
export function listen<K extends EventName>(event: K, cb: (payload: Events[K]) => void): () => void {
  if (!inTauri()) return () => {};
  let stopped = false;
  let unlisten: UnlistenFn | undefined;
  tauriListen<Events[K]>(event, (e) => {
    if (!stopped) cb(e.payload);
  }).then(
    (fn) => {
      if (stopped) fn();
      else unlisten = fn;
    },
    () => {},
  );
  return () => {
    if (stopped) return;
    stopped = true;
    unlisten?.();
    unlisten = undefined;
  };
}
