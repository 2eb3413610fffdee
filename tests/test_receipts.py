"""Every effect ends with a receipt (issue 55): a call that ran is ``delivered`` with the digest
of its result, one refused is ``denied``, one that did not run to an end ``failed``. A call
whose attempt was lost after its effect began — here, an attempt that timed out while the tool
ran; ``tests/test_receipts_killed.py`` SIGKILLs the worker — is settled before it runs again:
an idempotent tool runs again, a tool with ``reconcile`` asks the outside world, and any other
leaves an ``unknown`` receipt and waits for a person on the desk."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from temporalio.testing import WorkflowEnvironment

from orga.contracts.approvals import ApprovalDecision, EscalationResolution
from orga.contracts.journal import CallReceipt, Journal
from orga.contracts.state import LoopState
from orga.scripted.server import Turn
from orga.tools.sdk import Tool, ToolContext, tool
from tests.harness import Harness
from tests.helpers import (
    conversation,
    escalated,
    eventually,
    on,
    orga,
    pending,
    task_escalated,
    task_state,
    tool_results,
)
from tests.sample_tools import transfer


def _receipts(journal: Journal) -> list[tuple[str, str, str]]:
    return [(e.tool, e.call_id, e.outcome) for e in journal.entries if isinstance(e, CallReceipt)]


class Payments:
    """A payment service whose calls the tests can hold: its record of refunds, by key."""

    def __init__(self) -> None:
        self.refunds: dict[str, int] = {}
        self.held: set[str] = set()

    def tools(self) -> list[Tool]:
        payments = self

        async def stall(ctx: ToolContext, where: str, label: str) -> None:
            """A call's first attempt hangs ``where`` the test asked (before or after the
            effect), until its 1 s timeout: the attempt is lost with the effect done or not."""
            if label == where and ctx.idempotency_key not in payments.held:
                payments.held.add(ctx.idempotency_key)
                await asyncio.sleep(30)

        async def refund(amount: int, stall_at: str, ctx: ToolContext) -> str:
            await stall(ctx, stall_at, "before")
            payments.refunds[ctx.idempotency_key] = (
                payments.refunds.get(ctx.idempotency_key, 0) + amount
            )
            await stall(ctx, stall_at, "after")
            return f"refunded {amount}"

        def found(ctx: ToolContext) -> str | None:
            amount = payments.refunds.get(ctx.idempotency_key)
            return None if amount is None else f"refunded {amount} (found by its key)"

        def described(name: str, **options: Any) -> Tool:
            async def call(amount: int, stall_at: str, ctx: ToolContext) -> str:
                """Refund an amount.

                Args:
                    amount: cents.
                    stall_at: where the first attempt hangs: before, after or nowhere.
                """
                return await refund(amount, stall_at, ctx)

            return tool(name=name, timeout=1, serial=True, **options)(call)

        return [
            described("refund_plain"),  # effects (serial), and no way to tell
            described("refund_reconciled", reconcile=found),
            described("refund_idempotent", idempotent=True),
        ]


async def test_a_lost_attempt_is_settled_before_anything_runs_again(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Four calls whose first attempt is lost mid-call: reconciled after the effect (delivered,
    not run again), reconciled before it (run again: once), idempotent (run again), and plain —
    an ``unknown`` receipt, and a person on the desk, who confirms what happened."""
    payments = Payments()
    calls = [
        ("refund_reconciled", {"amount": 1, "stall_at": "after"}),
        ("refund_reconciled", {"amount": 2, "stall_at": "before"}),
        ("refund_idempotent", {"amount": 3, "stall_at": "before"}),
        ("refund_plain", {"amount": 4, "stall_at": "after"}),
    ]
    model = harness.new_model([Turn(tool_calls=calls), Turn(text="all settled")])
    names = ["refund_reconciled", "refund_idempotent", "refund_plain"]
    async with harness.worker(tools=payments.tools()):
        handle = await harness.start("refund them", model=model, tools=names)
        escalation = await escalated(handle)
        state = await handle.query("state", result_type=LoopState)
        [waiting] = state.pending_escalations
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(
                escalation_id=escalation,
                action="result",
                result="refunded 4 (checked with the bank)",
                reason="the bank shows it",
                operator="olu",
            ),
        )
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        state = await handle.query("state", result_type=LoopState)
        results = tool_results(await conversation(handle))
        code, shown, err = await orga("receipts", handle.id, env=on(env, harness))
        assert code == 0, err
    assert result.output == "all settled"
    assert "outcome of call" in waiting.error and "neither idempotent nor able to reconcile" in (
        waiting.error
    )
    # Each effect happened once, whatever its attempts did.
    assert sorted(payments.refunds.values()) == [1, 2, 3, 4]
    receipts = _receipts(journal)
    by_call_id: dict[str, list[str]] = {}
    for _, call_id, outcome in receipts:
        by_call_id.setdefault(call_id, []).append(outcome)
    # Each call: unknown first (its attempt was lost), then what settled it.
    assert sorted(by_call_id.values()) == [["unknown", "delivered"]] * 4
    delivered = {e.call_id: e for e in journal.entries
                 if isinstance(e, CallReceipt) and e.outcome == "delivered"}  # fmt: skip
    by_call = {r.call_id: r for r in results}
    for call_id, receipt in delivered.items():  # the digest is the result the model read
        digest = hashlib.sha256(by_call[call_id].content.encode()).hexdigest()
        assert receipt.digest == digest
    notes = {r.note for r in delivered.values()}
    assert "settled after a lost attempt: reconciled" in notes
    assert "settled after a lost attempt: ran again" in notes
    assert [r.outcome for r in state.receipts] == [o for _, _, o in receipts]
    heads = [line.split()[0] for line in shown.splitlines() if not line.startswith(" ")]
    assert sorted(heads) == ["delivered"] * 4 + ["unknown"] * 4
    assert "outcome of call" in shown  # the unknown one says why
    said = "\n".join(r.content for r in results)
    assert "reconcile found that its effect happened" in said  # the model reads the settling
    assert "result supplied by an operator by olu" in said


