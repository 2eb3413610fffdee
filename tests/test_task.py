"""The Task workflow on a real dev server: order, compensation, stuck steps, limit actions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import CancelledError

from orga.contracts import search_attributes as sa
from orga.contracts.approvals import EscalationResolution
from orga.contracts.journal import Journal, StepLimitReached, Terminated
from orga.contracts.task import TaskState
from tests.harness import Harness
from tests.helpers import (
    SHOP_STEPS,
    aborted,
    eventually,
    failure,
    statuses,
    task_escalated,
    task_state,
)
from tests.sample_tools import Probe, Shop, Unreliable, probe_tools


async def test_notify_fails_and_the_first_two_are_undone_in_reverse(harness: Harness) -> None:
    shop = Shop()
    async with harness.worker(tools=shop.tools):
        handle = await harness.start_task(SHOP_STEPS, policy={"max_reattempts_per_step": 1})
        report = await aborted(handle)
    assert statuses(report) == {
        "reserve": "compensated",
        "charge": "compensated",
        "notify": "failed",
    }
    # The same error twice: stuck after two attempts.
    assert shop.names() == ["reserve", "charge", "notify", "notify", "refund", "release"]
    refund, release = shop.calls[-2], shop.calls[-1]
    assert refund[1] == {"charge_id": "CH-4200"}
    assert release[1] == {"reservation": "R-lamp"}
    # Idempotency keys: one per step (the same on every attempt), one per compensation.
    # The chain's first run id is in each key: a task started again under the same workflow id
    # never gets this execution's keys (and so never its receipts).
    keys = {name: key for name, _, key in shop.calls}
    chain = f"{handle.id}/{handle.result_run_id}"
    assert keys["reserve"] == f"{chain}/reserve"
    assert keys["refund"] == f"{chain}/charge.compensate"
    assert [k for n, _, k in shop.calls if n == "notify"] == [f"{chain}/notify"] * 2


async def test_all_steps_complete(harness: Harness) -> None:
    shop = Shop(notify_fails=False)
    async with harness.worker(tools=shop.tools):
        handle = await harness.start_task(SHOP_STEPS)
        result = await handle.result()
    assert result.status == "completed"
    assert statuses(result) == {
        "reserve": "completed",
        "charge": "completed",
        "notify": "completed",
    }
    assert "release" not in shop.names()


@pytest.mark.parametrize(("same_error", "expected_attempts"), [(True, 2), (False, 5)])
async def test_stuck_detection(harness: Harness, same_error: bool, expected_attempts: int) -> None:
    unreliable = Unreliable(same_error=same_error)
    async with harness.worker(tools=[unreliable.tool]):
        handle = await harness.start_task(
            [{"id": "flaky", "action": {"kind": "tool", "tool": "unreliable"}}],
            policy={"max_reattempts_per_step": 4, "on_limit_reached": "abort_task"},
        )
        await aborted(handle)
        journal = await handle.query("journal", result_type=Journal)
    assert unreliable.attempts == expected_attempts
    [limit] = [e for e in journal.entries if isinstance(e, StepLimitReached)]
    assert limit.step_id == "flaky" and limit.attempts == expected_attempts
    assert ("stuck" in limit.reason) is same_error


async def test_skip_step_skips_dependents_too(harness: Harness) -> None:
    shop = Shop()
    steps = [
        *SHOP_STEPS,
        {
            "id": "receipt",
            "action": {"kind": "tool", "tool": "charge", "arguments": {"amount": 1}},
            "depends_on": ["notify"],
        },
        {
            "id": "unrelated",
            "action": {"kind": "tool", "tool": "charge", "arguments": {"amount": 2}},
        },
    ]
    async with harness.worker(tools=shop.tools):
        handle = await harness.start_task(
            steps, policy={"max_reattempts_per_step": 0, "on_limit_reached": "skip_step"}
        )
        result = await handle.result()
        state = await handle.query("state", result_type=TaskState)
    assert result.status == "completed"
    assert statuses(result) == {
        "reserve": "completed",
        "charge": "completed",
        "notify": "skipped",
        "receipt": "skipped",
        "unrelated": "completed",
    }
    receipt = next(s for s in result.steps if s.id == "receipt")
    assert "depends on ['notify']" in receipt.errors[0]
    assert state.completion_order == ["reserve", "charge", "unrelated"]


@pytest.mark.parametrize("action", ["retry", "skip", "abort"])
async def test_escalate(harness: Harness, action: str) -> None:
    unreliable = Unreliable(same_error=True, succeed_after=2)
    async with harness.worker(tools=[unreliable.tool]):
        handle = await harness.start_task(
            [{"id": "flaky", "action": {"kind": "tool", "tool": "unreliable"}}],
            policy={"max_reattempts_per_step": 5, "on_limit_reached": "escalate"},
        )
        escalation = await task_escalated(handle)
        assert escalation == "flaky#1"
        with pytest.raises(WorkflowUpdateFailedError) as refused:  # a step has no result to give
            await handle.execute_update(
                "resolve_escalation",
                EscalationResolution(
                    escalation_id=escalation, action="result", result="x", operator="ops"
                ),
            )
        assert "not 'result'" in str(refused.value.cause)
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(
                escalation_id=escalation,
                action=action,  # type: ignore[arg-type]
                operator="ops",
                reason="the vendor is down",
            ),
        )
        if action == "abort":
            cause = await failure(handle, "TaskAborted")
            assert statuses(cause.details[0]) == {"flaky": "failed"}
            assert "ops aborted it at step 'flaky': the vendor is down" in cause.message
            assert cause.message.endswith("; flaky declared no compensation"), cause.message
            assert cause.details[0]["outcome"] == "compensated"  # nothing was left to undo
            return
        result = await handle.result()
    expected = {"retry": "completed", "skip": "skipped"}[action]
    assert statuses(result) == {"flaky": expected}
    if action == "retry":
        assert result.steps[0].result == "finally"


async def test_parallel_steps_overlap(harness: Harness) -> None:
    shop = Shop(notify_fails=False)
    shop.slow = 0.5
    steps = [
        {"id": "a", "action": {"kind": "tool", "tool": "reserve", "arguments": {"item": "a"}}},
        {
            "id": "b",
            "action": {"kind": "tool", "tool": "reserve", "arguments": {"item": "b"}},
            "parallel": True,
        },
    ]
    async with harness.worker(tools=shop.tools):
        handle = await harness.start_task(steps)
        started = asyncio.get_running_loop().time()
        await handle.result()
        elapsed = asyncio.get_running_loop().time() - started
    assert elapsed < 0.95  # two half-second steps side by side


@pytest.mark.parametrize("where", ["step", "child loop", "escalation"])
async def test_cancellation_still_compensates(harness: Harness, where: str) -> None:
    from orga.scripted.server import Turn

    shop = Shop(notify_fails=False)
    unreliable = Unreliable(same_error=True)
    steps: list[dict[str, Any]] = [SHOP_STEPS[0], SHOP_STEPS[1]]
    model = harness.new_model([Turn(text="thinking…", delay=30)])  # the child loop's
    if where == "step":
        steps.append(
            {
                "id": "slow",
                "action": {
                    "kind": "tool",
                    "tool": "wait",
                    "arguments": {"label": "hang", "seconds": 30},
                },
                "depends_on": ["charge"],
            }
        )
    elif where == "child loop":
        steps.append(
            {
                "id": "think",
                "action": {
                    "kind": "loop",
                    "input": {
                        "messages": [{"role": "user", "content": "hm"}],
                        "config": {"model": model},
                    },
                },
                "depends_on": ["charge"],
            }
        )
    else:
        steps.append(
            {
                "id": "flaky",
                "action": {"kind": "tool", "tool": "unreliable"},
                "depends_on": ["charge"],
            }
        )
    probe = Probe()
    async with harness.worker(tools=[*shop.tools, unreliable.tool, *probe_tools(probe)]):
        handle = await harness.start_task(
            steps, policy={"max_reattempts_per_step": 0, "on_limit_reached": "escalate"}
        )

        async def third_under_way() -> bool:
            """The third step is at work: its tool runs, its child loop asks the model, or
            its failure waits for an operator."""
            state = await task_state(handle)
            if len(state.completion_order) != 2:
                return False
            if where == "escalation":
                return state.steps[2].status == "awaiting_operator"
            if where == "step":
                return "hang" in probe.order
            return bool(harness.model.requests_for(model))

        await eventually(third_under_way, f"the third step ({where}) under way")
        await handle.cancel(reason="the customer called it off")
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        assert isinstance(caught.value.cause, CancelledError)
        state = await handle.query("state", result_type=TaskState)
        journal = await handle.query("journal", result_type=Journal)
        listed = (await handle.describe()).typed_search_attributes.get(sa.STATUS)
    assert state.status == "cancelled" and listed == "cancelled"  # orga list --status cancelled
    [ended] = [e for e in journal.entries if isinstance(e, Terminated)]
    assert ended.reason == "cancelled"
    # What became of each effect: ran, then undone; the step cancelled mid-call is unknown.
    receipts = [(r.call_id, r.outcome) for r in state.receipts]
    assert receipts[:2] == [("reserve", "delivered"), ("charge", "delivered")]
    assert receipts[-2:] == [("charge", "compensated"), ("reserve", "compensated")]
    if where == "step":
        assert ("slow", "unknown") in receipts
    assert ended.message.startswith("the task was cancelled: the customer called it off; ")
    assert statuses(state)["reserve"] == "compensated"
    assert statuses(state)["charge"] == "compensated"
    assert shop.names()[-2:] == ["refund", "release"]


async def test_a_task_naming_a_tool_the_worker_lacks_fails_before_any_step(
    harness: Harness,
) -> None:
    shop = Shop(notify_fails=False)
    steps = [*SHOP_STEPS[:2], {"id": "ship", "action": {"kind": "tool", "tool": "ship_it"}}]
    steps[1] = {**steps[1], "compensation": {"tool": "refund_twice", "arguments": {}}}
    async with harness.worker(tools=shop.tools):
        handle = await harness.start_task(steps)
        cause = await failure(handle, "InvalidConfig")
        state = await handle.query("state", result_type=TaskState)
    assert "ship_it" in cause.message and "refund_twice" in cause.message
    assert "Nothing was run" in cause.message and ".." not in cause.message
    assert shop.names() == []
    assert state.status == "failed" and state.message == cause.message


async def test_the_final_message_says_what_was_undone(harness: Harness) -> None:
    shop = Shop()
    async with harness.worker(tools=shop.tools):
        handle = await harness.start_task(SHOP_STEPS, policy={"max_reattempts_per_step": 0})
        cause = await failure(handle, "TaskAborted")
        state = await handle.query("state", result_type=TaskState)
    assert cause.message.endswith(
        "; compensated charge, reserve; notify declared no compensation"
    ), cause.message
    assert state.message == cause.message
