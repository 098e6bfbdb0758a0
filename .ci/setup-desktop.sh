#!/usr/bin/env bash
# Installs what building and testing the desktop app needs on a Debian 12 machine:
# system packages (only the missing ones), tauri-driver (WebDriver for the E2E tests), the UI's
# npm dependencies, and the UI build (ui/dist, which the app embeds at compile time: without it
# `cargo build` of src-tauri fails). Idempotent and quiet on success; prints what it installs and
# why it fails.
# Facts behind the package list: shared/spec/desktop-on-linux.md.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  # build: WebKitGTK 4.1 for Tauri 2, libxdo (menus/shortcuts), tray (appindicator), SVG icons
  build-essential pkg-config libssl-dev
  libwebkit2gtk-4.1-dev libxdo-dev libayatana-appindicator3-dev librsvg2-dev
  # tests: a virtual display, WebDriver for WebKitGTK, a private D-Bus session with a notification
  # daemon and an unlockable Secret Service, screenshots, real clicks
  xvfb xauth webkit2gtk-driver dbus-x11 dunst libnotify-bin gnome-keyring libsecret-tools keyutils
  imagemagick fonts-dejavu-core fonts-inter xdotool
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup-desktop: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  log="$(mktemp)"
  if ! { "${sudo_cmd[@]}" apt-get update -q && \
         "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "setup-desktop: apt-get failed" >&2
    exit 1
  fi
  rm -f "$log"
fi

# tauri-driver: pinned to major 2 (crates.io already serves 3.0 pre-releases).
if ! command -v tauri-driver >/dev/null 2>&1 && [[ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/tauri-driver" ]]; then
  echo "setup-desktop: installing tauri-driver"
  cargo install tauri-driver --locked --version '^2' --quiet
fi

# UI dependencies, exactly as locked; skipped when node_modules already matches the lock.
ui="$root/ui"
if [[ -f "$ui/package-lock.json" ]]; then
  stamp="$ui/node_modules/.package-lock.json"
  if [[ ! -f "$stamp" || "$ui/package-lock.json" -nt "$stamp" ]]; then
    (cd "$ui" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
fi

# The UI build, when missing or older than its sources (cargo embeds ui/dist into the app).
if [[ -f "$ui/package.json" ]]; then
  if [[ ! -f "$ui/dist/index.html" ]] || [[ -n "$(find "$ui/src" "$ui/index.html" "$ui/package-lock.json" -newer "$ui/dist/index.html" -print -quit)" ]]; then
    echo "setup-desktop: building the UI (ui/dist)"
    (cd "$ui" && npm run build --silent >/dev/null)
  fi
fi
