// Mounting Svelte 5 components into jsdom for tests.
import { flushSync, mount, unmount, type Component } from "svelte";

export function render<P extends Record<string, unknown>, E extends Record<string, unknown>>(
  component: Component<P, E>,
  props: P,
): { target: HTMLElement; instance: E; destroy: () => void } {
  const target = document.createElement("div");
  document.body.appendChild(target);
  const instance = mount(component, { target, props }) as E;
  flushSync();
  return {
    target,
    instance,
    destroy: () => {
      void unmount(instance);
      target.remove();
    },
  };
}

/** Sets an input's value as typing would, and lets Svelte update. */
export function type(el: Element | null, value: string) {
  if (!(el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement)) throw new Error("not a text input");
  el.value = value;
  el.dispatchEvent(new Event("input", { bubbles: true }));
  flushSync();
}

export function click(el: Element | null) {
  if (!(el instanceof HTMLElement)) throw new Error("nothing to click");
  el.click();
  flushSync();
}

export function blur(el: Element | null) {
  if (!(el instanceof HTMLElement)) throw new Error("nothing to blur");
  el.dispatchEvent(new FocusEvent("blur"));
  flushSync();
}

export function buttonByText(root: HTMLElement, text: string): HTMLButtonElement {
  const b = [...root.querySelectorAll("button")].find((x) => x.textContent?.trim().startsWith(text));
  if (!b) throw new Error(`no button "${text}" in: ${[...root.querySelectorAll("button")].map((x) => x.textContent?.trim()).join(" | ")}`);
  return b;
}

/** Waits for pending promises (e.g. an async onanswer) and flushes. */
export async function settle() {
  await new Promise((r) => setTimeout(r, 0));
  flushSync();
}
