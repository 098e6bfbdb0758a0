#!/usr/bin/env bash
# Installs the Node tools CI uses into .ci/tools (pinned in .ci/tools/package.json and its lock):
# the official MCP conformance suite 0.2.0-alpha.12 and Node 22, which it needs (the machine has
# Node 20), and the official TypeScript SDK 1.32.2 (@modelcontextprotocol/sdk; the gateway tests
# run its client, tests/peers/ts_session_agent.mjs), and the reference server
# @modelcontextprotocol/server-everything 2026.8.31 (a 2025-11-25 server with SEP-1686 Tasks that
# crates/countersign-mcp/tests/it/legacy_everything.rs runs on Streamable HTTP). Idempotent; quiet
# unless something fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.ci/tools"
stamp="$tools/node_modules/.lock.sha256"
want="$(sha256sum "$tools/package-lock.json" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$tools/node_modules/.bin/conformance" ]] \
    && [[ -f "$tools/node_modules/@modelcontextprotocol/sdk/package.json" ]] \
    && [[ -f "$tools/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ]] \
    && "$tools/node_modules/.bin/node" --version 2>/dev/null | grep -q '^v22\.'; then
    exit 0
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! (cd "$tools" && npm ci --no-audit --no-fund) >"$log" 2>&1; then
    echo "setup-tools: npm ci in .ci/tools failed:" >&2
    cat "$log" >&2
    exit 1
fi
if ! "$tools/node_modules/.bin/node" --version | grep -q '^v22\.'; then
    echo "setup-tools: .ci/tools/node_modules/.bin/node is not Node 22" >&2
    exit 1
fi
echo "$want" >"$stamp"
