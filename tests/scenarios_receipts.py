"""Scenarios of what became of each effect (issue 55; ``tests/scenarios.py`` records them with
the rest): a task cancelled with a reason; a call whose attempt was lost mid-call, settled by a
person; receipts of a delivered and a denied call; a task's step lost mid-effect."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowFailureError, WorkflowHandle

from orga.contracts.approvals import ApprovalDecision, EscalationResolution
from orga.runtime.pauses import PauseBook
from orga.scripted.server import Turn
from orga.tools.sdk import ToolContext, tool
from tests.harness import TEST_STORE, Harness
from tests.helpers import SHOP_STEPS, escalated, eventually, loop_state, pending, task_state
from tests.sample_tools import Probe, Shop, probe_tools, transfer


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


async def unknown_outcome(h: Harness) -> WorkflowHandle[Any, Any]:
    """A call whose first attempt times out after its effect (the outcome unknown: an
    ``unknown`` receipt, patch ``call-receipts``), settled by a person who skips it; a second
    call delivered, a third denied by a person: their receipts."""
    effects: list[int] = []

    @tool(timeout=1, serial=True)
    async def ship(parcel: int, ctx: ToolContext) -> str:
        """Ship a parcel.

        Args:
            parcel: its number.
        """
        effects.append(parcel)
        if ctx.attempt == 1 and parcel == 1:
            await asyncio.sleep(30)  # the attempt times out after the effect
        return f"shipped {parcel}"

    model = h.new_model(
        [
            Turn(tool_calls=[("ship", {"parcel": 1})]),
            Turn(tool_calls=[("ship", {"parcel": 2}), ("transfer", {"amount": 3, "to": "x"})]),
            Turn(text="done"),
        ]
    )
    async with h.worker(tools=[ship, transfer]):
        handle = await h.start(
            "ship", model=model, tools=["ship", "transfer"], workflow_id="history-unknown-outcome"
        )
        escalation = await escalated(handle)
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(escalation_id=escalation, action="skip", operator="olu"),
        )
        [waiting] = (await pending(handle)).pending_approvals
        await handle.execute_update(
            "approve",
            ApprovalDecision(call_id=waiting.call_id, approved=False, reason="no", approver="pat"),
        )
        await handle.result()
    return handle


async def tool_paused(h: Harness) -> WorkflowHandle[Any, Any]:
    """A call whose tool is paused (``orga pause --tool``) waits, unrun, and runs once after
    the resume (``CallPaused``, timers of ``pause_recheck``)."""
    book = PauseBook(TEST_STORE)

    @tool(name="history_export")
    def export(table: str) -> str:
        """Export a table.

        Args:
            table: which.
        """
        return f"exported {table}"

    book.pause("tool:history_export", "scenario", "the export service is down")
    model = h.new_model([Turn(tool_calls=[("history_export", {"table": "t"})]), Turn(text="ok")])
    async with h.worker(tools=[export]):
        handle = await h.start(
            "export",
            model=model,
            tools=["history_export"],
            pause_recheck=timedelta(seconds=1),
            workflow_id="history-tool-paused",
        )

        async def paused() -> bool:
            return (await loop_state(handle)).status == "paused"

        await eventually(paused, "the call paused")
        book.resume("tool:history_export")
        await handle.result()
    return handle


async def task_unknown_step(h: Harness) -> WorkflowHandle[Any, Any]:
    """A task's step whose first attempt times out after its effect waits for a person (patch
    ``task-unknown-step``), who says it happened."""
    effects: list[int] = []

    @tool(name="history_ship_once", timeout=1, serial=True)
    async def ship(parcel: int, ctx: ToolContext) -> str:
        """Ship a parcel.

        Args:
            parcel: its number.
        """
        effects.append(parcel)
        if len(effects) == 1:
            await asyncio.sleep(30)  # the attempt times out after the effect
        return f"shipped {parcel}"

    steps = [{"id": "ship", "action": {"kind": "tool", "tool": "history_ship_once",
                                       "arguments": {"parcel": 1}}}]  # fmt: skip
    async with h.worker(tools=[ship]):
        handle = await h.start_task(steps, tool_timeout=1, workflow_id="history-task-unknown-step")

        async def waiting() -> str | None:
            escalations = (await task_state(handle)).pending_escalations
            return escalations[0].escalation_id if escalations else None

        escalation = await eventually(waiting, "the step on the desk")
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(
                escalation_id=escalation, action="result", result="shipped 1", operator="olu"
            ),
        )
        await handle.result()
    return handle


async def receipts_by_setup_level(h: Harness) -> WorkflowHandle[Any, Any]:
    """A loop set up at ``SETUP_LEVEL`` 1: its calls' receipts with no ``call-receipts``
    marker (nor the ``TemporalChangeVersion`` upsert that comes with one) in its history."""
    model = h.new_model([Turn(tool_calls=[("add", {"a": 2, "b": 3})]), Turn(text="5")])
    async with h.worker():
        handle = await h.start("2+3?", model=model, tools=["add"], workflow_id="history-level")
        await handle.result()
    return handle


RECEIPT_SCENARIOS = {
    "receipts_by_setup_level": receipts_by_setup_level,
    "task_unknown_step": task_unknown_step,
    "task_cancelled": task_cancelled,
    "unknown_outcome": unknown_outcome,
    "tool_paused": tool_paused,
}
