"""orga's loop against a bare Temporal workflow doing the same activities, in the same run.

    uv run python bench/loop_vs_bare.py [--runs 10] [--concurrent 20]

Both run on the tuned embedded dev server (SQLite file, WAL, transfer poll rate 1000/s) with
one in-process worker and an instant scripted model over HTTP on 127.0.0.1. For K tool calls
(one per turn, K+1 model calls) — ``orga`` with the built-in ``add``, ``local`` with the same
tool declared ``@tool(local=True)`` — it prints, per loop: median wall time and its ratio to bare,
worker CPU (this process: worker, client and the model server), history events and history
bytes, and loops/s with N loops at once. Not a test: numbers vary ±20 % on shared machines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.setup import Bench, bench, history_size
from orga.testing.scripted_model import RecordedRequest, Turn
from orga.tools.sdk import tool

PROMPT = "Add up the numbers, one tool call at a time."


@tool(local=True)
def add_local(a: float, b: float) -> float:
    """Add two numbers (declared local: a local activity, no server round trip).

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def instant_model(request: RecordedRequest) -> Turn:
    """Model ``bench-k<K>`` (or ``bench-local-k<K>``): one ``add`` (``add_local``) call per
    turn until K results, then an answer."""
    local = request.model.startswith("bench-local-")
    k = int(request.model.removeprefix("bench-local-" if local else "bench-").removeprefix("k"))
    done = request.tool_results()
    if done < k:
        return Turn(tool_calls=[("add_local" if local else "add", {"a": done, "b": 1})])
    return Turn(text=f"done after {done} calls")


@dataclass
class Measured:
    wall: float
    cpu: float
    events: int
    history_bytes: int
    throughput: float


def row(k: int, name: str, m: Measured, bare: Measured) -> str:
    return (
        f"{k:>3} {name:<6} {m.wall * 1000:>8.1f} {m.wall / bare.wall:>6.2f} "
        f"{m.cpu * 1000:>7.1f} {m.events:>7} {m.history_bytes / 1024:>9.1f} "
        f"{m.history_bytes / bare.history_bytes:>11.2f} {m.throughput:>8.1f}"
    )


async def run_orga(b: Bench, k: int) -> str:
    return await b.orga(PROMPT, f"bench-k{k}", ["add"], max_iterations=k + 1)


async def run_local(b: Bench, k: int) -> str:
    return await b.orga(PROMPT, f"bench-local-k{k}", ["add_local"], max_iterations=k + 1)


async def run_bare(b: Bench, k: int) -> str:
    return await b.bare(PROMPT, f"bench-k{k}", ["add"])


async def measure(b: Bench, runner: Any, k: int, runs: int, concurrent: int) -> Measured:
    for _ in range(2):
        await runner(b, k)  # warm up: sticky cache, connections
    walls: list[float] = []
    cpu_start = time.process_time()
    last = ""
    for _ in range(runs):
        start = time.perf_counter()
        last = await runner(b, k)
        walls.append(time.perf_counter() - start)
    cpu = (time.process_time() - cpu_start) / runs
    events, size = await history_size(b.client, last)
    start = time.perf_counter()
    await asyncio.gather(*(runner(b, k) for _ in range(concurrent)))
    throughput = concurrent / (time.perf_counter() - start)
    return Measured(statistics.median(walls), cpu, events, size, throughput)


async def main(runs: int, concurrent: int, ks: list[int]) -> None:
    async with bench(instant_model, tools=[add_local]) as b:
        print(
            f"{'K':>3} {'variant':<6} {'wall ms':>8} {'ratio':>6} {'cpu ms':>7} "
            f"{'events':>7} {'hist KiB':>9} {'bytes ratio':>11} {'loops/s':>8}"
        )
        for k in ks:
            bare = await measure(b, run_bare, k, runs, concurrent)
            orga = await measure(b, run_orga, k, runs, concurrent)
            local = await measure(b, run_local, k, runs, concurrent)
            for name, m in (("bare", bare), ("orga", orga), ("local", local)):
                print(row(k, name, m, bare))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="orga loop against a bare Temporal workflow")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--k", type=int, nargs="+", default=[10, 25])
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.concurrent, arguments.k))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
