"""The ORGA cycle as typestate: one class per phase, each able only to move to the next.

::

    Observing ─reason()─▶ Reasoning ─route()─▶ ToolPolicyCheck ─gate()─▶ ToolDispatching
        ▲                             │                                        │
        │                             └──────▶ AnswerPolicyCheck ─gate()─▶ Answered
        │                                           │ (denied: feedback)       │
        └───────────────────────────────────────────┴──────────collect()───────┘

Every constructor takes the phase it comes from, so a type checker rejects any path that
skips a phase: there is no way to build a ``ToolDispatching`` without a ``ToolPolicyCheck``,
and a ``Reasoning`` has no method that dispatches tools. Pure code: the workflow performs the
activities in between and hands their results to the transitions.
"""

from __future__ import annotations

from collections.abc import Sequence

from orga.contracts.conversation import Message, ToolCall, ToolResult
from orga.contracts.errors import UnhandledStopReason
from orga.contracts.inference import InferenceResponse
from orga.contracts.policy import PolicyAction, PolicyDecision, PolicyResult
from orga.core.arguments import elided
from orga.core.routing import route

__all__ = [
    "AnswerPolicyCheck",
    "Answered",
    "Observing",
    "PlannedCall",
    "Reasoning",
    "ToolDispatching",
    "ToolPolicyCheck",
]


class Observing:
    """The conversation holds everything up to the last turn; next, ask the model."""

    def __init__(self, iteration: int, new_messages: Sequence[Message] = ()) -> None:
        self.iteration = iteration
        self.new_messages = list(new_messages)
        """Messages the last phase produced, to append to the conversation."""

    def reason(self) -> Reasoning:
        """Start the next reasoning step."""
        return Reasoning(self)


class Reasoning:
    """A model call is under way for step ``iteration``."""

    def __init__(self, previous: Observing) -> None:
        self.iteration = previous.iteration + 1

    def route(self, response: InferenceResponse) -> ToolPolicyCheck | AnswerPolicyCheck:
        """Route on the structured ``stop_reason`` (and nothing else).

        Raises:
            UnhandledStopReason: for every stop reason other than ``tool_use`` and
                ``end_turn``; the turn's tool calls are not run.
        """
        where = route(response.stop_reason)
        if where == "act" and response.tool_calls:
            return ToolPolicyCheck(self, response)
        if where == "answer" and not response.tool_calls:
            return AnswerPolicyCheck(self, response)
        raw = response.raw_stop_reason or response.stop_reason
        if where == "fail":
            why = "orga continues only on 'tool_use' and 'end_turn'"
        elif where == "act":
            why = "a 'tool_use' turn must carry at least one tool call and this one has none"
        else:
            why = "an 'end_turn' turn must not carry tool calls and this one does"
        calls = [call.name for call in response.tool_calls]
        raise UnhandledStopReason(
            f"the model stopped with stop_reason {response.stop_reason!r} (provider said "
            f"{raw!r}) at iteration {self.iteration}: {why}. "
            f"{len(calls)} tool call(s) of this turn were not run.",
            {
                "stop_reason": response.stop_reason,
                "raw_stop_reason": raw,
                "iteration": self.iteration,
                "tool_calls_not_run": calls,
                "refusal": response.refusal,
                "text": response.text[:2000],
            },
        )


class ToolPolicyCheck:
    """The model asked for tool calls; each must pass the gate."""

    def __init__(self, previous: Reasoning, response: InferenceResponse) -> None:
        self.iteration = previous.iteration
        self.response = response
        self.calls = list(response.tool_calls)
        self.refused: dict[str, ToolResult] = {}
        """Calls answered before the gate (the evidence tracker's refusals), by id."""
        self.prepared: dict[str, str] = {}
        """Arguments a call runs with when they differ from the model's (judgement stripped)."""
        ids = [call.id for call in self.calls]
        if len(set(ids)) != len(ids):
            raise UnhandledStopReason(
                f"the model's turn at iteration {self.iteration} repeats a tool call id "
                f"({ids!r}); every call needs its own id to get its own result",
                {"stop_reason": response.stop_reason, "tool_calls_not_run": ids},
            )

    def refuse(self, call_id: str, result: ToolResult) -> None:
        """Answer a call before the gate; it will not run."""
        self.refused[call_id] = result

    def run_with(self, call_id: str, arguments: str) -> None:
        """Run a call with other arguments than the model wrote (the model is not told)."""
        self.prepared[call_id] = arguments

    def gated(self) -> list[ToolCall]:
        """The calls the gate decides: all but the refused ones, as they would run."""
        return [
            c.model_copy(update={"arguments": self.prepared[c.id]}) if c.id in self.prepared else c
            for c in self.calls
            if c.id not in self.refused
        ]

    def actions(self) -> list[PolicyAction]:
        """The actions the gate must decide, one per gated call, in the model's order."""
        return [PolicyAction.of_call(c) for c in self.gated()]

    def gate(self, result: PolicyResult) -> ToolDispatching:
        """Apply the gate's decisions. A malformed verdict denies everything (fail closed)."""
        gated = self.gated()
        decisions = list(result.decisions)
        if len(decisions) != len(gated):
            reason = (
                f"the gate {result.engine!r} returned {len(decisions)} decisions for "
                f"{len(gated)} calls; denying all of them"
            )
            decisions = [PolicyDecision(decision="deny", reason=reason) for _ in gated]
        by_id = {c.id: d for c, d in zip(gated, decisions, strict=True)}
        refused = PolicyDecision(decision="deny", reason="answered before the gate")
        return ToolDispatching(self, [by_id.get(c.id, refused) for c in self.calls])


