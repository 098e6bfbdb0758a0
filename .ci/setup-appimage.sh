#!/usr/bin/env bash
# Makes `tauri build --bundles appimage` work without GitHub: the Tauri CLI's AppImage bundler
# (tauri-bundler 2.10.6, in @tauri-apps/cli 2.12.6) runs linuxdeploy and copies an AppRun, both
# of which it downloads from GitHub unless a file of that name is already in its tools directory
# (`<cargo target dir>/.tauri/`, as tauri.conf.json sets `bundle.useLocalToolsDir`; it checks no
# hash). This script puts the project's own there, made from registry parts only:
#   AppRun-x86_64                        .ci/appimage/AppRun (the AppImage's entry point)
#   linuxdeploy-07333c6-x86_64.AppImage  a stand-in: an AppImage whose AppRun is
#                                        .ci/appimage/linuxdeploy.sh (packs the AppDir)
#   linuxdeploy-plugin-appimage.AppImage a placeholder that fails if run, so the bundler does not
#                                        try to download the real plugin (the stand-in needs none)
# The AppImage type-2 runtime (the ELF that every AppImage starts with; AppImageKit's, MIT) comes
# from the `appimage` crate on crates.io (Apache-2.0 OR MIT), which ships it as
# assets/runtime-x86_64; cargo downloads the crate, the file's SHA-256 is checked. mksquashfs comes
# from Debian's squashfs-tools.
# Idempotent; the tools are rebuilt on each run (under a second). Quiet on success but for one line.
# Env: CARGO_TARGET_DIR (the bundler's tools follow cargo's target dir), XDG_CACHE_HOME.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

runtime_crate=appimage
runtime_version=0.4.0
runtime_sha256=328e0d745c5c6817048c27bc3e8314871703f8f47ffa81a37cb06cd95a94b323
# The file names above are the ones this CLI version looks for (read with strace: the bundler
# looks for them by name, and downloads what is missing). Another version may use other names or
# check hashes: check again before changing it.
tauri_cli_version=2.12.6
linuxdeploy_name=linuxdeploy-07333c6-x86_64.AppImage

cli_version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$root/ui/node_modules/@tauri-apps/cli/package.json" 2>/dev/null | head -n1)"
if [[ "$cli_version" != "$tauri_cli_version" ]]; then
  echo "setup-appimage: @tauri-apps/cli is '${cli_version:-not installed}' in ui/node_modules, these tools are made for $tauri_cli_version (run .ci/setup-desktop.sh; after an upgrade, check the names its AppImage bundler looks for)" >&2
  exit 1
fi

# 1. Debian packages.
missing=()
for p in squashfs-tools; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup-appimage: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  log="$(mktemp)"
  if ! { DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get update -q && \
         DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "setup-appimage: apt-get failed" >&2
    exit 1
  fi
  rm -f "$log"
fi

# 2. The runtime, from the crate. A throw-away manifest that depends on it alone; the crate's own
# dependency `xcommon` (signing helpers it uses, with some 80 crates under it) is patched with an
# empty local crate, as nothing is compiled here: cargo downloads two crates, not ninety.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/countersign/appimage-runtime"
mkdir -p "$cache/manifest/src" "$cache/xcommon/src"
cat >"$cache/manifest/Cargo.toml" <<TOML
# Written by countersign's .ci/setup-appimage.sh: only fetched, never built.
[package]
name = "countersign-appimage-runtime-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$runtime_crate = "=$runtime_version"

[patch.crates-io]
xcommon = { path = "../xcommon" }

[workspace]
TOML
: >"$cache/manifest/src/lib.rs"
cat >"$cache/xcommon/Cargo.toml" <<TOML
# Written by countersign's .ci/setup-appimage.sh: stands in for the crate's signing dependency,
# which is never built here.
[package]
name = "xcommon"
version = "0.3.99"
edition = "2021"
publish = false
TOML
: >"$cache/xcommon/src/lib.rs"
metadata="$(cargo metadata --quiet --format-version 1 --manifest-path "$cache/manifest/Cargo.toml")"
crate_manifest="$(grep -o "\"manifest_path\":\"[^\"]*/$runtime_crate-$runtime_version/Cargo.toml\"" <<<"$metadata" | head -n1 | cut -d'"' -f4)"
if [[ -z "$crate_manifest" ]]; then
  echo "setup-appimage: cargo did not fetch $runtime_crate $runtime_version" >&2
  exit 1
fi
runtime_src="$(dirname "$crate_manifest")/assets/runtime-x86_64"
if [[ "$(sha256sum "$runtime_src" 2>/dev/null | cut -d' ' -f1)" != "$runtime_sha256" ]]; then
  echo "setup-appimage: $runtime_src is missing or is not the runtime expected (sha256 $runtime_sha256)" >&2
  exit 1
fi

# 3. The bundler's tools directory: <cargo's target dir>/.tauri (bundle.useLocalToolsDir).
target="$(cd "$root" && cargo metadata --quiet --no-deps --format-version 1 | grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)"
tools="$target/.tauri"
mkdir -p "$tools"

install -m 0755 "$here/appimage/AppRun" "$tools/AppRun-x86_64"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
standin="$work/linuxdeploy.AppDir"
mkdir -p "$standin"
install -m 0755 "$here/appimage/linuxdeploy.sh" "$standin/AppRun"
install -m 0644 "$runtime_src" "$standin/runtime-x86_64"
cat >"$standin/linuxdeploy.desktop" <<'DESKTOP'
[Desktop Entry]
Type=Application
Name=linuxdeploy (Countersign stand-in)
Exec=linuxdeploy
Icon=linuxdeploy
Categories=Development;
NoDisplay=true
DESKTOP
install -m 0644 "$root/icons/32x32.png" "$standin/linuxdeploy.png"
ln -s linuxdeploy.png "$standin/.DirIcon"
mksquashfs "$standin" "$work/standin.squashfs" -root-owned -noappend -no-progress -quiet -comp gzip >/dev/null
cat "$runtime_src" "$work/standin.squashfs" >"$work/linuxdeploy-x86_64.AppImage"
chmod 0755 "$work/linuxdeploy-x86_64.AppImage"
mv -f "$work/linuxdeploy-x86_64.AppImage" "$tools/$linuxdeploy_name"

cat >"$tools/linuxdeploy-plugin-appimage.AppImage" <<'PLACEHOLDER'
#!/bin/sh
# Placeholder written by countersign's .ci/setup-appimage.sh so that the Tauri bundler does not
# download linuxdeploy's AppImage plugin: the stand-in linuxdeploy beside it packs the AppImage
# itself and never runs a plugin.
echo "linuxdeploy-plugin-appimage: placeholder (see .ci/setup-appimage.sh), not a plugin" >&2
exit 1
PLACEHOLDER
chmod 0755 "$tools/linuxdeploy-plugin-appimage.AppImage"

echo "setup-appimage: AppImage tools in $tools (runtime: crate $runtime_crate $runtime_version)"
