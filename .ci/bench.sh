#!/usr/bin/env bash
# The benchmark of the durable task engine (crates/countersign-bench). It prints a table and
# asserts nothing: the numbers depend on the machine and on what else runs on it.
#
#   bash .ci/bench.sh           full run (the README's numbers): release build; N=1,000 and
#                               10,000 live tasks for 60 s each, a cold resume of 10,000 tasks,
#                               and the fastmcp 4.1.4 client side by side at N=1,000 (installs
#                               .ci/venv if needed), the real-server workload (SSE replies,
#                               a change on every poll) and the legacy era (calm's traffic on
#                               the 2025-11-25 demo server, beside calm) at both N. About 11
#                               minutes after the build, then the stdio tables (20 s idle windows).
#   bash .ci/bench.sh --quick   what CI runs: N=1,000 for 20 s and a resume of 2,000 tasks, no
#                               Python side, then the stdio tables with 5 s idle windows (~20 s
#                               more); about 55 s. Debug build, i.e. the one `.ci/test` has
#                               just made (a release build of the workspace costs 6-9 minutes on
#                               a 2-core machine, too much for a smoke run; CPU figures of a debug
#                               build are ~7x those of release, and the table says which it is).
#
# Where `perf stat` can count syscall tracepoints (as root here), the engine runs under it and
# the tables add its fsync/fdatasync, connect, epoll_wait and futex calls; elsewhere they say "—".
#
# Both modes end with `countersign-bench stdio` (the gateway in front of server-filesystem vs.
# direct stdio; `countersign watch` idle with 0 vs. 5 stdio servers; not with --json), which
# needs .ci/tools (installed here if missing) and the `countersign` binary of the same profile.
#
# Other arguments go to countersign-bench (`--tasks`, `--seconds`, `--json`, ...; see --help).
# BENCH_PROFILE=release|debug overrides the build profile.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

quick=false
json=false
for arg in "$@"; do
  if [[ "$arg" == "--quick" ]]; then quick=true; fi
  if [[ "$arg" == "--json" ]]; then json=true; fi
done
if [[ -n "${BENCH_PROFILE:-}" ]]; then
  profile="$BENCH_PROFILE"
elif $quick; then
  profile=debug
else
  profile=release
fi

case "$profile" in
  release) cargo build --release --locked -p countersign-bench -p countersign-cli; bin="${CARGO_TARGET_DIR:-target}/release/countersign-bench" ;;
  debug) cargo build --locked -p countersign-bench -p countersign-cli; bin="${CARGO_TARGET_DIR:-target}/debug/countersign-bench" ;;
  *) echo "bench.sh: BENCH_PROFILE must be release or debug, not $profile" >&2; exit 64 ;;
esac

bash .ci/setup-tools.sh
peer=()
idle=20
if $quick; then
  idle=5
else
  bash .ci/setup-peer.sh
  peer=(--fastmcp-python .ci/venv/bin/python --fastmcp-script tests/peers/fastmcp_poll_client.py)
fi

# The binary bounds its own run (a watchdog from its parameters) and kills its child processes
# on every exit path; `timeout` is the last resort should the driver itself wedge.
timeout --kill-after=30 3600 "$bin" "${peer[@]}" "$@"
# Its tables are Markdown, not JSON: with --json only the driver's document goes to stdout.
if ! $json; then
  echo
  timeout --kill-after=30 600 "$bin" stdio --idle-seconds "$idle" --tools .ci/tools
fi
