#!/usr/bin/env bash
# Background-mode footprint (prints numbers, no assertions): RSS and PSS of all Countersign
# processes with the window closed and 1,000 tracked tasks, and window reopen to first paint. Runs in
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
export MEASURE_WORK="$(mktemp -d /tmp/countersign-footprint.XXXXXX)"
trap '"$COUNTERSIGN_RESIDENT" --quit --data-dir "$MEASURE_WORK/thousand" 2>/dev/null || true; rm -rf "$MEASURE_WORK"' EXIT
echo "measuring the $profile build on $(nproc) CPU(s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
node "$here/footprint.mjs"
