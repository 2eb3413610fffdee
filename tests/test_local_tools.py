"""``@tool(local=True)``: short pure tools run as local activities — still gated, retried and
journaled, without a round trip through the server."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import EventType

from orga.contracts.approvals import ApprovalDecision
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import Journal, ObservationsCollected, PolicyEvaluated
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from tests.harness import Harness
from tests.helpers import conversation, pending, tool_results


@tool(local=True)
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


@tool(local=True)
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@tool(local=True, timeout=0.3)
async def nap() -> str:
    """Sleep longer than a local tool may."""
    await asyncio.sleep(5)
    return "rested"


@tool(local=True, requires_approval=True)
def stamp(text: str) -> str:
    """Stamp a text (a person approves each stamp)."""
    return f"[approved] {text}"


def test_a_local_tool_is_short() -> None:
    assert multiply.definition.local and multiply.definition.timeout is not None
    assert multiply.definition.timeout.total_seconds() == 10
    with pytest.raises(InvalidConfig, match="local=True allows a timeout of at most 10 s"):

        @tool(local=True, timeout=60)
        def slow() -> None:
            """Too slow to be local."""


async def test_local_tools_run_without_a_server_round_trip(harness: Harness) -> None:
    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    ("multiply", {"a": 6, "b": 7}),
                    ("divide", {"a": 1, "b": 0}),
                    ("nap", {}),
                ]
            ),
            Turn(tool_calls=[("stamp", {"text": "42"})]),
            Turn(text="42, stamped"),
        ]
    )
    async with harness.worker(tools=[multiply, divide, nap, stamp]):
        handle = await harness.start(
            "6 times 7, then stamp it",
            model=model,
            tools=["multiply", "divide", "nap", "stamp"],
            policy="default",
        )
        waiting = (await pending(handle)).pending_approvals[0]
        assert waiting.tool == "stamp"  # the gate still decides
        await handle.execute_update(
            "approve", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="ann")
        )
        result = await handle.result()
        results = tool_results(await conversation(handle))
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "42, stamped"
    product, quotient, napped, stamped = results
    assert (product.status, product.content) == ("ok", "42")
    assert quotient.status == "failed" and "ZeroDivisionError" in quotient.content
    assert napped.status == "timed_out" and "0.3 s" in napped.content
    assert stamped.content == "[approved] 42"
    assert sum(isinstance(e, PolicyEvaluated) for e in journal.entries) == 3  # two turns + answer
    assert sum(isinstance(e, ObservationsCollected) for e in journal.entries) == 2
    history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert "run_tool" not in scheduled  # no tool call went through the server's task queue
    markers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert len(markers) >= 4  # one per local tool call (besides the set-up's own)
