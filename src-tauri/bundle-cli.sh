#!/usr/bin/env bash
# Tauri's beforeBundleCommand (tauri.conf.json): puts the `countersign` CLI where the .deb's
# `bundle.linux.deb.files` takes it from (target/bundle-cli/countersign, relative to the
# repository root, whatever CARGO_TARGET_DIR is), built with the same profile as the app
# (TAURI_ENV_DEBUG=true for `tauri build --debug`), so the package ships both binaries.
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
(cd "$root" && cargo build --locked --quiet -p countersign-cli "${profile[@]}")
mkdir -p "$root/target/bundle-cli"
install -m 0755 "$target/$dir/countersign" "$root/target/bundle-cli/countersign"
echo "bundle-cli: packaging $target/$dir/countersign as /usr/bin/countersign"
