"""What a caller may put in a decision, against ``orga.core.decisions`` (pure): every malformed
proof is a ``ValueError`` with a reason (which the update's validator sends back and the signal
handler logs), never another exception that would fail the workflow task."""

from __future__ import annotations

from collections.abc import Mapping, Set
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orga.contracts.approvals import (
    ApprovalDecision,
    DecisionProof,
    DecisionSource,
    EnrolledApprover,
    PendingApproval,
)
from orga.core.decisions import check_decision
from orga.core.signatures import fingerprint, proof_problem, sha256_text
from orga.runtime.approver_keys import public_key_of, sign_decision

KEY = Ed25519PrivateKey.generate()
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ARGUMENTS = '{"amount": 5, "to": "bob"}'
PENDING = PendingApproval(
    call_id="i1_call_1_0",
    tool="transfer",
    arguments=ARGUMENTS,
    reason="needs a person",
    since=NOW - timedelta(minutes=1),
    arguments_sha256=sha256_text(ARGUMENTS),
    signatures_required=True,
)
ENROLLED = {"alice": EnrolledApprover(name="alice", public_key=public_key_of(KEY))}


def check(
    decision: ApprovalDecision,
    *,
    source: DecisionSource = "update",
    approvers: Mapping[str, EnrolledApprover] = ENROLLED,
    used: Set[str] = frozenset(),
    edits: bool = False,
) -> DecisionProof:
    return check_decision(
        decision,
        PENDING,
        source=source,
        approvers=approvers,
        used=used,
        workflow_id="loop-1",
        now=NOW,
        edits=edits,
    )


def alice(**fields: object) -> ApprovalDecision:
    decision = ApprovalDecision(call_id=PENDING.call_id, approved=True, approver="alice")
    signed = sign_decision(decision, workflow_id="loop-1", pending=PENDING, key=KEY, now=NOW)
    return signed.model_copy(update=fields)


def test_a_good_signature_is_verified_and_holds_again_from_the_record() -> None:
    proof = check(alice())
    assert proof.verified and proof.key_fingerprint == fingerprint(public_key_of(KEY))
    assert proof_problem("loop-1", PENDING.call_id, proof) is None
    assert proof_problem("loop-2", PENDING.call_id, proof)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"signature": "not base64 !!"}, "does not hold"),
        ({"signature": "AAAA"}, "does not hold"),  # base64, but no Ed25519 signature
        ({"signature": "A" * 10_000}, "does not hold"),
        ({"signed_at": datetime(2026, 12, 2, 12, 0)}, "names no time zone"),
        ({"signed_at": NOW + timedelta(hours=1)}, "stale signature"),
        ({"approver": " alice "}, None),  # the name is trimmed before it is checked
        ({"via": "mcp-elicitation"}, "does not hold"),  # signed without it
        ({"arguments": "[1, 2]"}, "not a JSON object"),
    ],
)
def test_a_malformed_proof_is_a_reason_never_a_crash(
    fields: dict[str, object], reason: str | None
) -> None:
    decision = alice(**fields)
    if reason is None:
        check(decision)
        return
    with pytest.raises(ValueError, match=reason):
        check(decision, edits=True)


def test_a_signature_used_before_and_a_signal_edit_are_refused() -> None:
    decision = alice()
    with pytest.raises(ValueError, match="replayed decision"):
        check(decision, used={decision.signature or ""})
    with pytest.raises(ValueError, match="sent by the approve update"):
        check(alice(arguments='{"amount": 1}'), source="signal", edits=True)


def test_an_enrolled_key_that_is_not_a_key_refuses_every_signature() -> None:
    broken = {"alice": EnrolledApprover(name="alice", public_key="AAAA")}
    with pytest.raises(ValueError, match="does not hold"):
        check(alice(), approvers=broken)
