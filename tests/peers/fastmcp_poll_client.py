#!/usr/bin/env python3
"""The fastmcp 4.1.4 client as the baseline of countersign-bench.

Creates N `bench_job` tasks with fastmcp's own task API (`call_tool_task`) and lets fastmcp's own
poll loop watch each one (`ToolTask.result()` -> `_drive_to_terminal`), the way an application
built on fastmcp would. Run by `countersign-bench --fastmcp-python .ci/venv/bin/python`; it speaks
the benchmark's line protocol (crates/countersign-bench/src/client.rs): one JSON object per line on
stdout (`created`, `window_start`, `window_end`, `result`), one `ok` per line on stdin, and it
exits at once when stdin closes, so it never outlives the benchmark.

Two adjustments, both outside the poll loop being measured:
- fastmcp 4.1.4 sends no `Mcp-Name` on tasks/*; strict servers (ours, rmcp) answer -32020. Setting
  `name_param = "taskId"` on its request models makes its own SDK add the header (spec section 5).
- `tasks/get` requests are counted by wrapping `fastmcp_tasks.client._send_get`, which the poll
  loop looks up by name on every poll.

CPU and memory are read exactly as the Rust side reads them: utime + stime from /proc/self/stat,
VmHWM from /proc/self/status, the peak reset through /proc/self/clear_refs at the window start.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import sys
import threading
import time

from fastmcp import Client
from fastmcp_tasks import client as tasks_client
from fastmcp_tasks import client_models
from fastmcp_tasks.client import call_tool_task

for _request in (
    client_models.GetTaskRequest,
    client_models.UpdateTaskRequest,
    client_models.CancelTaskRequest,
):
    _request.name_param = "taskId"

MAX_STEPS = 100
CREATE_CONCURRENCY = 32


class Counts:
    polls = 0
    failures = 0
    watch_errors = 0


_original_send_get = tasks_client._send_get


async def _counted_send_get(*args, **kwargs):
    Counts.polls += 1
    try:
        return await _original_send_get(*args, **kwargs)
    except Exception:
        Counts.failures += 1
        raise


tasks_client._send_get = _counted_send_get


def emit(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def cpu_seconds() -> float:
    with open("/proc/self/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    # After ')' comes field 3 (state); utime and stime are fields 14 and 15.
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Driver:
    """Commands from the benchmark on stdin; EOF ends this process at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.loop = loop
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, line.strip())
        os._exit(3)

    async def expect(self, word: str, within: float) -> None:
        got = await asyncio.wait_for(self.queue.get(), within)
        if got != word:
            raise RuntimeError(f"expected {word!r} from the benchmark, got {got!r}")


def plans(n: int, life_ms: int, every_ms: tuple[int, int]) -> list[dict]:
    """The same per-task plans as countersign-bench's workload::changing_plans."""
    out = []
    for _ in range(n):
        every = random.randint(every_ms[0], max(every_ms))
        steps = min(max(-(-life_ms // every), 2), MAX_STEPS)
        every = max(every, -(-life_ms // steps))
        out.append({"duration_ms": steps * every, "steps": steps})
    return out


def created_at(handle) -> float:
    text = handle.create_result.created_at.replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(text).timestamp()


async def watch(handle) -> None:
    try:
        await handle.result()
    except asyncio.CancelledError:
        raise
    except Exception as error:  # a failed watch is reported, not fatal
        Counts.watch_errors += 1
        print(f"fastmcp watch of {handle.task_id} failed: {error!r}", file=sys.stderr)


async def run(args: argparse.Namespace) -> None:
    driver = Driver(asyncio.get_running_loop())
    interval = args.interval_ms / 1000
    async with Client(args.url, timeout=30) as client:
        semaphore = asyncio.Semaphore(CREATE_CONCURRENCY)
        watchers = []

        async def create(arguments: dict):
            async with semaphore:
                handle = await call_tool_task(client, "bench_job", arguments)
            # fastmcp's own loop starts right away, as it would in an application.
            watchers.append(asyncio.create_task(watch(handle)))
            return handle

        started = time.monotonic()
        handles = await asyncio.wait_for(
            asyncio.gather(
                *(create(p) for p in plans(args.tasks, args.life_ms, (args.change_min_ms, args.change_max_ms)))
            ),
            args.create_budget_s,
        )
        create_seconds = time.monotonic() - started
        emit({"phase": "created", "tasks": len(handles), "seconds": create_seconds})
        await asyncio.sleep(args.warmup_ms / 1000)

        peak_before = peak_rss_kb()
        peak_reset = reset_peak()
        emit({"phase": "window_start"})
        await driver.expect("ok", 60)
        cpu0, polls0, t0 = cpu_seconds(), Counts.polls, time.monotonic()
        await asyncio.sleep(args.seconds)
        cpu1, polls1, wall = cpu_seconds(), Counts.polls, time.monotonic() - t0
        window_end = time.time()
        peak_window = peak_rss_kb()
        emit({"phase": "window_end"})
        await driver.expect("ok", 60)

        ideal = sum(max(0.0, window_end - created_at(h)) // interval for h in handles)
        emit(
            {
                "phase": "result",
                "client": "fastmcp",
                "tasks": len(handles),
                "create_seconds": create_seconds,
                "window_seconds": wall,
                "polls_window": polls1 - polls0,
                "polls_total": polls1,
                "poll_failures": Counts.failures + Counts.watch_errors,
                "ideal_lifetime": ideal,
                "cpu_percent": (cpu1 - cpu0) / wall * 100 if wall > 0 else 0.0,
                "peak_rss_kb": max(peak_before, peak_window),
                "window_peak_rss_kb": peak_window if peak_reset else None,
                "latency": None,
            }
        )
        # The measurement is over: leave without the orderly teardown of a thousand poll loops.
        os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--interval-ms", type=int, required=True)
    parser.add_argument("--warmup-ms", type=int, required=True)
    parser.add_argument("--create-budget-s", type=float, required=True)
    parser.add_argument("--life-ms", type=int, required=True)
    parser.add_argument("--change-min-ms", type=int, required=True)
    parser.add_argument("--change-max-ms", type=int, required=True)
    args = parser.parse_args()
    try:
        asyncio.run(asyncio.wait_for(run(args), args.create_budget_s + args.warmup_ms / 1000 + args.seconds + 300))
    except BaseException as error:  # report, then leave without waiting for stragglers
        print(f"fastmcp_poll_client: {error!r}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    main()
