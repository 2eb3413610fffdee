"""A person's decision on a waiting call, checked (pure): who may decide, with which proof.

Before a loop or task records a decision, ``check_decision`` holds it to the rules: where
approvers are enrolled, signed by the one it names (``orga.core.signatures``), over this
workflow, call and arguments, while the call waits, with a signature never used before; a
second approval by the same person of a call that needs several is refused; edited arguments
are a JSON object on an approval of a call that needs one approver. Where none are enrolled,
the decision passes as *unverified*.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from datetime import datetime, timedelta
from typing import Final

from orga.contracts.approvals import (
    ApprovalDecision,
    DecisionProof,
    DecisionSource,
    EnrolledApprover,
    PendingApproval,
)
from orga.core.arguments import try_parse_arguments
from orga.core.signatures import fingerprint, proof_problem

__all__ = ["SIGNATURE_SKEW", "check_decision", "key_approved_as"]

SIGNATURE_SKEW: Final = timedelta(minutes=5)
"""How far a signature's time may lie outside the time its call waited (clocks differ)."""


def _check_edit(
    decision: ApprovalDecision, pending: PendingApproval, source: DecisionSource, edits: bool
) -> None:
    if source != "update" or not edits:
        raise ValueError("edited arguments are sent by the approve update of a loop or task")
    if not decision.approved:
        raise ValueError("only an approval may edit the arguments (a denial says why)")
    if pending.approvals_needed > 1:
        raise ValueError(
            f"call {decision.call_id!r} needs {pending.approvals_needed} approvers: its "
            "arguments cannot be edited on the way (deny it, saying what to change)"
        )
    if try_parse_arguments(decision.arguments or "") is None:
        raise ValueError("the edited arguments are not a JSON object")


def check_decision(
    decision: ApprovalDecision,
    pending: PendingApproval,
    *,
    source: DecisionSource,
    approvers: Mapping[str, EnrolledApprover],
    used: Set[str],
    workflow_id: str,
    now: datetime,
    edits: bool = False,
) -> DecisionProof:
    """The proof of a person's decision on ``pending``, checked: with ``approvers`` enrolled,
    signed by the one it names, over this workflow, call and arguments, while the call waits,
    with a signature not ``used`` before; with none enrolled, unverified. Edited arguments
    (where the workflow takes ``edits``) must be a JSON object on an approval that needs one
    approver.

    Raises:
        ValueError: the decision is refused, and why (nothing is recorded).
    """
    approver = (decision.approver or "").strip()
    if decision.arguments is not None:
        _check_edit(decision, pending, source, edits)
    if decision.approved and approver in pending.approved_by:
        raise ValueError(
            f"{approver} already approved call {decision.call_id!r}: it needs "
            f"{pending.approvals_needed} distinct approvers ({len(pending.approved_by)} so far)"
        )
    if decision.via is not None and source != "update":
        raise ValueError(f"a decision via {decision.via} is sent by update")
    proof = DecisionProof(
        approver=approver,
        approved=decision.approved,
        reason=decision.reason,
        source="mcp-elicitation" if decision.via == "mcp-elicitation" else source,
        at=now,
        arguments_sha256=pending.arguments_sha256,
        edited_arguments=decision.arguments,
        via=decision.via,
        signature=decision.signature,
        signed_at=decision.signed_at,
    )
    if not approvers:
        return proof  # nobody is enrolled: the name is the caller's claim (unverified)
    enrolled = approvers.get(approver)
    if enrolled is None:
        raise ValueError(
            f"{approver!r} is not an enrolled approver of this worker (enrolled: "
            f"{', '.join(sorted(approvers))}): nothing was recorded"
        )
    if decision.signature is None or decision.signed_at is None:
        raise ValueError(
            "approvers are enrolled here: an unsigned decision is not recorded. Sign it "
            "with your key (ORGA_APPROVER_KEY names it; `orga approver keygen` writes one)"
        )
    if decision.signed_at.tzinfo is None:
        raise ValueError("the signature's time names no time zone: sign with an aware time")
    if decision.signature in used:
        raise ValueError("this signature was recorded before: a replayed decision is refused")
    if not pending.since - SIGNATURE_SKEW <= decision.signed_at <= now + SIGNATURE_SKEW:
        raise ValueError(
            f"signed at {decision.signed_at.isoformat()}, outside the time call "
            f"{decision.call_id!r} has waited (since {pending.since.isoformat()}): a replayed "
            "or stale signature is refused"
        )
    key = fingerprint(enrolled.public_key)
    checked = proof.model_copy(
        update={"verified": True, "key_fingerprint": key, "public_key": enrolled.public_key}
    )
    if proof_problem(workflow_id, decision.call_id, checked) is not None:
        raise ValueError(
            f"the signature does not hold for {approver}'s enrolled key ({key}) over this "
            "decision (this workflow, call, arguments, verdict and reason): nothing was "
            "recorded"
        )
    return checked


def key_approved_as(
    proof: DecisionProof, pending: PendingApproval, approvers: Mapping[str, EnrolledApprover]
) -> str | None:
    """The name under which the key that signed ``proof`` (an approval) already approved
    ``pending``, or None. Four eyes counts keys, not names: one key enrolled under two names
    (``carol``, ``carol-phone``) is one approver."""
    if not proof.approved or proof.key_fingerprint is None:
        return None
    for name in pending.approved_by:
        enrolled = approvers.get(name)
        if enrolled is not None and fingerprint(enrolled.public_key) == proof.key_fingerprint:
            return name
    return None
