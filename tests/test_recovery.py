"""Recovery strategies and circuit breakers inside running loops (real dev server)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from orga.contracts.approvals import EscalationAction, EscalationResolution
from orga.contracts.journal import EscalationResolved, Journal, RecoveryTriggered
from orga.contracts.state import LoopState
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import ask, conversation, escalated, tool_results
from tests.sample_tools import Flaky


async def recoveries(handle: Any) -> list[RecoveryTriggered]:
    journal = await handle.query("journal", result_type=Journal)
    return [e for e in journal.entries if isinstance(e, RecoveryTriggered)]


async def test_retry_strategy_retries_tool_errors(harness: Harness) -> None:
    flaky = Flaky(failures=2)
    model = harness.new_model([ask("flaky"), Turn(text="ok")])
    recovery = {
        "tools": {"flaky": {"strategy": "retry", "max_attempts": 3, "initial_interval": 0.1}}
    }
    async with harness.worker(tools=flaky.tools):
        handle = await harness.start("go", model=model, tools=["flaky"], recovery=recovery)
        await handle.result()
        [result] = tool_results(await conversation(handle))
    assert result.status == "ok" and "attempt 3" in result.content


async def test_default_llm_recovery_does_not_retry_tool_errors(harness: Harness) -> None:
    flaky = Flaky(failures=1)
    model = harness.new_model([ask("flaky"), Turn(text="ok")])
    async with harness.worker(tools=flaky.tools):
        handle = await harness.start("go", model=model, tools=["flaky"])
        await handle.result()
        [result] = tool_results(await conversation(handle))
        [used] = await recoveries(handle)
    assert result.is_error and "flaky attempt 1 failed" in result.content
    assert list(flaky.attempts.values()) == [1]
    assert (used.tool, used.strategy) == ("flaky", "llm_recovery")


async def test_fallback_answers_and_the_model_is_told(harness: Harness) -> None:
    flaky = Flaky(failures=99)
    model = harness.new_model([ask("flaky", "x"), Turn(text="ok")])
    recovery = {"tools": {"flaky": {"strategy": "fallback", "tools": ["backup"]}}}
    async with harness.worker(tools=flaky.tools):
        handle = await harness.start("go", model=model, tools=["flaky"], recovery=recovery)
        await handle.result()
        [result] = tool_results(await conversation(handle))
        [used] = await recoveries(handle)
    assert result.status == "recovered" and not result.is_error
    assert result.content.startswith("[answered by fallback tool 'backup' because 'flaky' failed")
    assert result.content.endswith("backup answer to x")
    assert used.strategy == "fallback"
    # The fallback tool was not advertised to the model.
    tools = [t["function"]["name"] for t in harness.model.requests_for(model)[0].body["tools"]]
    assert tools == ["flaky"]


async def test_cached_result(harness: Harness) -> None:
    # The lookup service goes down after its first call, by itself: the test waits on no timing.
    flaky = Flaky(failures=0, lookups_before_outage=1)
    model = harness.new_model(
        [ask("lookup", "a"), ask("lookup", "a"), ask("lookup", "b"), Turn(text="ok")]
    )
    recovery = {"default": {"strategy": "cached_result", "max_age": 600}}
    async with harness.worker(tools=flaky.tools):
        handle = await harness.start("go", model=model, tools=["lookup"], recovery=recovery)
        await handle.result()
        first, second, third = tool_results(await conversation(handle))
    assert first.status == "ok"
    # The second call's arguments equal the first's, so its cached result answers; the
    # third's do not.
    assert second.status == "recovered" and "[cached result from " in second.content
    assert second.content.endswith("looked up a")
    assert third.is_error and "no cached result" in third.content


async def test_dead_letter(harness: Harness) -> None:
    flaky = Flaky(failures=99)
    model = harness.new_model([ask("flaky", "z"), Turn(text="ok")])
    recovery = {"default": {"strategy": "dead_letter"}}
    async with harness.worker(tools=flaky.tools):
        handle = await harness.start("go", model=model, tools=["flaky"], recovery=recovery)
        await handle.result()
        state = await handle.query("state", result_type=LoopState)
        [result] = tool_results(await conversation(handle))
    [letter] = state.dead_letters
    assert (letter.tool, letter.arguments) == ("flaky", '{"query": "z"}')
    assert result.is_error and "dead-letter" in result.content


@pytest.mark.parametrize("action", ["retry", "skip", "result"])
async def test_escalate(harness: Harness, action: EscalationAction) -> None:
    flaky = Flaky(failures=1)
    model = harness.new_model([ask("flaky", "e"), Turn(text="ok")])
    recovery = {"default": {"strategy": "escalate"}}
    async with harness.worker(tools=flaky.tools):
        handle = await harness.start("go", model=model, tools=["flaky"], recovery=recovery)
        escalation_id = await escalated(handle)
        state = await handle.query("state", result_type=LoopState)
        assert state.status == "awaiting_approval"
        assert "flaky attempt 1 failed" in state.pending_escalations[0].error
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(
                escalation_id=escalation_id, action=action, result={"answer": 42}, operator="op"
            ),
        )
        await handle.result()
        [result] = tool_results(await conversation(handle))
        journal = await handle.query("journal", result_type=Journal)
    [resolved] = [e for e in journal.entries if isinstance(e, EscalationResolved)]
    assert (resolved.action, resolved.operator, resolved.source) == (action, "op", "update")
    if action == "retry":
        assert result.status == "ok" and "attempt 2" in result.content
    elif action == "skip":
        assert result.status == "skipped" and "skipped by op" in result.content
    else:
        assert result.status == "recovered" and result.content.endswith('{"answer": 42}')


async def test_escalate_abort_ends_the_loop(harness: Harness) -> None:
    flaky = Flaky(failures=5)
    model = harness.new_model([ask("flaky"), Turn(text="unused")])
    async with harness.worker(tools=flaky.tools):
        handle = await harness.start(
            "go", model=model, tools=["flaky"], recovery={"default": {"strategy": "escalate"}}
        )
        escalation_id = await escalated(handle)
        await handle.signal(
            "resolve_escalation",
            EscalationResolution(
                escalation_id=escalation_id, action="abort", reason="stop it", operator="olu"
            ),
        )
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    assert isinstance(caught.value.cause, ApplicationError)
    assert caught.value.cause.type == "Aborted" and "stop it" in caught.value.cause.message
    assert "by olu" in caught.value.cause.message


async def test_breaker_opens_refuses_and_recovers(harness: Harness) -> None:
    flaky = Flaky(failures=0, lookups_down=2)  # two failures open the breaker; then it works
    model = harness.new_model(
        [
            ask("lookup", "1"),
            ask("lookup", "2"),  # second failure: the breaker opens
            ask("lookup", "3"),  # refused
            Turn(text="waiting", tool_calls=[("lookup", {"query": "4"})], delay=1.3),
            Turn(text="done"),
        ]
    )
    breaker = {"failure_threshold": 2, "recovery_timeout": 1.0, "half_open_max_calls": 1}

    async with harness.worker(tools=flaky.tools):
        handle = await harness.start("go", model=model, tools=["lookup"], circuit_breaker=breaker)
        await handle.result()
        results = tool_results(await conversation(handle))
        state = await handle.query("state", result_type=LoopState)
    assert [r.status for r in results] == ["failed", "failed", "circuit_open", "ok"]
    assert "circuit is open after 2 consecutive failures, until " in results[2].content
    lookup = state.breakers["lookup"]
    assert lookup.state == "closed" and lookup.times_opened == 1


@pytest.mark.parametrize(
    ("kind", "status"), [("permission", "denied"), ("input", "invalid_arguments")]
)
async def test_non_retryable_tool_errors_skip_retries(
    harness: Harness, kind: str, status: str
) -> None:
    from tests.sample_tools import Guarded

    guarded = Guarded()
    model = harness.new_model([Turn(tool_calls=[("guarded", {"kind": kind})]), Turn(text="ok")])
    recovery = {"default": {"strategy": "retry", "max_attempts": 5, "initial_interval": 0.1}}
    async with harness.worker(tools=[guarded.tool]):
        handle = await harness.start("go", model=model, tools=["guarded"], recovery=recovery)
        await handle.result()
        [result] = tool_results(await conversation(handle))
    assert guarded.attempts == 1
    assert result.status == status and result.is_error
