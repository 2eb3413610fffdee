"""The policy activity: one call per turn decides every proposed action.

Gates, selected when a loop or task is set up (its config's choice within its agent's floor):

* ``permissive`` — allows everything. For development only: refused (every action denied)
  unless the worker runs with ``ORGA_ALLOW_PERMISSIVE=1``.
* ``default`` — fails closed: denies a tool that was not advertised to this loop or is not
  registered here, arguments that are not a JSON object or do not match the tool's schema;
  a tool declared ``requires_approval`` needs a human decision; a final answer is allowed.
* ``cedar`` / ``opa`` — the default checks first, then the external policy decides.

A delegated loop runs under its own gate *and* every gate up its delegation tree
(``PolicyRequest.ancestors``): each ancestor's engine judges, as that ancestor's agent, every
action its own gate did not deny (with the arguments it would run with); a deny anywhere wins
(``orga.gates.default.inherit``). An ancestor's ``default`` gate adds nothing a loop's own
default checks do not already make.

Anything a gate cannot decide is a denial. Before any gate, arguments a tool declares as paths
(``path_arguments``) are normalised (``orga.core.paths``): a path that is absolute, leaves its
root or names a hidden file is denied, and an allowed call whose path was normalised runs with
the normalised path (a ``modify``), so the policy judged the file that will be read.
"""

from __future__ import annotations

from temporalio import activity

