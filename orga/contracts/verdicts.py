"""The gate's verdicts (shared by the policy activity and a model call that decides the
``default`` gate on the worker: ``InferenceRequest.gate``), and what a policy engine was asked
for each (``AskedPolicy``: journaled, so ``orga policy what-if`` can ask another policy set)."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import ConfigDict, Field

from orga.contracts.wire import Compact, Contract

__all__ = ["ASKED_LIMIT", "AskedPolicy", "Decision", "PolicyDecision", "PolicyResult"]

Decision = Literal["allow", "deny", "modify", "require_approval"]

ASKED_LIMIT: Final = 16_384
"""Characters of an ``AskedPolicy`` (as JSON) kept in the decision; a longer one (large
arguments) is kept in orga's store, the decision holding its reference."""


class AskedPolicy(Contract):
    """What a policy engine (Cedar, OPA) was asked about one action, and what the loop's own
    gate made of its verdict — enough to ask another policy set the same question."""

    model_config = ConfigDict(frozen=True)

    engine: str
    """``cedar`` or ``opa``."""
    policy_hash: str | None = None
    """The policy set that answered (Cedar: a hash of its files; OPA: the bundle revision)."""
    request: dict[str, Any] = Field(default_factory=dict[str, Any])
    """The engine's own request, as it saw it: Cedar's ``principal``, ``action``, ``resource``
    and ``context`` (the arguments its schema declares); OPA's ``input`` document."""
    action: dict[str, Any] = Field(default_factory=dict[str, Any])
    """The orga action the request was built from (a ``PolicyAction``: kind, tool, call id, the
    arguments in full, a typed answer, a task's step), after path normalisation."""
    agent_id: str = ""
    workflow_id: str = ""
    subject: Literal["loop", "task"] = "loop"
    iteration: int = 0
    tokens_used: int = 0
    default: Decision = "allow"
    """What the default checks said before the engine (``allow`` or ``require_approval``); for
    a gate up a delegation tree (``inherits``), the decision it was asked to judge."""
    default_ids: list[str] = Field(default_factory=list[str])
    default_arguments: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """For ``inherits``: the arguments of the decision judged (a ``modify``)."""
    inherits: bool = Field(default=False, exclude_if=lambda v: not v)
    """The gate of a loop up the delegation tree: its verdict joins by ``inherit`` (a deny
    wins, then either's approval, then its rewrite), not as the loop's own engine's does."""
    decision: Decision = "deny"
    """The gate's decision from the engine's verdict and the default checks (before any gate up
    a delegation tree)."""
    reason: str = ""
    arguments: str | None = None
    """For ``modify``: the arguments the call ran with."""
    ref: str | None = None
    """Set when this record was over ``ASKED_LIMIT``: the whole of it is in orga's store under
    this reference (``request`` and ``action`` are then empty here)."""


class PolicyDecision(Contract):
    """The gate's verdict on one action."""

    model_config = ConfigDict(frozen=True)

    decision: Decision
    reason: str = ""
    """Why; a denial's reason is fed back to the model."""
    arguments: str | None = None
    """For ``modify``: the argument text to run with instead (the model sees the change)."""
    policy_ids: list[str] = Field(default_factory=list[str])
    """Which policies determined the decision (Cedar policy ids, rule names)."""
    asked: AskedPolicy | None = Field(default=None, exclude_if=lambda v: v is None)
    """What a policy engine was asked for it (none for the default and permissive gates)."""
    asked_above: list[AskedPolicy] = Field(
        default_factory=list[AskedPolicy], exclude_if=lambda v: not v
    )
    """What the gates up a delegated loop's tree were asked for it, nearest first."""

    @property
    def permits(self) -> bool:
        """True for ``allow`` and ``modify``."""
        return self.decision in ("allow", "modify")


class PolicyResult(Compact):
    """The output of ``evaluate_policy``: one decision per action, in the request's order."""

    model_config = ConfigDict(frozen=True)

    engine: str
    """Which gate decided (``default``, ``permissive``, ``cedar``, ``opa``)."""
    policy_hash: str | None = None
    """Hash of the policy set that decided, where the gate has one."""
    decisions: list[PolicyDecision]
