"""Contracts of the critic: a final answer is reviewed before the loop accepts it.

``config.critic`` names a reviewer: a model (``{"kind": "model", "agent": "<critic agent>"}``,
one model call of that agent returning a structured verdict) or a person (``{"kind":
"human"}``, through the ``review`` update). ``approve`` accepts the answer; ``revise`` sends the
feedback back to the model and the loop goes on. The ``max_rounds``-th review that still says
``revise`` ends the loop with ``termination_reason = "critic_rejected"``, the last answer and the
critique: a normal completion, not a failure.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, NonNegativeInt

from orga.contracts.inference import Usage
from orga.contracts.principals import Principal
from orga.contracts.vocabulary import ProviderName
from orga.contracts.wire import Compact, Contract, Tagged

__all__ = [
    "CRITIQUE",
    "REVIEW_TOOL",
    "CriticConfig",
    "CritiqueRequest",
    "CritiqueVerdict",
    "HumanCritic",
    "ModelCritic",
    "PendingReview",
    "Review",
    "ReviewRecord",
    "Verdict",
]

CRITIQUE: Final = "critique"
"""Name of the activity a model critic runs."""
REVIEW_TOOL: Final = "submit_review"
"""The tool a critic model must call with its verdict (a verdict in prose is not accepted)."""

Verdict = Literal["approve", "revise"]


class ModelCritic(Tagged):
    """A critic model: one model call of the worker's agent ``agent`` per review."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["model"] = "model"
    """Says which critic this is."""
    agent: str = Field(min_length=1)
    """The critic agent (agents file): its provider and model answer, as its own principal."""
    max_rounds: int = Field(default=2, ge=1, le=10)
    """Reviews at most; the last ``revise`` ends the loop ``critic_rejected``."""


class HumanCritic(Tagged):
    """A person reviews each final answer (the ``review`` update; ``orga review``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["human"] = "human"
    """Says which critic this is."""
    timeout: timedelta = Field(default=timedelta(hours=1), gt=timedelta(0))
    """How long a review waits for a person (the loop's clock stops meanwhile)."""
    on_timeout: Literal["approve", "reject"] = "reject"
    """What an unanswered review counts as: accept the answer, or end ``critic_rejected``."""
    max_rounds: int = Field(default=2, ge=1, le=10)
    """Reviews at most; the last ``revise`` ends the loop ``critic_rejected``."""


CriticConfig = Annotated[ModelCritic | HumanCritic, Field(discriminator="kind")]


class Review(Contract):
    """What a reviewer sends: the payload of the ``review`` update."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: Verdict
    feedback: str = ""
    """What to change (for ``revise``), or a note."""
    reviewer: str | None = None
    """Who reviewed (required by the update's validator)."""


class PendingReview(Contract):
    """A final answer waiting for a person's review."""

    model_config = ConfigDict(frozen=True)

    round: int
    answer: str
    since: datetime


class ReviewRecord(Contract):
    """One review, as recorded."""

    model_config = ConfigDict(frozen=True)

    round: NonNegativeInt
    verdict: Literal["approve", "revise", "reject"]
    """``reject``: an unanswered human review under ``on_timeout = "reject"``."""
    feedback: str = ""
    reviewer: str | None = None
    source: Literal["model", "update", "timeout"]
    at: datetime
    turn: NonNegativeInt | None = Field(default=None, exclude_if=lambda v: v is None)
    """In a thread: the turn whose answer it reviewed (a turn's reviews count towards
    ``max_rounds``, each turn anew)."""


class CritiqueRequest(Compact):
    """The input of the ``critique`` activity."""

    model_config = ConfigDict(frozen=True)

    critic: str
    provider: ProviderName
    model: str
    task: str
    answer: str
    round: int
    token_budget: int | None = None
    """Tokens the loop has left: the review must fit (``InferenceRequest.token_budget``)."""
    principal: Principal | None = None
    """Who the loop runs for: the call is charged to its spend ledger, as the loop's own are."""


class CritiqueVerdict(Compact):
    """A critic model's structured verdict."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    feedback: str = ""
    usage: Usage = Field(default_factory=Usage)
