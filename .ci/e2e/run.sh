#!/usr/bin/env bash
# E2E smoke: the built app, driven through tauri-driver/WebKitWebDriver inside a private session
# (Xvfb, D-Bus, dunst, gnome-keyring). Build first: cargo build -p countersign-desktop.
# Env: CARGO_TARGET_DIR (where the app was built), E2E_OUT (screenshots; default .ci/artifacts/e2e).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  exec "$root/.ci/with-session.sh" "$0" "$@"
fi

export COUNTERSIGN_APP="${COUNTERSIGN_APP:-$(realpath "${CARGO_TARGET_DIR:-$root/target}/debug/countersign-desktop")}"
export COUNTERSIGN_SEED="${COUNTERSIGN_SEED:-$here/seed.json}"
export E2E_OUT="${E2E_OUT:-$root/.ci/artifacts/e2e}"
mkdir -p "$E2E_OUT"

driver="${CARGO_HOME:-$HOME/.cargo}/bin/tauri-driver"
command -v tauri-driver >/dev/null 2>&1 && driver="$(command -v tauri-driver)"
"$driver" --port 4444 >"$E2E_OUT/tauri-driver.log" 2>&1 &
driver_pid=$!
trap 'kill "$driver_pid" 2>/dev/null || true; wait "$driver_pid" 2>/dev/null || true' EXIT

node "$here/smoke.mjs"
