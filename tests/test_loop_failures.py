"""How loops end without an answer: unhandled stop reasons and hard budgets, each typed,
each journaled as Terminated, and no tool of the failing turn ever run."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from orga.contracts.journal import Journal
from orga.contracts.state import LoopState
from orga.scripted.server import Raw, Turn
from tests.harness import Harness
from tests.helpers import failure
from tests.sample_tools import Probe, probe_tools


async def last_entry(handle: Any) -> Any:
    journal = await handle.query("journal", result_type=Journal)
    return journal.entries[-1]


@pytest.mark.parametrize(
    ("provider", "step", "expected"),
    [
        ("openai", Turn(text='{"', stop="max_tokens"), "max_tokens"),
        ("anthropic", Turn(text="partial", stop="max_tokens"), "max_tokens"),
        ("anthropic", Turn(text="", stop="pause_turn"), "pause_turn"),
        ("anthropic", Turn(text="", stop="refusal"), "refusal"),
        ("openai", Turn(text="", stop="content_filter"), "refusal"),
        ("anthropic", Turn(text="cut", stop="stop_sequence"), "stop_sequence"),
        ("openai", Turn(text="??", stop="weird_new_reason"), "weird_new_reason"),
        (
            "anthropic",
            Turn(text="", stop="model_context_window_exceeded"),
            "model_context_window_exceeded",
        ),
    ],
)
async def test_unhandled_stop_reasons_fail_the_loop(
    harness: Harness, provider: str, step: Turn, expected: str
) -> None:
    model = harness.new_model([step])
    async with harness.worker():
        handle = await harness.start("go", model=model, provider=provider, tools=["add"])
        error = await failure(handle)
        entry = await last_entry(handle)
        state = await handle.query("state", result_type=LoopState)
    assert error.type == "UnhandledStopReason"
    assert expected in error.message
    assert error.details[0]["stop_reason"] == expected
    assert entry.kind == "Terminated" and entry.reason == "UnhandledStopReason"
    assert state.status == "failed" and state.last_stop_reason == expected


async def test_tool_calls_of_an_unhandled_turn_are_not_run(harness: Harness) -> None:
    """An OpenAI refusal (finish_reason "stop" plus a refusal field) and an Anthropic refusal
    that carries a tool_use block: neither runs its tool."""
    probe = Probe()
    openai_refusal = Raw(
        200,
        {
            "id": "x",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "refusal": "I can't help with that.",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "wait", "arguments": '{"label": "x"}'},
                            }
                        ],
                    },
                }
            ],
        },
    )
    anthropic_refusal = Raw(
        200,
        {
            "id": "msg",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "wait", "input": {"label": "y"}}
            ],
            "stop_reason": "refusal",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    )
    async with harness.worker(tools=probe_tools(probe)):
        for provider, step in (("openai", openai_refusal), ("anthropic", anthropic_refusal)):
            model = harness.new_model([step])
            handle = await harness.start("go", model=model, provider=provider, tools=["wait"])
            error = await failure(handle)
            assert error.type == "UnhandledStopReason"
            assert error.details[0]["stop_reason"] == "refusal"
            assert error.details[0]["tool_calls_not_run"] == ["wait"]
    assert probe.order == []


async def test_max_iterations(harness: Harness) -> None:
    probe = Probe()
    model = harness.new_model(
        [Turn(tool_calls=[("wait", {"label": f"w{i}", "seconds": 0})]) for i in range(5)]
    )
    async with harness.worker(tools=probe_tools(probe)):
        handle = await harness.start("go", model=model, tools=["wait"], max_iterations=3)
        error = await failure(handle)
        entry = await last_entry(handle)
    assert error.type == "BudgetExceeded"
    details = error.details[0]
    assert details["budget"] == "max_iterations" and details["limit"] == 3
    assert details["state"]["iteration"] == 3
    assert details["state"]["tool_call_count"] == 2
    # The third turn's calls were not run: no model call would be left to read them.
    assert probe.order == ["w0", "w1"]
    assert entry.kind == "Terminated" and entry.reason == "BudgetExceeded"


async def test_max_total_tokens(harness: Harness) -> None:
    """The second call may answer with at most what the budget leaves after its input: its
    600-token answer is cut there, and the loop ends past the budget by no more than what the
    estimate of that call's input missed."""
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 1, "b": 1})], input_tokens=60, output_tokens=6_000),
            Turn(tool_calls=[("add", {"a": 2, "b": 2})], input_tokens=80, output_tokens=6_000),
        ]
    )
    async with harness.worker():
        handle = await harness.start("go", model=model, tools=["add"], max_total_tokens=10_000)
        error = await failure(handle)
    assert error.type == "BudgetExceeded"
    assert error.details[0]["budget"] == "max_total_tokens"
    first, second = harness.model.requests_for(model)
    assert "max_tokens" not in first.body  # plenty left: the provider's own limit
    cap = second.body["max_tokens"]
    assert 0 < cap < 10_000 - 6_060  # what is left after the second call's estimated input
    total = error.details[0]["state"]["usage"]["total_tokens"]
    assert total == 6_060 + 80 + cap  # the answer was cut at the cap
    assert total - 10_000 < 80  # past the budget by less than the last call's input
    assert "was cut at the tokens left of max_total_tokens=10000" in error.message


