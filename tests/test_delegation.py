"""Delegation on a real dev server: child loops of other agents, on a budget carved from the
parent's, charged back when they return."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.client import WorkflowExecutionDescription, WorkflowHandle

from orga.contracts.config import LoopInput
from orga.contracts.journal import DelegationFinished, DelegationStarted, Journal
from orga.contracts.state import LoopResult, LoopState
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import agents_file, eventually, loop_state


async def run_lead(
    harness: Harness, tmp_path: Path, models: dict[str, str], **config: Any
) -> tuple[WorkflowHandle[Any, LoopResult], LoopResult, LoopState, Journal]:
    settings = scripted_settings(harness.model, agents_file=agents_file(tmp_path, models))
    async with harness.worker(settings=settings):
        handle = await harness.start("Write a short report.", agent_id="lead", **config)
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
    return handle, result, state, journal


async def test_a_parent_delegates_to_two_agents_in_one_turn_and_pays_for_both(
    harness: Harness, tmp_path: Path
) -> None:
    models = {
        "lead": harness.new_model(
            [
                Turn(
                    tool_calls=[
                        ("delegate", {"agent": "research", "task": "Find the figure."}),
                        (
                            "delegate",
                            {"agent": "writer", "task": "Draft an intro.", "max_tokens": 5000},
                        ),
                    ],
                    input_tokens=100,
                    output_tokens=20,
                ),
                Turn(text="report: 42, with an intro", input_tokens=300, output_tokens=30),
            ]
        ),
        "research": harness.new_model(
            [Turn(text="the figure is 42", input_tokens=700, output_tokens=50, delay=0.5)]
        ),
        "writer": harness.new_model(
            [Turn(text="Once upon a report", input_tokens=900, output_tokens=100, delay=0.5)]
        ),
    }
    handle, result, state, journal = await run_lead(harness, tmp_path, models)
    assert result.output == "report: 42, with an intro"
    # Both children's spend is charged: 120 + 330 of its own, 750 + 1000 of theirs.
    assert result.usage.total_tokens == 120 + 330 + 750 + 1000
    by_agent = {d.agent: d for d in state.delegations}
    assert by_agent["research"].status == by_agent["writer"].status == "completed"
    assert by_agent["research"].usage.total_tokens == 750
    assert by_agent["writer"].usage.total_tokens == 1000
    assert by_agent["writer"].max_tokens == 5000  # what it asked for, under what was left
    # research asked for nothing: half of what was left (writer was given 5000 out of it)
    assert by_agent["research"].max_tokens == (100_000 - 120) // 2
    assert by_agent["research"].max_iterations == 23 // 2
    # The model read both answers as the calls' results.
    second = harness.model.requests_for(models["lead"])[1]
    assert sorted(second.tool_result_texts()) == ["Once upon a report", "the figure is 42"]
    # They ran side by side (each took half a second).
    [research_call] = harness.model.requests_for(models["research"])
    [writer_call] = harness.model.requests_for(models["writer"])
    assert abs(research_call.at - writer_call.at) < 0.45
    # The model was told whom it may hand work to.
    first = harness.model.requests_for(models["lead"])[0]
    assert any(
        m["role"] == "system" and "research: Finds facts" in str(m["content"])
        for m in first.body["messages"]
    )
    started = [e for e in journal.entries if isinstance(e, DelegationStarted)]
    finished = [e for e in journal.entries if isinstance(e, DelegationFinished)]
    assert {e.agent for e in started} == {e.agent for e in finished} == {"research", "writer"}
    # The children are child workflows of the parent, each as its own agent.
    child = harness.client.get_workflow_handle(by_agent["research"].workflow_id)
    description = await child.describe()
    assert description.parent_id == handle.id
    assert description.status is not None and description.status.name == "COMPLETED"
    started_event = (await child.fetch_history()).events[0]
    [payload] = started_event.workflow_execution_started_event_attributes.input.payloads
    child_input = LoopInput.model_validate_json(payload.data)
    assert child_input.config.agent_id == "research"
    assert child_input.config.delegation_depth == 1
    harness.handles.append(child)


async def test_a_child_is_refused_when_the_parent_has_too_little_left(
    harness: Harness, tmp_path: Path
) -> None:
    models = {
        "lead": harness.new_model(
            [
                Turn(
                    tool_calls=[("delegate", {"agent": "research", "task": "Find it."})],
                    input_tokens=100,
                    output_tokens=700,
                ),
                Turn(text="I will do it myself", input_tokens=100, output_tokens=10),
            ]
        ),
        "research": harness.new_model([Turn(text="never asked")]),
        "writer": harness.new_model([]),
    }
    _, result, state, journal = await run_lead(harness, tmp_path, models, max_total_tokens=1_500)
    assert result.output == "I will do it myself"
    [refusal] = harness.model.requests_for(models["lead"])[1].tool_result_texts()
    assert "was refused" in refusal and "700 token(s)" in refusal
    assert harness.model.requests_for(models["research"]) == []  # no child was started
    [record] = state.delegations
    assert record.status == "refused" and record.usage.total_tokens == 0
    [finished] = [e for e in journal.entries if isinstance(e, DelegationFinished)]
    assert finished.status == "refused"


async def test_a_failed_child_comes_back_as_its_typed_failure_and_is_charged(
    harness: Harness, tmp_path: Path
) -> None:
    models = {
        "lead": harness.new_model(
            [
                Turn(
                    tool_calls=[("delegate", {"agent": "writer", "task": "x", "max_iterations": 1})]
                ),
                Turn(text="the writer failed"),
            ]
        ),
        "research": harness.new_model([]),
        "writer": harness.new_model(
            [Turn(tool_calls=[("add", {"a": 1, "b": 2})], input_tokens=400, output_tokens=40)]
        ),
    }
    _, result, state, _ = await run_lead(harness, tmp_path, models)
    [failure] = harness.model.requests_for(models["lead"])[1].tool_result_texts()
    assert "failed (" in failure  # the writer has no tools and one model call: it cannot go on
    [record] = state.delegations
    assert record.status == "failed" and record.usage.total_tokens == 440
    assert result.usage.total_tokens == 15 + 15 + 440


async def test_cancelling_the_parent_cancels_its_children(harness: Harness, tmp_path: Path) -> None:
    models = {
        "lead": harness.new_model(
            [Turn(tool_calls=[("delegate", {"agent": "writer", "task": "slowly"})])]
        ),
        "research": harness.new_model([]),
        "writer": harness.new_model([Turn(text="late", delay=30)]),
    }
    settings = scripted_settings(harness.model, agents_file=agents_file(tmp_path, models))
    async with harness.worker(settings=settings):
        handle = await harness.start("Go.", agent_id="lead")

        async def delegated() -> LoopState | None:
            state = await loop_state(handle)
            return state if state.delegations else None

        [record] = (await eventually(delegated, "a delegation started")).delegations
        await eventually(lambda: harness.model.requests_for(models["writer"]), "the writer asked")
        await handle.cancel()
        child = harness.client.get_workflow_handle(record.workflow_id)

        async def ended() -> WorkflowExecutionDescription | None:
            description = await child.describe()
            running = description.status is None or description.status.name == "RUNNING"
            return None if running else description

        description = await eventually(ended, "the child loop ended")
    assert description.status is not None and description.status.name == "CANCELED"
