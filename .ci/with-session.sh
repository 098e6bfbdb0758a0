#!/usr/bin/env bash
# Runs CMD inside a private desktop session: its own D-Bus session bus, a notification daemon
# (dunst, which advertises "actions"), an unlocked gnome-keyring serving the Secret Service, XDG
# dirs in a temp dir, and an X display (Xvfb) unless DISPLAY is already set.
# Usage: .ci/with-session.sh CMD [ARGS…]   (exit status: CMD's)
# Facts behind each step: shared/spec/desktop-on-linux.md.
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: $0 CMD [ARGS…]" >&2
  exit 2
fi

# Re-enter under dbus-run-session so the bus (and everything on it) dies with CMD.
if [[ -z "${COUNTERSIGN_SESSION_BUS:-}" ]]; then
  export COUNTERSIGN_SESSION_BUS=1
  exec dbus-run-session -- "$0" "$@"
fi

tmp="$(mktemp -d /tmp/countersign-session.XXXXXX)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/run" "$tmp/data" "$tmp/config/dunst" "$tmp/cache"
chmod 700 "$tmp/run"
export XDG_RUNTIME_DIR="$tmp/run" XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="$tmp/cache"

wait_for() { # wait_for SECONDS DESCRIPTION TEST-CMD…
  local deadline=$((SECONDS + $1)) what="$2"
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "with-session: $what did not come up" >&2
      return 1
    fi
    sleep 0.1
  done
}

bus_has() {
  dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.NameHasOwner "string:$1" |
    grep -q 'boolean true'
}

if [[ -z "${DISPLAY:-}" ]]; then
  exec 3>"$tmp/display"
  Xvfb -displayfd 3 -screen 0 "${COUNTERSIGN_SCREEN:-1280x800x24}" -nolisten tcp >"$tmp/xvfb.log" 2>&1 &
  pids+=($!)
  exec 3>&-
  wait_for 10 Xvfb test -s "$tmp/display"
  export DISPLAY=":$(head -n1 "$tmp/display")"
fi

# A real click on a notification runs its default action, as a person would expect.
cat >"$tmp/config/dunst/dunstrc" <<'DUNSTRC'
[global]
    mouse_left_click = do_action, close_current
    mouse_right_click = close_current
    font = DejaVu Sans 10
DUNSTRC
# The context menu (`dunstctl context`, a notification's actions) goes through a script the tests
# steer (.ci/e2e/dunst-pick.sh) instead of dmenu, which needs a person.
printf '    dmenu = %s\n' "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/e2e/dunst-pick.sh" >>"$tmp/config/dunst/dunstrc"
dunst -config "$tmp/config/dunst/dunstrc" >"$tmp/dunst.log" 2>&1 &
pids+=($!)
wait_for 10 "dunst (org.freedesktop.Notifications)" bus_has org.freedesktop.Notifications

# gnome-keyring creates and unlocks the login keyring only with a non-empty password.
printf '%s' "${COUNTERSIGN_KEYRING_PASSWORD:-ci-password}" |
  gnome-keyring-daemon --foreground --unlock --components=secrets >"$tmp/keyring.env" 2>"$tmp/keyring.log" &
pids+=($!)
wait_for 10 "gnome-keyring (org.freedesktop.secrets)" bus_has org.freedesktop.secrets

set +e
"$@"
status=$?
set -e
exit "$status"
