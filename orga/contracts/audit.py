"""Contracts of the audit chain: every governance record of a loop or task, hash-chained.

Policy decisions, approvals, reviews, escalation resolutions, delegations and compensations are
appended, as they are journaled, to a chain in workflow state: each entry holds the SHA-256 of
the previous entry and of its own canonical JSON (``orga.core.audit``). The chain survives
continue-as-new (each run starts from the previous run's head). ``orga audit`` prints it;
``--verify`` rebuilds it from the workflow's history by replaying it, and reports the first
entry that does not match.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AUDITED_KINDS", "GENESIS", "AuditChain", "AuditEntry"]

GENESIS: Final = "0" * 64
"""The ``prev`` of a chain's first entry."""
AUDITED_KINDS: Final = frozenset(
    {
        "PolicyEvaluated",
        "ApprovalDecided",
        "ReviewDecided",
        "EscalationResolved",
        "DelegationStarted",
        "DelegationFinished",
        "CompensationSettled",
    }
)
"""The journal entries that are governance records."""


class AuditEntry(BaseModel):
    """One governance record in the chain."""

    model_config = ConfigDict(frozen=True)

    index: int
    """Position in the whole chain, from 0 (across continue-as-new)."""
    kind: str
    record: dict[str, Any]
    prev: str
    """The hash of the entry before (``GENESIS`` for the first)."""
    hash: str
    """SHA-256 of ``prev`` and the entry's canonical JSON (index, kind, record)."""


class AuditChain(BaseModel):
    """The chain as one run holds it: its entries, after what the runs before it held."""

    model_config = ConfigDict(frozen=True)

    base_index: int = 0
    """How many entries earlier runs of the workflow hold."""
    base: str = GENESIS
    """The hash of the last entry of the earlier runs."""
    entries: list[AuditEntry] = Field(default_factory=list[AuditEntry])

    @property
    def head(self) -> str:
        return self.entries[-1].hash if self.entries else self.base
