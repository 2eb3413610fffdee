"""The routing table and the typestate phases (pure, no server)."""

from __future__ import annotations

import pytest

from orga.contracts.conversation import ToolCall, ToolResult
from orga.contracts.errors import UnhandledStopReason
from orga.contracts.inference import KNOWN_STOP_REASONS, InferenceResponse
from orga.contracts.policy import PolicyDecision, PolicyResult
from orga.core.phases import Answered, AnswerPolicyCheck, Observing, ToolPolicyCheck
from orga.core.routing import route


def response(stop: str, calls: int = 0, text: str = "") -> InferenceResponse:
    return InferenceResponse(
        stop_reason=stop,
        text=text,
        tool_calls=[ToolCall(id=f"c{i}", name="add", arguments="{}") for i in range(calls)],
        provider="openai",
        model="m",
    )


def test_routing_table() -> None:
    assert route("tool_use") == "act"
    assert route("end_turn") == "answer"
    for other in KNOWN_STOP_REASONS - {"tool_use", "end_turn"}:
        assert route(other) == "fail"
    assert route("something_new") == "fail"
    assert route("") == "fail"


@pytest.mark.parametrize(
    ("stop", "calls"),
    [("max_tokens", 2), ("refusal", 1), ("pause_turn", 0), ("tool_use", 0), ("end_turn", 1)],
)
def test_reasoning_refuses_every_other_turn(stop: str, calls: int) -> None:
    reasoning = Observing(0).reason()
    with pytest.raises(UnhandledStopReason) as caught:
        reasoning.route(response(stop, calls))
    assert caught.value.details[0]["tool_calls_not_run"] == ["add"] * calls
    assert caught.value.non_retryable


def test_tool_turn_moves_through_gate_dispatch_collect() -> None:
    reasoning = Observing(0).reason()
    assert reasoning.iteration == 1
    check = reasoning.route(response("tool_use", 3, text="working"))
    assert isinstance(check, ToolPolicyCheck)
    assert [a.call_id for a in check.actions()] == ["c0", "c1", "c2"]
    dispatching = check.gate(
        PolicyResult(
            engine="test",
            decisions=[
                PolicyDecision(decision="allow"),
                PolicyDecision(decision="modify", arguments='{"a": 1}'),
                PolicyDecision(decision="deny", reason="no"),
            ],
        )
    )
    assert dispatching.planned[1].call.arguments == '{"a": 1}'
    assert dispatching.planned[1].requested.arguments == "{}"
    with pytest.raises(ValueError, match="no result"):
        dispatching.collect()
    # Results arrive in any order; the tool turn lists them in the model's order.
    for call_id in ("c2", "c0", "c1"):
        dispatching.record(ToolResult(call_id=call_id, name="add", content=call_id))
    with pytest.raises(ValueError, match="already has a result"):
        dispatching.record(ToolResult(call_id="c0", name="add", content="again"))
    with pytest.raises(KeyError):
        dispatching.record(ToolResult(call_id="zz", name="add", content="?"))
    observing = dispatching.collect()
    assistant, tool_turn = observing.new_messages
    assert [r.call_id for r in tool_turn.tool_results] == ["c0", "c1", "c2"]
    assert assistant.content == "working"
    assert assistant.tool_calls[1].arguments == '{"a": 1}'  # the model sees the modification
    assert observing.reason().iteration == 2


def test_a_malformed_verdict_denies_every_call() -> None:
    check = Observing(0).reason().route(response("tool_use", 2))
    assert isinstance(check, ToolPolicyCheck)
    dispatching = check.gate(PolicyResult(engine="broken", decisions=[]))
    assert [p.decision.decision for p in dispatching.planned] == ["deny", "deny"]


def test_repeated_call_ids_fail() -> None:
    bad = response("tool_use", 2).model_copy(
        update={"tool_calls": [ToolCall(id="same", name="a"), ToolCall(id="same", name="b")]}
    )
    with pytest.raises(UnhandledStopReason, match="repeats a tool call id"):
        Observing(0).reason().route(bad)


def test_answer_is_gated() -> None:
    check = Observing(4).reason().route(response("end_turn", text="42"))
    assert isinstance(check, AnswerPolicyCheck)
    assert [a.kind for a in check.actions()] == ["respond"]
    done = check.gate(PolicyResult(engine="t", decisions=[PolicyDecision(decision="allow")]))
    assert isinstance(done, Answered) and done.output == "42" and done.iteration == 5
    denied = check.gate(
        PolicyResult(engine="t", decisions=[PolicyDecision(decision="deny", reason="cite sources")])
    )
    assert isinstance(denied, Observing)
    assistant, feedback = denied.new_messages
    assert assistant.content == "42"
    assert "cite sources" in feedback.content and feedback.role == "user"
