"""Information-gain stopping, as data: what an evidence tool returns and what a loop records.

Tools marked ``@tool(evidence=True)`` gather evidence; ``orga.core.evidence`` judges each call
and keeps ``EvidenceCollection`` (shown by the ``state`` query, carried across continue-as-new).
A saturated loop ends with a ``ProgressSnapshot`` of the scopes it checked.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, NonNegativeInt

from orga.contracts.wire import Contract

__all__ = [
    "JUDGEMENT_FIELD",
    "CollectionState",
    "CompletedScope",
    "Evidence",
    "EvidenceCollection",
    "Judgement",
    "ProgressSnapshot",
]

JUDGEMENT_FIELD = "previous_gain"
"""The argument the loop adds to evidence tools' schemas for the model's judgement."""
Judgement = Literal["GAINED", "NO_GAIN"]
CollectionState = Literal["COLLECTING", "SATURATED"]


class Evidence(Contract):
    """What an evidence tool may return: the observation, and whether it found anything."""

    found: bool
    observation: str


class CompletedScope(Contract):
    """An evidence call that ran (control facts and a short summary, not the raw result)."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    scope: str
    invocation: Literal["ran", "failed"]
    evidence: Literal["found", "none"]
    summary: str
    judgement: Judgement | None = None


class ProgressSnapshot(Contract):
    """What a saturated loop established: the scopes it checked and what each returned."""

    model_config = ConfigDict(frozen=True)

    checked: list[CompletedScope]
    limitation: str = "insufficient evidence"
    reason: str

    def render(self) -> str:
        """The snapshot as the loop's final answer."""
        lines = [f"Stopped collecting evidence: {self.reason}. Limitation: {self.limitation}."]
        lines += [
            f"- {c.tool} {c.scope}: {c.evidence} ({c.invocation}) — {c.summary}"
            for c in self.checked
        ]
        return "\n".join(lines)


class EvidenceCollection(Contract):
    """Control state of evidence collection (only control facts, never raw results)."""

    max_no_gain: NonNegativeInt = 2
    state: CollectionState = "COLLECTING"
    completed: list[CompletedScope] = Field(default_factory=list[CompletedScope])
    awaiting_judgement: list[str] = Field(default_factory=list[str])
    """Call ids whose results the next evidence call must judge."""
    consecutive_no_gain: NonNegativeInt = 0
    stop_reason: str | None = None
    stop_delivered: bool = False

    @property
    def saturated(self) -> bool:
        return self.state == "SATURATED"
