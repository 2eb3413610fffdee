"""Binding a loop to the person it runs for: a principal, claimed or signed by an issuer.

Whoever starts a loop may say whom it runs for (``LoopInput.principal``). Said by a plain
client it is a *claim*. An *issuer* — a caller that authenticated the user: the web endpoint,
the desk, an operator's CLI — signs it for the workflow id with its Ed25519 key
(``ORGA_ISSUER`` names it, ``ORGA_ISSUER_KEY`` holds the key; the worker's operator enrolls
the public key as ``[issuers.<name>]``), and the worker then records the principal verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orga.contracts.principals import PrincipalClaim
from orga.runtime.approver_keys import load_key, sign_principal
from orga.runtime.settings import Settings

__all__ = ["Issuer", "bind", "issuer_from"]


@dataclass(frozen=True)
class Issuer:
    """A caller that authenticates users and may bind them to loops: its enrolled name and
    its private key."""

    name: str
    key: Ed25519PrivateKey


def issuer_from(settings: Settings) -> Issuer | None:
    """The issuer the settings name (``ORGA_ISSUER`` and ``ORGA_ISSUER_KEY``), if any.

    Raises:
        ApproverKeyError: the key file cannot be read or is not an Ed25519 key.
    """
    if settings.issuer is None or settings.issuer_key is None:
        return None
    return Issuer(settings.issuer, load_key(settings.issuer_key, "ORGA_ISSUER_KEY"))


@overload
def bind(
    principal: PrincipalClaim | str, workflow_id: str, issuer: Issuer | None
) -> PrincipalClaim: ...
@overload
def bind(principal: None, workflow_id: str, issuer: Issuer | None) -> None: ...
@overload
def bind(
    principal: PrincipalClaim | str | None, workflow_id: str, issuer: Issuer | None
) -> PrincipalClaim | None: ...
def bind(
    principal: PrincipalClaim | str | None, workflow_id: str, issuer: Issuer | None
) -> PrincipalClaim | None:
    """``principal`` (a claim, or a user's name) for the workflow ``workflow_id``: signed when
    there is an ``issuer``, a claim otherwise."""
    if principal is None:
        return None
    claim = PrincipalClaim(user=principal) if isinstance(principal, str) else principal
    if issuer is None:
        return claim
    return sign_principal(claim, workflow_id=workflow_id, issuer=issuer.name, key=issuer.key)
