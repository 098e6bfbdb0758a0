#!/usr/bin/env bash
# Installs the Python interop peer (tests/peers/fastmcp_server.py) into .ci/venv:
# python3 -m venv .ci/venv && pip install -r tests/peers/requirements.txt
# (= pip install "fastmcp[tasks]==4.1.4"). Idempotent: does nothing when the venv
# already has exactly those requirements. Quiet unless something fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.ci/venv"
req="$root/tests/peers/requirements.txt"
# Every transitive dependency pinned too, so CI installs what was tested.
constraints="$root/tests/peers/constraints.txt"
stamp="$venv/.requirements.sha256"
python="${PYTHON:-python3}"

want="$(cat "$req" "$constraints" | sha256sum | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
    && "$venv/bin/python" -c 'import fastmcp, fastmcp_tasks' >/dev/null 2>&1; then
    exit 0
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
run() {
    if ! "$@" >>"$log" 2>&1; then
        echo "setup-peer: failed: $*" >&2
        cat "$log" >&2
        exit 1
    fi
}

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    rm -rf "$venv"
    run "$python" -m venv "$venv"
fi
run "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" -c "$constraints"
run "$venv/bin/python" -c 'import fastmcp, fastmcp_tasks'
echo "$want" >"$stamp"
