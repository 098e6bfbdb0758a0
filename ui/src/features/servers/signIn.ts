// What a window says about an OAuth sign-in: who and until when, and where a sign-in leads.
// Times are Unix milliseconds, shown in UTC like every other time in the app.
import type { SignInInfo } from "../../bindings/SignInInfo";
import type { SignInRegistration } from "../../bindings/SignInRegistration";
import { duration } from "../../app/format.svelte";

/**
 * "Signed in as ada@example.com · token renews in 42 min", or "… · token expires 14:05 UTC"
 * when nothing renews it, or "expired" once past; "Signed in" without a name when the server
 * gave none.
 */
export function signInLine(info: SignInInfo | undefined, now: number): string {
  const who = info?.account ? `Signed in as ${info.account}` : "Signed in";
  if (!info || info.expiresAtMs === undefined) return who;
  const left = info.expiresAtMs - now;
  if (info.renews) {
    return left > 0 ? `${who} · token renews in ${duration(left)}` : `${who} · token renewing`;
  }
  if (left <= 0) return `${who} · token expired`;
  const at = new Date(info.expiresAtMs).toISOString();
  const when = left < 86_400_000 ? `${at.slice(11, 16)} UTC` : `${at.slice(0, 10)} ${at.slice(11, 16)} UTC`;
  return `${who} · token expires ${when}`;
}

/** A client the person registered with the authorization server themselves (the add form's sign-in options). */
export type ClientOptions = { clientId: string; clientSecret?: string; redirectPort?: number };

/** How Countersign will identify itself to the authorization server, in a person's words. */
export function registrationText(registration: SignInRegistration): string {
  switch (registration) {
    case "pre_registered":
      return "as the client you registered";
    case "kept":
      return "as the same client as before";
    case "metadata_document":
      return "as Countersign (its published client description)";
    case "dynamic":
      return "as Countersign (it registers itself with the server)";
  }
}

/**
 * The add form's sign-in options, checked: nothing given → `undefined` (dynamic registration);
 * a secret or port without a client ID, or a port that is not a whole number from 1 to 65535 →
 * the sentence to show.
 */
export function clientOptions(clientId: string, clientSecret: string, redirectPort: string): ClientOptions | undefined | string {
  const id = clientId.trim();
  const portText = redirectPort.trim();
  if (!id) return clientSecret || portText ? "A client secret or redirect port needs the client ID it belongs to." : undefined;
  const port = portText ? Number(portText) : undefined;
  if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535)) return "The redirect port is a whole number from 1 to 65535.";
  return { clientId: id, ...(clientSecret ? { clientSecret } : {}), ...(port !== undefined ? { redirectPort: port } : {}) };
}
