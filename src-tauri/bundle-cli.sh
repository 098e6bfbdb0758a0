#!/usr/bin/env bash
# Tauri's beforeBundleCommand (tauri.conf.json): puts the `countersign` CLI and the
# `countersign-resident` background process where the .deb's `bundle.linux.deb.files` and the
# AppImage's `bundle.linux.appimage.files` take them from (target/bundle-cli/, relative to the
# repository root, whatever CARGO_TARGET_DIR is), built with the same profile as the app
# (TAURI_ENV_DEBUG=true for `tauri build --debug`), so the package ships all three binaries (the
# app starts the resident from beside itself).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")"
profile=(--release)
dir=release
if [[ "${TAURI_ENV_DEBUG:-false}" == "true" ]]; then
  profile=()
  dir=debug
fi
# The app's own `cargo build` usually built it already; then this is a no-op.
(cd "$root" && cargo build --locked --quiet -p countersign-cli -p countersign-resident "${profile[@]}")
mkdir -p "$root/target/bundle-cli"
for bin in countersign countersign-resident; do
  install -m 0755 "$target/$dir/$bin" "$root/target/bundle-cli/$bin"
  echo "bundle-cli: packaging $target/$dir/$bin as /usr/bin/$bin"
done
