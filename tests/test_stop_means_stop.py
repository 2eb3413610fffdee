"""Stop means stop: a cancel, or a loop's timeout, that lands while an activity runs ends the
loop there — no new model call, no next tool, no fallback, no escalation waited for — with what
the turn's calls came to on the record (their receipts); a task's step stops instead of being
retried, skipped or escalated, and the saga undoes what ran. Each was swallowed before (issue
63: Temporal hands a cancelled activity back as a plain failure and takes the cancellation off
the task)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from orga.contracts.errors import BudgetExceeded
from orga.contracts.journal import CallReceipt, Journal, PolicyEvaluated, Terminated
from orga.contracts.state import LoopState
from orga.contracts.task import TaskState
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import eventually, failure, held_opa
from tests.sample_tools import Bank, running


def again(name: str) -> list[Turn]:
    """A model that asks for ``name`` twice, then answers: a loop that goes on after the first
    call asks the model again, and runs the tool again."""
    return [
        Turn(tool_calls=[(name, {"table": "orders"})]),
        Turn(tool_calls=[(name, {"table": "invoices"})]),
        Turn(text="all done"),
    ]


async def cancelled(handle: WorkflowHandle[Any, Any]) -> None:
    """The workflow ended cancelled (not failed, not completed)."""
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    assert isinstance(caught.value.cause, CancelledError), caught.value.cause


async def receipts(handle: WorkflowHandle[Any, Any]) -> list[CallReceipt]:
    journal = await handle.query("journal", result_type=Journal)
    return [e for e in journal.entries if isinstance(e, CallReceipt)]


@pytest.mark.parametrize(
    ("options", "outcome", "note"),
    [
        ({"serial": True}, "unknown", "cancelled while it ran"),  # it had begun its effect
        ({}, "failed", "cancel"),  # a pure tool: it did not run to an end
    ],
    ids=["with-effects", "pure"],
)
async def test_a_cancel_while_a_tool_runs_ends_the_loop_there(
    harness: Harness, options: dict[str, Any], outcome: str, note: str
) -> None:
    work = running("export_all", **options)
    model = harness.new_model(again("export_all"))
    async with harness.worker(tools=[work.tool]):
        handle = await harness.start("export", model=model, tools=["export_all"])
        await eventually(work.started.is_set, "the tool is running")
        await handle.cancel(reason="wrong customer")
        await cancelled(handle)
        state = await handle.query("state", result_type=LoopState)
        [receipt] = await receipts(handle)
        journal = await handle.query("journal", result_type=Journal)
    assert len(harness.model.requests_for(model)) == 1  # the model was not asked again
    [ran] = work.calls  # nor the tool run again
    assert (state.status, state.termination_reason) == ("cancelled", "cancelled")
    assert (receipt.call_id, receipt.outcome) == (ran, outcome)
    assert note in receipt.note, receipt.note
    [ended] = [e for e in journal.entries if isinstance(e, Terminated)]
    assert (ended.reason, ended.message) == ("cancelled", "wrong customer")


async def test_a_loop_whose_timeout_passes_while_a_tool_runs_ends_there(harness: Harness) -> None:
    work = running("export_all")
    model = harness.new_model(again("export_all"))
    async with harness.worker(tools=[work.tool]):
        handle = await harness.start("export", model=model, tools=["export_all"], timeout=2)
        error = await failure(handle, BudgetExceeded.__name__)
    assert "timeout" in error.message
    assert len(harness.model.requests_for(model)) == 1
    assert len(work.calls) == 1


async def test_a_cancel_while_a_tool_with_escalate_recovery_runs_waits_for_nobody(
    harness: Harness,
) -> None:
    """The cancelled call is no failure to escalate: the loop ends, nobody is asked."""
    work = running("export_all", raise_on_cancel=True)
    model = harness.new_model(again("export_all"))
    async with harness.worker(tools=[work.tool]):
        handle = await harness.start(
            "export",
            model=model,
            tools=["export_all"],
            recovery={"default": {"strategy": "escalate"}},
        )
        await eventually(work.started.is_set, "the tool is running")
        await handle.cancel()
        await cancelled(handle)
        state = await handle.query("state", result_type=LoopState)
    assert state.pending_escalations == [] and state.status == "cancelled"
    assert len(harness.model.requests_for(model)) == 1


async def test_a_cancel_during_the_model_call_is_no_failure_of_the_model(
    harness: Harness,
) -> None:
    """A model call cut short by the cancel neither fails the loop ``ModelCallFailed`` nor
    hands it to its fallback."""
    first = harness.new_model([Turn(text="slow", delay=30)])
    second = harness.new_model([Turn(text="from the fallback")])
    async with harness.worker():
        handle = await harness.start(
            "hello",
            model=first,
            fallbacks=[{"provider": "openai", "model": second}],
        )
        await eventually(lambda: harness.model.requests_for(first), "the model is asked")
        await handle.cancel()
        await cancelled(handle)
    assert harness.model.requests_for(second) == []


async def test_a_cancel_during_the_policy_check_is_no_denial_to_go_on_from(
    harness: Harness,
) -> None:
    work = running("export_all")
    model = harness.new_model(again("export_all"))
    with held_opa() as (url, check):  # the policy check answers only once released
        settings = scripted_settings(harness.model, opa_url=url)
        async with harness.worker(settings=settings, tools=[work.tool]):
            handle = await harness.start("export", model=model, tools=["export_all"], policy="opa")
            await check.arrived()
            await handle.cancel()
            await cancelled(handle)
            check.release.set()
            journal = await handle.query("journal", result_type=Journal)
    assert not [e for e in journal.entries if isinstance(e, PolicyEvaluated)]  # no denial made up
    assert len(harness.model.requests_for(model)) == 1
    assert work.calls == []


async def test_a_cancelled_task_stops_its_step_rather_than_escalating_it(
    harness: Harness,
) -> None:
    """The step's tool raises as it is cancelled (Temporal hands that error to the task, not
    a cancel): the step is not retried, skipped or escalated — the task stops, and the charge
    made before it is refunded."""
    bank = Bank()
    work = running("export_all", raise_on_cancel=True, serial=True)
    steps = [
        {
            "id": "charge",
            "action": {
                "kind": "tool",
                "tool": "charge_then_work",
                "arguments": {"amount": 300, "seconds": 0},
            },
            "compensation": {"tool": "refund", "arguments": {"receipt": "${result}"}},
        },
        {
            "id": "export",
            "action": {"kind": "tool", "tool": "export_all", "arguments": {"table": "t"}},
            "depends_on": ["charge"],
        },
    ]
    async with harness.worker(tools=[*bank.tools, work.tool]):
        handle = await harness.start_task(steps, policy={"on_limit_reached": "escalate"})
        await eventually(work.started.is_set, "the export step is running")
        await handle.cancel()
        await cancelled(handle)
        state = await handle.query("state", result_type=TaskState)
        journal = await handle.query("journal", result_type=Journal)
    assert state.pending_escalations == []
    assert {s.id: s.status for s in state.steps} == {"charge": "compensated", "export": "cancelled"}
    assert [(kind, amount) for kind, _, amount in bank.rows()] == [
        ("charge", 300),
        ("refund", -300),
    ]
    assert len(work.calls) == 1
    export = [e for e in journal.entries if isinstance(e, CallReceipt) and e.call_id == "export"]
    assert [e.outcome for e in export] == ["unknown"]  # it had begun: a person finds out
