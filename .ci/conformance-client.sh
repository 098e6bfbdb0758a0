#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, installed under
# .ci/tools by another script) against our client adapter, at both spec versions the client
# speaks: 2026-07-28 (the stateless client) and 2025-11-25 (the legacy client and its session).
#
#   CONFORMANCE_CLIENT_CMD   adapter command (default: target/debug/conformance-client). The suite
#                            runs it through /bin/sh with the mock server URL appended as the last
#                            argument, and sets MCP_CONFORMANCE_SCENARIO,
#                            MCP_CONFORMANCE_PROTOCOL_VERSION (and MCP_CONFORMANCE_CONTEXT when the
#                            scenario has data for the client).
#   CONFORMANCE_TIMEOUT_MS   per-scenario client timeout (default: 30000, the suite's default).
#   CONFORMANCE_SPEC_VERSIONS  the versions to run (default: "2026-07-28 2025-11-25").
#   [scenario ...]           optional subset of the scenarios below; each runs at every selected
#                            version that lists it.
#
# Results: .ci/artifacts/conformance/client/<version>/<scenario>/<scenario>-<timestamp>/
# {checks.json,stdout.txt,stderr.txt} plus .../<version>/<scenario>/runner.log.
#
# Prints one line per scenario and version and exits non-zero if any scenario has a FAILURE or
# WARNING check, produced no checks (no checks.json, or nothing but SKIPPED/INFO entries), or the
# runner itself failed (client crash or timeout).
set -euo pipefail

SCENARIOS_2026_07_28=(
  tools_call
  request-metadata
  sep-2322-client-request-state
  http-standard-headers
  http-custom-headers
  http-invalid-tool-headers
  json-schema-ref-no-deref
  json-schema-2020-12-preservation
  # Authorization (MCP 2026-07-28): the suite's `auth` 14, then the auth scenarios of `draft`.
  auth/metadata-default
  auth/metadata-var1
  auth/metadata-var2
  auth/metadata-var3
  auth/basic-cimd
  auth/scope-from-www-authenticate
  auth/scope-from-scopes-supported
  auth/scope-omitted-when-undefined
  auth/scope-step-up
  auth/scope-retry-limit
  auth/token-endpoint-auth-basic
  auth/token-endpoint-auth-post
  auth/token-endpoint-auth-none
  auth/pre-registration
  auth/resource-mismatch
  auth/offline-access-scope
  auth/offline-access-not-supported
  auth/authorization-server-migration
  auth/iss-supported
  auth/iss-not-advertised
  auth/iss-supported-missing
  auth/iss-wrong-issuer
  auth/iss-unexpected
  auth/iss-normalized
  auth/metadata-issuer-mismatch
)

# `conformance list --client --spec-version 2025-11-25`: every client scenario of that version
# (the 18 `--requirements 2025-11-25` scores, and json-schema-2020-12-preservation, added after
# the release). The suite's auth extensions (client credentials, enterprise-managed, DPoP, WIF)
# are on no spec timeline and never scored; Countersign does not implement them.
SCENARIOS_2025_11_25=(
  initialize
  tools_call
  elicitation-sep1034-client-defaults
  sse-retry
  json-schema-2020-12-preservation
  auth/metadata-default
  auth/metadata-var1
  auth/metadata-var2
  auth/metadata-var3
  auth/basic-cimd
  auth/scope-from-www-authenticate
  auth/scope-from-scopes-supported
  auth/scope-omitted-when-undefined
  auth/scope-step-up
  auth/scope-retry-limit
  auth/token-endpoint-auth-basic
  auth/token-endpoint-auth-post
  auth/token-endpoint-auth-none
  auth/pre-registration
)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bin_dir="$root/.ci/tools/node_modules/.bin"
if [[ ! -x "$bin_dir/node" || ! -x "$bin_dir/conformance" ]]; then
  echo "conformance-client: $bin_dir/{node,conformance} missing; install .ci/tools first" >&2
  exit 2
fi
export PATH="$bin_dir:$PATH"

cmd="${CONFORMANCE_CLIENT_CMD:-target/debug/conformance-client}"
timeout_ms="${CONFORMANCE_TIMEOUT_MS:-30000}"

read -r -a versions <<<"${CONFORMANCE_SPEC_VERSIONS:-2026-07-28 2025-11-25}"

