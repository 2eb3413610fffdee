"""What the stored begun-effect mark costs a tool call with effects (issue 63).

Before a tool with effects runs, its activity sends the mark as a heartbeat and waits for the
server's answer (``orga.tools._outcomes.mark_began``), so that a worker lost right after the
effect leaves the mark behind. A pure tool sends none. This runs orga loops of K calls of the
same instant tool, declared pure and declared ``serial``, alternating, on the tuned embedded
server, and prints the median time per call of each and their difference — the mark's price.

    uv run python bench/effect_mark.py [--k 10] [--loops 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable

from bench.setup import bench
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.sdk import tool


@tool(name="note_pure")
async def note_pure(n: int) -> str:
    """Note a number (no effect).

    Args:
        n: the number.
    """
    return f"noted {n}"


@tool(name="note_marked", serial=True)
async def note_marked(n: int) -> str:
    """Note a number (an effect: marked before it runs).

    Args:
        n: the number.
    """
    return f"noted {n}"


def responder(k: int) -> Callable[[RecordedRequest], Turn]:
    """The scripted model: K calls of the tool it was offered, then an answer."""

    def respond(request: RecordedRequest) -> Turn:
        done = request.tool_results()
        tool_name = str(request.body.get("tools", [{}])[0].get("function", {}).get("name", ""))
        if done < k:
            return Turn(tool_calls=[(tool_name, {"n": done})])
        return Turn(text="done")

    return respond


async def main(k: int, loops: int) -> None:
    async with bench(responder(k), tools=[note_pure, note_marked]) as b:
        times: dict[str, list[float]] = {"note_pure": [], "note_marked": []}
        for round_ in range(loops + 2):
            for name in ("note_pure", "note_marked"):
                started = time.perf_counter()
                await b.orga("note them", model=f"bench-{name}", tools=[name])
                if round_ >= 2:  # the first two warm the worker up
                    times[name].append((time.perf_counter() - started) / k)
    pure = statistics.median(times["note_pure"]) * 1000
    marked = statistics.median(times["note_marked"]) * 1000
    print(f"per call, median of {loops} loops of {k} calls each (same run, alternating):")
    print(f"  pure tool            {pure:6.2f} ms")
    print(f"  tool with effects    {marked:6.2f} ms")
    print(f"  the stored mark      {marked - pure:+6.2f} ms a call ({marked / pure:.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="What the stored begun-effect mark costs.")
    parser.add_argument("--k", type=int, default=10, help="tool calls per loop")
    parser.add_argument("--loops", type=int, default=30, help="loops of each kind")
    given = parser.parse_args()
    asyncio.run(main(given.k, given.loops))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
