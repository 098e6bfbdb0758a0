#!/usr/bin/env bash
# Measures the desktop app and prints the numbers the README quotes (no assertions): cold start
# to first paint, idle RSS with 1,000 tracked tasks, frame times scrolling 10,000 tasks. Runs in
# a private session under Xvfb (software rendering), like the E2E tests.
# Env: PROFILE (release, the default, or debug), CARGO_TARGET_DIR (default: target/).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")"
profile="${PROFILE:-release}"

if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  bash "$root/.ci/setup-desktop.sh"
  flag=(); [[ "$profile" == release ]] && flag=(--release)
  (cd "$root" && CARGO_TARGET_DIR="$target" cargo build --locked --quiet "${flag[@]}" -p countersign-desktop -p countersign-resident -p countersign-cli --features countersign-desktop/custom-protocol)
  exec "$root/.ci/with-session.sh" "$0" "$@"
fi

export COUNTERSIGN_APP="$target/$profile/countersign-desktop"
export COUNTERSIGN_CLI="$target/$profile/countersign"
export COUNTERSIGN_RESIDENT="$target/$profile/countersign-resident"
export MEASURE_WORK="$(mktemp -d /tmp/countersign-measure.XXXXXX)"
driver="${CARGO_HOME:-$HOME/.cargo}/bin/tauri-driver"
command -v tauri-driver >/dev/null 2>&1 && driver="$(command -v tauri-driver)"
"$driver" --port 4444 >"$MEASURE_WORK/driver.log" 2>&1 &
driver_pid=$!
trap 'kill "$driver_pid" 2>/dev/null || true; wait "$driver_pid" 2>/dev/null || true; rm -rf "$MEASURE_WORK"' EXIT
echo "measuring the $profile build on $(nproc) CPU(s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
node "$here/measure.mjs"
