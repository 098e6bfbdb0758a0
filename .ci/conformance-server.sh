#!/usr/bin/env bash
# Runs the official MCP conformance scenarios of the Tasks extension against the demo server.
#
#   DEMO_SERVER_CMD   command that starts the server and prints its URL as the first stdout
#                     line (default: target/debug/examples/serve 0; build it first with
#                     `cargo build -p countersign-demo --example serve`)
#   CONFORMANCE_SCENARIOS  space-separated scenarios to run instead of the nine required ones
#   CONFORMANCE_OUT   directory for results (default: a fresh temporary directory)
#   CONFORMANCE_URL   an endpoint already running to test instead of starting one (what
#                     .ci/conformance-gateway.sh does for the gateway)
#
# Prints one line per scenario and exits non-zero if any check failed or warned.
set -euo pipefail

cd "$(dirname "$0")/.."
tools_bin="$PWD/.ci/tools/node_modules/.bin"
if [[ ! -x "$tools_bin/conformance" || ! -x "$tools_bin/node" ]]; then
    echo "conformance suite not installed under .ci/tools (npm install there)" >&2
    exit 2
fi

read -r -a server_cmd <<< "${DEMO_SERVER_CMD:-target/debug/examples/serve 0}"
if [[ -n "${CONFORMANCE_URL:-}" ]]; then
    :
elif ! command -v "${server_cmd[0]}" > /dev/null 2>&1 && [[ ! -x "${server_cmd[0]}" ]]; then
    echo "demo server command not found: ${server_cmd[0]}" >&2
    echo "build it with: cargo build -p countersign-demo --example serve" >&2
    exit 2
fi

if [[ -n "${CONFORMANCE_SCENARIOS:-}" ]]; then
    read -r -a scenarios <<< "$CONFORMANCE_SCENARIOS"
else
    scenarios=(
        tasks-lifecycle
        tasks-capability-negotiation
        tasks-wire-fields
        tasks-request-state-removal
        tasks-mrtr-input
        tasks-request-headers
        tasks-dispatch-and-envelope
        tasks-required-task-error
        tasks-mrtr-composition
    )
fi

out="${CONFORMANCE_OUT:-$(mktemp -d -t countersign-conformance.XXXXXX)}"
mkdir -p "$out"

server_pid=""
stop_server() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2> /dev/null; then
        kill "$server_pid" 2> /dev/null || true
        wait "$server_pid" 2> /dev/null || true
    fi
}
trap stop_server EXIT

if [[ -n "${CONFORMANCE_URL:-}" ]]; then
    url="$CONFORMANCE_URL"
else
    "${server_cmd[@]}" > "$out/server.stdout" 2> "$out/server.stderr" &
    server_pid=$!

    url=""
    for _ in $(seq 1 300); do
        url="$(head -n 1 "$out/server.stdout" 2> /dev/null || true)"
        [[ -n "$url" ]] && break
        if ! kill -0 "$server_pid" 2> /dev/null; then
            echo "demo server exited before printing its URL:" >&2
            cat "$out/server.stderr" >&2
            exit 1
        fi
        sleep 0.1
    done
    if [[ -z "$url" ]]; then
        echo "demo server printed no URL within 30 s" >&2
        exit 1
    fi
fi
echo "server at $url (results in $out)"

# Counts the statuses in a scenario's checks.json: prints "passed failed warnings total".
count_checks() {
    "$tools_bin/node" -e '
        const fs = require("fs"), path = require("path");
        const files = [];
        const walk = (dir) => {
            for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
                const full = path.join(dir, entry.name);
                if (entry.isDirectory()) walk(full);
                else if (entry.name === "checks.json") files.push(full);
            }
        };
        walk(process.argv[1]);
        const checks = files.flatMap((file) => JSON.parse(fs.readFileSync(file, "utf8")));
        const count = (status) => checks.filter((check) => check.status === status).length;
        console.log(count("SUCCESS"), count("FAILURE"), count("WARNING"), checks.length);
    ' "$1"
}

status=0
for scenario in "${scenarios[@]}"; do
    dir="$out/$scenario"
    mkdir -p "$dir"
    PATH="$tools_bin:$PATH" conformance server --url "$url" --scenario "$scenario" -o "$dir" \
        > "$dir/output.txt" 2>&1 || true
    read -r passed failed warnings total < <(count_checks "$dir")
    echo "$scenario → $passed checks passed, $failed failed, $warnings warnings"
    if [[ "$total" -eq 0 || "$failed" -ne 0 || "$warnings" -ne 0 ]]; then
        [[ "$total" -eq 0 ]] && echo "  (no checks recorded; see $dir/output.txt)"
        status=1
    fi
done

exit "$status"
