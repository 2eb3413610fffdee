"""The Anthropic adapter against recorded real bodies (tests/fixtures/providers)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from orga.contracts.conversation import Message, ToolCall, ToolResult
from orga.contracts.errors import MalformedModelResponse
from orga.contracts.tools import ToolDefinition
from orga.providers.anthropic import build_messages_request, parse_message
from tests.fixtures import body


def test_end_turn_text_live() -> None:
    response = parse_message(body("anthropic_01_end_turn_text.json"))
    assert response.stop_reason == "end_turn"
    assert response.text
    assert response.tool_calls == []
    assert response.provider == "anthropic"


@pytest.mark.parametrize(
    "name",
    [
        "anthropic_02_tool_use_text_then_tool_use.json",
        "anthropic_02b_tool_use_beta_with_caller.json",
    ],
)
def test_text_then_tool_use_live(name: str) -> None:
    data = body(name)
    response = parse_message(data)
    assert response.stop_reason == "tool_use"
    assert response.text == data["content"][0]["text"]
    assert len(response.tool_calls) == 1
    assert response.tool_calls[0].id.startswith("toolu_")


def test_parallel_tool_use_and_usage_with_cache_fields() -> None:
    response = parse_message(body("anthropic_03_parallel_tool_use.json"))
    assert [c.id for c in response.tool_calls] == [
        "toolu_013nheddwxiFJt4C4Q8eGUXJ",
        "toolu_01Vg4JstpLEp3JiQadw9aTU1",
    ]
    assert response.usage.input_tokens == 473 and response.usage.output_tokens == 169
    assert response.usage.total_tokens == 642


def test_max_tokens_docs_body_with_only_two_usage_keys() -> None:
    response = parse_message(body("anthropic_04_max_tokens_DOCS.json"))
    assert response.stop_reason == "max_tokens"
    assert response.text == "C"
    assert response.usage.total_tokens == 43


def test_rule_empty_content_refusal() -> None:
    response = parse_message(body("anthropic_05_refusal_DOCS.json"))
    assert response.stop_reason == "refusal"
    assert response.text == ""
    assert response.refusal == "This request was declined because it could enable cyber harm."


def test_rule_refusal_with_tool_use_keeps_the_stop_reason() -> None:
    data = copy.deepcopy(body("anthropic_05_refusal_DOCS.json"))
    data["content"] = copy.deepcopy(body("anthropic_03_parallel_tool_use.json")["content"][1:2])
    response = parse_message(data)
    assert response.stop_reason == "refusal"
    assert [c.name for c in response.tool_calls] == ["get_weather"]


def test_pause_turn_with_only_a_server_tool_block() -> None:
    response = parse_message(body("anthropic_06_pause_turn_server_tool_use_SDK_MOCK.json"))
    assert response.stop_reason == "pause_turn"
    assert response.tool_calls == []


def test_rule_server_tools_are_not_client_calls() -> None:
    response = parse_message(body("anthropic_06b_server_tool_web_search_end_turn.json"))
    assert response.stop_reason == "end_turn"
    assert response.tool_calls == []
    assert len(response.text) > 20


def test_thinking_block_is_skipped() -> None:
    fragment = body("anthropic_07_thinking_then_tool_use_DOCS_FRAGMENT.json")
    response = parse_message(
        {"id": "x", "model": "m", "stop_reason": "tool_use", "content": fragment["content"]}
    )
    assert response.text.startswith("I can help you get the current weather")
    assert [c.name for c in response.tool_calls] == ["get_weather"]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("stop_reason"),
        lambda d: d.update(content="text"),
        lambda d: d.update(stop_reason="tool_use"),  # tool_use without a tool_use block
    ],
)
def test_malformed_bodies_fail_loudly(mutate: Any) -> None:
    data = copy.deepcopy(body("anthropic_01_end_turn_text.json"))
    mutate(data)
    with pytest.raises(MalformedModelResponse):
        parse_message(data)


def test_request_system_merging_tool_results_and_kept_text() -> None:
    tool = ToolDefinition(name="get_weather", description="Weather.", parameters={"type": "object"})
    messages = [
        Message(role="system", content="first system"),
        Message(role="user", content="weather in SF?"),
        Message(role="system", content="late system"),
        Message(role="user", content="in celsius"),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=[
                ToolCall(id="t1", name="get_weather", arguments='{"location": "SF"}'),
                ToolCall(id="t2", name="get_weather", arguments="{not json"),
            ],
        ),
        Message(
            role="tool",
            tool_results=[
                ToolResult(call_id="t1", name="get_weather", content="18C"),
                ToolResult(call_id="t2", name="get_weather", content="bad args", is_error=True),
            ],
        ),
        Message(role="user", content="[orga gate] note"),
    ]
    request = build_messages_request(messages, [tool], model="claude", temperature=0.5)
    assert request["system"] == "first system\n\nlate system"
    assert request["max_tokens"] == 4096
    assert request["tools"] == [
        {"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object"}}
    ]
    turns = request["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["text"] for b in turns[0]["content"]] == ["weather in SF?", "in celsius"]
    assert turns[1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"location": "SF"}},
        {
            "type": "tool_use",
            "id": "t2",
            "name": "get_weather",
            "input": {"_unparsed_arguments": "{not json"},
        },
    ]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert turns[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": "bad args",
        "is_error": True,
    }