from orga.activities.elsewhere import Elsewhere, elsewhere_if_missing
from orga.contracts.policy import (
    EVALUATE_POLICY,
    AncestorGate,
    PolicyAction,
    PolicyDecision,
    PolicyRequest,
    PolicyResult,
)
from orga.contracts.verdicts import ASKED_LIMIT, AskedPolicy
from orga.contracts.vocabulary import PolicyMode
from orga.gates.cedar import CedarGate
from orga.gates.default import combine, default_decision, inherit, normalise_paths
from orga.gates.opa import OpaGate
from orga.runtime.tracing import tracer
from orga.tools.sdk import ToolRegistry
from orga.worker.blobs import BlobStore

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
        blobs: BlobStore | None = None,
        elsewhere: Elsewhere | None = None,
    ) -> None:
        self._elsewhere = elsewhere
        """Whether a live worker of a task queue registers some tools (``evaluate_policy``)."""
        self._registry = registry
        self._blobs = blobs
        self._cedar = cedar
        self._opa = opa
        self._allow_permissive = allow_permissive
        self._allow_hidden = allow_hidden

    @activity.defn(name=EVALUATE_POLICY)
    async def evaluate_policy(self, request: PolicyRequest) -> PolicyResult:
        """Decide every action of one turn — where this worker registers the tools the loop
        was offered that they call; else, where another live worker of the queue does, fail
        ``SetupElsewhere``: the workflow asks that one (``orga.activities.elsewhere``).

        Raises:
            ApplicationError: ``SetupElsewhere``.
        """
        offered = set(request.advertised)
        called = [a.tool for a in request.actions if a.kind == "call_tool" and a.tool in offered]
        await elsewhere_if_missing(self._registry, self._elsewhere, [t for t in called if t])
        return await self.decide(request)

    async def decide(self, request: PolicyRequest) -> PolicyResult:
        """Decide every action of one turn with this worker's tools."""
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
                        asked=decision.asked,
                        asked_above=decision.asked_above,
                    )
                )
            else:
                decisions.append(decision)
        return result.model_copy(update={"decisions": decisions})

    async def _decide(self, request: PolicyRequest) -> PolicyResult:
        own = result = await self._own(request)
        for ancestor in request.ancestors:
            result = await self._inherit(request, result, ancestor)
        if own is result:
            return result
        decisions = [  # what the loop's own engine was asked stays with each decision
            d if o.asked is None else d.model_copy(update={"asked": o.asked})
            for d, o in zip(result.decisions, own.decisions, strict=True)
        ]
        return result.model_copy(update={"decisions": decisions})

    async def _inherit(
        self, request: PolicyRequest, result: PolicyResult, ancestor: AncestorGate
    ) -> PolicyResult:
        """``result`` once the gate of a loop up the tree judged what it did not deny."""
        if ancestor.policy not in ("cedar", "opa"):
            return result  # the loop's own default checks hold: its floor is at least default
        open_ = [i for i, d in enumerate(result.decisions) if d.decision != "deny"]
        if not open_:
            return result
        asked: list[PolicyAction] = []
        for i in open_:
            action, decision = request.actions[i], result.decisions[i]
            if decision.arguments is not None:  # judged as it would run
                action = action.model_copy(update={"arguments": decision.arguments})
            asked.append(action)
        judged = request.model_copy(
            update={"mode": ancestor.policy, "agent_id": ancestor.agent_id, "ancestors": []}
        )
        engine = await self._engine(ancestor.policy, asked, judged)
        gate = f"the {ancestor.policy} gate of {ancestor.agent_id!r}, up the delegation tree"
        decisions = list(result.decisions)
        if engine is None:
            refused = PolicyDecision(decision="deny", reason=_unconfigured(ancestor.policy))
            verdicts, policy_hash = [refused for _ in asked], None
        else:
            verdicts, policy_hash = engine
        for index, action, verdict in zip(open_, asked, verdicts, strict=True):
            before = decisions[index]
            after = inherit(before, verdict, gate)
            above = list(before.asked_above)
            if engine is not None and (
                record := self._asked(action, judged, before, after, policy_hash, inherits=True)
            ):
                above.append(record)
            decisions[index] = after.model_copy(update={"asked_above": above})
        return result.model_copy(
            update={"decisions": decisions, "policy_hash": result.policy_hash or policy_hash}
        )

    async def _engine(
        self, mode: PolicyMode, actions: list[PolicyAction], request: PolicyRequest
    ) -> tuple[list[PolicyDecision], str | None] | None:
        """An external engine's verdicts and policy hash (``None``: not configured here)."""
        if mode == "cedar" and self._cedar is not None:
            return self._cedar.decide(actions, request), self._cedar.policy_hash
        if mode == "opa" and self._opa is not None:
            return await self._opa.decide_with_revision(actions, request)
        return None

    async def _own(self, request: PolicyRequest) -> PolicyResult:
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
        engine = await self._engine(request.mode, asked, request)
        if engine is None:
            reason = _unconfigured(request.mode)
            return PolicyResult(
                engine=request.mode,
                decisions=[
                    d if d.decision == "deny" else PolicyDecision(decision="deny", reason=reason)
                    for d in decisions
                ],
            )
        verdicts, policy_hash = engine
        for index, verdict in zip(passed, verdicts, strict=True):
            default, action = decisions[index], request.actions[index]
            combined = combine(default, verdict)
            if record := self._asked(action, request, default, combined, policy_hash):
                combined = combined.model_copy(update={"asked": record})
            decisions[index] = combined
        return PolicyResult(engine=request.mode, policy_hash=policy_hash, decisions=decisions)

    def _asked(
        self,
        action: PolicyAction,
        request: PolicyRequest,
        before: PolicyDecision,
        after: PolicyDecision,
        policy_hash: str | None,
        *,
        inherits: bool = False,
    ) -> AskedPolicy | None:
        """What ``request``'s engine was asked about ``action`` (None: it passed unjudged),
        ``before`` the decision it was asked to judge (the default checks', or for a gate up
        the tree, the loop's own), ``after`` what the gate made of its verdict."""
        gate = self._cedar if request.mode == "cedar" else self._opa
        question = gate.asked(action, request) if gate is not None else None
        if question is None:
            return None
        return self._bounded(
            AskedPolicy(
                engine=request.mode,
                policy_hash=policy_hash,
                request=question,
                action=action.model_dump(mode="json", exclude_defaults=True),
                agent_id=request.agent_id,
                workflow_id=request.workflow_id,
                subject=request.subject,
                iteration=request.iteration,
                tokens_used=request.usage.total_tokens,
                default=before.decision,
                default_ids=list(before.policy_ids),
                default_arguments=before.arguments if inherits else None,
                inherits=inherits,
                decision=after.decision,
                reason=after.reason,
                arguments=after.arguments,
            )
        )

    def _bounded(self, asked: AskedPolicy) -> AskedPolicy:
        """``asked``, or a stand-in holding its reference in orga's store when it is long."""
        text = asked.model_dump_json()
        if len(text) <= ASKED_LIMIT or self._blobs is None:
            return asked
        return asked.model_copy(update={"request": {}, "action": {}, "ref": self._blobs.put(text)})


def _unconfigured(mode: PolicyMode) -> str:
    return (
        f"policy mode {mode!r} is not configured on this worker (set ORGA_POLICY_DIR for "
        "cedar, ORGA_OPA_URL for opa); denied (fail closed)"
    )
