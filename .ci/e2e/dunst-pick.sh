#!/usr/bin/env bash
# dunst's `dmenu` for the tests: instead of asking a person, picks the context-menu line (dunst
# writes one per action, e.g. "#Approve (demo · deploy_service) [4,approve]", the last without a
# newline) that contains the text in $XDG_RUNTIME_DIR/dunst-pick, which a test writes before
# `dunstctl context`. Nothing written, or no line matches: picks nothing (exit 1), as a person
# pressing Escape. The lines offered go to $XDG_RUNTIME_DIR/dunst-menu.log.
set -euo pipefail
pick_file="${XDG_RUNTIME_DIR:?}/dunst-pick"
[[ -s "$pick_file" ]] || exit 1
want="$(cat "$pick_file")"
rm -f "$pick_file"
while IFS= read -r line || [[ -n "$line" ]]; do
  printf '%s\n' "$line" >>"${XDG_RUNTIME_DIR}/dunst-menu.log"
  if [[ "$line" == *"$want"* ]]; then
    printf '%s\n' "$line"
    exit 0
  fi
done
exit 1
