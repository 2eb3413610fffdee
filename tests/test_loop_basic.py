"""The loop end to end on a real dev server: tools, answers, and what the queries show."""

from __future__ import annotations

from orga.journal import Journal
from orga.scripted_model import Turn
from orga.state import LoopState
from tests.harness import Harness


async def test_one_tool_then_answer(harness: Harness) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("add", {"a": 2, "b": 3})]), Turn(text="2 + 3 = 5")]
    )
    async with harness.worker():
        handle = await harness.start("What is 2+3?", model=model, tools=["add"])
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)

    assert result.output == "2 + 3 = 5"
    assert result.iterations == 2
    assert result.termination_reason == "end_turn"
    assert result.usage.total_tokens == 30
    assert result.tool_call_count == 1
    assert state.status == "completed" and state.phase == "completed"
    assert state.tool_calls[0].tool == "add" and state.tool_calls[0].status == "ok"
    kinds = [e.kind for e in journal.entries]
    assert kinds == [
        "Started",
        "ReasoningComplete",
        "PolicyEvaluated",
        "ToolsDispatched",
        "ObservationsCollected",
        "ReasoningComplete",
        "PolicyEvaluated",
        "Terminated",
    ]
    second = harness.model.requests_for(model)[1].body
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "5.0"
