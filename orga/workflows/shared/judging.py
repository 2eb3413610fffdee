"""Asking a loop's judge about a held call while a person may answer it too (workflow code).

``HumanDesk`` starts ``consult`` when a call starts waiting, where the loop's setup names a
judge (``JudgeSeat``, asked through a ``JudgeAsker``). The judge's answer (the
``consult_judge`` activity, one attempt within the judge's ``timeout``; what a model judge
spent is charged to the loop) decides the call only when it is clear and sure, the judge is not in
shadow mode, the call needs one approver (or the judge counts as one of several), its signed
decision holds like a person's (``HumanDesk.check_judged``) and, where the gate's policies say
who may decide (Cedar ``Action::"approve"``/``"deny"``), they let the judge decide it. Anything
else leaves the call to a person, and the opinion is shown with the waiting call (``state``,
``orga pending``, the desk). A person who decides first wins: the desk cancels the
consultation (``HumanDesk._wait_for_approval``): a judge still thinking is cancelled (nobody
pays for a verdict no one needs), and an answer that landed anyway — in the same moment, or
while the gate was asked whether the judge may decide — is recorded and ignored. Every answer
is journaled (``JudgeConsulted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from orga.contracts.approvals import JudgeOpinion, PendingApproval
from orga.contracts.conversation import ToolCall
from orga.contracts.inference import Usage
from orga.contracts.judges import CONSULT_JUDGE, JudgeAnswer, JudgeCase, JudgeRequest, JudgeSeat
from orga.contracts.policy import PolicyAction
from orga.contracts.principals import Principal
from orga.core.judging import failed
from orga.workflows.shared.failures import failure_of

if TYPE_CHECKING:
    from orga.workflows.shared.human_desk import HumanDesk

__all__ = ["JudgeAsker", "consult"]


@dataclass
class JudgeAsker:
    """How a loop asks its judge (``seat``) about a waiting call: one attempt of
    ``consult_judge`` within the judge's timeout."""

    seat: JudgeSeat
    workflow_id: str
    agent: str
    task: Callable[[], str]
    """The loop's task, when it asks."""
    principal: Callable[[], Principal | None]
    """Who the loop runs for (a model judge's call is charged to its ledger)."""
    charge: Callable[[Usage, int], None]
    """Add what a model judge spent to the loop's books (tokens, model calls)."""
    queue: str | None = None
    """Where its consultation goes (None: the loop's own queue): a model judge's, the loop's
    model calls' queue (``ORGA_MODEL_TASK_QUEUE``), rate-limited with them."""

    def spent(self, answer: JudgeAnswer) -> None:
        """Charge what a model judge's answer served to the loop (a judge that is code spends
        nothing, and touches no books)."""
        if answer.model_calls:
            self.charge(answer.usage, answer.model_calls)

    def start(self, pending: PendingApproval) -> workflow.ActivityHandle[JudgeAnswer]:
        case = JudgeCase.of(
            pending, workflow_id=self.workflow_id, agent=self.agent, task=self.task()
        )
        return workflow.start_activity(
            CONSULT_JUDGE,
            JudgeRequest(
                judge=self.seat.name, case=case, pending=pending, principal=self.principal()
            ),
            result_type=JudgeAnswer,
            task_queue=self.queue,
            start_to_close_timeout=self.seat.timeout,
            retry_policy=RetryPolicy(maximum_attempts=1),  # a judge that fails: a person decides
            summary=f"judge {self.seat.name} · {pending.tool} {pending.call_id}",
            # Cancelled, the consultation still takes an answer that lands (it is journaled and
            # decides nothing); the person's decision never waits for it.
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )


