"""What the Web UI shows: summaries on every activity, current details, search attributes."""

from __future__ import annotations

from temporalio.api.sdk.v1 import WorkflowMetadata

from orga import LoopConfig, LoopInput, Message
from orga.contracts import search_attributes as sa
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.state import LoopResult
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import pending, summaries
from tests.sample_tools import transfer


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
    labels = summaries(history.events)
    assert labels == [
        "ui-agent: 1+2?",
        "resolve the loop's setup · 1 tool(s)",
        f"model {model} · iteration 1",  # which also decides the default gate for its call
        "loop timeout",  # the timer starts, and lapses: a loop that ends in time cancels nothing
        "tool add · i1_call_" + labels[4].split("call_", 1)[-1],
        f"model {model} · iteration 2",  # and for its answer
    ], "\n".join(summaries(history.events, kinds=True))
    assert metadata.current_details.startswith("**completed** · iteration 2/25 · 30/100000 tokens")
    attributes = description.typed_search_attributes
    assert attributes.get(sa.AGENT_ID) == "ui-agent"
    assert attributes.get(sa.STATUS) == "completed"
    assert attributes.get(sa.ITERATION) == 2
    assert attributes.get(sa.TOTAL_TOKENS) == 30
    # Upserted when the status changes (start, end), not on every turn: one event each (the
    # SDK's own upsert of TemporalChangeVersion, with a patch's first use, aside).
    upserts = [
        e
        for e in history.events
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
        and "TemporalChangeVersion"
        not in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
    ]
    assert len(upserts) == 2
    assert not any(e.HasField("timer_canceled_event_attributes") for e in history.events)


async def test_summaries_name_the_effective_model_and_every_timer(harness: Harness) -> None:
    """A loop that names no model shows the worker's default in every model summary (and in its
    state and result); the loop timeout and each approval wait are labelled timers."""
    default = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 1, "to": "x"})]), Turn(text="done")]
    )
    settings = scripted_settings(harness.model)
    openai = settings.providers["openai"].model_copy(update={"default_model": default})
    settings = settings.model_copy(update={"providers": {**settings.providers, "openai": openai}})
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay x", tools=["transfer"])
        state = await pending(handle)
        assert (state.provider, state.model) == ("openai", default)
        [waiting] = state.pending_approvals
        await handle.execute_update(
            "approve", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="ui")
        )
        result = await handle.result()
        history = await handle.fetch_history()
    assert (result.provider, result.model) == ("openai", default)
    labels = summaries(history.events)
    assert f"model {default} · iteration 1" in labels
    assert f"model {default} · iteration 2" in labels
    timers = [
        label.removeprefix("timer_started_event_attributes: ")
        for label in summaries(history.events, kinds=True)
        if label.startswith("timer_started_event_attributes: ")
    ]
    assert "loop timeout" in timers
    assert f"approval timeout · transfer {waiting.call_id}" in timers
