#!/usr/bin/env bash
# Prints the accessibility checker's (axe-core) violation counts per view of the desktop app, empty
# and with data (.ci/e2e/axe.mjs), in a private session under Xvfb. Numbers only: the E2E asserts.
# Builds nothing: point COUNTERSIGN_APP/COUNTERSIGN_CLI at built binaries (default: target/debug,
# built by .ci/e2e/run.sh), e.g. to compare two builds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")"

if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  bash "$root/.ci/setup-desktop.sh"
  exec "$root/.ci/with-session.sh" "$0" "$@"
fi

export COUNTERSIGN_APP="${COUNTERSIGN_APP:-$target/debug/countersign-desktop}"
export COUNTERSIGN_CLI="${COUNTERSIGN_CLI:-$target/debug/countersign}"
export AXE_WORK="$(mktemp -d /tmp/countersign-axe.XXXXXX)"
mkdir -p "$AXE_WORK/home"
driver="${CARGO_HOME:-$HOME/.cargo}/bin/tauri-driver"
command -v tauri-driver >/dev/null 2>&1 && driver="$(command -v tauri-driver)"
port="${AXE_DRIVER_PORT:-4454}"
export TAURI_DRIVER_URL="http://127.0.0.1:$port"
HOME="$AXE_WORK/home" "$driver" --port "$port" --native-port "$((port + 1))" >"$AXE_WORK/driver.log" 2>&1 &
driver_pid=$!
trap 'kill "$driver_pid" 2>/dev/null || true; wait "$driver_pid" 2>/dev/null || true; rm -rf "$AXE_WORK"' EXIT
node "$here/axe.mjs"