# The scenarios of one version (by name, into the array `listed`).
scenarios_of() {
  case "$1" in
    2026-07-28) listed=("${SCENARIOS_2026_07_28[@]}") ;;
    2025-11-25) listed=("${SCENARIOS_2025_11_25[@]}") ;;
    *)
      echo "conformance-client: unknown spec version '$1' (known: 2026-07-28 2025-11-25)" >&2
      exit 2
      ;;
  esac
}

for s in "$@"; do
  known=0
  for v in "${versions[@]}"; do
    scenarios_of "$v"
    for k in "${listed[@]}"; do [[ "$s" == "$k" ]] && known=1; done
  done
  if ((known == 0)); then
    echo "conformance-client: unknown scenario '$s' at ${versions[*]}" >&2
    exit 2
  fi
done

# Catch the common mistake (adapter not built) before eight identical failures.
first_word="${cmd%% *}"
if [[ "$first_word" == */* && ! -x "$first_word" ]]; then
  echo "conformance-client: adapter '$first_word' not found or not executable (build it first)" >&2
  exit 2
fi

artifacts="$root/.ci/artifacts/conformance/client"
mkdir -p "$artifacts"

# Prints "<passed> <failures> <warnings> <entries>" for a checks.json, then one indented line per
# FAILURE/WARNING check on stderr.
summarize() {
  node -e '
    const fs = require("fs");
    let checks;
    try {
      checks = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
      if (!Array.isArray(checks)) throw new Error("checks.json is not an array");
    } catch (e) {
      console.error(`    unreadable ${process.argv[1]}: ${e.message}`);
      console.log("0 0 0 0");
      process.exit(0);
    }
    const count = (s) => checks.filter((c) => c.status === s).length;
    console.log(`${count("SUCCESS")} ${count("FAILURE")} ${count("WARNING")} ${checks.length}`);
    for (const c of checks) {
      if (c.status === "FAILURE" || c.status === "WARNING") {
        const why = (c.errorMessage || c.description || "").split("\n")[0].slice(0, 300);
        console.error(`    ${c.status} ${c.id} [${c.name}] ${why}`);
      }
    }
  ' "$1"
}

bad=0
for version in "${versions[@]}"; do
  scenarios_of "$version"
  for scenario in "${listed[@]}"; do
    if (($# > 0)); then
      wanted=0
      for s in "$@"; do [[ "$s" == "$scenario" ]] && wanted=1; done
      ((wanted == 1)) || continue
    fi
    out="$artifacts/$version/$scenario"
    rm -rf "$out"
    mkdir -p "$out"

    rc=0
    conformance client \
      --command "$cmd" \
      --scenario "$scenario" \
      --spec-version "$version" \
      --timeout "$timeout_ms" \
      -o "$out" >"$out/runner.log" 2>&1 || rc=$?

    shopt -s nullglob
    files=("$out"/"$scenario"-*/checks.json)
    shopt -u nullglob

    passed=0 failures=0 warnings=0 entries=0
    notes=()
    if ((${#files[@]} == 0)); then
      notes+=("no checks.json (scenario skipped or runner error; see $out/runner.log)")
    else
      summary="$(summarize "${files[0]}" 2>"$out/problems.txt")" || summary="0 0 0 0"
      read -r passed failures warnings entries <<<"$summary"
    fi

    echo "client $version $scenario: $passed checks passed, $failures failures, $warnings warnings"

    if ((${#files[@]} > 0 && passed + failures + warnings == 0)); then
      notes+=("no scored checks ($entries entries, all SKIPPED/INFO)")
    fi
    if ((rc != 0)); then
      if grep -q "CLIENT TIMED OUT" "$out/runner.log"; then
        notes+=("runner exit $rc: client timed out after ${timeout_ms} ms")
      elif grep -q "CLIENT EXITED WITH ERROR" "$out/runner.log"; then
        notes+=("runner exit $rc: client exited with an error")
      elif ((failures + warnings == 0)); then
        notes+=("runner exit $rc (see $out/runner.log)")
      fi
    fi
    if [[ -s "$out/problems.txt" ]]; then
      cat "$out/problems.txt" >&2
    fi
    for n in "${notes[@]+"${notes[@]}"}"; do
      echo "    $n" >&2
    done

    if ((failures > 0 || warnings > 0 || ${#notes[@]} > 0)); then
      bad=1
    fi
  done
done

exit "$bad"
