#!/usr/bin/env bash
# The project's stand-in for linuxdeploy, the tool the Tauri CLI's AppImage bundler runs (and
# otherwise downloads from GitHub, which this project's machines cannot reach). It is the AppRun of
# a small AppImage that .ci/setup-appimage.sh builds and puts where the bundler looks for
# `linuxdeploy-07333c6-x86_64.AppImage`; the bundler runs it as
#   OUTPUT=<file.AppImage> ARCH=x86_64 linuxdeploy --appimage-extract-and-run --verbosity N
#     --appdir <Product.AppDir> --plugin gtk [--plugin gstreamer] --output appimage
# (the runtime takes `--appimage-extract-and-run` itself). It does what linuxdeploy's
# `--output appimage` step does: checks the AppDir the bundler laid out (AppRun, the desktop
# entry and its icon at the top), packs it with mksquashfs (Debian's squashfs-tools) and writes
# the AppImage type-2 runtime (from the `appimage` crate on crates.io, carried inside this
# stand-in beside this script) followed by the SquashFS image to $OUTPUT.
# What it does not do: deploy shared libraries or GTK/GStreamer modules into the AppDir
# (linuxdeploy and its plugins do; none of them is in a registry we reach). The AppImage therefore
# runs against the system's WebKitGTK 4.1 and GTK 3, as the .deb does (README, "AppImage").
# Env: OUTPUT (required), ARCH (x86_64 only), SQUASHFS_COMP (gzip or xz, the two the runtime
# reads; default gzip).
set -euo pipefail

say() { echo "linuxdeploy (countersign stand-in): $*" >&2; }
die() { say "$*"; exit 1; }

here="${APPDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
runtime="$here/runtime-x86_64"

appdir="" output="" plugins=()
while (($#)); do
  case "$1" in
    --appdir) appdir="${2:?--appdir needs a value}"; shift 2 ;;
    --appdir=*) appdir="${1#*=}"; shift ;;
    --output) output="${2:?--output needs a value}"; shift 2 ;;
    --output=*) output="${1#*=}"; shift ;;
    --plugin) plugins+=("${2:?--plugin needs a value}"); shift 2 ;;
    --plugin=*) plugins+=("${1#*=}"); shift ;;
    --verbosity) shift 2 ;;
    --verbosity=*|-v*) shift ;;
    --appimage-extract-and-run) shift ;;
    *) die "unsupported argument: $1 (this stand-in knows what the Tauri bundler passes)" ;;
  esac
done

[[ -n "$appdir" && -d "$appdir" ]] || die "--appdir must name a directory (got '${appdir}')"
[[ "$output" == appimage ]] || die "only --output appimage is supported (got '${output}')"
[[ -n "${OUTPUT:-}" ]] || die "OUTPUT (the AppImage to write) must be set"
[[ "${ARCH:-x86_64}" == x86_64 ]] || die "only x86_64 is supported (ARCH=${ARCH})"
[[ -f "$runtime" ]] || die "the AppImage runtime is missing: $runtime"
if ((${#plugins[@]})); then
  say "not running plugins (${plugins[*]}): the AppImage uses the system's GTK and WebKitGTK"
fi
appdir="$(cd "$appdir" && pwd)"

# The AppDir's top, as the AppImage spec wants it: AppRun, one desktop entry, its icon.
[[ -x "$appdir/AppRun" ]] || die "$appdir/AppRun is missing or not executable"
shopt -s nullglob
entries=("$appdir"/*.desktop)
shopt -u nullglob
((${#entries[@]} == 1)) || die "expected one desktop entry at the top of $appdir, found ${#entries[@]}"
entry="${entries[0]}"
# A symlink the bundler made with an absolute target would point outside the image once packed:
# make it relative to the AppDir.
if [[ -L "$entry" ]]; then
  target="$(readlink "$entry")"
  if [[ "$target" == /* ]]; then
    case "$target" in
      "$appdir"/*) ln -sfn "${target#"$appdir"/}" "$entry" ;;
      *) die "$entry points outside the AppDir: $target" ;;
    esac
  fi
fi
[[ -f "$entry" ]] || die "$entry is a dangling link"
grep -q '^\[Desktop Entry\]' "$entry" || die "$entry has no [Desktop Entry] group"
exec_line="$(sed -n 's/^Exec=//p' "$entry" | head -n1)"
[[ -n "$exec_line" ]] || die "$entry has no Exec="
exe="${exec_line%% *}"
[[ -x "$appdir/usr/bin/$exe" ]] || die "$entry runs $exe, which is not in $appdir/usr/bin"
icon="$(sed -n 's/^Icon=//p' "$entry" | head -n1)"
[[ -n "$icon" ]] || die "$entry has no Icon="
# The icon the entry names must sit at the top (the spec; desktops show it). The bundler puts the
# largest square icon there as <Product>.png and .DirIcon: give it the entry's name too.
if [[ ! -e "$appdir/$icon.png" && ! -e "$appdir/$icon.svg" ]]; then
  [[ -e "$appdir/.DirIcon" ]] || die "no $icon.png at the top of $appdir, and no .DirIcon to take it from"
  cp -L "$appdir/.DirIcon" "$appdir/$icon.png"
fi

comp="${SQUASHFS_COMP:-gzip}"
[[ "$comp" == gzip || "$comp" == xz ]] || die "SQUASHFS_COMP must be gzip or xz (the runtime reads no other)"
mkdir -p "$(dirname "$OUTPUT")"
image="$(mktemp "$(dirname "$OUTPUT")/.squashfs.XXXXXX")"
trap 'rm -f "$image" "$OUTPUT.part"' EXIT
say "packing $appdir ($comp)"
mksquashfs "$appdir" "$image" -root-owned -noappend -no-progress -quiet -comp "$comp" >&2
cat "$runtime" "$image" >"$OUTPUT.part"
chmod 0755 "$OUTPUT.part"
mv -f "$OUTPUT.part" "$OUTPUT"
say "wrote $OUTPUT ($(stat -c %s "$OUTPUT") bytes; the image starts at $(stat -c %s "$runtime"))"
