"""Evidence judging in a running loop: information-gain stopping around the gate.

Workflow code. Before the gate, each evidence call of a turn is judged by the tracker
(``orga.core.evidence``): it runs (with the model's judgement stripped from its arguments), or is
refused with ``DUPLICATE_SCOPE`` / ``PROTOCOL_ERROR`` / ``STOP_REQUIRED`` (an error result, not
gated, not run), or — when the model ignores ``STOP_REQUIRED`` — ends the loop as saturated.
After the turn, the calls that ran are recorded so the next call can judge them.
"""

from __future__ import annotations

from orga.contracts.conversation import Message, ToolResult
from orga.contracts.evidence import EvidenceCollection, ProgressSnapshot
from orga.contracts.journal import EvidenceJudged, EvidenceSaturated
from orga.contracts.tools import ToolDefinition
from orga.core.evidence import EvidenceTracker
from orga.core.phases import Observing, ToolDispatching, ToolPolicyCheck
from orga.workflows.reasoning.loop_books import LoopBooks

__all__ = ["EvidenceJudge", "evidence_tools"]


def evidence_tools(definitions: dict[str, ToolDefinition], advertised: list[str]) -> list[str]:
    """The advertised tools that gather evidence (their calls carry a judgement)."""
    return [name for name in advertised if name in definitions and definitions[name].evidence]


class EvidenceJudge:
    """The loop's evidence tracker, for the tools it advertises."""

    def __init__(
        self,
        collection: EvidenceCollection,
        definitions: dict[str, ToolDefinition],
        advertised: list[str],
        books: LoopBooks,
    ) -> None:
        self.tracker = EvidenceTracker(collection)
        self._judged = set(evidence_tools(definitions, advertised))
        self._books = books

    @property
    def collection(self) -> EvidenceCollection:
        return self.tracker.collection

    @property
    def saturated(self) -> bool:
        return self.tracker.saturated

    def is_evidence(self, name: str) -> bool:
        return name in self._judged

    def track(self, check: ToolPolicyCheck) -> bool:
        """Judge the turn's evidence calls before the gate; True ends the loop (saturated)."""
        tracker, books = self.tracker, self._books
        for call in check.calls:
            if not self.is_evidence(call.name):
                continue
            was_saturated = tracker.saturated
            verdict = tracker.admit(call)
            if verdict.end_loop:
                return True
            outcome = verdict.judgement or (verdict.refusal or "").split(":")[0] or "FIRST"
            books.record(
                EvidenceJudged(
                    **books.stamp(),
                    call_id=call.id,
                    tool=call.name,
                    judgement=outcome,
                    consecutive_no_gain=tracker.collection.consecutive_no_gain,
                    state=tracker.collection.state,
                )
            )
            if tracker.saturated and not was_saturated:
                reason = tracker.collection.stop_reason or "saturated"
                books.record(EvidenceSaturated(**books.stamp(), reason=reason))
            if verdict.refusal is not None:
                check.refuse(
                    call.id,
                    ToolResult(
                        call_id=call.id,
                        name=call.name,
                        content=verdict.refusal,
                        is_error=True,
                        status="refused",
                    ),
                )
            else:
                check.run_with(call.id, verdict.arguments)
        return False

    def observe(
        self, dispatching: ToolDispatching, observed: Observing, check: ToolPolicyCheck
    ) -> None:
        """Tell the tracker about the evidence calls that ran this turn."""
        results = {r.call_id: r for r in observed.new_messages[-1].tool_results}
        for planned in dispatching.planned:
            call = planned.execute
            if self.is_evidence(call.name) and call.id not in check.refused:
                self.tracker.completed_call(call, call.arguments, results[call.id])

    def end_saturated(self, check: ToolPolicyCheck) -> tuple[list[Message], ProgressSnapshot]:
        """The model kept calling evidence tools after STOP_REQUIRED: end, normally.

        Returns the messages that close the turn (every call answered "not run") and the
        snapshot that becomes the loop's answer.
        """
        results = [
            ToolResult(
                call_id=c.id,
                name=c.name,
                content="Not run: the loop ended because evidence collection is saturated.",
                is_error=True,
                status="not_run",
            )
            for c in check.calls
        ]
        closing = [check.response.as_message(), Message(role="tool", tool_results=results)]
        return closing, self.tracker.snapshot()
