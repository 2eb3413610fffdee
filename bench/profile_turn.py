"""Where a governed loop's worker CPU goes, against a bare Temporal loop: a profile.

    uv run python bench/profile_turn.py [--k 25] [--runs 10]

Runs ``--runs`` loops of K instant ``add`` turns through orga and as many bare loops (the same
benchmark as ``bench/loop_vs_bare.py``, one at a time), each under yappi's CPU clock across
every thread (the workflow activations run in a thread pool), and prints CPU ms per loop by
where the time was spent: the workflow sandbox, pydantic, Temporal's converter and protobuf,
orga's workflow code, orga's activities, HTTP, and the rest. The difference of the two columns
is what governance costs on the worker, and where. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yappi

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.loop_vs_bare import run_minimal, run_orga, scripted
from bench.setup import bench

# (category, path fragment): the first fragment found in a function's file decides.
CATEGORIES: list[tuple[str, str]] = [
    ("sandbox (import/restrict)", "worker/workflow_sandbox"),
    ("temporal workflow runtime", "temporalio/worker/_workflow_instance"),
    ("temporal converter/codec", "temporalio/converter"),
    ("temporal (other)", "temporalio/"),
    ("protobuf", "google/protobuf"),
    ("pydantic", "pydantic"),
    ("orga workflows", "/orga/workflows/"),
    ("orga core/contracts", "/orga/co"),
    ("orga activities", "/orga/activities/"),
    ("orga runtime", "/orga/runtime/"),
    ("http (httpx/httpcore/h11)", "http"),
    ("json", "/json/"),
    ("asyncio", "asyncio/"),
]


def category(function: Any) -> str:
    where = str(function.module)
    return next((name for name, part in CATEGORIES if part in where), "other")


def by_category(stats: Any) -> dict[str, float]:
    """Own CPU seconds per category (each function's time without its callees')."""
    totals: dict[str, float] = defaultdict(float)
    for function in stats:
        totals[category(function)] += function.tsub
    return totals


def by_function(stats: Any) -> dict[str, float]:
    """Own CPU seconds per function (``module:name``)."""
    totals: dict[str, float] = defaultdict(float)
    for function in stats:
        module = str(function.module).rsplit("site-packages/", 1)[-1]
        totals[f"{module}:{function.name}"] += function.tsub
    return totals


async def profiled(runner: Any, k: int, runs: int) -> tuple[dict[str, float], dict[str, float]]:
    async with bench(scripted) as b:
        for _ in range(2):
            await runner(b, k)  # warm up: sticky cache, connections, imports
        yappi.clear_stats()
        yappi.set_clock_type("cpu")
        yappi.start(builtins=True, profile_threads=True)
        for _ in range(runs):
            await runner(b, k)
        yappi.stop()
        stats = yappi.get_func_stats()
        return (
            {name: seconds / runs for name, seconds in by_category(stats).items()},
            {name: seconds / runs for name, seconds in by_function(stats).items()},
        )


async def main(k: int, runs: int, top: int) -> None:
    bare, bare_functions = await profiled(run_minimal, k, runs)
    orga, orga_functions = await profiled(run_orga, k, runs)
    names = sorted(set(bare) | set(orga), key=lambda n: -(orga.get(n, 0) - bare.get(n, 0)))
    print(f"worker CPU per loop, K={k}, {runs} loops each (ms; yappi, cpu clock, all threads)")
    print(f"{'where':<28} {'minimal':>8} {'orga':>8} {'orga-min':>10}")
    for name in names:
        b, o = bare.get(name, 0.0) * 1000, orga.get(name, 0.0) * 1000
        print(f"{name:<28} {b:>8.1f} {o:>8.1f} {o - b:>10.1f}")
    total_b, total_o = sum(bare.values()) * 1000, sum(orga.values()) * 1000
    print(f"{'total':<28} {total_b:>8.1f} {total_o:>8.1f} {total_o - total_b:>10.1f}")
    if top:
        print(f"\nthe {top} functions orga spends most more own CPU in (ms per loop)")
        extra = {
            name: orga_functions.get(name, 0.0) - bare_functions.get(name, 0.0)
            for name in set(orga_functions) | set(bare_functions)
        }
        for name in sorted(extra, key=lambda n: -extra[n])[:top]:
            b, o = bare_functions.get(name, 0.0) * 1000, orga_functions.get(name, 0.0) * 1000
            print(f"{o - b:>8.1f}  ({b:.1f} → {o:.1f})  {name[-90:]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="where orga's worker CPU goes")
    parser.add_argument("--k", type=int, default=25)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--top", type=int, default=25, help="list the top functions too")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.k, arguments.runs, arguments.top))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
