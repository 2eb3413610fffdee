"""The saga leaves no effect behind: running steps are stopped and undone, compensations are seen
through (by retries, or by an operator), and the outcome says what was undone. Effects are rows
the test's own tools write to the worker's store, once per idempotency key."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from orga.contracts.approvals import EscalationResolution
from orga.contracts.journal import CallReceipt, CompensationSettled, Journal
from orga.contracts.task import TaskResult, TaskState
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import DECLINE, aborted, charge_step, eventually, statuses, task_state
from tests.sample_tools import Bank


async def settled(handle: WorkflowHandle[Any, TaskResult]) -> list[CompensationSettled]:
    journal = await handle.query("journal", result_type=Journal)
    return [e for e in journal.entries if isinstance(e, CompensationSettled)]


async def waiting_for(handle: WorkflowHandle[Any, TaskResult], escalation: str) -> TaskState:
    """The task's state once ``escalation`` is pending (polled: the condition, not a time)."""

    async def probe() -> TaskState | None:
        state = await task_state(handle)
        waiting = any(e.escalation_id == escalation for e in state.pending_escalations)
        return state if waiting else None

    return await eventually(probe, f"{escalation} waits for an operator")


async def test_a_parallel_step_still_running_when_another_fails_is_compensated(
    harness: Harness,
) -> None:
    bank = Bank()
    async with harness.worker(tools=bank.tools):
        handle = await harness.start_task(
            [charge_step("charge_then_work", amount=500, seconds=20), DECLINE],
            policy={"max_reattempts_per_step": 0},
        )
        report = await aborted(handle)
        entries = await settled(handle)
    # The charge had landed and its call was still working when the check failed: the call
    # was cancelled and waited for, then the charge refunded.
    assert [(kind, amount) for kind, _, amount in bank.rows()] == [
        ("charge", 500),
        ("refund", -500),
    ]
    charge = next(s for s in report["steps"] if s["id"] == "charge")
    assert charge["status"] == "compensated" and charge["attempted"]
    assert "cancelled while running" in charge["errors"]
    assert report["outcome"] == "compensated" and report["uncompensated"] == []
    assert [(e.step_id, e.how) for e in entries] == [("charge", "succeeded")]


async def test_a_compensation_that_reads_the_result_of_an_unfinished_step_still_runs(
    harness: Harness,
) -> None:
    """``"${result.receipt}"`` of a step cancelled before it returned is null: the refund runs,
    and finds the charge by the step's idempotency key."""
    bank = Bank()
    step = charge_step("charge_then_work", amount=300, seconds=20)
    step["compensation"]["arguments"] = {"receipt": "${result.receipt}"}
    async with harness.worker(tools=bank.tools):
        handle = await harness.start_task([step, DECLINE], policy={"max_reattempts_per_step": 0})
        report = await aborted(handle)
        entries = await settled(handle)
    assert [(kind, amount) for kind, _, amount in bank.rows()] == [
        ("charge", 300),
        ("refund", -300),
    ]
    assert report["outcome"] == "compensated"
    assert [(e.step_id, e.how) for e in entries] == [("charge", "succeeded")]


@pytest.mark.parametrize("cooperative", [False, True])
async def test_a_sync_step_cancelled_mid_call_is_compensated_after_its_effect_lands(
    harness: Harness, cooperative: bool
) -> None:
    bank = Bank()
    async with harness.worker(tools=bank.tools):
        handle = await harness.start_task(
            [charge_step("charge_when_done", amount=700, cooperative=cooperative)]
        )
        await asyncio.to_thread(bank.started.wait, 30)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        state = await handle.query("state", result_type=TaskState)
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert isinstance(caught.value.cause, CancelledError)
    # What the Web UI shows as the task's current details.
    assert metadata.current_details.splitlines() == [
        "**task** cancelled · compensated",
        "- charge: compensated",
    ]
    rows = [(kind, amount) for kind, _, amount in bank.rows()]
    if cooperative:
        # The tool saw ctx.cancelled and stopped before charging: the refund found nothing.
        assert rows == []
    else:
        # The thread could not be stopped: the task waited for it, and the charge it made
        # after the cancellation was refunded.
        assert rows == [("charge", 700), ("refund", -700)]
    assert len(bank.refund_calls) == 1  # the compensation ran either way
    [charge] = state.steps
    assert charge.status == "compensated" and "cancelled while running" in charge.errors
    assert state.status == "cancelled" and state.outcome == "compensated"
    assert state.message is not None and "compensated charge" in state.message


