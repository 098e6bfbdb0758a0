import { mount } from "svelte";
import App from "./app/App.svelte";
import "./app/app.css";
import { call, inTauri } from "./ipc";

const target = document.getElementById("app");
if (target) {
  mount(App, { target });
  // Two frames: the first is scheduled, the second means the first was painted.
  if (inTauri()) requestAnimationFrame(() => requestAnimationFrame(() => void call("ui_painted").catch(() => {})));
}
