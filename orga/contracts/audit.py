"""Contracts of the audit chain: every governance record of a loop or task, hash-chained.

Policy decisions, approvals, reviews, escalation resolutions, delegations and compensations are
appended, as they are journaled, to a chain in workflow state: each entry holds the SHA-256 of
the previous entry and of its own canonical JSON (``orga.core.audit``). The chain survives
continue-as-new (each run starts from the previous run's head). ``orga audit`` prints it;
``--verify`` rebuilds it from the workflow's history by replaying it, and reports the first
entry that does not match.

A Temporal reset starts a new run from a point of an earlier one: what that run recorded after
the point is no longer on the chain the workflow goes on with. ``ResetRun`` says what such a
run held that the surviving history does not: governance records, and effects (tool calls
and child workflows that ran).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import ConfigDict, Field

from orga.contracts.wire import Contract

__all__ = [
    "AUDITED_KINDS",
    "DECISION_KINDS",
    "GENESIS",
    "AuditChain",
    "AuditEntry",
    "Effect",
    "ExportedEntry",
    "ResetRun",
]

GENESIS: Final = "0" * 64
"""The ``prev`` of a chain's first entry."""
AUDITED_KINDS: Final = frozenset(
    {
        "PolicyEvaluated",
        "ApprovalDecided",
        "JudgeConsulted",
        "ReviewDecided",
        "EscalationResolved",
        "DelegationStarted",
        "DelegationFinished",
        "CompensationSettled",
        "Forked",
        "CallReceipt",
    }
)
"""The journal entries that are governance records."""
DECISION_KINDS: Final = frozenset({"ApprovalDecided", "ReviewDecided", "EscalationResolved"})
"""The governance records that are a person's (or a timeout's) decision: a reset may not drop
one from the audit unless the verifier accepts it."""


class AuditEntry(Contract):
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


class AuditChain(Contract):
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


class ExportedEntry(AuditEntry):
    """A line of ``orga audit --export``: an entry and the run that holds it."""

    run_id: str | None = None
    """The run whose chain holds the entry (``None`` in exports written before runs were
    named)."""
    reset_away: bool = False
    """The run was reset away and the surviving chain does not hold this entry."""

    def entry(self) -> AuditEntry:
        """The entry as a chain holds it (without the run)."""
        return AuditEntry.model_validate(self.model_dump(include=set(AuditEntry.model_fields)))


class Effect(Contract):
    """Something a run did in the world, as its history records it."""

    model_config = ConfigDict(frozen=True)

    event_id: int
    """The event that records it: its outcome, or its start while it was in flight."""
    kind: Literal["tool", "child_workflow"]
    name: str
    """The tool, or the child's workflow type."""
    ref: str
    """The tool call's id, or the child's workflow id."""
    outcome: Literal["completed", "failed", "timed_out", "canceled", "terminated", "in_flight"]
    """How it ended in that run; ``in_flight``: it was running when the run ended."""


class ResetRun(Contract):
    """A run that a reset took off the workflow's surviving history, and what it held that the
    surviving history does not."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    reset_into: str | None = None
    """The run a reset started from a point of this one (``None``: this run continued from a
    run that was reset away)."""
    reset_event: int | None = None
    """The event of ``reset_into`` that marks the reset: this run's events before it were
    copied into ``reset_into``."""
    reason: str = ""
    """The reset's reason, as the server recorded it."""
    continued_from: str | None = None
    """The run this one continued (continue-as-new) from."""
    entries: list[AuditEntry] = Field(default_factory=list[AuditEntry])
    """Governance records on this run's chain that the surviving chain does not hold."""
    effects: list[Effect] = Field(default_factory=list[Effect])
    """Tool calls and child workflows that ran in this run after the point the surviving
    history keeps."""
    accepted: bool = False
    """The verifier accepted what the reset dropped (``--accept-reset``)."""

    @property
    def decisions(self) -> list[AuditEntry]:
        """The dropped records that are decisions (``DECISION_KINDS``)."""
        return [entry for entry in self.entries if entry.kind in DECISION_KINDS]

    @property
    def drops_governance(self) -> bool:
        """The reset dropped a decision or an effect: verification fails unless accepted."""
        return bool(self.decisions or self.effects)
