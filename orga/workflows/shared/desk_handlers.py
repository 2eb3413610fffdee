"""The people's handlers of a loop or task: the ``approval`` signal and ``approve`` update, the
``resolve_escalation`` signal and update, and the ``review`` update, all answered by the
workflow's ``HumanDesk`` (``orga.workflows.shared.human_desk``).

Workflow code: a mixin for the two workflow definitions (``ReasoningLoop``, ``Task``).
"""

from __future__ import annotations

from temporalio import workflow

from orga.contracts.approvals import (
    ApprovalDecision,
    ApprovalRecord,
    EscalationRecord,
    EscalationResolution,
)
from orga.contracts.critic import Review
from orga.contracts.messages import (
    APPROVAL_SIGNAL,
    APPROVE_UPDATE,
    RESOLVE_ESCALATION,
    REVIEW_UPDATE,
)
from orga.workflows.shared.human_desk import HumanDesk

__all__ = ["DeskHandlers"]


class DeskHandlers:
    """The ``approval``/``approve`` and ``resolve_escalation`` signals and updates, for a
    workflow with a ``_desk``."""

    _desk: HumanDesk

    def desk(self) -> HumanDesk:
        """The workflow's desk (no query: read after a replay, by ``orga judge what-if``)."""
        return self._desk

    @workflow.signal(name=RESOLVE_ESCALATION)
    def resolve_escalation_signal(self, resolution: EscalationResolution) -> None:
        """Resolve a parked step with one of its options (``retry``, ``skip``, …)."""
        self._desk.resolve_by_signal(resolution)

    @workflow.update(name=RESOLVE_ESCALATION)
    def resolve_escalation(self, resolution: EscalationResolution) -> EscalationRecord:
        """Resolve a parked step; returns the resolution as recorded."""
        return self._desk.resolve_update(resolution)

    @resolve_escalation.validator
    def _check_resolution(self, resolution: EscalationResolution) -> None:
        self._desk.check_resolution(resolution)

    @workflow.update(name=REVIEW_UPDATE)
    def review(self, review: Review) -> Review:
        """Review the final answer that waits (``{"verdict", "feedback"?, "reviewer"}``);
        returns the review as recorded."""
        self._desk.record_review(review)
        return review

    @review.validator
    def _check_review(self, review: Review) -> None:
        self._desk.check_review(review)

    @workflow.signal(name=APPROVAL_SIGNAL)
    def approval(self, decision: ApprovalDecision) -> None:
        """Approve or deny a pending call (``{"call_id", "approved", "reason"?, "approver"}``)."""
        self._desk.decide_by_signal(decision)

    @workflow.update(name=APPROVE_UPDATE)
    async def approve(self, decision: ApprovalDecision) -> ApprovalRecord:
        """Approve or deny a pending call (an approval may edit its arguments); returns the
        decision as recorded."""
        return await self._desk.decide_update(decision)

    @approve.validator
    def _check_approve(self, decision: ApprovalDecision) -> None:
        self._desk.check_approval(decision)
