"""Scenarios of what became of each effect (issue 55; ``tests/scenarios.py`` records them with
the rest): a task cancelled with a reason."""

from __future__ import annotations

import contextlib
from typing import Any

from temporalio.client import WorkflowFailureError, WorkflowHandle

from tests.harness import Harness
from tests.helpers import SHOP_STEPS, eventually, task_state
from tests.sample_tools import Probe, Shop, probe_tools


async def task_cancelled(h: Harness) -> WorkflowHandle[Any, Any]:
    """A task cancelled with a reason while a step runs: its completed steps are compensated,
    it is ``cancelled`` (patch ``task-cancelled-status``) and journals why."""
    shop, probe = Shop(notify_fails=False), Probe()
    steps: list[dict[str, Any]] = [
        SHOP_STEPS[0],
        {
            "id": "slow",
            "action": {
                "kind": "tool",
                "tool": "wait",
                "arguments": {"label": "hang", "seconds": 60},
            },
            "depends_on": [SHOP_STEPS[0]["id"]],
        },
    ]
    async with h.worker(tools=[*shop.tools, *probe_tools(probe)]):
        handle = await h.start_task(steps, workflow_id="history-task-cancelled")

        async def hanging() -> bool:
            return "hang" in probe.order and len((await task_state(handle)).completion_order) == 1

        await eventually(hanging, "the second step under way")
        await handle.cancel(reason="the customer called it off")
        with contextlib.suppress(WorkflowFailureError):
            await handle.result()
    return handle


RECEIPT_SCENARIOS = {"task_cancelled": task_cancelled}