class PlannedCall:
    """One call of a turn with the gate's decision on it."""

    def __init__(
        self, index: int, call: ToolCall, decision: PolicyDecision, prepared: str | None = None
    ) -> None:
        self.index = index
        self.decision = decision
        self.requested = call
        """The call as the model made it."""
        modified = decision.decision == "modify" and decision.arguments is not None
        self.call = call.model_copy(update={"arguments": decision.arguments}) if modified else call
        """The call as the model will see it (rewritten by a ``modify`` decision)."""
        self.execute = self.call
        """The call as it runs: ``call``, or the loop's own preparation of it."""
        if prepared is not None and not modified:
            self.execute = call.model_copy(update={"arguments": prepared})

    def edit(self, arguments: str) -> None:
        """The call runs, and the model sees it, with ``arguments`` (an approver's edit)."""
        self.call = self.execute = self.call.model_copy(update={"arguments": arguments})


class ToolDispatching:
    """The gated calls are running. Each call id must receive exactly one result."""

    def __init__(self, previous: ToolPolicyCheck, decisions: Sequence[PolicyDecision]) -> None:
        self.iteration = previous.iteration
        self.response = previous.response
        self.planned = [
            PlannedCall(index, call, decision, previous.prepared.get(call.id))
            for index, (call, decision) in enumerate(zip(previous.calls, decisions, strict=True))
        ]
        self._ledger: dict[str, ToolResult | None] = {p.call.id: None for p in self.planned}
        for call_id, result in previous.refused.items():
            self._ledger[call_id] = result

    def record(self, result: ToolResult) -> None:
        """Enter the result of one call. A second result for the same id is a bug."""
        if result.call_id not in self._ledger:
            raise KeyError(f"no call {result.call_id!r} in this turn")
        if self._ledger[result.call_id] is not None:
            raise ValueError(f"call {result.call_id!r} already has a result")
        self._ledger[result.call_id] = result

    def results(self) -> list[ToolResult]:
        """The results entered so far (a turn that stops before every call has one)."""
        return [r for r in self._ledger.values() if r is not None]

    def missing(self) -> list[str]:
        """Call ids still without a result."""
        return [call_id for call_id, result in self._ledger.items() if result is None]

    def refused_arguments(self) -> bool:
        """Whether a call's arguments were refused unread (``orga.core.arguments.elided``)."""
        return any(elided(p.call) is not p.call for p in self.planned)

    def collect(self, elide: bool = False) -> Observing:
        """Close the turn: one tool message with one result per call id, in the model's order.

        A call whose decision changed its arguments is shown to the model as modified, so the
        assistant turn in the conversation carries the arguments that actually ran. With
        ``elide``, arguments that were refused unread are kept as a short stand-in.
        """
        if missing := self.missing():
            raise ValueError(f"calls {missing!r} have no result; every call id needs one")
        results = self.results()
        assistant = self.response.as_message()
        shown = [elided(p.call) if elide else p.call for p in self.planned]
        if any(s is not p.requested for s, p in zip(shown, self.planned, strict=True)):
            assistant = assistant.model_copy(update={"tool_calls": shown})
        return Observing(self.iteration, [assistant, Message(role="tool", tool_results=results)])


class AnswerPolicyCheck:
    """The model ended its turn with an answer; the answer must pass the gate (``respond``)."""

    def __init__(self, previous: Reasoning, response: InferenceResponse) -> None:
        self.iteration = previous.iteration
        self.response = response
        self.answer: str | None = None
        """A typed loop's answer value as JSON text, once validated: the gate judges it."""

    def actions(self) -> list[PolicyAction]:
        return [PolicyAction.of_answer(self.answer)]

    def gate(self, result: PolicyResult) -> Answered | Observing:
        """An allowed answer completes the loop; a denied one goes back to the model."""
        decision = result.decisions[0] if len(result.decisions) == 1 else None
        if decision is not None and decision.permits:
            return Answered(self)
        reason = decision.reason if decision is not None else "the gate gave no single decision"
        feedback = Message(
            role="user",
            content=(
                f"[orga gate] Your final answer was not accepted: {reason or 'denied'}. "
                "Revise your answer, or use the available tools, and answer again."
            ),
        )
        return Observing(self.iteration, [self.response.as_message(), feedback])


class Answered:
    """The loop is done: the answer passed the gate."""

    def __init__(self, previous: AnswerPolicyCheck) -> None:
        self.iteration = previous.iteration
        self.output = previous.response.text
        self.message = previous.response.as_message()
