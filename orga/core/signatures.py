"""Signed decisions and bindings (pure): what an approver or an issuer signs, and checking it
against an enrolled key.

A decision is signed as the canonical JSON of what it decides and on what — the workflow, the
call, approve or deny, the SHA-256 of the arguments the approver was shown, the edited
arguments' SHA-256 (approve with edits), the reason, the approver's name, how they were asked
and when they signed — with the approver's Ed25519 private key. The workflow checks the
signature against the public key the worker's operator enrolled for that name, so a decision
cannot be moved to another workflow, call or set of arguments, nor its reason changed, and
``orga audit --verify`` checks it again from what the journal recorded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from datetime import UTC, datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from orga.contracts.approvals import DecisionProof
from orga.contracts.principals import PRINCIPAL_FORMAT
from orga.core.audit import canonical

__all__ = [
    "SIGNED_FORMAT",
    "decision_text",
    "fingerprint",
    "principal_text",
    "proof_problem",
    "public_key_problem",
    "sha256_text",
    "signature_holds",
]

SIGNED_FORMAT = "orga-approval/1"
"""The version of what is signed (part of the signed text)."""


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of ``text`` in UTF-8."""
    return hashlib.sha256(text.encode()).hexdigest()


def _instant(value: datetime) -> str:
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def decision_text(
    *,
    workflow_id: str,
    call_id: str,
    approved: bool,
    arguments_sha256: str,
    edited_arguments: str | None,
    reason: str | None,
    approver: str,
    via: str | None,
    signed_at: datetime,
) -> bytes:
    """The bytes an approver signs for one decision."""
    return canonical(
        {
            "format": SIGNED_FORMAT,
            "workflow_id": workflow_id,
            "call_id": call_id,
            "approved": approved,
            "arguments_sha256": arguments_sha256,
            "edited_arguments_sha256": (
                None if edited_arguments is None else sha256_text(edited_arguments)
            ),
            "reason": reason or "",
            "approver": approver,
            "via": via,
            "signed_at": _instant(signed_at),
        }
    ).encode()


def principal_text(
    *, user: str, tenant: str | None, workflow_id: str, issuer: str, signed_at: datetime
) -> bytes:
    """The bytes an issuer signs to bind ``user`` (of ``tenant``) to one workflow: the web
    endpoint, the desk or an operator's CLI, once it has authenticated the caller
    (``orga.contracts.principals``). Bound to the workflow id, a binding cannot be moved to
    another loop."""
    return canonical(
        {
            "format": PRINCIPAL_FORMAT,
            "user": user,
            "tenant": tenant,
            "workflow_id": workflow_id,
            "issuer": issuer,
            "signed_at": _instant(signed_at),
        }
    ).encode()


def _raw_key(public_key: str) -> bytes | None:
    try:
        raw = base64.b64decode(public_key, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def public_key_problem(public_key: str) -> str | None:
    """Why ``public_key`` is not an Ed25519 public key (32 bytes, base64); ``None`` if it is."""
    if _raw_key(public_key) is None:
        return "not an Ed25519 public key (32 bytes in base64, as `orga approver keygen` prints)"
    return None


def fingerprint(public_key: str) -> str:
    """A short name of a public key: ``SHA256:`` and the first 16 hex digits of its hash."""
    raw = _raw_key(public_key) or public_key.encode()
    return "SHA256:" + hashlib.sha256(raw).hexdigest()[:16]


def signature_holds(public_key: str, text: bytes, signature: str) -> bool:
    """Whether ``signature`` (base64) is ``public_key``'s signature of ``text``."""
    raw = _raw_key(public_key)
    if raw is None:
        return False
    try:
        signed = base64.b64decode(signature, validate=True)
        Ed25519PublicKey.from_public_bytes(raw).verify(signed, text)
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True


def proof_problem(workflow_id: str, call_id: str, proof: DecisionProof) -> str | None:
    """Why a decision recorded as verified does not hold (its signature, checked again
    against the key recorded with it); ``None`` when it holds or was recorded unverified."""
    if not proof.verified:
        return None
    if proof.public_key is None or proof.signature is None or proof.signed_at is None:
        return f"{proof.approver}'s decision on {call_id} is marked verified but holds no signature"
    if fingerprint(proof.public_key) != proof.key_fingerprint:
        return f"{proof.approver}'s decision on {call_id} names a key that is not the one recorded"
    text = decision_text(
        workflow_id=workflow_id,
        call_id=call_id,
        approved=proof.approved,
        arguments_sha256=proof.arguments_sha256 or "",
        edited_arguments=proof.edited_arguments,
        reason=proof.reason,
        approver=proof.approver or "",
        via=proof.via,
        signed_at=proof.signed_at,
    )
    if not signature_holds(proof.public_key, text, proof.signature):
        return (
            f"{proof.approver}'s signature on the decision on {call_id} does not hold for key "
            f"{proof.key_fingerprint}"
        )
    return None
