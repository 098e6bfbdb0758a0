import { describe, expect, it } from "vitest";
import { commandLine, envPairs, quoteWord, splitCommand } from "./command";

function words(line: string): string[] {
  const s = splitCommand(line);
  if (!s.ok) throw new Error(`refused: ${s.error}`);
  return s.words;
}

describe("splitCommand", () => {
  it("splits on whitespace and keeps quoted spaces, as a shell does", () => {
    expect(words("npx -y @modelcontextprotocol/server-filesystem /tmp/notes")).toEqual(["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp/notes"]);
    expect(words(`node  'My Server/index.js'\t"two words" plain\\ escaped`)).toEqual(["node", "My Server/index.js", "two words", "plain escaped"]);
    expect(words(`python -c 'print("hi")' "it's" ""`)).toEqual(["python", "-c", 'print("hi")', "it's", ""]);
    expect(words(`a"b"'c'd`)).toEqual(["abcd"]);
    expect(words(`echo "a \\"quoted\\" \\\\ word"`)).toEqual(["echo", 'a "quoted" \\ word']);
  });

  it("refuses what only a shell would understand, and unclosed quotes, saying why", () => {
    for (const line of ["server | tee log", "server > out", "a && b", "echo $HOME", "echo `id`", 'echo "$HOME"', "a; b"]) {
      const s = splitCommand(line);
      expect(s.ok, line).toBe(false);
      if (!s.ok) expect(s.error, line).toMatch(/without a shell/);
    }
    expect(splitCommand("node 'open")).toEqual({ ok: false, error: "A single quote (') is not closed." });
    expect(splitCommand('node "open')).toEqual({ ok: false, error: 'A double quote (") is not closed.' });
    expect(splitCommand("node \\")).toMatchObject({ ok: false });
    expect(splitCommand("   ")).toMatchObject({ ok: false });
  });

  it("passes a shell's operators when quoted", () => {
    expect(words(`grep 'a|b' '$HOME' "a;b"`)).toEqual(["grep", "a|b", "$HOME", "a;b"]);
  });
});

describe("commandLine", () => {
  it("quotes like the server page's command (crates/countersign-mcp stdio display)", () => {
    expect(quoteWord("/usr/bin/node")).toBe("/usr/bin/node");
    expect(quoteWord("--key=a,b+c@d:1%")).toBe("--key=a,b+c@d:1%");
    expect(quoteWord("two words")).toBe("'two words'");
    expect(quoteWord("it's")).toBe("'it'\\''s'");
    expect(quoteWord("")).toBe("''");
  });

  it("round-trips: the line shown splits back into the same words", () => {
    const cases = [
      ["node", "dist/index.js", "stdio"],
      ["python", "-c", 'print("hi")', "it's", "", "a b", "$HOME", "a|b", "tab\there", "new\nline", "back\\slash", "émoji 🎉"],
    ];
    for (const w of cases) expect(words(commandLine(w))).toEqual(w);
  });
});

describe("envPairs", () => {
  it("gives each variable once, skips empty rows, and needs names a shell takes", () => {
    expect(envPairs([{ name: " ROOT ", value: "/srv" }, { name: "", value: "" }], [{ name: "API_KEY", value: "s3cret" }])).toEqual({
      ok: true,
      env: [["ROOT", "/srv"]],
      secretEnv: [["API_KEY", "s3cret"]],
    });
    expect(envPairs([{ name: "1X", value: "v" }], [])).toMatchObject({ ok: false, error: expect.stringMatching(/1X is not a variable name/) });
    expect(envPairs([{ name: "", value: "v" }], [])).toMatchObject({ ok: false, error: expect.stringMatching(/no name/) });
    expect(envPairs([{ name: "K", value: "a" }], [{ name: "K", value: "b" }])).toMatchObject({ ok: false, error: "K is given twice." });
    expect(envPairs([], [{ name: "TOKEN", value: "" }])).toMatchObject({ ok: false, error: expect.stringMatching(/TOKEN has no value/) });
  });

  it("never puts a secret value in an error", () => {
    const r = envPairs([], [{ name: "TOKEN", value: "s3cret" }, { name: "TOKEN", value: "other-s3cret" }]);
    expect(r.ok).toBe(false);
    expect(JSON.stringify(r)).not.toMatch(/s3cret/);
  });
});
