// A stdio server's command line as a person types it, split into the program and its arguments
// the way a POSIX shell would, and the words quoted back the way the server page shows them
// (`StdioCommand::display` in crates/countersign-mcp/src/stdio.rs): what is typed, what runs and
// what is shown agree. The command runs without a shell, so a shell's operators are refused
// rather than passed on as arguments no shell will read.

/** A command line split into its words, or why it cannot be. */
export type Split = { ok: true; words: string[] } | { ok: false; error: string };

/** Characters a shell would act on outside quotes; here they must be quoted to mean themselves. */
const OPERATORS = new Set(["|", "&", ";", "<", ">", "(", ")", "$", "`"]);

/** Splits `line` as `sh` would: whitespace between words, '…' literal, "…" with \" \\ \$ \` escapes, \x outside quotes. */
export function splitCommand(line: string): Split {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let i = 0;
  while (i < line.length) {
    const c = line.charAt(i);
    if (c === " " || c === "\t" || c === "\n") {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      i++;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) return { ok: false, error: "A single quote (') is not closed." };
      word += line.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      i++;
      let closed = false;
      while (i < line.length) {
        const d = line.charAt(i);
        if (d === '"') {
          closed = true;
          i++;
          break;
        }
        if (d === "\\" && i + 1 < line.length && '"\\$`'.includes(line.charAt(i + 1))) {
          word += line.charAt(i + 1);
          i += 2;
        } else if (d === "$" || d === "`") {
          return { ok: false, error: `The command runs without a shell: ${d} inside "…" is not expanded. Use '…' to pass it as it is.` };
        } else {
          word += d;
          i++;
        }
      }
      if (!closed) return { ok: false, error: 'A double quote (") is not closed.' };
      inWord = true;
    } else if (c === "\\") {
      if (i + 1 >= line.length) return { ok: false, error: "The command line ends with a backslash." };
      // A backslash before a newline joins lines, as in a shell.
      if (line.charAt(i + 1) !== "\n") {
        word += line.charAt(i + 1);
        inWord = true;
      }
      i += 2;
    } else if (OPERATORS.has(c)) {
      return { ok: false, error: `The command runs without a shell: ${c} is not understood. Quote it ('${c}') to pass it as an argument.` };
    } else {
      word += c;
      inWord = true;
      i++;
    }
  }
  if (inWord) words.push(word);
  if (words.length === 0) return { ok: false, error: "Give the command to run." };
  return { ok: true, words };
}

/** One word as the server page shows it: bare when plain, else in single quotes. */
export function quoteWord(word: string): string {
  if (word !== "" && /^[A-Za-z0-9\-_./=:@,+%]+$/.test(word)) return word;
  return `'${word.replaceAll("'", "'\\''")}'`;
}

/** The words as one command line that `splitCommand` reads back as the same words. */
export function commandLine(words: string[]): string {
  return words.map(quoteWord).join(" ");
}

/** A variable row of the form: its name and value as typed. */
export type EnvRow = { name: string; value: string };

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The variables of the form's rows, or why they cannot be used: names as a shell takes them,
 * each given once across the plain and the secret ones; a row left wholly empty is skipped.
 */
export function envPairs(plain: EnvRow[], secret: EnvRow[]): { ok: true; env: [string, string][]; secretEnv: [string, string][] } | { ok: false; error: string } {
  const seen = new Set<string>();
  const pairs = (rows: EnvRow[], kind: string): [string, string][] | string => {
    const out: [string, string][] = [];
    for (const row of rows) {
      const name = row.name.trim();
      if (name === "" && row.value === "") continue;
      if (!ENV_NAME.test(name)) return `${name === "" ? `A ${kind} variable has no name` : `${name} is not a variable name`} (letters, digits and _, not starting with a digit).`;
      if (seen.has(name)) return `${name} is given twice.`;
      if (kind === "secret" && row.value === "") return `The secret variable ${name} has no value.`;
      seen.add(name);
      out.push([name, row.value]);
    }
    return out;
  };
  const env = pairs(plain, "plain");
  if (typeof env === "string") return { ok: false, error: env };
  const secretEnv = pairs(secret, "secret");
  if (typeof secretEnv === "string") return { ok: false, error: secretEnv };
  return { ok: true, env, secretEnv };
}
