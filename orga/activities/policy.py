"""The policy activity: one call per turn decides every proposed action.

Gates, selected when a loop or task is set up (its config's choice within its agent's floor):

* ``permissive`` — allows everything. For development only: refused (every action denied)
  unless the worker runs with ``ORGA_ALLOW_PERMISSIVE=1``.
* ``default`` — fails closed: denies a tool that was not advertised to this loop or is not
  registered here, arguments that are not a JSON object or do not match the tool's schema;
  a tool declared ``requires_approval`` needs a human decision; a final answer is allowed.
* ``cedar`` / ``opa`` — the default checks first, then the external policy decides.

Anything a gate cannot decide is a denial. Before any gate, arguments a tool declares as paths
(``path_arguments``) are normalised (``orga.core.paths``): a path that is absolute, leaves its
root or names a hidden file is denied, and an allowed call whose path was normalised runs with
the normalised path (a ``modify``), so the policy judged the file that will be read.
"""

from __future__ import annotations

from temporalio import activity

from orga.contracts.policy import (
    EVALUATE_POLICY,
    PolicyAction,
    PolicyDecision,
    PolicyRequest,
    PolicyResult,
)
from orga.gates.cedar import CedarGate
from orga.gates.default import combine, default_decision, normalise_paths
from orga.gates.opa import OpaGate
from orga.runtime.tracing import tracer
from orga.tools.sdk import ToolRegistry

__all__ = ["PolicyActivities"]


class PolicyActivities:
    """The gates one worker offers."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        cedar: CedarGate | None = None,
        opa: OpaGate | None = None,
        allow_permissive: bool = False,
        allow_hidden: bool = False,
    ) -> None:
        self._registry = registry
        self._cedar = cedar
        self._opa = opa
        self._allow_permissive = allow_permissive
        self._allow_hidden = allow_hidden

    @activity.defn(name=EVALUATE_POLICY)
    async def evaluate_policy(self, request: PolicyRequest) -> PolicyResult:
        """Decide every action of one turn."""
        checked = [
            normalise_paths(a, self._registry, allow_hidden=self._allow_hidden)
            for a in request.actions
        ]
        actions = [
            c if isinstance(c, PolicyAction) else a
            for c, a in zip(checked, request.actions, strict=True)
        ]
        with tracer().start_as_current_span(
            "orga.gate",
            attributes={
                "orga.policy.mode": request.mode,
                "orga.agent.id": request.agent_id,
                "orga.policy.actions": [a.tool or a.kind for a in request.actions],
            },
        ) as span:
            result = await self._decide(request.model_copy(update={"actions": actions}))
            span.set_attribute("orga.policy.decisions", [d.decision for d in result.decisions])
        decisions: list[PolicyDecision] = []
        for given, check, decision in zip(request.actions, checked, result.decisions, strict=True):
            if isinstance(check, PolicyDecision):
                decisions.append(check)
            elif decision.decision == "allow" and check.arguments != given.arguments:
                decisions.append(
                    PolicyDecision(
                        decision="modify",
                        reason="path normalised before the policy judged it",
                        arguments=check.arguments,
                        policy_ids=[*decision.policy_ids, "default.path"],
                    )
                )
            else:
                decisions.append(decision)
        return result.model_copy(update={"decisions": decisions})

    async def _decide(self, request: PolicyRequest) -> PolicyResult:
        if request.mode == "permissive":
            if not self._allow_permissive:
                reason = (
                    "the permissive gate is refused on this worker (ORGA_ALLOW_PERMISSIVE is not "
                    "set); denied (fail closed)"
                )
                decisions = [
                    PolicyDecision(
                        decision="deny", reason=reason, policy_ids=["permissive.refused"]
                    )
                    for _ in request.actions
                ]
            else:
                decisions = [
                    PolicyDecision(decision="allow", policy_ids=["permissive"])
                    for _ in request.actions
                ]
            return PolicyResult(engine="permissive", decisions=decisions)
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
            decisions[index] = combine(decisions[index], verdict)
        return PolicyResult(engine=request.mode, policy_hash=policy_hash, decisions=decisions)
