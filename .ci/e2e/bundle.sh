# Sourced by deb.sh and appimage.sh, the bundles' smoke tests: building one debug bundle with the
# Tauri CLI, the WebDriver server, and what is left to stop when a test ends.
# `custom-protocol`: the same features as .ci/e2e/run.sh's build, so the app is not rebuilt.

# bundle KIND EXT: builds `tauri build --debug --bundles KIND` into $target/debug/bundle/KIND
# and sets `bundled` to the one *.EXT it made (exits if there is not exactly one).
bundle() {
  local kind="$1" ext="$2" dir="$target/debug/bundle/$1"
  echo "$kind: building the debug bundle (into $dir)"
  rm -rf "$dir"
  (cd "$root" && CARGO_TARGET_DIR="$target" ui/node_modules/.bin/tauri build --debug --bundles "$kind" --ci --features custom-protocol)
  local found=("$dir"/*."$ext")
  if [[ ${#found[@]} -ne 1 || ! -f "${found[0]}" ]]; then
    echo "$kind: expected one .$ext in $dir, found: ${found[*]}" >&2
    exit 1
  fi
  bundled="${found[0]}"
}

# The WebDriver server for the window (tauri-driver): on PATH, else in cargo's bin directory.
tauri_driver() {
  command -v tauri-driver 2>/dev/null || echo "${CARGO_HOME:-$HOME/.cargo}/bin/tauri-driver"
}

# On exit: quits every resident under $E2E_WORK (with the executable in `smoke_resident`), stops
# the driver (`driver_pid`) and removes $E2E_WORK. `trap smoke_cleanup EXIT`.
smoke_cleanup() {
  find "$E2E_WORK" -name resident.sock 2>/dev/null | while read -r sock; do
    "$smoke_resident" --quit --data-dir "$(dirname "$sock")" 2>/dev/null || true
  done
  kill "$driver_pid" 2>/dev/null || true
  wait "$driver_pid" 2>/dev/null || true
  rm -rf "$E2E_WORK"
}