async def consult(desk: HumanDesk, asker: JudgeAsker, call_id: str) -> None:
    """Ask the judge about the waiting call ``call_id``; record its opinion, and its decision
    where it may decide. Cancelled (a person decided first, the loop stopped), the judge's
    activity is cancelled; an answer that lands anyway is recorded, deciding nothing."""
    pending = desk.approvals[call_id]
    asking = asker.start(pending)
    try:
        answer = await asking
    except ActivityError as error:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # The consultation was cancelled (a person decided, the loop stopped): the judge's
            # activity was cancelled with it, which is no failure of the judge.
            raise asyncio.CancelledError from error
        failure = failure_of(error)
        answer = failed(
            "timed out" if failure.timed_out else f"failed: {failure.kind}: {failure.message}"
        )
    except asyncio.CancelledError:
        if asking.done() and not asking.cancelled() and asking.exception() is None:
            asker.spent(asking.result())
            _ignored(desk, asker, pending, asking.result())
        raise
    asker.spent(answer)
    try:
        await _weigh(desk, asker, pending, answer)
    except asyncio.CancelledError:  # while the gate was asked: the answer is kept, ignored
        _ignored(desk, asker, pending, answer)
        raise


def _ignored(
    desk: HumanDesk, asker: JudgeAsker, pending: PendingApproval, answer: JudgeAnswer
) -> None:
    """Record an answer that landed when the call no longer waited for it."""
    decided = pending.call_id in desk.decided_ids
    desk.judged(
        pending,
        _opinion(
            asker.seat, answer, "a person decided first" if decided else "the call no longer waits"
        ),
        None,
    )


def _opinion(seat: JudgeSeat, answer: JudgeAnswer, why_not: str | None) -> JudgeOpinion:
    return JudgeOpinion(
        judge=seat.name,
        verdict=answer.verdict,
        confidence=answer.confidence,
        reasons=answer.reasons,
        at=workflow.now(),
        decides=why_not is None and answer.decision is not None,
        why_not=why_not,
    )


async def _weigh(
    desk: HumanDesk, asker: JudgeAsker, pending: PendingApproval, answer: JudgeAnswer
) -> None:
    """Whether the answer decides the call: record it so, or show it with the waiting call."""
    seat, call_id = asker.seat, pending.call_id
    why_not = answer.why_not or _why_it_may_not_decide(desk, seat, pending)
    if why_not is None and answer.decision is not None:
        try:
            desk.check_judged(answer.decision)
        except ValueError as error:
            why_not = f"its decision is refused: {error}"
    if why_not is None and answer.decision is not None and desk.authority is not None:
        enrolled = desk.approvers.get(seat.name)
        verdict = await desk.authority(
            PolicyAction.of_decision(
                ToolCall(id=call_id, name=pending.tool, arguments=pending.arguments),
                approved=answer.decision.approved,
                approver=seat.name,
                groups=enrolled.groups if enrolled is not None else (),
            )
        )
        if not verdict.permits:
            why_not = (
                f"the policy does not let the judge decide it: "
                f"{verdict.reason or 'no policy permits it'}"
            )
    why_not = why_not or _decided_first(desk, call_id)  # while the gate was asked
    opinion = _opinion(seat, answer, why_not)
    desk.judged(pending, opinion, answer.decision if opinion.decides else None)


def _decided_first(desk: HumanDesk, call_id: str) -> str | None:
    if call_id in desk.decided_ids or call_id not in desk.approvals:
        return "a person decided first"
    return None


def _why_it_may_not_decide(
    desk: HumanDesk, seat: JudgeSeat, pending: PendingApproval
) -> str | None:
    if decided := _decided_first(desk, pending.call_id):
        return decided  # (in the same moment as the answer)
    if seat.shadow:
        return "the judge is in shadow mode: a person decides"
    if pending.approvals_needed > 1 and not seat.counts_as_person:
        return (
            f"the call needs {pending.approvals_needed} people's approvals, and the judge "
            "does not count as one"
        )
    if seat.name not in desk.approvers:
        return f"the judge is not an enrolled approver of this worker ([approvers.{seat.name}])"
    return None
