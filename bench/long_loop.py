"""Flat in length: orga's turn 300 against its turn 5, and the minimal loop's beside it.

    uv run python bench/long_loop.py [--turns 300] [--runs 3]

One loop of N tool turns (continue-as-new included: ``max_history_events`` as configured) on
the tuned embedded dev server, against an instant scripted model over HTTP on 127.0.0.1. For
every turn it reads from the history (every run of the loop) the time the workflow spent
between its steps — from a model call's completion to the tool's scheduling, and from the
tool's completion to the next model call's scheduling — which is orga's own overhead per turn,
without the model's or the tool's time. It prints the median of turns 1-10 and of the last ten,
their ratio (target ≤ 1.10), and the same for the minimal loop a Temporal user writes (which
never continues as new, so its history and replay grow with every turn). Medians over
``--runs`` loops each. Not a test: ``tests/test_long_loops.py`` guards what a turn writes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from bench.setup import bench
from orga.scripted.server import RecordedRequest, Turn


def counting_model(request: RecordedRequest) -> Turn:
    """Model ``turns-<N>``: adds one, N times, then answers."""
    turns = int(request.model.removeprefix("turns-"))
    done = request.tool_results()
    if done < turns:
        return Turn(tool_calls=[("add", {"a": done, "b": 1})])
    return Turn(text=f"added {done} times")


def _seconds(event: HistoryEvent) -> float:
    return event.event_time.seconds + event.event_time.nanos / 1e9


async def between_steps(client: Client, workflow_id: str) -> list[float]:
    """Milliseconds the workflow spent between steps, per turn, across every run."""
    handle = client.get_workflow_handle(workflow_id)
    run_id: str | None = (
        await handle.describe()
    ).raw_description.workflow_execution_info.first_run_id
    per_turn: list[float] = []
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        names: dict[int, str] = {}
        completed: dict[str, float] = {}
        gap = 0.0
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                name = event.activity_task_scheduled_event_attributes.activity_type.name
                names[event.event_id] = name
                if "tool" in completed and name.endswith("call_model"):
                    gap += _seconds(event) - completed.pop("tool")
                    per_turn.append(gap * 1000)
                    gap = 0.0
                elif "model" in completed and name.endswith("run_tool"):
                    gap += _seconds(event) - completed.pop("model")
            elif event.HasField("activity_task_completed_event_attributes"):
                scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
                name = names.get(scheduled, "")
                completed["model" if name.endswith("call_model") else "tool"] = _seconds(event)
        last = history.events[-1]
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return per_turn


def _row(name: str, turns: list[list[float]]) -> None:
    early = statistics.median(t for run in turns for t in run[:10])
    late = statistics.median(t for run in turns for t in run[-10:])
    print(f"{name:>8} {early:>12.1f} {late:>12.1f} {late / early:>7.2f}   (target ≤ 1.10)")


async def main(turns: int, runs: int) -> None:
    async with bench(counting_model) as b:
        orga: list[list[float]] = []
        minimal: list[list[float]] = []
        for _ in range(runs):
            loop = await b.orga(
                "count", f"turns-{turns}", ["add"],
                max_iterations=turns + 1, max_total_tokens=10_000_000, timeout=3600,
            )  # fmt: skip
            orga.append(await between_steps(b.client, loop))
            bare = await b.minimal("count", f"turns-{turns}", ["add"])
            minimal.append(await between_steps(b.plain, bare))
        print(f"one loop of {turns} tool turns, {runs} run(s); ms between steps per turn")
        print(f"{'loop':>8} {'turns 1-10':>12} {'last 10':>12} {'ratio':>7}")
        _row("orga", orga)
        _row("minimal", minimal)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="turn 300 against turn 5")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.turns, arguments.runs))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
