"""People's decisions that race each other (issue 63): two answers to one escalation that reach
the loop in one workflow task record the first and refuse the second (both were answered
"recorded", and the second replaced the first); an approval with edits whose call was decided
while the gate checked the edit fails as an update, the loop going on with the decision that
came first. (Where a policy judges who may decide, the same race read the call after the check
with ``approvals[call_id]``: a ``KeyError`` that failed the workflow task on every replay. Its
judge is Cedar, too quick to hold; the check is held here, and both paths ask
``HumanDesk._still_pending`` after every wait.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError

from orga.contracts.approvals import ApprovalDecision, EscalationAction, EscalationResolution
from orga.contracts.journal import ApprovalDecided, EscalationResolved, Journal
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from tests.harness import Harness, scripted_settings
from tests.helpers import (
    ask,
    conversation,
    escalated,
    eventually,
    held_opa,
    pending,
    tool_results,
)
from tests.sample_tools import Flaky

_SCHEDULED = "activity_task_scheduled_event_attributes"


async def test_two_answers_to_one_escalation_in_one_workflow_task_record_the_first(
    harness: Harness,
) -> None:
    flaky = Flaky(failures=1)
    model = harness.new_model([ask("flaky", "e"), Turn(text="ok")])
    escalate: Any = {"default": {"strategy": "escalate"}}
    async with harness.worker(tools=flaky.tools):
        handle = await harness.start("go", model=model, tools=["flaky"], recovery=escalate)
        escalation_id = await escalated(handle)
    # No worker meanwhile: both answers wait in the history and reach the loop together.
    answers: list[tuple[EscalationAction, str]] = [("skip", "ann"), ("retry", "bob")]
    for action, operator in answers:
        answer = EscalationResolution(escalation_id=escalation_id, action=action, operator=operator)
        await handle.signal("resolve_escalation", answer)
    async with harness.worker(tools=flaky.tools):
        await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        [result] = tool_results(await conversation(handle))
    [resolved] = [e for e in journal.entries if isinstance(e, EscalationResolved)]
    assert (resolved.action, resolved.operator) == ("skip", "ann")
    assert result.status == "skipped" and "skipped by ann" in result.content


def _purging_asks_a_person(facts: dict[str, Any]) -> dict[str, Any]:
    """An OPA's rule: a call of ``purge`` needs a person (its edit, the approver's, does not)."""
    asks = facts.get("tool") == "purge" and not _edited(facts)
    return {"allow": True, "require_approval": asks, "reason": "purging needs a person"}


def _edited(facts: dict[str, Any]) -> bool:
    return facts.get("arguments") == {"table": "t2"}


async def test_an_edit_whose_call_was_decided_meanwhile_fails_the_update_not_the_loop(
    harness: Harness,
) -> None:
    @tool
    def purge(table: str) -> str:
        """Purge a table.

        Args:
            table: which one.
        """
        return f"purged {table}"

    model = harness.new_model([Turn(tool_calls=[("purge", {"table": "t1"})]), Turn(text="ok")])
    # The approver's edit is checked by the gate again: that check waits until released.
    with held_opa(_purging_asks_a_person, holds=_edited) as (url, check):
        settings = scripted_settings(harness.model, opa_url=url)
        async with harness.worker(settings=settings, tools=[purge]):
            handle = await harness.start("purge", model=model, tools=["purge"], policy="opa")
            [waiting] = (await pending(handle)).pending_approvals
            edited = ApprovalDecision(
                call_id=waiting.call_id, approved=True, approver="kim", arguments='{"table": "t2"}'
            )
            editing = asyncio.create_task(handle.execute_update("approve", edited))
            await check.arrived()  # the edit is being checked
            denial = ApprovalDecision(call_id=waiting.call_id, approved=False, approver="olu")
            await handle.signal("approval", denial)

            async def moved_on() -> bool:  # the denial is in: the model is asked again
                history = await handle.fetch_history()
                scheduled = [e for e in history.events if e.HasField(_SCHEDULED)]
                return len(scheduled) >= 2

            # The check runs as a local activity: the loop reads the signal when its workflow task
            # heartbeats (every few seconds), while the check still waits.
            await eventually(moved_on, "the loop took the denial while the edit was checked")
            check.release.set()
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await editing
            await handle.result()
            journal = await handle.query("journal", result_type=Journal)
    assert "was decided while this decision was checked" in str(refused.value.cause)
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.approver) == (False, "olu")
