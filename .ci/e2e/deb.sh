#!/usr/bin/env bash
# The installable package: builds the debug .deb with the Tauri CLI (`tauri build --debug
# --bundles deb`: the app with the UI embedded, the `countersign` CLI, the `countersign-resident`
# background process (engine, tray, notifications), the desktop entry with the
# countersign:// link handler, icons), installs it with apt-get as a person would, and runs the
# smoke test (.ci/e2e/installed.mjs) against the installed binaries inside a private session
# (.ci/with-session.sh). Run by .ci/test after the end-to-end tests.
# Env: CARGO_TARGET_DIR (default: target/), SCREENSHOTS (default: .ci/artifacts/screenshots).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")"

if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  bash "$root/.ci/setup-desktop.sh" # the Tauri CLI is a devDependency of ui/
  source "$here/bundle.sh"
  bundle deb deb
  echo "deb: installing $bundled"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  # --reinstall: the version does not change between builds, and apt would keep the old files.
  log="$(mktemp)"
  if ! DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --reinstall "$bundled" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "deb: apt-get install failed" >&2
    exit 1
  fi
  rm -f "$log"
  exec "$root/.ci/with-session.sh" "$0" "$@"
fi

export COUNTERSIGN_APP=/usr/bin/countersign-desktop
export COUNTERSIGN_CLI=/usr/bin/countersign
export COUNTERSIGN_RESIDENT=/usr/bin/countersign-resident
export SCREENSHOTS="$(realpath -m "${SCREENSHOTS:-$root/.ci/artifacts/screenshots}")"
export E2E_WORK="$(mktemp -d /tmp/countersign-deb.XXXXXX)"
mkdir -p "$SCREENSHOTS" "$E2E_WORK/home"
logs="$root/.ci/artifacts/e2e"
mkdir -p "$logs"

source "$here/bundle.sh"
driver="$(tauri_driver)"
# The demo at 10x speed, so its approval arrives within seconds.
HOME="$E2E_WORK/home" RUST_LOG=info COUNTERSIGN_DEMO_SPEED=10 "$driver" --port 4444 >"$logs/installed-app-and-driver.log" 2>&1 &
driver_pid=$!
smoke_resident="$COUNTERSIGN_RESIDENT"
trap smoke_cleanup EXIT

node "$here/installed.mjs"