async def test_a_call_whose_input_alone_exceeds_what_is_left_is_not_made(
    harness: Harness,
) -> None:
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 1, "b": 1})], input_tokens=40, output_tokens=9_950),
            Turn(text="never asked"),
        ]
    )
    async with harness.worker():
        handle = await harness.start("go", model=model, tools=["add"], max_total_tokens=10_000)
        error = await failure(handle)
    assert error.type == "BudgetExceeded" and error.details[0]["budget"] == "max_total_tokens"
    assert "not enough for its next model call" in error.message
    assert len(harness.model.requests_for(model)) == 1  # the provider was not asked again
    assert error.details[0]["state"]["usage"]["total_tokens"] == 9_990


async def test_timeout(harness: Harness) -> None:
    model = harness.new_model([Turn(text="too late", delay=3)])
    async with harness.worker():
        handle = await harness.start("go", model=model, timeout=1)
        error = await failure(handle)
        entry = await last_entry(handle)
    assert error.type == "BudgetExceeded"
    assert error.details[0]["budget"] == "timeout"
    assert error.details[0]["state"]["phase"] == "reasoning"
    assert entry.kind == "Terminated"


async def test_invalid_input_fails_with_a_typed_error(harness: Harness) -> None:
    async with harness.worker():
        handle = await harness.client.start_workflow(
            "ReasoningLoop",
            {"messages": [{"role": "user", "content": "x"}], "config": {"max_iteratons": 3}},
            id="invalid-input-" + harness.task_queue,
            task_queue=harness.task_queue,
        )
        harness.handles.append(handle)
        error = await failure(handle)
    assert error.type == "InvalidConfig"
    assert "config.max_iteratons: Extra inputs are not permitted" in error.message


async def test_unknown_configured_tool_is_a_config_error(harness: Harness) -> None:
    model = harness.new_model([Turn(text="unused")])
    async with harness.worker():
        handle = await harness.start("go", model=model, tools=["add", "no_such_tool"])
        error = await failure(handle)
    assert error.type == "InvalidConfig"
    assert "no_such_tool" in error.message
    assert harness.model.requests_for(model) == []


@pytest.mark.parametrize("workflow", ["ReasoningLoop", "Task"])
@pytest.mark.parametrize("given", ["just a string", [1, 2], 42, None])
async def test_input_that_is_not_an_object_fails_at_once(
    harness: Harness, workflow: str, given: object
) -> None:
    """Temporal would retry a workflow task that cannot decode its input forever; orga takes
    the raw payload and fails the workflow with ``InvalidConfig`` instead."""
    async with harness.worker():
        handle = await harness.client.start_workflow(
            workflow,
            given,
            id=f"not-an-object-{uuid.uuid4().hex[:8]}",
            task_queue=harness.task_queue,
        )
        harness.handles.append(handle)
        error = await failure(handle)
    assert error.type == "InvalidConfig"
    assert "must be a JSON object" in error.message and "Nothing was run" in error.message
