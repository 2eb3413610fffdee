"""The information-gain tracker's state machine (pure): every transition."""

from __future__ import annotations

import json
from typing import Any

from orga.contracts.conversation import ToolCall, ToolResult
from orga.contracts.evidence import EvidenceCollection
from orga.contracts.tools import ToolDefinition
from orga.core.evidence import EvidenceTracker, with_judgement


def call(n: int, judgement: str | None = None, **arguments: Any) -> ToolCall:
    if judgement is not None:
        arguments["previous_gain"] = judgement
    return ToolCall(id=f"c{n}", name="grep", arguments=json.dumps(arguments))


def ran(
    tracker: EvidenceTracker, c: ToolCall, content: str = "match", found: str | None = None
) -> None:
    verdict = tracker.admit(c)
    assert verdict.run, verdict
    result = ToolResult(call_id=c.id, name=c.name, content=content, evidence=found)  # type: ignore[arg-type]
    tracker.completed_call(c, verdict.arguments, result)


def test_first_call_needs_no_judgement_and_is_stripped() -> None:
    tracker = EvidenceTracker(EvidenceCollection())
    verdict = tracker.admit(call(1, q="error"))
    assert verdict.run and json.loads(verdict.arguments) == {"q": "error"}
    verdict = tracker.admit(call(2, "GAINED", q="x"))
    assert json.loads(verdict.arguments) == {"q": "x"}


def test_missing_or_invalid_judgement_is_a_protocol_error() -> None:
    tracker = EvidenceTracker(EvidenceCollection())
    ran(tracker, call(1, q="a"))
    for bad in (call(2, q="b"), call(3, "MAYBE", q="b")):
        verdict = tracker.admit(bad)
        assert not verdict.run and verdict.refusal is not None
        assert verdict.refusal.startswith("PROTOCOL_ERROR")
    assert tracker.collection.awaiting_judgement == ["c1"]  # still waiting for a proper judgement
    assert tracker.collection.consecutive_no_gain == 0


def test_gained_resets_no_gain_counts_and_saturates() -> None:
    tracker = EvidenceTracker(EvidenceCollection(max_no_gain=2))
    ran(tracker, call(1, q="a"))
    ran(tracker, call(2, "NO_GAIN", q="b"))
    assert tracker.collection.consecutive_no_gain == 1 and tracker.collection.state == "COLLECTING"
    ran(tracker, call(3, "GAINED", q="c"))
    assert tracker.collection.consecutive_no_gain == 0
    assert [c.judgement for c in tracker.collection.completed] == ["NO_GAIN", "GAINED", None]
    ran(tracker, call(4, "NO_GAIN", q="d"))
    verdict = tracker.admit(call(5, "NO_GAIN", q="e"))
    assert tracker.collection.state == "SATURATED" and tracker.collection.stop_delivered
    assert not verdict.run and (verdict.refusal or "").startswith("STOP_REQUIRED")
    end = tracker.admit(call(6, "NO_GAIN", q="f"))
    assert end.end_loop and not end.run


def test_duplicate_scope_counts_as_no_gain() -> None:
    tracker = EvidenceTracker(EvidenceCollection(max_no_gain=3))
    ran(tracker, call(1, q="same"))
    verdict = tracker.admit(call(2, "NO_GAIN", q="same"))
    assert not verdict.run and (verdict.refusal or "").startswith("DUPLICATE_SCOPE")
    assert tracker.collection.consecutive_no_gain == 2  # the judgement, then the duplicate
    verdict = tracker.admit(call(3, q="same"))  # nothing awaits judgement now
    assert "DUPLICATE_SCOPE" in (verdict.refusal or "") and "STOP_REQUIRED" in (
        verdict.refusal or ""
    )
    assert tracker.collection.state == "SATURATED"


def test_saturation_on_stop_then_an_answer_is_possible() -> None:
    tracker = EvidenceTracker(EvidenceCollection(max_no_gain=1))
    ran(tracker, call(1, q="a"))
    verdict = tracker.admit(call(2, "NO_GAIN", q="b"))
    assert (verdict.refusal or "").startswith("STOP_REQUIRED")
    snapshot = tracker.snapshot()
    assert [c.scope for c in snapshot.checked] == ['{"q": "a"}']
    assert snapshot.limitation == "insufficient evidence"
    assert "grep" in snapshot.render()


def test_statuses_found_none_failed() -> None:
    tracker = EvidenceTracker(EvidenceCollection())
    ran(tracker, call(1, q="a"), content="")
    ran(tracker, call(2, "NO_GAIN", q="b"), content="x", found="none")
    failed = call(3, "NO_GAIN", q="c")
    verdict = tracker.admit(failed)
    tracker.completed_call(
        failed,
        verdict.arguments,
        ToolResult(call_id="c3", name="grep", content="boom", is_error=True),
    )
    assert [(c.invocation, c.evidence) for c in tracker.collection.completed] == [
        ("ran", "none"),
        ("ran", "none"),
        ("failed", "none"),
    ]


def test_the_schema_gets_the_judgement_argument() -> None:
    definition = ToolDefinition(
        name="grep",
        description="d",
        parameters={"type": "object", "properties": {"q": {}}, "required": ["q"]},
    )
    judged = with_judgement(definition).parameters
    assert judged["properties"]["previous_gain"]["enum"] == ["GAINED", "NO_GAIN"]
    assert judged["required"] == ["q"]
    assert "previous_gain" not in definition.parameters["properties"]  # not mutated
