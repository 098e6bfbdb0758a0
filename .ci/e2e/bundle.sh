# Sourced by deb.sh and appimage.sh: builds one debug bundle with the Tauri CLI and names it.
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
