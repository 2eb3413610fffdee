"""The loop end to end on a real dev server: tools, answers, and what the queries show."""

from __future__ import annotations

from orga.contracts.journal import Journal
from orga.contracts.state import LoopState
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import eventually


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
        "CallReceipt",
        "ReasoningComplete",
        "PolicyEvaluated",
        "Terminated",
    ]
    second = harness.model.requests_for(model)[1].body
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "5"


async def test_a_new_worker_rebuilds_the_conversation_from_the_workflow(harness: Harness) -> None:
    """Worker A serves the first model call and the tool; worker B, with an empty cache, the
    second model call: it must read the conversation back through the workflow's query."""
    from tests.sample_tools import Probe, probe_tools

    probe = Probe()
    tools = probe_tools(probe)
    model = harness.new_model(
        [
            Turn(text="waiting", tool_calls=[("wait", {"label": "w", "seconds": 1.0})]),
            Turn(text="done"),
        ]
    )
    async with harness.worker(tools=tools):
        handle = await harness.start("please wait", model=model, tools=["wait"])
        await eventually(lambda: "w" in probe.order, "the tool started")
    # Worker A shut down gracefully after the tool finished; B takes over.
    async with harness.worker(tools=tools):
        result = await handle.result()
    assert result.output == "done"
    second = harness.model.requests_for(model)[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[0]["content"] == "please wait" and second[1]["content"] == "waiting"
