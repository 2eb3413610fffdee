"""Forks: a new loop that starts from another loop's state after turn N (``orga fork``).

The client names the source and the turn (``ForkRequest`` in ``LoopInput.fork``); the fork's
worker reads the state itself from the source (the ``fork_point`` query, answered from the
source's history even when it has ended), so a client cannot hand a loop a conversation or
budgets spent of its own making. The fork journals where it came from first (``Forked``, on
its audit chain: workflow id, run id, turn, the carried state's hash); the source is untouched.
Turns are numbered as ``orga journal`` numbers them (``it N``: model calls of the loop).
"""

from __future__ import annotations

from typing import Final

from pydantic import ConfigDict, Field

from orga.contracts.carry import ToolStateSnapshot
from orga.contracts.conversation import USER_MESSAGE_LIMIT, Message
from orga.contracts.evidence import EvidenceCollection
from orga.contracts.inference import Usage
from orga.contracts.wire import Compact, Contract

__all__ = ["FETCH_FORK_POINT", "FORK_MEMO", "ForkPoint", "ForkPointAsk", "ForkRequest"]

FETCH_FORK_POINT: Final = "fetch_fork_point"
"""The activity that reads a fork point from the source loop (``ForkRequest`` → ``ForkPoint``)."""
FORK_MEMO: Final = "orga_forked_from"
"""The memo key a fork is started with: ``{"workflow_id", "run_id", "at"}`` of its source."""


class ForkRequest(Compact):
    """Where a fork starts: a loop, the turn after which, and what is said there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workflow_id: str = Field(min_length=1, max_length=1_000)
    run_id: str | None = None
    """The run that holds turn ``at``; default: found from the loop's newest run back."""
    at: int = Field(ge=0)
    """The turn (``orga journal``'s ``it N``) after which the fork starts; 0: before the first
    model call."""
    say: str | None = Field(default=None, max_length=USER_MESSAGE_LIMIT)
    """A user message added after turn ``at`` (or, with ``replace``, instead of the last one
    before it)."""
    replace: bool = False


class ForkPointAsk(Contract):
    """The ``fork_point`` query's argument."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: int = Field(ge=0)


class ForkPoint(Contract):
    """A loop's state after turn ``at``, as the ``fork_point`` query answers it."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    run_id: str
    at: int
    task_queue: str = ""
    """The source's task queue: a fork runs where its source ran unless told otherwise."""
    found: bool = True
    """False when this run does not hold turn ``at``: ``earlier_run_id`` may."""
    earlier_run_id: str | None = None
    """The run this one continued (continue-as-new), which holds the turns before its own."""
    first: int = 0
    """The first turn this run can fork after."""
    last: int = 0
    """The last turn this run can fork after."""
    messages: list[Message] = Field(default_factory=list[Message])
    """The conversation after turn ``at``."""
    usage: Usage = Field(default_factory=Usage)
    model_calls: int = 0
    """Model calls its budget had paid for (its critic's and children's included)."""
    tool_call_count: int = 0
    answered: bool = False
    """Turn ``at`` was an answer (the conversation ends with it): a fork must say something."""
    tools: ToolStateSnapshot = Field(default_factory=ToolStateSnapshot)
    """Its tool state then: breakers, cached results, dead letters (no decided approvals: a
    fork's calls are its own)."""
    evidence: EvidenceCollection | None = None
    """Its evidence collection then (information-gain saturation)."""
    context_summary: str | None = None
    """An ``anchored_summary`` loop's running summary then, and the messages it covers."""
    summarised_through: int = 0
    unsummarised_through: int = 0
    calibration: float = 1.0
    """The token-estimate calibration it had learnt."""
    config: dict[str, object] = Field(default_factory=dict[str, object])
    """The source's config (as JSON), for the fork to start from."""
    state_hash: str = ""
    """SHA-256 of the carried state (the conversation's digest, the budgets spent)."""
