"""Asking a loop's judge about a held call while a person may answer it too (workflow code).

``HumanDesk`` starts ``consult`` when a call starts waiting, where the loop's setup names a
judge (``JudgeSeat``). The judge's answer (the ``consult_judge`` activity, one attempt within
the judge's ``timeout``) decides the call only when it is clear and sure, the judge is not in
shadow mode, the call needs one approver (or the judge counts as one of several), its signed
decision holds like a person's (``HumanDesk.check_judged``) and, where the gate's policies say
who may decide (Cedar ``Action::"approve"``/``"deny"``), they let the judge decide it. Anything
else leaves the call to a person, and the opinion is shown with the waiting call (``state``,
``orga pending``, the desk). A person who decides first wins: the desk cancels the
consultation (``HumanDesk._wait_for_approval``), and an answer that lands while the gate is
asked is recorded and ignored. Every consultation is journaled (``JudgeConsulted``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from orga.contracts.approvals import JudgeOpinion, PendingApproval
from orga.contracts.conversation import ToolCall
from orga.contracts.judges import CONSULT_JUDGE, JudgeAnswer, JudgeCase, JudgeRequest, JudgeSeat
from orga.contracts.policy import PolicyAction
from orga.workflows.shared.failures import failure_of

if TYPE_CHECKING:
    from orga.workflows.shared.human_desk import HumanDesk

__all__ = ["AskJudge", "consult", "judge_asker"]

AskJudge = Callable[[PendingApproval], Awaitable[JudgeAnswer]]
"""Ask the loop's judge about a waiting call (the ``consult_judge`` activity)."""


def judge_asker(
    seat: JudgeSeat, *, workflow_id: str, agent: str, task: Callable[[], str]
) -> AskJudge:
    """How a loop asks ``seat``'s judge: one attempt of ``consult_judge`` within its timeout;
    ``task`` gives the loop's task when it asks."""

    async def ask(pending: PendingApproval) -> JudgeAnswer:
        case = JudgeCase(
            workflow_id=workflow_id,
            agent=agent,
            task=task(),
            call_id=pending.call_id,
            tool=pending.tool,
            arguments=pending.arguments,
            reason=pending.reason,
        )
        return await workflow.execute_activity(
            CONSULT_JUDGE,
            JudgeRequest(judge=seat.name, case=case, pending=pending),
            result_type=JudgeAnswer,
            start_to_close_timeout=seat.timeout,
            retry_policy=RetryPolicy(maximum_attempts=1),  # a judge that fails: a person decides
            summary=f"judge {seat.name} · {pending.tool} {pending.call_id}",
        )

    return ask


async def consult(desk: HumanDesk, seat: JudgeSeat, ask: AskJudge, call_id: str) -> None:
    """Ask the judge about the waiting call ``call_id``; record its opinion, and its decision
    where it may decide."""
    pending = desk.approvals[call_id]
    try:
        answer = await ask(pending)
    except ActivityError as error:
        failure = failure_of(error)
        why = "timed out" if failure.timed_out else f"failed: {failure.kind}: {failure.message}"
        answer = JudgeAnswer(verdict="escalate", why_not=f"the judge {why}"[:500])
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
    if call_id in desk.decided_ids or call_id not in desk.approvals:
        why_not = "a person decided first"
    opinion = JudgeOpinion(
        judge=seat.name,
        verdict=answer.verdict,
        confidence=answer.confidence,
        reasons=answer.reasons,
        at=workflow.now(),
        decides=why_not is None and answer.decision is not None,
        why_not=why_not,
    )
    desk.judged(call_id, opinion, answer.decision if opinion.decides else None)


def _why_it_may_not_decide(
    desk: HumanDesk, seat: JudgeSeat, pending: PendingApproval
) -> str | None:
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
