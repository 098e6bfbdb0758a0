#!/usr/bin/env bash
# The desktop app's tests: the builds, then the end-to-end tests in a real window
# (.ci/e2e/e2e.mjs) inside a private session (.ci/with-session.sh: Xvfb, D-Bus, dunst, unlocked
# gnome-keyring), against the fastmcp peer and a token-protected demo server.
# Env: CARGO_TARGET_DIR (default: target/), SCREENSHOTS (default: .ci/artifacts/screenshots).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")"

if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  bash "$root/.ci/setup-desktop.sh"
  bash "$root/.ci/setup-peer.sh"
  echo "e2e: UI build"
  (cd "$root/ui" && npm run build --silent >/dev/null)
  echo "e2e: building the app, the resident and the CLI (into $target)"
  # The shell's own tests (IPC contract, bindings drift, capabilities) run in the workspace's
  # `cargo test`; here the app is built as people run it, with the UI embedded.
  (cd "$root" && CARGO_TARGET_DIR="$target" cargo build --locked --quiet -p countersign-desktop -p countersign-resident -p countersign-cli --features countersign-desktop/custom-protocol)
  exec "$root/.ci/with-session.sh" "$0" "$@"
fi

export COUNTERSIGN_APP="$target/debug/countersign-desktop"
export COUNTERSIGN_CLI="$target/debug/countersign"
export COUNTERSIGN_RESIDENT="$target/debug/countersign-resident"
export PEER_PYTHON="$root/.ci/venv/bin/python"
export SCREENSHOTS="$(realpath -m "${SCREENSHOTS:-$root/.ci/artifacts/screenshots}")"
export E2E_WORK="$(mktemp -d /tmp/countersign-e2e.XXXXXX)"
mkdir -p "$SCREENSHOTS" "$E2E_WORK/home"
logs="$root/.ci/artifacts/e2e"
mkdir -p "$logs"

driver="${CARGO_HOME:-$HOME/.cargo}/bin/tauri-driver"
command -v tauri-driver >/dev/null 2>&1 && driver="$(command -v tauri-driver)"
# The test browser of the OAuth sign-in: it follows the authorization URL (the peer's authorize
# endpoint approves at once) and delivers the redirect to the app's loopback listener, as a
# person's browser would after approving.
browser="$E2E_WORK/test-browser.sh"
cat >"$browser" <<'SH'
#!/bin/sh
loc=$(curl -s -o /dev/null -w '%{redirect_url}' "$1") && curl -s -o /dev/null "$loc"
SH
chmod +x "$browser"
# The app opens a sign-in as every face opens a link (core::browser): $BROWSER first, set below.
# The app inherits this environment: a scratch HOME keeps its Downloads (audit exports) out of
# the real one; RUST_LOG=info puts its log (never a token) next to the screenshots; BROWSER is
# where it opens a sign-in.
# E2E_DRIVER_PORT: another port when a second run shares the machine (4444 and 4445 by default).
port="${E2E_DRIVER_PORT:-4444}"
export TAURI_DRIVER_URL="http://127.0.0.1:$port"
HOME="$E2E_WORK/home" RUST_LOG=info BROWSER="$browser" "$driver" --port "$port" --native-port "$((port + 1))" >"$logs/app-and-driver.log" 2>&1 &
driver_pid=$!
cleanup() {
  # The residents the window sessions started (one per data directory) end as the tray's Quit
  # ends them.
  find "$E2E_WORK" -name resident.sock 2>/dev/null | while read -r sock; do
    "$COUNTERSIGN_RESIDENT" --quit --data-dir "$(dirname "$sock")" 2>/dev/null || true
  done
  kill "$driver_pid" 2>/dev/null || true
  wait "$driver_pid" 2>/dev/null || true
  rm -rf "$E2E_WORK"
}
trap cleanup EXIT

echo "e2e: keyring round trip against the session's real Secret Service"
(cd "$root" && CARGO_TARGET_DIR="$target" cargo test --locked -p countersign-core --lib secrets -- --ignored)
echo "e2e: the CLI's tokens through the session's Secret Service (each server its own, never another's)"
(cd "$root" && CARGO_TARGET_DIR="$target" cargo test --locked -p countersign-tests --test it -- --ignored keyring::)

status=0
node "$here/e2e.mjs" || status=$?
echo "e2e: the Settings page (autostart entry, do-not-disturb in the real daemon, poll floor, gateway)"
E2E_HOME="$E2E_WORK/home" node "$here/settings.mjs" || status=$?
echo "e2e: a stdio server added with the Add server form's Command choice (server-everything on stdio)"
E2E_CI_TOOLS="${COUNTERSIGN_CI_TOOLS:-$root/.ci/tools}" node "$here/stdio.mjs" || status=$?
echo "e2e: background mode (window closed: WebKit's processes end, the engine goes on; reopening)"
E2E_LOGS="$logs" node "$here/background.mjs" || status=$?
echo "e2e: the tray menu over D-Bus (Open rebuilds the window, Quit ends every process)"
E2E_LOGS="$logs" node "$here/tray.mjs" || status=$?
# Last: building the shell's tests relinks target/debug/countersign-desktop without the UI
# embedded (no custom-protocol), which the window tests above must not run (deb.sh builds its own).
echo "e2e: the window's sign-in commands against the OAuth peer (no token in any IPC payload)"
(cd "$root" && CARGO_TARGET_DIR="$target" COUNTERSIGN_PEER_PYTHON="$root/.ci/venv/bin/python" cargo test --locked -p countersign-desktop --test ipc -- --ignored) || status=$?
# A token must never reach a log either.
# (csa_: agent tokens, the one created in the window and the demo agent's.)
if grep -qs "e2e-fastmcp-\|e2e-demo-\|csa_" "$logs/app-and-driver.log" "$logs/background-app.log" "$logs/tray-app.log"; then
  echo "FAIL a bearer token appears in the app's log ($logs/app-and-driver.log)" >&2
  status=1
fi
exit "$status"
