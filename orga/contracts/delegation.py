"""Contracts of delegation: a loop hands a task to another of the worker's agents.

An agent whose entry in the agents file lists ``delegates`` gets the ``delegate`` tool. A call
runs a child ``ReasoningLoop`` of the named agent (a child workflow, under that agent's own
policy and ceilings) on a budget carved from what the parent has left; what the child spends
is charged to the parent when it returns, so a child never spends more than its parent had.

An agent that runs at an A2A endpoint (``AgentSpec.a2a``) is delegated to by the
``delegate_remote`` activity instead (``RemoteDelegation`` in, ``RemoteAnswer`` out:
``orga.activities.remote_agents``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field, NonNegativeInt

from orga.contracts.inference import Usage
from orga.contracts.principals import Principal
from orga.contracts.wire import Contract

__all__ = [
    "A2A_USAGE_KEY",
    "DELEGATE_REMOTE",
    "DELEGATE_TOOL",
    "MIN_DELEGATION_TOKENS",
    "REMOTE_WAITS_SIGNAL",
    "DelegationArguments",
    "DelegationRecord",
    "DelegationStatus",
    "RemoteAnswer",
    "RemoteDelegation",
    "RemoteSettled",
    "RemoteWaits",
]

DELEGATE_TOOL: Final = "delegate"
DELEGATE_REMOTE: Final = "delegate_remote"
REMOTE_WAITS_SIGNAL: Final = "remote_waits"
"""The signal by which a remote delegation says its task waits for a person there (or no
longer): the loop shows it on its state and the desk's inbox."""
A2A_USAGE_KEY: Final = "orga.usage"
"""The key of an A2A answer artifact's metadata under which orga's endpoint reports what the
turn spent (``Usage``'s fields and ``model_calls``), for a caller that charges it on."""
"""The activity that hands a task to an agent at an A2A endpoint."""
MIN_DELEGATION_TOKENS: Final = 1_000
"""A child gets at least this many tokens, or the delegation is refused."""

DelegationStatus = Literal["running", "completed", "failed", "refused"]


class DelegationArguments(Contract):
    """The arguments of a ``delegate`` call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(min_length=1)
    task: str = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_iterations: int | None = Field(default=None, ge=1)
    tools: list[str] | None = Field(default=None, max_length=100)
    """Fewer tools than the child's agent has (never others); default: all of them."""


class DelegationRecord(Contract):
    """One delegation of a loop: to whom, on what budget, and how it went."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    agent: str
    workflow_id: str
    status: DelegationStatus
    max_tokens: NonNegativeInt
    max_iterations: NonNegativeInt
    usage: Usage = Field(default_factory=Usage)
    """What the child spent (charged to the parent)."""
    error: str | None = None
    waiting: str | None = None
    """A remote agent's task waits for a person at its endpoint: what it says waits."""


class RemoteDelegation(Contract):
    """A task for an agent of the worker's agents file that runs at an A2A endpoint: the
    worker finds the endpoint and its token by the agent's id, never in this input."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1)
    call_id: str = Field(min_length=1, max_length=200)
    """The ``delegate`` call: with the workflow id, names the A2A context (one per call)."""
    deadline: datetime
    """When the remote task must have ended (its share of the parent's working time); past
    it, it is cancelled there."""
    max_tokens: NonNegativeInt
    """The share of the parent's tokens held for it on the principal's spend ledger."""
    max_cost: float | None = Field(default=None, ge=0)
    """The share of the parent's money (``max_cost``), held likewise."""
    principal: Principal | None = None
    """Whom its cost is charged to (the parent's principal, as its worker resolved it)."""


RemoteSettled = Literal["reconciled", "sent"]
"""How a call whose earlier attempt was lost was settled: the remote had its task, which was
followed (``reconciled``), or had none, and the task was sent (``sent``)."""


class RemoteAnswer(Contract):
    """What a remote A2A agent answered, and what it said it spent."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    output: str
    value: Any = None
    """Its data parts' values (one: the value; several: a list), if it sent any."""
    usage: Usage = Field(default_factory=Usage)
    model_calls: NonNegativeInt = 0
    reported: bool = False
    """Whether it reported what it spent (orga's endpoint does); else nothing is charged."""
    settled: RemoteSettled | None = None


class RemoteWaits(Contract):
    """A remote delegation's task waits for a person at its endpoint (``says``: what), or no
    longer (``None``). Shown, never acted on: the remote's people decide there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_id: str = Field(min_length=1, max_length=200)
    says: str | None = Field(default=None, max_length=1_000)
