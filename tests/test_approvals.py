"""Human approvals on a real dev server: signal, update, validation, restarts, no worker."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from orga.contracts import search_attributes as sa
from orga.contracts.approvals import ApprovalDecision, ApprovalRecord
from orga.contracts.conversation import Message
from orga.contracts.journal import ApprovalDecided, Journal
from orga.contracts.state import LoopState
from orga.scripted.server import RecordedRequest, Turn
from tests.harness import Harness
from tests.helpers import conversation, eventually, pending
from tests.sample_tools import Probe, probe_tools, transfer


def results(messages: list[Message]) -> dict[str, Any]:
    return {r.name: r for m in messages if m.role == "tool" for r in m.tool_results}


async def test_approve_by_signal_while_other_calls_proceed(harness: Harness) -> None:
    probe = Probe()
    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    ("transfer", {"amount": 5, "to": "bob"}),
                    ("wait", {"label": "w", "seconds": 0}),
                ]
            ),
            Turn(text="sent"),
        ]
    )
    async with harness.worker(tools=[transfer, *probe_tools(probe)]):
        handle = await harness.start("pay bob", model=model, tools=["transfer", "wait"])
        state = await pending(handle)
        [waiting] = state.pending_approvals
        assert waiting.tool == "transfer" and '"amount": 5' in waiting.arguments
        assert waiting.reason == "tool 'transfer' requires approval"
        assert state.status == "awaiting_approval"
        # The independent call ran while the approval waits.
        await eventually(lambda: "w" in probe.spans, "the independent call ran")
        description = await handle.describe()
        assert description.typed_search_attributes.get(sa.STATUS) == "awaiting_approval"
        await handle.signal(
            "approval", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="alice")
        )
        result = await handle.result()
        messages = await conversation(handle)
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "sent"
    assert results(messages)["transfer"].content == "sent 5 to bob"
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.approver, decided.source) == (True, "alice", "signal")


async def test_deny_by_update_and_the_validator(harness: Harness) -> None:
    released = threading.Event()

    def held(_: RecordedRequest) -> Turn:
        """The answer after the denial waits until the test is done deciding: the loop is
        still running when the second decision comes (the validator's to refuse; a loop that
        had ended made the server abort the update, one CI run in many)."""
        released.wait(60)
        return Turn(text="not sent")

    model = harness.new_model([Turn(tool_calls=[("transfer", {"amount": 500, "to": "eve"})]), held])
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay eve", model=model, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
        events_before = len((await handle.fetch_history()).events)
        with pytest.raises(WorkflowUpdateFailedError) as unknown:
            await handle.execute_update(
                "approve", ApprovalDecision(call_id="nope", approved=True, approver="carol")
            )
        assert isinstance(unknown.value.cause, ApplicationError)
        assert "'nope' is not waiting for approval" in str(unknown.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as nobody:
            await handle.execute_update(
                "approve", ApprovalDecision(call_id=waiting.call_id, approved=True)
            )
        assert "names no approver" in str(nobody.value.cause)
        assert len((await handle.fetch_history()).events) == events_before  # nothing written
        record = await handle.execute_update(
            "approve",
            ApprovalDecision(
                call_id=waiting.call_id, approved=False, reason="too much", approver="carol"
            ),
            result_type=ApprovalRecord,
        )
        assert (record.approved, record.reason, record.approver, record.source) == (
            False,
            "too much",
            "carol",
            "update",
        )
        with pytest.raises(WorkflowUpdateFailedError) as again:
            await handle.execute_update(
                "approve", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="x")
            )
        assert "already decided" in str(again.value.cause)
        released.set()
        result = await handle.result()
        messages = await conversation(handle)
    assert result.output == "not sent"
    denied = results(messages)["transfer"]
    assert denied.is_error and denied.status == "denied"
    assert "not approved by carol: too much" in denied.content


async def test_worker_restarted_while_an_approval_is_pending(harness: Harness) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 1, "to": "dan"})]), Turn(text="done")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay dan", model=model, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
    # No worker at all now: the signal is stored by Temporal and delivered later.
    await handle.signal(
        "approval", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="dan")
    )
    async with harness.worker(tools=[transfer]):
        result = await handle.result()
        messages = await conversation(handle)
    assert result.output == "done"
    assert results(messages)["transfer"].content == "sent 1 to dan"


async def test_update_after_a_worker_restart(harness: Harness) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 2, "to": "fay"})]), Turn(text="ok")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay fay", model=model, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
    async with harness.worker(tools=[transfer]):  # a fresh worker rebuilds the wait from history
        state = await handle.query("state", result_type=LoopState)
        assert [p.call_id for p in state.pending_approvals] == [waiting.call_id]
        record = await handle.execute_update(
            "approve",
            ApprovalDecision(call_id=waiting.call_id, approved=True, approver="fay"),
            result_type=ApprovalRecord,
        )
        assert record.approved
        assert (await handle.result()).output == "ok"


async def test_current_details_name_the_pending_approval(harness: Harness) -> None:
    from temporalio.api.sdk.v1 import WorkflowMetadata

    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 1, "to": "x"})]), Turn(text="ok")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay", model=model, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert f"waiting for approval of transfer ({waiting.call_id})" in metadata.current_details
        await handle.signal(
            "approval", ApprovalDecision(call_id=waiting.call_id, approved=False, approver="z")
        )
        await handle.result()


async def test_a_signal_that_names_nobody_is_ignored(harness: Harness) -> None:
    """The audit trail never records a decision without an approver: such a signal is dropped
    (and logged), the call keeps waiting, and a signed decision then goes through."""
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 3, "to": "gil"})]), Turn(text="ok")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay gil", model=model, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
        await handle.signal("approval", ApprovalDecision(call_id=waiting.call_id, approved=True))
        await handle.signal(
            "approval", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="  ")
        )
        # Signals are handled in order: once the worker has seen a later, signed decision, the
        # unsigned ones before it were ignored rather than recorded.
        await handle.signal(
            "approval", ApprovalDecision(call_id=waiting.call_id, approved=False, approver="hal")
        )
        assert (await handle.result()).output == "ok"
        journal = await handle.query("journal", result_type=Journal)
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.approver) == (False, "hal")
