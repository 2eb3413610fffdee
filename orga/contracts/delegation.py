"""Contracts of delegation: a loop hands a task to another of the worker's agents.

An agent whose entry in the agents file lists ``delegates`` gets the ``delegate`` tool. A call
runs a child ``ReasoningLoop`` of the named agent (a child workflow, under that agent's own
policy and ceilings) on a budget carved from what the parent has left; what the child spends
is charged to the parent when it returns, so a child never spends more than its parent had.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field, NonNegativeInt

from orga.contracts.inference import Usage
from orga.contracts.wire import Contract

__all__ = [
    "DELEGATE_TOOL",
    "MIN_DELEGATION_TOKENS",
    "DelegationArguments",
    "DelegationRecord",
    "DelegationStatus",
]

DELEGATE_TOOL: Final = "delegate"
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
