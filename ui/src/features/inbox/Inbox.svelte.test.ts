import { flushSync } from "svelte";
import { afterEach, describe, expect, it } from "vitest";
import type { InputRequestView } from "../../bindings/InputRequestView";
import type { InputResponse } from "../../bindings/InputResponse";
import { render, settle } from "../../test/mount";
import Inbox from "./Inbox.svelte";

const confirm = (key: string, server: string): InputRequestView => ({
  key,
  taskId: `t-${key}`,
  serverId: server,
  serverName: server,
  toolName: "deploy",
  receivedAt: "2026-12-02T09:00:00Z",
  request: { mode: "form", message: `Deploy ${key}?`, requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] } },
});

function press(key: string) {
  window.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
  flushSync();
}

describe("Inbox keyboard", () => {
  let destroy: (() => void) | undefined;
  afterEach(() => destroy?.());

  it("moves with j/k, reviews with a, sends with a again, declines with d", async () => {
    const inputs = [confirm("k1", "alpha"), confirm("k2", "beta"), confirm("k3", "gamma")];
    const sent: [string, InputResponse][] = [];
    let selected: string | undefined = "k1";
    const first: string | undefined = "k1";
    const props: {
      inputs: InputRequestView[];
      selectedKey: string | undefined;
      onselect: (key: string | undefined) => void;
      onanswer: (key: string, r: InputResponse) => Promise<void>;
    } = $state({
      inputs,
      selectedKey: first,
      onselect: (key: string | undefined) => {
        selected = key;
        props.selectedKey = key;
      },
      onanswer: async (key: string, r: InputResponse) => {
        sent.push([key, r]);
        props.inputs = props.inputs.filter((i) => i.key !== key);
      },
    });
    const r = render(Inbox, props);
    destroy = r.destroy;
    const server = () => r.target.querySelector('[data-testid="requesting-server"]')?.textContent;
    expect(server()).toBe("alpha");
    press("j");
    expect(server()).toBe("beta");
    press("k");
    expect(server()).toBe("alpha");

    press("a");
    expect(r.target.querySelector(".review"), "first a opens the review").not.toBeNull();
    expect(sent).toEqual([]);
    press("a");
    await settle();
    expect(sent).toEqual([["k1", { action: "accept", content: { ok: false } }]]);
    expect(selected, "the next request is selected after answering").toBe("k2");

    press("d");
    await settle();
    expect(sent[1]).toEqual(["k2", { action: "decline" }]);

    press("?");
    expect(r.target.querySelector('[role="dialog"]')).not.toBeNull();
    press("Escape");
    expect(r.target.querySelector('[role="dialog"]')).toBeNull();
  });
});
