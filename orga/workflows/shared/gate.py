"""The Gate of the ORGA cycle: one policy decision per turn, journaled, failing closed.

Workflow code. Every action a loop takes — the model's tool calls, its final answer, the calls
pre-hydration and fallbacks make — and every step and compensation of a task is decided here,
all actions of a turn at once, by the ``evaluate_policy`` local activity (one marker event per
turn). When the policy check itself fails (an engine down, a timeout), every action is
denied: the gate never fails open.

Under the ``default`` gate a loop's model call is decided on the worker that made it, by the
policy activity's own function, for the actions of its answer (``PolicyAction.of_turn``):
``ModelCallDecisions`` holds them by what each was about (kind, call id, tool, arguments), and
``Gate.decide`` takes an action's decision from there, journaled as any other — an action no
decision was made for is asked of the policy activity as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import FailureError

from orga.contracts.conversation import ToolCall
from orga.contracts.inference import InferenceResponse, Usage
from orga.contracts.journal import DecisionRecord, JournalEntry, PolicyEvaluated, Stamp
from orga.contracts.policy import (
    EVALUATE_POLICY,
    AncestorGate,
    PolicyAction,
    PolicyDecision,
    PolicyRequest,
    PolicyResult,
)
from orga.contracts.vocabulary import PolicyMode
from orga.workflows.shared.elsewhere import where_the_tools_are
from orga.workflows.shared.failures import failure_of
from orga.workflows.shared.options import POLICY_RETRY, POLICY_TIMEOUT
from orga.workflows.shared.patches import GATE_BY_ACTION
from orga.workflows.shared.stopping import Stopping

__all__ = ["Gate", "ModelCallDecisions"]


class ModelCallDecisions:
    """The ``default`` gate's decisions a model call made for the actions of its answer (its
    calls named by the ids the loop gives them, ``with_internal_ids``)."""

    def __init__(self, actions: Sequence[PolicyAction], result: PolicyResult) -> None:
        self._actions = list(actions)
        self._result = result
        self._by_key = (
            {a.key: d for a, d in zip(actions, result.decisions, strict=True)}
            if len(actions) == len(result.decisions)
            else {}  # a malformed answer decides nothing here: the policy activity is asked
        )

    @classmethod
    def of(cls, response: InferenceResponse) -> ModelCallDecisions | None:
        """What ``response`` (its ids the loop's) was decided, if its model call gated it."""
        if response.gate is None:
            return None
        return cls(PolicyAction.of_turn(response.tool_calls), response.gate)

    def for_actions(self, actions: Sequence[PolicyAction]) -> PolicyResult | None:
        """The decisions on exactly ``actions``, or None when one was not decided here.

        ``respond`` is looked up without its answer's value: the ``default`` gate allows every
        final answer, whatever its value."""
        decisions: list[PolicyDecision] = []
        for action in actions:
            key = action.key if action.kind != "respond" else PolicyAction.of_answer().key
            found = self._by_key.get(key)
            if found is None:
                return None
            decisions.append(found)
        own = self._result.decisions
        if len(decisions) == len(own) and all(a is b for a, b in zip(decisions, own, strict=True)):
            return self._result  # the answer's own decisions, in its order: as they came (frozen)
        return self._result.model_copy(update={"decisions": decisions})

    def same_turn(self, actions: Sequence[PolicyAction]) -> bool:
        """``actions`` are all of the answer's, in order (the rule before patch
        ``gate-by-action``, under which only then were the decisions taken)."""

        def about(given: Sequence[PolicyAction]) -> list[tuple[str, str]]:
            return [(a.tool or a.kind, a.arguments if a.kind == "call_tool" else "") for a in given]

        return about(actions) == about(self._actions)


class Gate:
    """Asks the policy engine about a workflow's actions, and journals each decision."""

    def __init__(
        self,
        *,
        policy: PolicyMode,
        agent_id: str,
        workflow_id: str,
        record: Callable[[JournalEntry], None],
        stamp: Callable[[], Stamp],
        facts: Callable[[], tuple[int, Usage]],
        subject: Literal["loop", "task"] = "loop",
        stopping: Stopping | None = None,
    ) -> None:
        self.policy: PolicyMode = policy
        """The gate (replaced by the resolved one once the workflow is set up)."""
        self.ancestors: list[AncestorGate] = []
        """A delegated loop's: the gates of the loops above it, which judge its actions too."""
        self._agent_id = agent_id
        self._workflow_id = workflow_id
        self._record = record
        self._stamp = stamp
        self._facts = facts
        """The iteration (a task: steps completed) and usage so far."""
        self._subject: Literal["loop", "task"] = subject
        self._stopping = stopping or Stopping()
        """The workflow's stop: a stopping workflow asks nothing, and a policy check its
        cancellation cut short is no denial to go on from."""

    async def decide(
        self,
        actions: list[PolicyAction],
        advertised: list[str],
        decided: ModelCallDecisions | None = None,
    ) -> PolicyResult:
        """One decision per action, in order (no actions: no policy call at all). ``decided``:
        the decisions the model call made (the ``default`` gate, on the worker): when they
        cover every action, they are the gate's, journaled, with no policy call."""
        if not actions:  # every call was answered before the gate (the evidence tracker)
            return PolicyResult(engine=self.policy, decisions=[])
        self._stopping.check()
        found = decided.for_actions(actions) if decided is not None else None
        if found is not None and (
            (decided is not None and decided.same_turn(actions)) or workflow.patched(GATE_BY_ACTION)
        ):
            self._journal(actions, found)
            return found
        iteration, usage = self._facts()
        request = PolicyRequest(
            mode=self.policy,
            agent_id=self._agent_id,
            workflow_id=self._workflow_id,
            subject=self._subject,
            iteration=iteration,
            usage=usage,
            advertised=advertised,
            actions=actions,
            ancestors=self.ancestors,
        )
        try:
            result = await where_the_tools_are(
                EVALUATE_POLICY,
                request,
                PolicyResult,
                timeout=POLICY_TIMEOUT,
                retry_policy=POLICY_RETRY,
                summary=f"policy {self.policy} · {len(actions)} action(s)",
            )
        except FailureError as error:
            # A local activity's failure arrives as the error itself, not wrapped in an
            # ActivityError; a timeout as a TimeoutError. Either way: deny (fail closed) —
            # unless the workflow's stop cut the check short: then it ends here.
            self._stopping.check()
            reason = f"the policy check failed ({failure_of(error).message}); denied (fail closed)"
            result = PolicyResult(
                engine=self.policy,
                decisions=[PolicyDecision(decision="deny", reason=reason) for _ in actions],
            )
        self._journal(actions, result)
        return result

    def _journal(self, actions: list[PolicyAction], result: PolicyResult) -> None:
        self._record(
            PolicyEvaluated(
                **self._stamp(),
                engine=result.engine,
                policy_hash=result.policy_hash,
                decisions=[
                    DecisionRecord(
                        action=action.kind,
                        call_id=action.call_id,
                        tool=action.tool,
                        decision=decision.decision,
                        reason=decision.reason,
                        policy_ids=list(decision.policy_ids),
                        asked=decision.asked,
                        asked_above=list(decision.asked_above),
                    )
                    for action, decision in zip(actions, result.decisions, strict=False)
                ],
            )
        )

    async def decide_call(self, call: ToolCall) -> PolicyDecision:
        """Gate one call the loop itself makes (a fallback), as if ``call.name`` were advertised."""
        return await self.decide_one(PolicyAction.of_call(call), [call.name])

    async def decide_one(self, action: PolicyAction, advertised: list[str]) -> PolicyDecision:
        """Gate one action (a person's decision, say: ``approve`` / ``deny``)."""
        return (await self.decide([action], advertised)).decisions[0]
