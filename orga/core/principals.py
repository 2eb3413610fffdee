"""Who a loop's children run for (pure): the principal a loop hands on.

A child loop (a delegation, a task's loop step) runs for its parent's principal. The parent
hands on the claim it was started with when its worker verified it — the signature, made for
the workflow at the top, holds for a child whose server-set parent is an orga workflow on its
task queue — and otherwise the user and tenant alone, so a signature that did not hold for the
parent never holds for its child.
"""

from __future__ import annotations

from orga.contracts.principals import Principal, PrincipalClaim

__all__ = ["handed_on"]


def handed_on(claim: PrincipalClaim | None, principal: Principal | None) -> PrincipalClaim | None:
    """The claim a child of a loop that runs for ``principal`` (started with ``claim``) gets."""
    if principal is None:
        return None
    if principal.verified and claim is not None:
        return claim
    return PrincipalClaim(user=principal.user, tenant=principal.tenant)
