"""Waiting for people, durably: approvals of gated calls and escalations of failing steps.

Workflow code. A wait is listed (``pending``) *before* the workflow starts waiting, so whoever
sees it in the ``state`` query can answer at once; the answer (signal, update, or the timeout)
is recorded with its source and time. Waits survive worker restarts like everything else in
the workflow: they are timers and conditions in its history.

Where the worker's operator enrolled approvers (``enroll``, from the setup recorded in
history), an approval is recorded only when an enrolled approver signed it
(``orga.core.signatures``), within the time the call has waited, with a signature not used
before; the update's validator refuses anything else with the reason, and the call stays
pending. Where none are enrolled, decisions are recorded as unverified. A tool may need several
distinct approvers (``approvals_needed``): the call runs when the last approves, any deny stops
it. An approval may edit the call's arguments: the edited call passes the gate again
(``check_edit``) before the decision is recorded.

Over 400 lines: approvals, escalations and reviews are one desk — one ``waiting`` state, one
change signal, one set of handlers a workflow mixes in; the rules a decision is held to are
pure code in ``orga.core.decisions``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from orga.contracts.approvals import (
    ApprovalDecision,
    ApprovalRecord,
    DecisionProof,
    DecisionSource,
    EnrolledApprover,
    EscalationRecord,
    EscalationResolution,
    JudgeOpinion,
    PendingApproval,
    PendingEscalation,
)
from orga.contracts.conversation import ToolCall
from orga.contracts.critic import PendingReview, Review
from orga.contracts.journal import (
    ApprovalDecided,
    EscalationResolved,
    JournalEntry,
    JudgeConsulted,
    Stamp,
)
from orga.contracts.policy import PolicyAction, PolicyDecision
from orga.core.decisions import check_decision, key_approved_as
from orga.core.profile import glob_matches
from orga.core.signatures import sha256_text
from orga.workflows.shared.judging import JudgeAsker, consult
from orga.workflows.shared.metrics import count
from orga.workflows.shared.patches import (
    MCP_ANSWERS_ARE_CLAIMS,
    ONE_KEY_ONE_APPROVER,
    ONE_RESOLUTION,
)
from orga.workflows.shared.signal_answers import SignalAnswers

__all__ = ["HumanDesk"]


class HumanDesk:
    """The pending approvals and escalations of one workflow, and their answers."""

    def __init__(
        self,
        on_change: Callable[[], None],
        *,
        record: Callable[[JournalEntry], None] | None = None,
        stamp: Callable[[], Stamp] | None = None,
    ) -> None:
        self._on_change = on_change
        self._record = record
        self._stamp = stamp
        """Where decisions are journaled (``ApprovalDecided``, ``EscalationResolved``)."""
        self.approvals: dict[str, PendingApproval] = {}
        self.escalations: dict[str, PendingEscalation] = {}
        self._approved: dict[str, ApprovalRecord] = {}
        self._resolved: dict[str, EscalationRecord] = {}
        self.decided_ids: set[str] = set()
        """Every call id ever decided here (so a second decision is refused)."""
        self._signals = SignalAnswers()
        """Answers by signal, kept until their workflow task ends if their wait is not listed."""
        self.review_pending: PendingReview | None = None
        """A final answer waiting for a person's review."""
        self._reviewed: tuple[Review, str] | None = None
        self.approvers: dict[str, EnrolledApprover] = {}
        """The enrolled approvers (none: decisions are recorded unverified)."""
        self._needed: dict[str, int] = {}
        self._proofs: dict[str, list[DecisionProof]] = {}
        self._signatures: set[str] = set()
        """Every signature recorded here (so none is accepted twice)."""
        self.check_edit: Callable[[ToolCall], Awaitable[PolicyDecision]] | None = None
        """The gate's decision on a call as an approver edited it (set by loops and tasks)."""
        self.authority: Callable[[PolicyAction], Awaitable[PolicyDecision]] | None = None
        """The gate's decision on a person's decision, where its policies say who may decide
        what (set by loops and tasks whose setup says so)."""
        self.judge: JudgeAsker | None = None
        """The loop's judge, and how to ask it (``orga.workflows.shared.judging``)."""
        self.on_wait: Callable[[PendingApproval], None] | None = None
        """Told of each call that starts waiting, as a judge is shown it (set by a replay:
        ``orga judge what-if``)."""

    def enroll(
        self, approvers: Sequence[EnrolledApprover], approvals_needed: Mapping[str, int]
    ) -> None:
        """Who may decide (from the setup in history), and how many distinct approvers the
        tools matching each glob need."""
        self.approvers = {a.name: a for a in approvers}
        self._needed = dict(approvals_needed)

    def approvals_needed(self, tool: str) -> int:
        """Distinct approvers ``tool``'s calls need (the highest of the globs it matches)."""
        return max((n for glob, n in self._needed.items() if glob_matches(glob, tool)), default=1)

    @property
    def waiting(self) -> bool:
        return bool(self.approvals or self.escalations or self.review_pending)

    # ---- approvals ---------------------------------------------------------------------

    def check_approval(self, decision: ApprovalDecision) -> None:
        """Raise ``ValueError`` unless the decision answers a pending approval, says who
        decided, and — where approvers are enrolled — is signed by that approver, for this
        call and these arguments, while the call waits, with a signature not used before, by
        a key that has not approved it yet."""
        self._proof(decision, "update", validating=True)

    def _proof(
        self, decision: ApprovalDecision, source: DecisionSource, *, validating: bool = False
    ) -> DecisionProof:
        approver = (decision.approver or "").strip()
        if not approver:
            raise ValueError(
                "the decision names no approver: say who decides (approver), so the audit "
                "trail records it"
            )
        if decision.call_id in self.decided_ids:
            raise ValueError(f"call {decision.call_id!r} was already decided")
        pending = self.approvals.get(decision.call_id)
        if pending is None:
            listed = ", ".join(self.approvals) or "none"
            raise ValueError(
                f"call {decision.call_id!r} is not waiting for approval (pending: {listed})"
            )
        if source == "signal" and self.authority is not None:
            raise ValueError(
                "a policy judges who may decide here: send the decision by the approve update "
                "(orga approve, the desk, LoopHandle.approve), which can answer a refusal"
            )
        if (
            self.approvers
            and decision.via == "mcp-elicitation"
            and (validating or workflow.patched(MCP_ANSWERS_ARE_CLAIMS))
        ):
            raise ValueError(
                "approvers are enrolled here: an answer to orga mcp's form is the MCP client "
                "app's, not a person's signed decision, and is not recorded. Decide with your "
                "own key (orga approve, orga desk)"
            )
        proof = check_decision(
            decision,
            pending,
            source=source,
            approvers=self.approvers,
            used=self._signatures,
            workflow_id=workflow.info().workflow_id,
            now=workflow.now(),
            edits=self.check_edit is not None,
        )
        twin = key_approved_as(proof, pending, self.approvers)
        # A validator never asks for a patch (it runs only for new updates, never on replay).
        if twin is not None and (validating or workflow.patched(ONE_KEY_ONE_APPROVER)):
            raise ValueError(
                f"{approver!r} signs with the key ({proof.key_fingerprint}) that already "
                f"approved call {decision.call_id!r} as {twin!r}: it needs "
                f"{pending.approvals_needed} distinct approvers, and one key is one approver. "
                "Another person must approve it with their own key"
            )
        return proof

    async def decide_update(self, decision: ApprovalDecision) -> ApprovalRecord:
        """The ``approve`` update: record the decision; an approval with edited arguments first
        passes the gate again as the call it would run (schema and policy), and a refusal of
        the edit is the update's failure — the call stays pending.

        Raises:
            ApplicationError: the edit, or (after waiting on the gate) the decision, is refused.
        """
        runs: str | None = None
        if decision.arguments is not None and self.check_edit is not None:
            pending = self._still_pending(decision)
            edited = ToolCall(id=pending.call_id, name=pending.tool, arguments=decision.arguments)
            verdict = await self.check_edit(edited)
            self._still_pending(decision)  # decided by someone else while the gate was asked
            if not verdict.permits and verdict.decision != "require_approval":
                raise _refused(
                    f"the gate refuses the call with the edited arguments: {verdict.reason}. "
                    f"Call {decision.call_id!r} still waits as it was."
                )
            runs = (verdict.arguments if verdict.decision == "modify" else None) or (
                decision.arguments
            )
        if self.authority is not None:
            await self._judged(decision, runs)
        return self._decided(decision, "update", runs)

    async def _judged(self, decision: ApprovalDecision, runs: str | None) -> None:
        """Ask the gate whether this person may make this decision on this call.

        Raises:
            ApplicationError: the policy says they may not (the call stays pending).
        """
        assert self.authority is not None
        pending = self._still_pending(decision)
        approver = (decision.approver or "").strip()
        enrolled = self.approvers.get(approver)
        verb = "approve" if decision.approved else "deny"
        verdict = await self.authority(
            PolicyAction.of_decision(
                ToolCall(
                    id=pending.call_id, name=pending.tool, arguments=runs or pending.arguments
                ),
                approved=decision.approved,
                approver=approver,
                groups=enrolled.groups if enrolled is not None else (),
            )
        )
        self._still_pending(decision)  # decided by someone else while the policy was asked
        if not verdict.permits:
            raise _refused(
                f"the policy does not let {approver} {verb} call {decision.call_id!r} "
                f"({pending.tool}): {verdict.reason or 'no policy permits it'}. The call still "
                "waits."
            )

    def _still_pending(self, decision: ApprovalDecision) -> PendingApproval:
        """The call the update decides, still waiting; another decision may have ended the
        wait while the gate was asked (then ``ApplicationError``: the update's failure)."""
        pending = self.approvals.get(decision.call_id)
        if pending is None or decision.call_id in self.decided_ids:
            raise _refused(
                f"call {decision.call_id!r} was decided while this decision was checked: it "
                "no longer waits, and this decision is not recorded"
            )
        return pending

    def _decided(
        self, decision: ApprovalDecision, source: DecisionSource, runs: str | None
    ) -> ApprovalRecord:
        try:
            record = self.decide(decision, source)
        except ValueError as error:  # decided meanwhile (another update won the race)
            raise ApplicationError(
                str(error), type="DecisionRefused", non_retryable=True
            ) from error
        return record.model_copy(update={"arguments": runs}) if runs else record

    def decide(
        self, decision: ApprovalDecision, source: DecisionSource, *, runs: str | None = None
    ) -> ApprovalRecord:
        """Record a decision (the update's validator, or the signal handler, checked it): the
        call's final decision, or — while it needs more approvers — one approval of several.
        ``runs``: the arguments an approval with edits runs with (as the gate passed them)."""
        proof = self._proof(decision, source)
        pending = self.approvals[decision.call_id]
        if proof.signature is not None and proof.verified:
            self._signatures.add(proof.signature)
        proofs = [*self._proofs.get(decision.call_id, []), proof]
        approvers = [p.approver for p in proofs if p.approved and p.approver]
        complete = not proof.approved or len(approvers) >= pending.approvals_needed
        record = ApprovalRecord(
            call_id=decision.call_id,
            tool=pending.tool,
            approved=proof.approved,
            reason=proof.reason,
            approver=", ".join(approvers) if proof.approved else proof.approver,
            source=proof.source,
            at=proof.at,
            verified=all(p.verified for p in proofs),
            complete=complete,
            decisions=proofs,
        )
        if not complete:
            self._proofs[decision.call_id] = proofs
            self.approvals[decision.call_id] = pending.model_copy(update={"approved_by": approvers})
            self._on_change()
            return record
        self._proofs.pop(decision.call_id, None)
        if proof.edited_arguments is not None:
            record = record.model_copy(update={"arguments": runs or proof.edited_arguments})
        self._approved[decision.call_id] = record
        self.decided_ids.add(decision.call_id)
        return record

    def check_judged(self, decision: ApprovalDecision) -> None:
        """Raise ``ValueError`` unless the judge's decision holds as a person's would (signed
        by its enrolled key, for this call and these arguments, while the call waits)."""
        self._proof(decision, "judge")

    def judged(
        self, asked: PendingApproval, opinion: JudgeOpinion, decision: ApprovalDecision | None
    ) -> None:
        """Record the judge's ``decision`` (checked, and allowed by the policies), or show its
        ``opinion`` with the call ``asked`` about while it waits for a person; journal the
        opinion (one that came when the call no longer waited too: recorded, and ignored)."""
        call_id = asked.call_id
        pending = self.approvals.get(call_id)
        if pending is None:  # the wait ended (a person decided, the loop stopped): decide nothing
            opinion = opinion.model_copy(update={"decides": False})
            decision = None
        elif decision is not None:
            try:
                self.decide(decision, "judge")
            except ValueError as error:
                opinion = opinion.model_copy(
                    update={"decides": False, "why_not": f"its decision is refused: {error}"}
                )
        if pending is not None and not opinion.decides and call_id not in self.decided_ids:
            self.approvals[call_id] = pending.model_copy(update={"judge": opinion})
            self._on_change()
        if self._record is not None and self._stamp is not None:
            self._record(
                JudgeConsulted(**self._stamp(), call_id=call_id, tool=asked.tool, opinion=opinion)
            )

    def decide_by_signal(self, decision: ApprovalDecision) -> None:
        """The ``approval`` signal: record the decision, or log why it was ignored (a call not
        waiting yet: ``SignalAnswers``)."""
        self._signals.give(
            self.approvals, decision.call_id, lambda: self.decide(decision, "signal"), "approval"
        )

    async def approval(
        self, call: ToolCall, reason: str, iteration: int, timeout: timedelta
    ) -> ApprovalRecord:
        """Wait for a person's decision on ``call`` (journaled); a timeout is a denial."""
        asked = workflow.now()
        count("orga_approvals_requested", tool=call.name)
        record = await self._wait_for_approval(call, reason, iteration, timeout)
        if self._record is not None and self._stamp is not None:
            self._record(
                ApprovalDecided(
                    **self._stamp(),
                    call_id=record.call_id,
                    tool=record.tool,
                    approved=record.approved,
                    approver=record.approver,
                    reason=record.reason,
                    source=record.source,
                    waited_seconds=(record.at - asked).total_seconds(),
                    verified=record.verified,
                    decisions=record.decisions,
                    arguments=call.arguments if record.arguments else None,
                    edited_arguments=record.arguments,
                )
            )
        return record

    async def _wait_for_approval(
        self, call: ToolCall, reason: str, iteration: int, timeout: timedelta
    ) -> ApprovalRecord:
        self.approvals[call.id] = PendingApproval(
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            reason=reason,
            since=workflow.now(),
            iteration=iteration,
            arguments_sha256=sha256_text(call.arguments),
            signatures_required=bool(self.approvers),
            approvals_needed=self.approvals_needed(call.name),
        )
        if self.on_wait is not None:
            self.on_wait(self.approvals[call.id])
        self._on_change()
        judging = (
            asyncio.create_task(consult(self, self.judge, call.id))
            if self.judge is not None
            else None
        )
        try:
            await workflow.wait_condition(
                lambda: call.id in self._approved,
                timeout=timeout,
                timeout_summary=f"approval timeout · {call.name} {call.id}",
            )
        except TimeoutError:
            self._approved[call.id] = ApprovalRecord(
                call_id=call.id,
                tool=call.name,
                approved=False,
                reason="approval timed out",
                source="timeout",
                at=workflow.now(),
            )
            self.decided_ids.add(call.id)
            self._proofs.pop(call.id, None)
        except asyncio.CancelledError:
            self._withdraw(self.approvals, call.id)
            if judging is not None:
                judging.cancel()
            raise
        # (Any other BaseException is the worker evicting this workflow: touch nothing.)
        if judging is not None and not judging.done():
            judging.cancel()  # a person decided first: nobody pays for a verdict no one needs
        self._withdraw(self.approvals, call.id)
        return self._approved.pop(call.id)

    def _withdraw(self, waits: dict[str, Any], key: str) -> None:
        del waits[key]
        self._on_change()

    # ---- escalations -------------------------------------------------------------------

    def check_resolution(
        self, resolution: EscalationResolution, *, validating: bool = True
    ) -> None:
        """Raise ``ValueError`` unless it answers a pending escalation with one of its options,
        says who resolved it, and the escalation has no answer yet (two that arrive together
        are not both "recorded": the first is, the second refused). ``validating``: the
        update's validator asks; else the handler, behind patch ``one-resolution``."""
        if not (resolution.operator or "").strip():
            raise ValueError(
                "the resolution names no operator: say who resolves it (operator), so the "
                "audit trail records it"
            )
        pending = self.escalations.get(resolution.escalation_id)
        if pending is None:
            listed = ", ".join(self.escalations) or "none"
            raise ValueError(
                f"escalation {resolution.escalation_id!r} is not pending (pending: {listed})"
            )
        if resolution.action not in pending.options:
            raise ValueError(
                f"escalation {resolution.escalation_id!r} can be resolved with "
                f"{pending.options!r}, not {resolution.action!r}"
            )
        earlier = self._resolved.get(resolution.escalation_id)
        if earlier is not None and (validating or workflow.patched(ONE_RESOLUTION)):
            raise ValueError(
                f"escalation {resolution.escalation_id!r} was already resolved "
                f"({earlier.action} by {earlier.operator or 'an operator'}, {earlier.source})"
            )

    def resolve_update(self, resolution: EscalationResolution) -> EscalationRecord:
        """The ``resolve_escalation`` update: record it; one that lost a race since its
        validator fails the update (``ApplicationError``), never the workflow task."""
        try:
            return self.resolve(resolution, "update")
        except ValueError as error:
            raise _refused(str(error)) from error

    def resolve(self, resolution: EscalationResolution, source: DecisionSource) -> EscalationRecord:
        """Record a resolution (the update's validator, or the signal handler, checked it)."""
        self.check_resolution(resolution, validating=False)
        record = EscalationRecord(
            escalation_id=resolution.escalation_id,
            action=resolution.action,
            result=resolution.result,
            reason=resolution.reason,
            operator=resolution.operator,
            source=source,
            at=workflow.now(),
        )
        self._resolved[resolution.escalation_id] = record
        return record

    def resolve_by_signal(self, resolution: EscalationResolution) -> None:
        """The ``resolve_escalation`` signal: record it, or log why it was ignored."""
        resolved = functools.partial(self.resolve, resolution, "signal")
        self._signals.give(
            self.escalations, resolution.escalation_id, resolved, "resolve_escalation"
        )

    async def escalation(self, pending: PendingEscalation) -> EscalationRecord:
        """Wait, without a time limit, for an operator to resolve ``pending`` (journaled)."""
        self.escalations[pending.escalation_id] = pending
        count("orga_escalations_raised", tool=pending.tool)
        self._on_change()
        try:
            await workflow.wait_condition(lambda: pending.escalation_id in self._resolved)
        except asyncio.CancelledError:
            self._withdraw(self.escalations, pending.escalation_id)
            raise
        self._withdraw(self.escalations, pending.escalation_id)
        record = self._resolved.pop(pending.escalation_id)
        if self._record is not None and self._stamp is not None:
            self._record(
                EscalationResolved(
                    **self._stamp(),
                    escalation_id=record.escalation_id,
                    tool=pending.tool,
                    action=record.action,
                    operator=record.operator,
                    reason=record.reason,
                    source=record.source,
                )
            )
        return record

    # ---- reviews -----------------------------------------------------------------------------

    def check_review(self, review: Review) -> None:
        """Raise ``ValueError`` unless an answer waits for review and the review names who
        reviewed."""
        if not (review.reviewer or "").strip():
            raise ValueError(
                "the review names no reviewer: say who reviews (reviewer), so the audit trail "
                "records it"
            )
        if self.review_pending is None or self._reviewed is not None:
            raise ValueError("no answer is waiting for review")

    def record_review(self, review: Review) -> None:
        """Record a person's review (the update's validator checked it)."""
        if self.review_pending is not None and self._reviewed is None:
            self._reviewed = (review, "update")

    async def review(self, pending: PendingReview, timeout: timedelta) -> tuple[Review, str]:
        """Wait for a person's review of ``pending``; the review and its source (``update``,
        or ``timeout`` with no review: the caller applies its default)."""
        self.review_pending, self._reviewed = pending, None
        self._on_change()
        try:
            await workflow.wait_condition(
                lambda: self._reviewed is not None,
                timeout=timeout,
                timeout_summary=f"review timeout · answer {pending.round}",
            )
        except TimeoutError:
            self._reviewed = (Review(verdict="approve"), "timeout")
        except asyncio.CancelledError:
            self.review_pending = None
            self._on_change()
            raise
        answered = self._reviewed
        assert answered is not None  # the condition, or the timeout, set it
        self.review_pending, self._reviewed = None, None
        self._on_change()
        return answered


def _refused(why: str) -> ApplicationError:
    """A decision refused by its update's handler (after waiting on the gate)."""
    return ApplicationError(why, type="DecisionRefused", non_retryable=True)
