"""History bytes per iteration: a loop whose tool returns 2 KiB each turn, orga against bare.

    uv run python bench/history_growth.py [--iterations 50]

The conversation is resent to the model every turn. A bare workflow passes it whole to each
model-call activity, so each iteration stores the whole conversation again: history grows with
the square of the iterations. orga passes only the messages added since the previous call (the
worker keeps the rest, or reads it back from the workflow), so history grows linearly. Prints,
for loops of 10…N iterations, the history size and the bytes added per iteration.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.setup import bench, history_size
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.sdk import tool

RESULT = ("log line with some content " * 76)[:2048]  # 2 KiB


@tool
def read_logs(page: int) -> str:
    """Read one page of logs (2 KiB).

    Args:
        page: which page.
    """
    return RESULT


def paging_model(request: RecordedRequest) -> Turn:
    """Model ``pages-<N>``: reads N pages of logs, one per turn, then answers."""
    pages = int(request.model.removeprefix("pages-"))
    done = request.tool_results()
    if done < pages:
        return Turn(tool_calls=[("read_logs", {"page": done})])
    return Turn(text=f"read {done} pages")


async def main(iterations: int) -> None:
    async with bench(paging_model, tools=[read_logs]) as b:
        print(
            f"{'iterations':>10} {'bare KiB':>9} {'orga KiB':>9} {'ratio':>6} "
            f"{'bare B/iter':>12} {'orga B/iter':>12}"
        )
        previous: tuple[int, int, int] | None = None
        for n in range(10, iterations + 1, 10):
            bare_id = await b.bare("read the logs", f"pages-{n}", ["read_logs"])
            orga_id = await b.orga(
                "read the logs", f"pages-{n}", ["read_logs"], max_iterations=n + 1
            )
            _, bare_bytes = await history_size(b.client, bare_id)
            _, orga_bytes = await history_size(b.client, orga_id)
            if previous is None:
                bare_step, orga_step = bare_bytes / n, orga_bytes / n
            else:
                span = n - previous[0]
                bare_step = (bare_bytes - previous[1]) / span
                orga_step = (orga_bytes - previous[2]) / span
            print(
                f"{n:>10} {bare_bytes / 1024:>9.1f} {orga_bytes / 1024:>9.1f} "
                f"{orga_bytes / bare_bytes:>6.2f} {bare_step:>12.0f} {orga_step:>12.0f}"
            )
            previous = (n, bare_bytes, orga_bytes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="history bytes per iteration")
    parser.add_argument("--iterations", type=int, default=50)
    asyncio.run(main(parser.parse_args().iterations))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
