"""Who a loop runs for: principals, the operator's spend limits, and what the ledger reports.

A **principal** is a user and the tenant the user belongs to. A loop, a thread, a task, a
delegated child and a fork each run for one (or for nobody: no ledger then applies). It reaches
the worker as a ``PrincipalClaim`` in the start input; the worker resolves it when the loop
starts (``orga.worker.principals``) into a ``Principal``:

* **bound**: the claim carries a signature by an *issuer* the operator enrolled
  (``[issuers.<name>] key = "…"``) — the web endpoint, the desk or an operator's CLI, each of
  which authenticated the caller and signed ``orga.core.signatures.principal_text`` for this
  workflow id. The principal is then ``verified``.
* **claimed**: no signature, or one that does not hold. A plain Temporal client can say
  anything; the principal is recorded as a claim (``verified`` false), and the operator decides
  whether claims run at all (``[principals] claims = "record" | "refuse"``).

The operator's mapping wins over both: a user listed with a tenant (``[users.ann] tenant =
"acme"``) belongs to that tenant whatever the claim says. Otherwise a binding's tenant is the
issuer's word, and a claim's is not taken: an unbound user the operator did not map runs under
the tenant ``claimed``, whose limits and weight (``[tenants.claimed]``) all such claims share.
A binding admits one execution: the first to use it (recorded in the store every worker
shares); a later execution under the same workflow id with a copy of it is refused. A child
loop runs for its parent's principal, a next run (continue-as-new) for its previous run's;
neither is a client's to choose.

Limits are per user and per tenant, per UTC day and month, in USD (priced as
``LoopConfig.max_cost`` is) and tokens (``SpendLimits``). Every model call reserves its worst
case against them before it is sent and settles to what was served (``orga.runtime.spend``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, StringConstraints

from orga.contracts.wire import Compact, Contract

__all__ = [
    "CLAIMED_TENANT",
    "NAME_PATTERN",
    "PRINCIPAL_FORMAT",
    "ClaimRule",
    "Period",
    "Principal",
    "PrincipalClaim",
    "PrincipalName",
    "Scope",
    "SpendLimits",
    "SpendLine",
]

PRINCIPAL_FORMAT: Final = "orga-principal/1"
"""The version of what an issuer signs (part of the signed text)."""

CLAIMED_TENANT: Final = "claimed"
"""The tenant a claim runs under when the operator maps its user to none: a claim never names
its tenant (it would spend that tenant's budget and take its fairness weight). The operator
limits and weighs all such claims together as ``[tenants.claimed]``."""

NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$"
"""A user's or tenant's name: plain characters only (an e-mail address fits), so a name is
safe in a search-attribute query, a metric label and a terminal."""

PrincipalName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]

ClaimRule = Literal["record", "refuse"]
"""What the worker does with a principal no enrolled issuer signed: run it, marked a claim
(``record``, the default), or refuse the loop (``refuse``)."""

Period = Literal["day", "month"]
"""A spend limit's period: the UTC calendar day or month."""

Scope = Literal["user", "tenant"]
"""Whose spend a ledger line counts."""


class PrincipalClaim(Compact):
    """Who a loop, thread or task is started for, as its starter says (``LoopInput.principal``,
    ``TaskInput.principal``). Unsigned, it is a claim; signed by an enrolled issuer for this
    workflow id, it binds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user: PrincipalName
    tenant: PrincipalName | None = None
    """The user's tenant, as the issuer signs it (the operator's mapping wins when it says).
    Unsigned, it is not taken: a claim runs under its user's mapped tenant, else under
    ``claimed`` (``CLAIMED_TENANT``)."""
    issuer: str | None = Field(default=None, max_length=200)
    """The enrolled issuer that authenticated the user and signed this claim."""
    workflow_id: str | None = Field(default=None, max_length=1000)
    """The workflow the issuer bound the user to (signed: a binding is not moved elsewhere)."""
    signed_at: datetime | None = None
    signature: str | None = Field(default=None, max_length=200)
    """Ed25519 signature (base64) of ``orga.core.signatures.principal_text``."""


class Principal(Compact):
    """Who a loop runs for, as its worker resolved it (recorded with the loop's setup)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user: PrincipalName
    tenant: PrincipalName | None = None
    verified: bool = False
    """An enrolled issuer bound the user to this loop (or to the loop it descends from);
    false: a claim its starter made."""
    issuer: str | None = None
    """The issuer that bound it (``None`` for a claim)."""

    def describe(self) -> str:
        """``ann@acme`` (``ann@acme (claimed)`` for a claim the operator maps to acme, ``ann
        (claimed)`` for one it maps to no tenant): for people to read."""
        tenant = None if self.tenant == CLAIMED_TENANT and not self.verified else self.tenant
        name = self.user if tenant is None else f"{self.user}@{tenant}"
        return name if self.verified else f"{name} (claimed)"


class SpendLimits(Contract):
    """What a user or a tenant may spend, across all of its loops (``[users.<name>]``,
    ``[tenants.<name>]``; ``"*"`` names the limits of every one not listed). None: no limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    day_usd: float | None = Field(default=None, gt=0)
    """USD per UTC day, priced as ``LoopConfig.max_cost`` is (a model without a known price
    cannot be kept within it: its calls are refused)."""
    month_usd: float | None = Field(default=None, gt=0)
    """USD per UTC calendar month."""
    day_tokens: int | None = Field(default=None, ge=1)
    """Tokens (input and output) per UTC day."""
    month_tokens: int | None = Field(default=None, ge=1)
    """Tokens per UTC calendar month."""


class SpendLine(Contract):
    """One user's or tenant's spend in one period, as the ledger holds it (``orga spend``)."""

    model_config = ConfigDict(frozen=True)

    scope: Scope
    name: str
    period: Period
    key: str
    """The period itself: ``2026-12-04`` (a day) or ``2026-12`` (a month), UTC."""
    spent_usd: float = 0.0
    spent_tokens: int = 0
    reserved_usd: float = 0.0
    """Held by calls in flight (their worst case), not yet settled."""
    reserved_tokens: int = 0
    calls: int = 0
    """Settled model calls."""
    limit_usd: float | None = None
    limit_tokens: int | None = None
