import { mount } from "svelte";
import App from "./app/App.svelte";
import "./app/app.css";
import { afterNextPaint, markFirstPaint } from "./app/paint";
import { call, inTauri } from "./ipc";

/** Now, in unix milliseconds by the webview's clock (the cold-start budget's timestamps). */
const now = () => performance.timeOrigin + performance.now();
const scriptMs = now();
const target = document.getElementById("app");
if (target) {
  mount(App, { target });
  const mountedMs = now();
  // The window is built hidden and shown now (`window::reveal`): it draws with content at once.
  if (inTauri()) void call("ui_mounted").catch(() => {});
  afterNextPaint(() => {
    const paintedMs = now();
    markFirstPaint();
    if (inTauri()) void call("ui_painted", { navigatedMs: performance.timeOrigin, scriptMs, mountedMs, paintedMs }).catch(() => {});
  });
}