async def test_a_lost_call_a_person_runs_again_is_no_silent_retry(harness: Harness) -> None:
    """Issue 65: a person's ``retry`` of a call whose attempt was lost ran it again, and the
    model read only the new result — as if nothing had happened, though failures.md promises
    "never a silent retry" (the effect may now have happened twice). It reads that it was."""
    payments = Payments()
    model = harness.new_model(
        [Turn(tool_calls=[("refund_plain", {"amount": 4, "stall_at": "after"})]), Turn(text="ok")]
    )
    async with harness.worker(tools=payments.tools()):
        handle = await harness.start("refund it", model=model, tools=["refund_plain"])
        escalation = await escalated(handle)
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(escalation_id=escalation, action="retry", operator="olu"),
        )
        await handle.result()
        results = tool_results(await conversation(handle))
    [result] = results
    assert result.content.startswith("[an earlier attempt of this call was lost after it began")
    assert "a person chose to run it again" in result.content
    assert result.content.endswith("refunded 4")
    assert sorted(payments.refunds.values()) == [8]  # it ran twice: the model is told so


async def test_a_denied_call_has_its_receipt_and_a_retried_failure_is_no_lost_attempt(
    harness: Harness,
) -> None:
    """A tool that raises on its first attempt and is retried (``recovery: retry``) ran to
    an end both times: its second attempt is no lost attempt, and runs."""
    runs: list[int] = []

    @tool(timeout=5)
    async def flaky_note(text: str, ctx: ToolContext) -> str:
        """Write a note.

        Args:
            text: the note.
        """
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("the disk hiccuped")
        return f"noted {text}"

    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    ("flaky_note", {"text": "hi"}),
                    ("transfer", {"amount": 9, "to": "eve"}),
                ]
            ),
            Turn(text="ok"),
        ]
    )
    retry = {"strategy": "retry", "max_attempts": 2, "initial_interval": 0.1}
    async with harness.worker(tools=[flaky_note, transfer]):
        handle = await harness.start(
            "note it, pay eve",
            model=model,
            tools=["flaky_note", "transfer"],
            recovery={"tools": {"flaky_note": retry}},
        )
        [waiting] = (await pending(handle)).pending_approvals
        await handle.execute_update(
            "approve",
            ApprovalDecision(
                call_id=waiting.call_id, approved=False, reason="not eve", approver="pat"
            ),
        )
        await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    assert runs == [1, 2]
    assert sorted((t, o) for t, _, o in _receipts(journal)) == [
        ("flaky_note", "delivered"),
        ("transfer", "denied"),
    ]
    [denied] = [e for e in journal.entries if isinstance(e, CallReceipt) and e.outcome == "denied"]
    assert "not approved by pat: not eve" in denied.note


async def test_a_tasks_step_lost_mid_effect_waits_for_a_person_whatever_its_policy(
    harness: Harness,
) -> None:
    """A task's step whose attempt was lost after its effect (``refund_plain``: neither
    idempotent nor able to reconcile) leaves an ``unknown`` receipt and waits on the desk though
    the task would skip failed steps; the person says it happened (its result). A second one,
    lost before its effect, is run again on the person's word: each refund happened once."""
    payments = Payments()
    steps = [
        {"id": "a", "action": {"kind": "tool", "tool": "refund_plain",
                               "arguments": {"amount": 4, "stall_at": "after"}}},
        {"id": "b", "action": {"kind": "tool", "tool": "refund_plain",
                               "arguments": {"amount": 5, "stall_at": "before"}}},
    ]  # fmt: skip
    async with harness.worker(tools=payments.tools()):
        handle = await harness.start_task(
            steps, tool_timeout=1, policy={"on_limit_reached": "skip_step"}
        )
        first = await task_escalated(handle)
        [waiting] = (await task_state(handle)).pending_escalations
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(
                escalation_id=first, action="result", result="refunded 4", operator="olu"
            ),
        )

        async def second() -> str | None:
            escalations = (await task_state(handle)).pending_escalations
            return escalations[0].escalation_id if escalations else None

        again = await eventually(second, "step b on the desk")
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(escalation_id=again, action="retry", operator="olu"),
        )
        result = await handle.result()
    assert waiting.options == ["result", "retry", "skip", "abort"]
    assert "outcome of call" in waiting.error
    assert sorted(payments.refunds.values()) == [4, 5]  # each effect once
    assert result.status == "completed"
    assert [s.status for s in result.steps] == ["completed", "completed"]
    assert result.steps[0].result == "[result supplied by olu]\nrefunded 4"
    assert [(r.call_id, r.outcome) for r in result.receipts] == [
        ("a", "unknown"),
        ("a", "delivered"),
        ("b", "unknown"),
        ("b", "delivered"),
    ]
