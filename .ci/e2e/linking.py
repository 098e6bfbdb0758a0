"""CPU time of starting each executable (dynamic linking, constructors, `main` refusing its
arguments) without and with the window process's preload, side by side: the part of a window
reopen that `core/src/resident/preload.rs` shortens. Starts alternate between the two, so a busy
machine slows both alike; prints the medians (no assertions).

Usage: linking.py PRELOAD EXE [EXE…]   (PRELOAD: the `:`-separated libraries; EXE may carry
arguments after a space, as `countersign-desktop --help`)."""

import os
import resource
import statistics
import subprocess
import sys

RUNS = 15


def cpu_ms(argv, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def main():
    preload, exes = sys.argv[1], sys.argv[2:]
    plain = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "COUNTERSIGN_PRELOAD")}
    preloaded = {**plain, "LD_PRELOAD": preload}
    print(f"CPU to start each process (median of {RUNS}, ms): without the preload → with {preload}")
    for exe in exes:
        argv = exe.split(" ")
        cpu_ms(argv, plain)  # page cache warm for both
        without, with_ = [], []
        for _ in range(RUNS):
            without.append(cpu_ms(argv, plain))
            with_.append(cpu_ms(argv, preloaded))
        a, b = statistics.median(without), statistics.median(with_)
        print(f"  {os.path.basename(argv[0]):<22} {a:6.1f} → {b:6.1f}  ({b - a:+.1f})")


if __name__ == "__main__":
    main()
