"""What the Web UI shows: summaries on every activity, current details, search attributes."""

from __future__ import annotations

from typing import Any

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.contrib.pydantic import pydantic_data_converter

from orga import LoopConfig, LoopInput, Message
from orga.cli.scripted_model import Turn
from orga.contracts import search_attributes as sa
from orga.contracts.state import LoopResult
from tests.harness import Harness


def summaries(events: Any) -> list[str]:
    convert = pydantic_data_converter.payload_converter
    found: list[str] = []
    for event in events:
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            found.append(convert.from_payloads([event.user_metadata.summary])[0])
    return found


async def test_summaries_details_and_search_attributes(harness: Harness) -> None:
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 1, "b": 2})]), Turn(text="3")])
    async with harness.worker():
        handle = await harness.client.start_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content="1+2?")],
                config=LoopConfig(model=model, tools=["add"], agent_id="ui-agent"),
            ),
            id=f"ui-{harness.task_queue}",
            task_queue=harness.task_queue,
            result_type=LoopResult,
            static_summary="ui-agent: 1+2?",
        )
        harness.handles.append(handle)
        await handle.result()
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        description = await handle.describe()
        history = await handle.fetch_history()
    assert await description.static_summary() == "ui-agent: 1+2?"
    assert summaries(history.events) == [
        "ui-agent: 1+2?",
        "describe 1 tool(s)",
        f"model {model} · iteration 1",
        "policy default · 1 action(s)",
        "tool add · call_" + summaries(history.events)[4].split("call_")[1],
        f"model {model} · iteration 2",
        "policy default · 1 action(s)",
    ]
    assert metadata.current_details.startswith("**completed** · iteration 2/25 · 30/100000 tokens")
    attributes = description.typed_search_attributes
    assert attributes.get(sa.AGENT_ID) == "ui-agent"
    assert attributes.get(sa.STATUS) == "completed"
    assert attributes.get(sa.ITERATION) == 2
    assert attributes.get(sa.TOTAL_TOKENS) == 30
