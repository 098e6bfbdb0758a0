#!/usr/bin/env bash
# Runs the official MCP conformance server scenarios against the local MCP gateway
# (`countersign gateway`) in front of the demo server, with a policy that allows every tool: the
# tasks scenarios (as .ci/conformance-server.sh runs them against the demo server directly) and
# the stateless and header ones. The suite reaches the gateway as an agent, with an agent token
# (.ci/conformance-auth.mjs adds the header).
#
#   COUNTERSIGN_BIN        the countersign binary (default: target/debug/countersign)
#   CONFORMANCE_SCENARIOS  space-separated scenarios to run instead of the default set
#   CONFORMANCE_OUT        directory for results (default: a fresh temporary directory)
#
# Prints one line per scenario; exits non-zero if any check failed or warned.
set -euo pipefail

cd "$(dirname "$0")/.."
bin="${COUNTERSIGN_BIN:-target/debug/countersign}"
if [[ ! -x "$bin" ]]; then
    echo "countersign binary not found: $bin (cargo build -p countersign-cli)" >&2
    exit 2
fi
work="$(mktemp -d -t countersign-conformance-gateway.XXXXXX)"
data="$work/ledger"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2> /dev/null || true
        wait "$pid" 2> /dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# Waits for the first stdout line of a background command (its URL).
first_line() {
    local file="$1" pid="$2" line=""
    for _ in $(seq 1 300); do
        line="$(head -n 1 "$file" 2> /dev/null || true)"
        [[ -n "$line" ]] && { echo "$line"; return 0; }
        kill -0 "$pid" 2> /dev/null || { echo "exited before printing its URL: $(cat "$file.err")" >&2; return 1; }
        sleep 0.1
    done
    echo "printed no URL within 30 s" >&2
    return 1
}

"$bin" demo-server --port 0 > "$work/demo.out" 2> "$work/demo.out.err" &
pids+=($!)
demo_url="$(first_line "$work/demo.out" "${pids[-1]}")"
cs() { "$bin" --data-dir "$data" "$@"; }
cs servers add demo "$demo_url" > /dev/null
# Allow everything: a rule per tool the demo server lists (no rule would mean ask).
mapfile -t tools < <("$bin" --json tools "$demo_url" | "$PWD/.ci/tools/node_modules/.bin/node" -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
        const v = JSON.parse(s); for (const t of v.tools ?? v) console.log(t.name);
    });')
# server-stateless also calls tools the demo server does not list (hooks to change its lists);
# the upstream answers them with an error, but unallowed they would wait for a person's approval.
tools+=(test_trigger_tool_change test_trigger_prompt_change)
for tool in "${tools[@]}"; do
    cs policy set demo "$tool" allow > /dev/null
done
umask 077
cs --json agents add conformance | "$PWD/.ci/tools/node_modules/.bin/node" -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => process.stdout.write(JSON.parse(s).token));' \
    > "$work/token"
"$bin" --data-dir "$data" gateway --port 0 > "$work/gateway.out" 2> "$work/gateway.out.err" &
pids+=($!)
base="$(first_line "$work/gateway.out" "${pids[-1]}")"
echo "gateway at ${base}demo, in front of the demo server at $demo_url (${#tools[@]} tools allowed)"

if [[ -z "${CONFORMANCE_SCENARIOS:-}" ]]; then
    export CONFORMANCE_SCENARIOS="tasks-lifecycle tasks-capability-negotiation tasks-wire-fields \
tasks-request-state-removal tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope \
tasks-required-task-error tasks-mrtr-composition server-stateless http-header-validation \
http-custom-header-server-validation"
fi
COUNTERSIGN_AGENT_TOKEN_FILE="$work/token" \
NODE_OPTIONS="--import=$(realpath .ci/conformance-auth.mjs)" \
CONFORMANCE_URL="${base}demo" \
    bash .ci/conformance-server.sh
