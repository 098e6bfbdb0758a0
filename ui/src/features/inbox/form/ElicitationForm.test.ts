import { afterEach, describe, expect, it, vi } from "vitest";
import type { InputResponse } from "../../../bindings/InputResponse";
import { blur, buttonByText, click, render, settle, type } from "../../../test/mount";
import ElicitationForm from "./ElicitationForm.svelte";

const SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", title: "Cluster name", minLength: 3, default: "prod-eu-2" },
    owner: { type: "string", title: "Owner email", format: "email" },
    nodes: { type: "integer", title: "Nodes", minimum: 1, maximum: 64, default: 3 },
    autoscale: { type: "boolean", title: "Autoscale", default: true },
    region: { type: "string", title: "Region", oneOf: [{ const: "eu-west-1", title: "Ireland" }, { const: "eu-central-1", title: "Frankfurt" }], default: "eu-central-1" },
    size: { type: "string", title: "Size", enum: ["s", "m", "l", "xl", "xxl"] },
    addons: { type: "array", title: "Add-ons", items: { anyOf: [{ const: "metrics", title: "Metrics" }, { const: "gpu", title: "GPU pool" }] }, maxItems: 1 },
  },
  required: ["name", "owner", "nodes", "region"],
};

let cleanup: (() => void) | undefined;
afterEach(() => {
  cleanup?.();
  cleanup = undefined;
});

function setup(schema: unknown = SCHEMA, message = "Choose the parameters") {
  const answers: InputResponse[] = [];
  const onanswer = vi.fn(async (r: InputResponse) => void answers.push(r));
  const r = render(ElicitationForm, { server: "peer-rmcp", message, schema, onanswer });
  cleanup = r.destroy;
  const q = (sel: string) => r.target.querySelector(sel);
  return { ...r, answers, onanswer, q };
}

