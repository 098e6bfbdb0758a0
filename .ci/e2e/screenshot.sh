#!/usr/bin/env bash
# Launches the built app with the built-in demo server (--demo, its own throwaway ledger) inside a
# private session (.ci/with-session.sh) and saves a screenshot of the whole X screen after
# SETTLE_SECONDS, optionally after typing ROUTE keys (1 inbox, 2 tasks, 3 servers, 4 call, 5 audit).
# Usage: .ci/e2e/screenshot.sh OUT.png [ROUTE] [SETTLE_SECONDS]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(realpath -m "${1:?usage: screenshot.sh OUT.png [ROUTE] [SECONDS]}")"
route="${2:-}"
settle="${3:-8}"
app="${COUNTERSIGN_APP:-${CARGO_TARGET_DIR:-$root/target}/debug/countersign-desktop}"

if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  exec "$root/.ci/with-session.sh" "$0" "$@"
fi

data="$(mktemp -d /tmp/countersign-shot.XXXXXX)"
log="$data/app.log"
"$app" --demo --data-dir "$data/ledger" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
sleep "$settle"
if [[ -n "$route" ]]; then
  # Keyboard navigation, as a user would: the number keys switch sections.
  xdotool search --sync --onlyvisible --name Countersign windowactivate --sync >/dev/null 2>&1 || true
  xdotool type --delay 80 "$route"
  sleep 1
fi
kill -0 "$pid" 2>/dev/null || { echo "app exited early:" >&2; cat "$log" >&2; exit 1; }
import -window root "$out"
