"""The step progress tracker: when to stop re-attempting a failing step (pure).

Each failed attempt's error text is compared with the previous one by normalised Levenshtein
similarity (rapidfuzz: ``1 - distance / length of the longer``). At or above
``similarity_threshold`` the step is stuck — the same failure again — and stops even before the
attempt limit; otherwise it may be attempted again until ``max_reattempts_per_step`` re-attempts
are used up. An unrecoverable error (one no attempt can fix) stops at once.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from rapidfuzz.distance import Levenshtein

from orga.contracts.task import StepPolicy

__all__ = ["ProgressDecision", "StepTracker", "similarity"]


_COMPARED_CHARS = 8_000
"""Characters of each error compared (the tool activity cuts its errors to this many): the
distance takes time in the product of the lengths, and error texts may carry what a remote
system answered — 256 KiB each would hold the workflow for seconds."""


def similarity(a: str, b: str) -> float:
    """Normalised Levenshtein similarity of the texts' first 8 000 characters: 1.0 for equal
    texts, 0.0 for nothing in common."""
    return float(Levenshtein.normalized_similarity(a[:_COMPARED_CHARS], b[:_COMPARED_CHARS]))


class ProgressDecision(BaseModel):
    """``continue`` (attempt again) or ``stop`` with the reason."""

    model_config = ConfigDict(frozen=True)

    action: Literal["continue", "stop"]
    reason: str = ""


class StepTracker(BaseModel):
    """The failures of one step so far."""

    attempts: int = 0
    errors: list[str] = Field(default_factory=list[str])

    def failed(
        self, error: str, policy: StepPolicy, *, unrecoverable: bool = False
    ) -> ProgressDecision:
        """Record a failed attempt and decide whether another one makes sense."""
        self.attempts += 1
        previous = self.errors[-1] if self.errors else None
        self.errors.append(error)
        if unrecoverable:
            return ProgressDecision(action="stop", reason=f"unrecoverable error: {error}")
        if previous is not None:
            alike = similarity(previous, error)
            if alike >= policy.similarity_threshold:
                return ProgressDecision(
                    action="stop",
                    reason=(
                        f"stuck: attempt {self.attempts} failed like the one before "
                        f"(similarity {alike:.2f} ≥ {policy.similarity_threshold:.2f}): {error}"
                    ),
                )
        if self.attempts > policy.max_reattempts_per_step:
            return ProgressDecision(
                action="stop",
                reason=(
                    f"{self.attempts} attempt(s) failed (max_reattempts_per_step="
                    f"{policy.max_reattempts_per_step}); last error: {error}"
                ),
            )
        return ProgressDecision(action="continue")

    def reset(self) -> None:
        """An operator asked for another round of attempts."""
        self.errors.clear()
        self.attempts = 0
