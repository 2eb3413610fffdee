"""An approver's (or an issuer's) Ed25519 key: writing one, reading it, signing with it.

An *issuer* — the web endpoint, the desk, an operator's CLI — holds a key of the same kind
(``ORGA_ISSUER_KEY``, enrolled as ``[issuers.<name>] key = "…"``) and signs the principal it
authenticated onto the loop it starts (``sign_principal``).

The private key stays with the person (a PEM file, readable by its owner only, that
``ORGA_APPROVER_KEY`` names); the worker's operator enrolls the public key
(``[approvers.<name>] key = "…"``). ``orga approve``, the desk, ``orga mcp`` and
``LoopHandle.approve`` sign what ``orga.core.signatures.decision_text`` says.
"""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orga.contracts.approvals import ApprovalDecision, PendingApproval
from orga.contracts.principals import PrincipalClaim
from orga.core.signatures import decision_text, principal_text

__all__ = [
    "ApproverKeyError",
    "generate_key",
    "load_key",
    "public_key_of",
    "sign_decision",
    "sign_principal",
]


class ApproverKeyError(Exception):
    """The approver's key cannot be written or read: the message says why, in one line."""


def public_key_of(key: Ed25519PrivateKey) -> str:
    """The public key to enroll (32 raw bytes, base64)."""
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def generate_key(path: Path) -> Ed25519PrivateKey:
    """Write a new private key to ``path`` (PEM, mode 0600); refuses to overwrite one.

    Raises:
        ApproverKeyError: ``path`` exists, or cannot be written.
    """
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as error:
        raise ApproverKeyError(
            f"{path} exists: orga never overwrites a key (choose another --out, or delete it)"
        ) from error
    except OSError as error:
        raise ApproverKeyError(f"cannot write {path}: {error.strerror}") from error
    with os.fdopen(descriptor, "wb") as out:
        out.write(pem)
    return key


def load_key(path: Path, variable: str = "ORGA_APPROVER_KEY") -> Ed25519PrivateKey:
    """The private key in the PEM file at ``path`` (named by ``variable``, for messages).

    Raises:
        ApproverKeyError: it cannot be read, or is not an unencrypted Ed25519 private key.
    """
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ApproverKeyError(
            f"{variable}={path}: cannot read the key ({error.strerror})"
        ) from error
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise ApproverKeyError(
            f"{variable}={path}: not an unencrypted PEM private key "
            "(`orga approver keygen` writes one)"
        ) from error
    if not isinstance(key, Ed25519PrivateKey):
        raise ApproverKeyError(f"{variable}={path}: not an Ed25519 key")
    return key


def sign_decision(
    decision: ApprovalDecision,
    *,
    workflow_id: str,
    pending: PendingApproval,
    key: Ed25519PrivateKey,
    now: datetime | None = None,
) -> ApprovalDecision:
    """``decision`` on ``pending`` (of workflow ``workflow_id``), signed with ``key`` now."""
    signed_at = now or datetime.now(UTC)
    text = decision_text(
        workflow_id=workflow_id,
        call_id=decision.call_id,
        approved=decision.approved,
        arguments_sha256=pending.arguments_sha256,
        edited_arguments=decision.arguments,
        reason=decision.reason,
        approver=(decision.approver or "").strip(),
        via=decision.via,
        signed_at=signed_at,
    )
    signature = base64.b64encode(key.sign(text)).decode()
    return decision.model_copy(update={"signed_at": signed_at, "signature": signature})


def sign_principal(
    claim: PrincipalClaim,
    *,
    workflow_id: str,
    issuer: str,
    key: Ed25519PrivateKey,
    now: datetime | None = None,
) -> PrincipalClaim:
    """``claim`` bound to workflow ``workflow_id`` by ``issuer`` (signed with its ``key``):
    the caller who authenticated the user signs, and the worker checks it against the key the
    operator enrolled for ``issuer``."""
    signed_at = now or datetime.now(UTC)
    text = principal_text(
        user=claim.user,
        tenant=claim.tenant,
        workflow_id=workflow_id,
        issuer=issuer,
        signed_at=signed_at,
    )
    return claim.model_copy(
        update={
            "issuer": issuer,
            "workflow_id": workflow_id,
            "signed_at": signed_at,
            "signature": base64.b64encode(key.sign(text)).decode(),
        }
    )
