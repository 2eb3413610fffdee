"""What a loop's workflow code costs, replayed: CPU and Python calls per loop, without noise.

    uv run python bench/workflow_calls.py [--k 25] [--replays 40] [--top 30]

Runs one orga loop of K instant ``add`` turns and one minimal loop (``bench/minimal.py``, the
same benchmark as ``bench/loop_vs_bare.py``) on the embedded dev server, then replays each
history in this process, in its own sandbox and with its own converter (no server, no model:
only the workflow code runs). It prints, per loop:

* the workflow thread's CPU inside the activations (``time.thread_time``; the median and the
  least of ``--replays`` replays);
* the Python function calls made inside the activations (counted with ``sys.setprofile``,
  one replay): a figure that does not vary from run to run, to measure a change by;
* the ``--top`` functions of orga by the calls made inside them (their own and their callees').

A worker runs the same activations once each (its sticky cache keeps the workflow), so this is
the workflow-thread part of ``loop_vs_bare``'s worker CPU; there, with the event loop and the
Temporal core on the other threads, a call costs about twice what it costs in replay. Not a
test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from temporalio.worker import _workflow as worker_workflow  # pyright: ignore[reportPrivateUsage]

from bench.loop_vs_bare import add_local, pay, run_minimal, run_orga, scripted
from bench.minimal import MinimalLoopWorkflow
from bench.setup import bench
from orga.plugin import replayer

Running = worker_workflow._RunningWorkflow  # pyright: ignore[reportPrivateUsage]
_activate = Running.activate


@contextmanager
def watched(on_activation: Callable[[Callable[[], Any]], Any]) -> Iterator[None]:
    """Every workflow activation in this process runs through ``on_activation``."""

    def activate(self: Any, act: Any) -> Any:
        return on_activation(lambda: _activate(self, act))

    Running.activate = activate  # type: ignore[method-assign]
    try:
        yield
    finally:
        Running.activate = _activate  # type: ignore[method-assign]


async def record(k: int) -> dict[str, WorkflowHistory]:
    """One orga loop and one minimal loop of K turns (after two of each to warm up)."""
    async with bench(scripted, tools=[add_local, pay]) as b:
        for _ in range(2):
            await run_orga(b, k)
            await run_minimal(b, k)
        orga, _ = await run_orga(b, k)
        minimal, _ = await run_minimal(b, k)
        return {
            "orga": await b.client.get_workflow_handle(orga).fetch_history(),
            "minimal": await b.plain.get_workflow_handle(minimal).fetch_history(),
        }


async def cpu(play: Replayer, history: WorkflowHistory, replays: int) -> list[float]:
    """The workflow thread's CPU seconds inside activations, per replay."""
    spent = [0.0]

    def timed(run: Callable[[], Any]) -> Any:
        start = time.thread_time()
        try:
            return run()
        finally:
            spent[0] += time.thread_time() - start

    for _ in range(5):
        await play.replay_workflow(history)  # warm up: imports, the sandbox's caches
    found: list[float] = []
    with watched(timed):
        for _ in range(replays):
            spent[0] = 0.0
            await play.replay_workflow(history, raise_on_replay_failure=True)
            found.append(spent[0])
    return found


async def calls(play: Replayer, history: WorkflowHistory) -> tuple[int, Counter[str]]:
    """Python and builtin calls inside activations in one replay; and, per function of orga,
    the calls made while it was on the stack."""
    total = [0]
    inside: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "c_call"):
            return
        total[0] += 1
        seen: set[str] = set()
        at: FrameType | None = frame
        while at is not None:
            code = at.f_code
            if "/orga/" in code.co_filename:
                name = f"{code.co_filename.rpartition('/orga/')[2]}:{code.co_qualname}"
                if name not in seen:
                    seen.add(name)
                    inside[name] += 1
            at = at.f_back

    def counted(run: Callable[[], Any]) -> Any:
        sys.setprofile(profile)
        try:
            return run()
        finally:
            sys.setprofile(None)

    with watched(counted):
        await play.replay_workflow(history, raise_on_replay_failure=True)
    return total[0], inside


async def main(k: int, replays: int, top: int) -> None:
    histories = await record(k)
    players = {"orga": replayer(), "minimal": Replayer(workflows=[MinimalLoopWorkflow])}
    found: dict[str, tuple[list[float], int, Counter[str]]] = {}
    for name, play in players.items():
        spent = await cpu(play, histories[name], replays)
        count, inside = await calls(play, histories[name])
        found[name] = (spent, count, inside)
    print(f"K={k}, {replays} replays: workflow-thread CPU and Python calls per loop")
    print(f"{'':<8} {'median ms':>10} {'least ms':>9} {'calls':>8} {'events':>7}")
    for name, (spent, count, _) in found.items():
        events = len(histories[name].events)
        print(
            f"{name:<8} {statistics.median(spent) * 1000:>10.2f} {min(spent) * 1000:>9.2f} "
            f"{count:>8} {events:>7}"
        )
    (orga_spent, orga_calls, inside), (base_spent, base_calls, _) = found["orga"], found["minimal"]
    print(
        f"orga / minimal: CPU {statistics.median(orga_spent) / statistics.median(base_spent):.2f}x"
        f", calls {orga_calls / base_calls:.2f}x"
    )
    print(f"\norga's functions by the calls made inside them (of {orga_calls}):")
    for name, count in inside.most_common(top):
        print(f"{count:>8}  {name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a loop's workflow code, replayed")
    parser.add_argument("--k", type=int, default=25)
    parser.add_argument("--replays", type=int, default=40)
    parser.add_argument("--top", type=int, default=30)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.k, arguments.replays, arguments.top))
