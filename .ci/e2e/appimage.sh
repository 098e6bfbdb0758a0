#!/usr/bin/env bash
# The AppImage: puts the project's AppImage tools where the Tauri CLI looks for them
# (.ci/setup-appimage.sh: nothing is downloaded from GitHub), builds the debug AppImage with the
# Tauri CLI (`tauri build --debug --bundles appimage`: the app with the UI embedded, the
# `countersign` CLI and the `countersign-resident` background process, the desktop entry with the
# countersign:// link handler, the icon) and runs the smoke test (.ci/e2e/appimage.mjs) against
# the AppImage itself inside a private session (.ci/with-session.sh). There is no FUSE here, so
# the AppImage runs with APPIMAGE_EXTRACT_AND_RUN=1 (its runtime extracts it to /tmp and runs it
# from there) or is unpacked with --appimage-extract.
# Env: CARGO_TARGET_DIR (default: target/), SCREENSHOTS (default: .ci/artifacts/screenshots).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")"

if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  bash "$root/.ci/setup-desktop.sh" # the Tauri CLI is a devDependency of ui/
  bash "$root/.ci/setup-appimage.sh"
  source "$here/bundle.sh"
  bundle appimage AppImage
  export COUNTERSIGN_APPIMAGE="$bundled"
  echo "appimage: testing $COUNTERSIGN_APPIMAGE ($(stat -c %s "$COUNTERSIGN_APPIMAGE") bytes)"
  exec "$root/.ci/with-session.sh" "$0" "$@"
fi

: "${COUNTERSIGN_APPIMAGE:?set by the first half of this script}"
SCREENSHOTS="$(realpath -m "${SCREENSHOTS:-$root/.ci/artifacts/screenshots}")"
E2E_WORK="$(mktemp -d /tmp/countersign-appimage.XXXXXX)"
logs="$root/.ci/artifacts/e2e"
# The app's stderr (the resident's, and so the windows' it starts): the smoke test reads it.
E2E_LOG="$logs/appimage-app-and-driver.log"
export SCREENSHOTS E2E_WORK E2E_LOG
mkdir -p "$SCREENSHOTS" "$E2E_WORK/home" "$logs"
# No FUSE on CI machines: the runtime extracts the image and runs it from there.
export APPIMAGE_EXTRACT_AND_RUN=1

source "$here/bundle.sh"
driver="$(tauri_driver)"
# The demo at 10x speed, so its approval arrives within seconds. No COUNTERSIGN_RESIDENT for the
# app: it must start the resident from beside itself, inside the AppImage.
HOME="$E2E_WORK/home" RUST_LOG=info COUNTERSIGN_DEMO_SPEED=10 env -u COUNTERSIGN_RESIDENT \
  "$driver" --port 4444 >"$E2E_LOG" 2>&1 &
driver_pid=$!
smoke_resident="$E2E_WORK/squashfs-root/usr/bin/countersign-resident"
trap smoke_cleanup EXIT

node "$here/appimage.mjs"
