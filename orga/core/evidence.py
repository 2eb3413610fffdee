"""Information-gain stopping: a loop stops when its evidence stops telling it anything new.

Tools marked ``@tool(evidence=True)`` gather evidence. Every evidence call after the first must
carry the model's judgement of the previous evidence result, in an extra argument the loop adds
to those tools' schemas (``previous_gain``: ``"GAINED"`` or ``"NO_GAIN"``) and strips before
the tool runs. The tracker is pure; its state (``EvidenceCollection``) lives in workflow state:

* a call whose scope (its arguments as canonical JSON, judgement removed) was already completed
  is not run: ``DUPLICATE_SCOPE``, which counts as no gain;
* a missing or invalid judgement: the call is not run, ``PROTOCOL_ERROR`` explains the rule;
* ``max_no_gain`` consecutive no-gain judgements: ``SATURATED`` — further evidence calls are
  refused with ``STOP_REQUIRED``, telling the model to answer with what it has;
* an evidence call after ``STOP_REQUIRED`` was delivered, or an answer while saturated, ends the
  loop normally (``termination_reason = "saturated"``) with a progress snapshot built from the
  completed calls.
"""

from __future__ import annotations

import json
from typing import Any, cast

from pydantic import BaseModel

from orga.contracts.conversation import ToolCall, ToolResult
from orga.contracts.evidence import (
    JUDGEMENT_FIELD,
    CompletedScope,
    EvidenceCollection,
    Judgement,
    ProgressSnapshot,
)
from orga.contracts.tools import ToolDefinition
from orga.core.arguments import try_parse_arguments

__all__ = ["EvidenceTracker", "Verdict", "scope_of", "with_judgement"]

_SUMMARY_CHARS = 200


def with_judgement(definition: ToolDefinition) -> ToolDefinition:
    """The tool's definition with the ``previous_gain`` argument added to its schema."""
    schema = dict(definition.parameters)
    properties = dict(cast(dict[str, Any], schema.get("properties", {})))
    properties[JUDGEMENT_FIELD] = {
        "type": "string",
        "enum": ["GAINED", "NO_GAIN"],
        "description": (
            "Required on every evidence call after your first: your judgement of the previous "
            "evidence result — GAINED if it told you something new, NO_GAIN if it did not."
        ),
    }
    schema["properties"] = properties
    return definition.model_copy(update={"parameters": schema})


def scope_of(arguments: dict[str, Any]) -> str:
    """The scope of a call: its arguments without the judgement, as canonical JSON."""
    plain = {k: v for k, v in arguments.items() if k != JUDGEMENT_FIELD}
    return json.dumps(plain, sort_keys=True, ensure_ascii=False)


class Verdict(BaseModel):
    """The tracker's decision on one evidence call, before it runs."""

    run: bool
    arguments: str
    """The arguments to run with (judgement stripped)."""
    refusal: str | None = None
    """``DUPLICATE_SCOPE``, ``PROTOCOL_ERROR`` or ``STOP_REQUIRED`` text when not run."""
    end_loop: bool = False
    """The model ignored ``STOP_REQUIRED``: end the loop as saturated."""
    judgement: Judgement | None = None


class EvidenceTracker:
    """Judges evidence calls; its state is an ``EvidenceCollection`` kept in workflow state."""

    def __init__(self, collection: EvidenceCollection) -> None:
        self.collection = collection

    @property
    def saturated(self) -> bool:
        return self.collection.saturated

    def _no_gain(self) -> None:
        held = self.collection
        held.consecutive_no_gain += 1
        if held.consecutive_no_gain >= held.max_no_gain and held.state == "COLLECTING":
            held.state = "SATURATED"
            held.stop_reason = (
                f"{held.consecutive_no_gain} consecutive results without new information"
            )

    def admit(self, call: ToolCall) -> Verdict:
        """Judge one evidence call of the current turn, in the model's order."""
        arguments = try_parse_arguments(call.arguments)
        if arguments is None:
            return Verdict(run=True, arguments=call.arguments)  # the gate explains the JSON
        judgement = arguments.get(JUDGEMENT_FIELD)
        stripped = json.dumps(
            {k: v for k, v in arguments.items() if k != JUDGEMENT_FIELD}, ensure_ascii=False
        )
        if self.collection.saturated:
            if self.collection.stop_delivered:
                return Verdict(run=False, arguments=stripped, end_loop=True)
            self.collection.stop_delivered = True
            return Verdict(run=False, arguments=stripped, refusal=self._stop_text())
        recorded: Judgement | None = None
        if self.collection.awaiting_judgement:
            if judgement not in ("GAINED", "NO_GAIN"):
                return Verdict(
                    run=False,
                    arguments=stripped,
                    refusal=(
                        f"PROTOCOL_ERROR: every evidence call after the first must include "
                        f'"{JUDGEMENT_FIELD}": "GAINED" or "NO_GAIN" — your judgement of '
                        "whether the previous evidence result told you something new "
                        f"(got {judgement!r}). The call was not run; call again with it."
                    ),
                )
            recorded = judgement
            self._judge(recorded)
            if self.saturated:
                self.collection.stop_delivered = True
                return Verdict(
                    run=False, arguments=stripped, refusal=self._stop_text(), judgement=recorded
                )
        scope = scope_of(arguments)
        completed = self.collection.completed
        earlier = next((c for c in completed if c.tool == call.name and c.scope == scope), None)
        if earlier is not None:
            self._no_gain()
            text = (
                f"DUPLICATE_SCOPE: {call.name} with exactly these arguments already ran (call "
                f"{earlier.call_id}); repeating it cannot tell you anything new. Counted as no "
                "gain."
            )
            if self.saturated:
                self.collection.stop_delivered = True
                text += " " + self._stop_text()
            return Verdict(run=False, arguments=stripped, refusal=text, judgement=recorded)
        return Verdict(run=True, arguments=stripped, judgement=recorded)

    def _judge(self, judgement: Judgement) -> None:
        judged = set(self.collection.awaiting_judgement)
        self.collection.completed = [
            c.model_copy(update={"judgement": judgement}) if c.call_id in judged else c
            for c in self.collection.completed
        ]
        self.collection.awaiting_judgement = []
        if judgement == "GAINED":
            self.collection.consecutive_no_gain = 0
        else:
            self._no_gain()

    def _stop_text(self) -> str:
        return (
            f"STOP_REQUIRED: evidence collection is saturated ({self.collection.stop_reason}). "
            "Do not call evidence tools again. Answer now with what you have, and say what is "
            "still unknown."
        )

    def completed_call(self, call: ToolCall, arguments: str, result: ToolResult) -> None:
        """Record an evidence call that ran (or failed) so the next call can judge it."""
        scope = scope_of(try_parse_arguments(arguments) or {})
        ran = not result.is_error
        found = ran and (
            result.evidence == "found" if result.evidence else bool(result.content.strip())
        )
        summary = " ".join(result.content.split())
        if len(summary) > _SUMMARY_CHARS:
            summary = summary[: _SUMMARY_CHARS - 1] + "…"
        self.collection.completed.append(
            CompletedScope(
                call_id=call.id,
                tool=call.name,
                scope=scope,
                invocation="ran" if ran else "failed",
                evidence="found" if found else "none",
                summary=summary,
            )
        )
        self.collection.awaiting_judgement.append(call.id)

    def snapshot(self) -> ProgressSnapshot:
        """What the loop established, for its final answer."""
        held = self.collection
        reason = held.stop_reason or "evidence stopped changing"
        return ProgressSnapshot(checked=list(held.completed), reason=reason)