async def test_a_child_loop_step_ends_only_after_its_cancelled_tool_call_has(
    harness: Harness,
) -> None:
    """A loop step's tool call that cannot stop (a sync tool, charging a second after it is
    cancelled) is waited for: the task settles after the charge has landed, never before —
    so a compensation would find it."""
    bank = Bank()
    model = harness.new_model(
        [
            Turn(tool_calls=[("charge_when_done", {"amount": 900, "after": 1.0})]),
            Turn(text="unused"),
        ]
    )
    loop_step = {
        "id": "shop",
        "action": {
            "kind": "loop",
            "input": {
                "messages": [{"role": "user", "content": "buy it"}],
                "config": {"model": model, "tools": ["charge_when_done"]},
            },
        },
    }
    async with harness.worker(tools=bank.tools):
        handle = await harness.start_task(
            [loop_step, DECLINE], policy={"max_reattempts_per_step": 0}
        )
        await aborted(handle)
        rows_when_settled = [(kind, amount) for kind, _, amount in bank.rows()]
        state = await handle.query("state", result_type=TaskState)
    assert rows_when_settled == [("charge", 900)]  # it had landed before the task settled
    shop = next(s for s in state.steps if s.id == "shop")
    assert shop.status == "cancelled"


@pytest.mark.parametrize("action", ["give_up", "mark_compensated"])
async def test_a_compensation_failing_for_good_goes_to_an_operator(
    harness: Harness, action: str
) -> None:
    bank = Bank(refund_failures=-1)
    async with harness.worker(tools=bank.tools):
        handle = await harness.start_task(
            [
                charge_step("charge_then_work", amount=300, seconds=0),
                {**DECLINE, "parallel": False},
            ],
            policy={"max_reattempts_per_step": 0},
            compensation_escalate_after=2,
        )
        state = await waiting_for(handle, "charge.compensate#1")
        [question] = state.pending_escalations
        assert question.options == ["retry", "mark_compensated", "give_up"]
        assert "failed 2 time(s)" in question.error and "still being retried" in question.error
        assert statuses(state)["charge"] == "compensating"
        # The operator was asked, and the retries go on meanwhile.
        await eventually(lambda: len(bank.refund_calls) >= 3, "a third refund attempt")
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(
                escalation_id="charge.compensate#1",
                action=action,  # type: ignore[arg-type]
                operator="ops",
                reason="refunded by phone" if action == "mark_compensated" else "bank is gone",
            ),
        )
        report = await aborted(handle)
        entries = await settled(handle)
    charge = next(s for s in report["steps"] if s["id"] == "charge")
    assert "refund service is down" in charge["compensation_error"]
    [entry] = entries
    assert entry.escalations == 1 and entry.operator == "ops"
    if action == "give_up":
        assert charge["status"] == "compensation_failed"
        assert charge["compensation_note"] == "left uncompensated by ops: bank is gone"
        assert report["outcome"] == "compensation_incomplete"
        assert report["uncompensated"] == ["charge"]
        assert entry.how == "gave_up"
        assert "compensation INCOMPLETE for charge" in report["message"]
    else:
        assert charge["status"] == "compensated"
        assert charge["compensation_note"] == "marked compensated by ops: refunded by phone"
        assert report["outcome"] == "compensated"
        assert entry.how == "marked_compensated"
    assert [kind for kind, _, _ in bank.rows()] == ["charge"]  # the refund never succeeded


async def test_a_compensation_failing_five_times_then_succeeding_is_compensated(
    skipping: Harness,
) -> None:
    """Five failures (back-off 1, 2, 4, 8 s: skipped time) bring in an operator; the sixth
    attempt, still retried meanwhile, succeeds and withdraws the question."""
    bank = Bank(refund_failures=5)
    async with skipping.worker(tools=bank.tools):
        handle = await skipping.start_task(
            [
                charge_step("charge_then_work", amount=900, seconds=0),
                {**DECLINE, "parallel": False},
            ],
            policy={"max_reattempts_per_step": 0},
        )
        report = await aborted(handle)
        entries = await settled(handle)
        state = await handle.query("state", result_type=TaskState)
    assert len(bank.refund_calls) == 6
    assert len(set(bank.refund_calls)) == 1  # one idempotency key for every attempt
    assert [(kind, amount) for kind, _, amount in bank.rows()] == [
        ("charge", 900),
        ("refund", -900),
    ]
    assert statuses(report)["charge"] == "compensated"
    assert report["outcome"] == "compensated"
    [entry] = entries
    assert (entry.how, entry.escalations) == ("succeeded", 1)  # the operator was asked
    assert state.pending_escalations == []  # and the question withdrawn


async def test_a_step_without_compensation_cancelled_mid_call_promises_none(
    harness: Harness,
) -> None:
    """Issue 65: a step cancelled while its call ran has an ``unknown`` receipt; one that
    declares no compensation said "(compensated next)", though nothing undoes it."""
    bank = Bank()
    step = charge_step("charge_when_done", amount=700)
    del step["compensation"]
    async with harness.worker(tools=bank.tools):
        handle = await harness.start_task([step])
        await asyncio.to_thread(bank.started.wait, 30)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    [receipt] = [e for e in journal.entries if isinstance(e, CallReceipt)]
    assert receipt.outcome == "unknown"
    assert "compensated next" not in receipt.note
    assert "(none undoes it)" in receipt.note