describe("ElicitationForm", () => {
  it("renders every field with its title and pre-filled defaults", () => {
    const { target, q } = setup();
    const labels = [...target.querySelectorAll(".field .label")].map((l) => l.textContent?.replace("*", "").trim());
    expect(labels).toEqual(["Cluster name", "Owner email", "Nodes", "Autoscale", "Region", "Size", "Add-ons"]);
    expect((q("#f-name") as HTMLInputElement).value).toBe("prod-eu-2");
    expect((q("#f-nodes") as HTMLInputElement).value).toBe("3");
    expect((q("#f-autoscale") as HTMLInputElement).checked).toBe(true);
    expect((q('input[type=radio][value="eu-central-1"]') as HTMLInputElement).checked).toBe(true);
    expect(q("#f-owner")?.getAttribute("type")).toBe("email");
    expect(q("select#f-size"), "more than 4 options use a select").not.toBeNull();
    expect(target.querySelectorAll(".req")).toHaveLength(4);
  });

  it("validates inline after a field is left, not before", () => {
    const { q } = setup();
    const owner = q("#f-owner");
    type(owner, "not-an-email");
    expect(q('[data-field="owner"] .error')).toBeNull();
    blur(owner);
    expect(q('[data-field="owner"] .error')?.textContent).toBe("Not an email address");
    type(owner, "ops@example.com");
    expect(q('[data-field="owner"] .error')).toBeNull();
  });

  it("refuses to review until required fields are valid, then shows every value", () => {
    const { target, q, onanswer } = setup();
    click(buttonByText(target, "Review answer"));
    expect(target.querySelector(".review")).toBeNull();
    expect(q('[data-field="owner"] .error')?.textContent).toBe("Required");

    type(q("#f-owner"), "ops@example.com");
    type(q("#f-nodes"), "5");
    click(q('input[type=checkbox][value="gpu"]'));
    click(buttonByText(target, "Review answer"));
    const review = target.querySelector(".review");
    expect(review, "review step shown").not.toBeNull();
    expect(review?.textContent).toContain("peer-rmcp");
    const rows = [...target.querySelectorAll(".review dt")].map((dt) => [dt.textContent, dt.nextElementSibling?.textContent]);
    expect(rows).toEqual([
      ["Cluster name", "prod-eu-2"], ["Owner email", "ops@example.com"], ["Nodes", "5"], ["Autoscale", "Yes"],
      ["Region", "Frankfurt"], ["Size", "—"], ["Add-ons", "GPU pool"],
    ]);
    expect(onanswer, "nothing is sent before the user confirms").not.toHaveBeenCalled();
  });

  it("sends the reviewed content on Send", async () => {
    const { target, q, answers } = setup();
    type(q("#f-owner"), "ops@example.com");
    click(buttonByText(target, "Review answer"));
    click(buttonByText(target, "Send"));
    await settle();
    expect(answers).toEqual([
      { action: "accept", content: { name: "prod-eu-2", owner: "ops@example.com", nodes: 3, autoscale: true, region: "eu-central-1" } },
    ]);
  });

  it("lets the user go back from review and edit", () => {
    const { target, q } = setup();
    type(q("#f-owner"), "ops@example.com");
    click(buttonByText(target, "Review answer"));
    click(buttonByText(target, "Edit"));
    expect((q("#f-owner") as HTMLInputElement).value, "edits survive the round trip").toBe("ops@example.com");
  });

  it("declines without validating, and offers no ambiguous Cancel", async () => {
    const a = setup();
    click(buttonByText(a.target, "Decline this question"));
    await settle();
    expect(a.answers).toEqual([{ action: "decline" }]);
    const labels = [...a.target.querySelectorAll("button")].map((b) => b.textContent?.trim());
    expect(labels.some((l) => /^Cancel/.test(l ?? "")), `"Cancel" beside "Decline" is easy to mix up with cancelling the task: ${labels}`).toBe(false);
  });

  it("d asks before declining: one key press sends nothing, the same key again declines", async () => {
    const { instance, target, answers } = setup();
    (instance as unknown as { decline(): void }).decline();
    await settle();
    expect(answers).toEqual([]);
    expect(target.querySelector('[data-testid="armed"]')?.textContent).toMatch(/Decline this question/);
    (instance as unknown as { back(): void }).back();
    await settle();
    expect(target.querySelector('[data-testid="armed"]'), "Esc steps back from the question").toBeNull();
    (instance as unknown as { decline(): void }).decline();
    (instance as unknown as { decline(): void }).decline();
    await settle();
    expect(answers).toEqual([{ action: "decline" }]);
  });

  it("enforces maxItems on multi-select", () => {
    const { target, q } = setup();
    type(q("#f-owner"), "ops@example.com");
    click(q('input[type=checkbox][value="gpu"]'));
    click(q('input[type=checkbox][value="metrics"]'));
    click(buttonByText(target, "Review answer"));
    expect(target.querySelector(".review")).toBeNull();
    expect(q('[data-field="addons"] .error')?.textContent).toBe("Choose at most 1");
  });

  it("warns visibly when a field looks like a secret", () => {
    const { target } = setup({ type: "object", properties: { api_token: { type: "string" } }, required: ["api_token"] });
    expect(target.querySelector('[role="alert"]')?.textContent).toContain("looks like a request for a secret");
    expect(target.querySelector(".secret-badge")).not.toBeNull();
  });

  it("renders server text as text, never as HTML", () => {
    const evil = `<img src=x onerror="window.__pwned=1"><b>bold</b>`;
    const { target } = setup(
      { type: "object", properties: { x: { type: "string", title: evil, description: evil } } },
      evil,
    );
    expect(target.querySelector("img, b"), "no element was created from server text").toBeNull();
    expect(target.querySelector(".question")?.textContent).toBe(evil);
    expect(target.textContent).toContain("<b>bold</b>");
  });

  it("offers only decline and cancel when a required field cannot be rendered", () => {
    const { target } = setup({ type: "object", properties: { cfg: { type: "object" } }, required: ["cfg"] });
    expect(buttonByText(target, "Review answer").disabled).toBe(true);
    expect(buttonByText(target, "Decline this question").disabled).toBe(false);
  });

  it("shows the error and keeps the form when sending fails", async () => {
    const onanswer = vi.fn(async () => {
      throw { code: "already_answered", message: "Answered from a notification." };
    });
    const r = render(ElicitationForm, { server: "s", message: "m", schema: { type: "object", properties: {} }, onanswer });
    cleanup = r.destroy;
    click(buttonByText(r.target, "Review answer"));
    click(buttonByText(r.target, "Send"));
    await settle();
    expect(r.target.querySelector(".banner.error")?.textContent).toBe("Answered from a notification.");
  });

  describe("an approval question (one required yes/no)", () => {
    const DEPLOY = {
      type: "object",
      properties: {
        approve: { type: "boolean", title: "Approve", description: "Allow the deployment to proceed" },
        reason: { type: "string", title: "Reason" },
      },
      required: ["approve"],
    };

    it("shows Approve and Deny as the two primary actions, and no consent checkbox left at a default", () => {
      const { target } = setup(DEPLOY, "Approve deployment of 'billing-api'?");
      const primaries = [...target.querySelectorAll("button.primary")].map((b) => b.textContent?.replace(/\s+/g, " ").trim());
      expect(primaries).toEqual(["Approve a", "Deny n"]);
      expect(target.querySelector('input[type="checkbox"]'), "the choice is a button, not a switch that starts off").toBeNull();
      expect([...target.querySelectorAll("button")].some((b) => /Review answer|^Send/.test(b.textContent ?? ""))).toBe(false);
      expect(target.querySelector("#f-reason"), "the optional reason is kept").not.toBeNull();
    });

    it("Approve sends approve: true with the reason; Deny sends approve: false", async () => {
      const a = setup(DEPLOY);
      type(a.q("#f-reason"), "looks fine");
      click(a.q('[data-testid="approve"]'));
      await settle();
      expect(a.answers).toEqual([{ action: "accept", content: { approve: true, reason: "looks fine" } }]);
      a.destroy();
      const b = setup(DEPLOY);
      click(b.q('[data-testid="deny"]'));
      await settle();
      expect(b.answers).toEqual([{ action: "accept", content: { approve: false } }]);
    });

    it("keys ask first: a once sends nothing, a twice approves; n twice denies", async () => {
      const a = setup(DEPLOY);
      const form = a.instance as unknown as { accept(): void; deny(): void };
      form.accept();
      await settle();
      expect(a.answers).toEqual([]);
      expect(a.q('[data-testid="armed"]')?.getAttribute("data-armed")).toBe("approve");
      form.accept();
      await settle();
      expect(a.answers).toEqual([{ action: "accept", content: { approve: true } }]);
      a.destroy();
      const b = setup(DEPLOY);
      const other = b.instance as unknown as { accept(): void; deny(): void };
      other.deny();
      await settle();
      expect(b.answers).toEqual([]);
      other.deny();
      await settle();
      expect(b.answers).toEqual([{ action: "accept", content: { approve: false } }]);
    });
  });
});
