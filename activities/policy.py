"""The policy activity: one call per turn decides every proposed action.

Gates, selected per loop by ``config.policy``:

* ``permissive`` — allows everything. For development only.
* ``default`` — fails closed: denies a tool that was not advertised to this loop or is not
  registered here, arguments that are not a JSON object or do not match the tool's schema;
  a tool declared ``requires_approval`` needs a human decision; a final answer is allowed.
* ``cedar`` / ``opa`` — the default checks first, then the external policy decides.

Anything a gate cannot decide is a denial.
"""

from __future__ import annotations

from temporalio import activity

from activities.cedar import CedarGate
from activities.opa import OpaGate
from orga.contracts.errors import ToolInputError
from orga.contracts.policy import (
    EVALUATE_POLICY,
    PolicyAction,
    PolicyDecision,
    PolicyRequest,
    PolicyResult,
)
from orga.runtime.tools import ToolRegistry, parse_arguments

__all__ = ["PolicyActivities", "default_decision"]


def default_decision(
    action: PolicyAction, request: PolicyRequest, registry: ToolRegistry
) -> PolicyDecision:
    """The default gate's verdict on one action."""
    if action.kind == "respond":
        return PolicyDecision(decision="allow", policy_ids=["default.respond"])
    name = action.tool or ""
    if name not in request.advertised:
        available = ", ".join(request.advertised) or "none"
        return PolicyDecision(
            decision="deny",
            reason=f"tool {name!r} is not available to this agent (available: {available})",
            policy_ids=["default.advertised"],
        )
    found = registry.get(name)
    if found is None:
        return PolicyDecision(
            decision="deny",
            reason=f"tool {name!r} is not registered on the worker that checked the call",
            policy_ids=["default.registered"],
        )
    try:
        found.validate(parse_arguments(name, action.arguments))
    except ToolInputError as error:
        return PolicyDecision(
            decision="deny", reason=error.message, policy_ids=["default.arguments"]
        )
    if found.definition.requires_approval:
        return PolicyDecision(
            decision="require_approval",
            reason=f"tool {name!r} requires approval",
            policy_ids=["default.requires_approval"],
        )
    return PolicyDecision(decision="allow", policy_ids=["default.allow"])


def _combine(default: PolicyDecision, external: PolicyDecision) -> PolicyDecision:
    """An external verdict on an action the default checks let through."""
    if external.decision == "allow" and default.decision == "require_approval":
        return default.model_copy(
            update={"policy_ids": [*default.policy_ids, *external.policy_ids]}
        )
    return external


class PolicyActivities:
    """The gates one worker offers."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        cedar: CedarGate | None = None,
        opa: OpaGate | None = None,
    ) -> None:
        self._registry = registry
        self._cedar = cedar
        self._opa = opa

    @activity.defn(name=EVALUATE_POLICY)
    async def evaluate_policy(self, request: PolicyRequest) -> PolicyResult:
        """Decide every action of one turn."""
        if request.mode == "permissive":
            return PolicyResult(
                engine="permissive",
                decisions=[
                    PolicyDecision(decision="allow", policy_ids=["permissive"])
                    for _ in request.actions
                ],
            )
        decisions = [default_decision(a, request, self._registry) for a in request.actions]
        if request.mode == "default":
            return PolicyResult(engine="default", decisions=decisions)
        passed = [i for i, d in enumerate(decisions) if d.decision != "deny"]
        asked = [request.actions[i] for i in passed]
        if request.mode == "cedar" and self._cedar is not None:
            verdicts = self._cedar.decide(asked, request)
            policy_hash: str | None = self._cedar.policy_hash
        elif request.mode == "opa" and self._opa is not None:
            verdicts = await self._opa.decide(asked, request)
            policy_hash = None
        else:
            reason = (
                f"policy mode {request.mode!r} is not configured on this worker (set "
                "ORGA_POLICY_DIR for cedar, ORGA_OPA_URL for opa); denied (fail closed)"
            )
            return PolicyResult(
                engine=request.mode,
                decisions=[
                    d if d.decision == "deny" else PolicyDecision(decision="deny", reason=reason)
                    for d in decisions
                ],
            )
        for index, verdict in zip(passed, verdicts, strict=True):
            decisions[index] = _combine(decisions[index], verdict)
        return PolicyResult(engine=request.mode, policy_hash=policy_hash, decisions=decisions)
