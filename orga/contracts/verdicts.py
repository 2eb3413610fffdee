"""The gate's verdicts (shared by the policy activity and a model call that decides the
``default`` gate on the worker: ``InferenceRequest.gate``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Decision", "PolicyDecision", "PolicyResult"]

Decision = Literal["allow", "deny", "modify", "require_approval"]


class PolicyDecision(BaseModel):
    """The gate's verdict on one action."""

    model_config = ConfigDict(frozen=True)

    decision: Decision
    reason: str = ""
    """Why; a denial's reason is fed back to the model."""
    arguments: str | None = None
    """For ``modify``: the argument text to run with instead (the model sees the change)."""
    policy_ids: list[str] = Field(default_factory=list[str])
    """Which policies determined the decision (Cedar policy ids, rule names)."""

    @property
    def permits(self) -> bool:
        """True for ``allow`` and ``modify``."""
        return self.decision in ("allow", "modify")


class PolicyResult(BaseModel):
    """The output of ``evaluate_policy``: one decision per action, in the request's order."""

    model_config = ConfigDict(frozen=True)

    engine: str
    """Which gate decided (``default``, ``permissive``, ``cedar``, ``opa``)."""
    policy_hash: str | None = None
    """Hash of the policy set that decided, where the gate has one."""
    decisions: list[PolicyDecision]
