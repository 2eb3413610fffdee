"""Scenarios of issue 64 (``tests/scenarios.py`` records them with the rest): a loop that
continues as new, whose next runs first ask the server what they continue (patch
``carry-from-own-run``)."""

from __future__ import annotations

from typing import Any

from temporalio.client import WorkflowHandle

from orga.scripted.server import Turn
from tests.harness import Harness


def _counter(request: Any) -> Turn:
    done = request.tool_results()
    return Turn(tool_calls=[("add", {"a": done, "b": 1})]) if done < 24 else Turn(text="24")


async def carry_from_own_run(h: Harness) -> WorkflowHandle[Any, Any]:
    """25 iterations with a 200-event history limit: several runs, each asking what it
    continues before it takes its carry."""
    model = h.new_model([_counter] * 25)
    async with h.worker():
        handle = await h.start(
            "count",
            model=model,
            tools=["add"],
            max_history_events=200,
            workflow_id="history-carry-from-own-run",
        )
        await handle.result()
    return handle


INPUT_SCENARIOS = {"carry_from_own_run": carry_from_own_run}
