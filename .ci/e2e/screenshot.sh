#!/usr/bin/env bash
# Launches the built app with the seed inbox inside a private session (.ci/with-session.sh) and
# saves a screenshot of the whole X screen. Usage: .ci/e2e/screenshot.sh OUT.png [ROUTE] [SETTLE_SECONDS]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(realpath -m "${1:?usage: screenshot.sh OUT.png [ROUTE] [SECONDS]}")"
route="${2:-}"
settle="${3:-4}"
app="${COUNTERSIGN_APP:-${CARGO_TARGET_DIR:-$root/target}/debug/countersign-desktop}"

if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  exec "$root/.ci/with-session.sh" "$0" "$@"
fi

COUNTERSIGN_SEED="${COUNTERSIGN_SEED:-$here/seed.json}" "$app" >"${TMPDIR:-/tmp}/countersign-app.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
sleep "$settle"
if [[ -n "$route" ]]; then
  # Keyboard navigation, as a user would: the number keys switch sections.
  xdotool search --sync --onlyvisible --name Countersign windowactivate --sync >/dev/null 2>&1 || true
  xdotool type --delay 80 "$route"
  sleep 1
fi
kill -0 "$pid" 2>/dev/null || { echo "app exited early:" >&2; cat "${TMPDIR:-/tmp}/countersign-app.log" >&2; exit 1; }
import -window root "$out"
