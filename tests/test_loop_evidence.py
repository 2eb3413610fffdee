"""Information-gain stopping inside running loops: a loop stops when it stops learning."""

from __future__ import annotations

from orga.contracts.journal import EvidenceJudged, EvidenceSaturated, Journal
from orga.contracts.state import LoopState
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import conversation
from tests.sample_tools import log_search_tools


def search(query: str, judgement: str | None = None) -> Turn:
    arguments: dict[str, object] = {"query": query}
    if judgement is not None:
        arguments["previous_gain"] = judgement
    return Turn(tool_calls=[("search_logs", arguments)])


async def test_requerying_the_same_scope_ends_saturated_with_a_snapshot(harness: Harness) -> None:
    seen: list[dict[str, object]] = []
    model = harness.new_model(
        [
            search("timeout"),
            search("timeout", "NO_GAIN"),  # duplicate scope: two without gain → saturated
            search("timeout", "NO_GAIN"),  # after STOP_REQUIRED: the loop ends
        ]
    )
    async with harness.worker(tools=log_search_tools(seen)):
        handle = await harness.start("why did it fail?", model=model, tools=["search_logs"])
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
        messages = await conversation(handle)
    assert result.termination_reason == "saturated"
    assert result.iterations == 3
    assert seen == [{"query": "timeout"}]  # ran once; the tool never saw previous_gain
    assert result.snapshot is not None
    [checked] = result.snapshot.checked
    assert (checked.tool, checked.scope, checked.evidence) == (
        "search_logs",
        '{"query": "timeout"}',
        "found",
    )
    assert checked.summary == "12:01 db timeout"
    assert result.snapshot.limitation == "insufficient evidence"
    assert result.output.startswith("Stopped collecting evidence")
    refusal = messages[4].tool_results[0]
    assert refusal.status == "refused" and refusal.content.startswith("DUPLICATE_SCOPE")
    assert "STOP_REQUIRED" in refusal.content
    assert state.evidence is not None and state.evidence.state == "SATURATED"
    assert state.evidence.stop_delivered
    judged = [e.judgement for e in journal.entries if isinstance(e, EvidenceJudged)]
    assert judged == ["FIRST", "NO_GAIN"]
    assert len([e for e in journal.entries if isinstance(e, EvidenceSaturated)]) == 1
    assert journal.entries[-1].kind == "Terminated" and journal.entries[-1].reason == "saturated"
    # The model saw the judgement argument in the tool's schema.
    schema = harness.model.requests_for(model)[0].body["tools"][0]["function"]["parameters"]
    assert "previous_gain" in schema["properties"]


async def test_a_model_that_gains_keeps_going(harness: Harness) -> None:
    seen: list[dict[str, object]] = []
    model = harness.new_model(
        [
            search("timeout"),
            search("disk", "GAINED"),
            search("oom", "GAINED"),
            Turn(text="the disk filled up, then the database timed out"),
        ]
    )
    async with harness.worker(tools=log_search_tools(seen)):
        handle = await harness.start("why?", model=model, tools=["search_logs"])
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
    assert result.termination_reason == "end_turn" and result.snapshot is None
    assert [s["query"] for s in seen] == ["timeout", "disk", "oom"]
    assert state.evidence is not None
    assert [c.evidence for c in state.evidence.completed] == ["found", "found", "none"]
    assert state.evidence.consecutive_no_gain == 0


async def test_missing_judgement_is_refused_then_an_answer_after_stop_is_saturated(
    harness: Harness,
) -> None:
    seen: list[dict[str, object]] = []
    model = harness.new_model(
        [
            search("timeout"),
            search("disk"),  # no judgement: PROTOCOL_ERROR, not run
            search("disk", "NO_GAIN"),  # judged: runs
            search("oom", "NO_GAIN"),  # second no-gain: STOP_REQUIRED
            Turn(text="not enough evidence: maybe the database"),
        ]
    )
    async with harness.worker(tools=log_search_tools(seen)):
        handle = await harness.start("why?", model=model, tools=["search_logs"], max_no_gain=2)
        result = await handle.result()
        messages = await conversation(handle)
    statuses = [r.status for m in messages if m.role == "tool" for r in m.tool_results]
    assert statuses == ["ok", "refused", "ok", "refused"]
    assert [s["query"] for s in seen] == ["timeout", "disk"]
    protocol = messages[4].tool_results[0].content
    assert protocol.startswith("PROTOCOL_ERROR") and "previous_gain" in protocol
    assert result.termination_reason == "saturated"
    assert result.output == "not enough evidence: maybe the database"
    assert result.snapshot is not None and len(result.snapshot.checked) == 2
