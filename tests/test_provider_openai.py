"""The OpenAI-compatible adapter against recorded real bodies (tests/fixtures/providers)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from orga.contracts.conversation import Message, ToolCall, ToolResult
from orga.contracts.errors import (
    ImplausibleUsage,
    MalformedModelResponse,
    ProviderRejected,
    ProviderUnavailable,
)
from orga.contracts.tools import ToolDefinition
from orga.providers.openai import build_chat_request, parse_chat_completion
from orga.providers.usage import check_usage
from tests.fixtures import body


def test_parallel_tool_calls_live() -> None:
    response = parse_chat_completion(body("openai_10_parallel_tool_calls.json"), "openai")
    assert response.stop_reason == "tool_use"
    assert response.raw_stop_reason == "tool_calls"
    assert [c.name for c in response.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert response.tool_calls[0].id == "call_fdNz3vOBKYgOIpMdWotB9MjY"
    assert json.loads(response.tool_calls[1].arguments) == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert response.text == ""
    assert (response.usage.input_tokens, response.usage.output_tokens) == (149, 60)
    assert response.usage.total_tokens == 209
    assert response.model == "gpt-4o-2024-08-06"


def test_single_tool_call_docs_without_refusal_key() -> None:
    response = parse_chat_completion(body("openai_10b_tool_call_single_DOCS.json"), "openai")
    assert response.stop_reason == "tool_use"
    assert json.loads(response.tool_calls[0].arguments) == {"location": "Boston, MA"}
    assert response.refusal is None


@pytest.mark.parametrize("name", ["openai_09_stop_DOCS.json", "openai_09b_stop_LIVE_2024.json"])
def test_plain_answers_end_the_turn(name: str) -> None:
    response = parse_chat_completion(body(name), "openai")
    assert response.stop_reason == "end_turn"
    assert response.text
    assert response.tool_calls == []


def test_length_is_max_tokens() -> None:
    response = parse_chat_completion(body("openai_11_length.json"), "openai")
    assert response.stop_reason == "max_tokens"
    assert response.raw_stop_reason == "length"
    assert response.text == '{"'


def test_openrouter_live_body_with_whitespace_padding_and_native_reason() -> None:
    from tests.fixtures import raw_text

    text = raw_text("openrouter_14_chat_completion_native_STOP_LIVE.json")
    assert text[0].isspace()
    response = parse_chat_completion(json.loads(text.strip()), "openrouter")
    assert response.stop_reason == "end_turn"
    assert response.text == "Bitcoin: A Peer-to-Peer Electronic Cash System"
    assert response.usage.total_tokens == 2348


def test_rule_refusal_field_with_stop_is_a_refusal() -> None:
    data = copy.deepcopy(body("openai_09b_stop_LIVE_2024.json"))
    data["choices"][0]["message"].update(content=None, refusal="I'm sorry, I can't help.")
    response = parse_chat_completion(data, "openai")
    assert response.stop_reason == "refusal"
    assert response.refusal == "I'm sorry, I can't help."


def test_rule_content_filter_is_a_refusal() -> None:
    data = copy.deepcopy(body("openai_09_stop_DOCS.json"))
    data["choices"][0]["finish_reason"] = "content_filter"
    assert parse_chat_completion(data, "openai").stop_reason == "refusal"


def test_rule_tool_calls_with_stop_is_tool_use() -> None:
    data = copy.deepcopy(body("openai_10b_tool_call_single_DOCS.json"))
    data["choices"][0]["finish_reason"] = "stop"
    response = parse_chat_completion(data, "openai")
    assert response.stop_reason == "tool_use"
    assert response.raw_stop_reason == "stop"


def test_rules_object_arguments_and_missing_call_id_from_ollama() -> None:
    """Ollama's native message (arguments as an object, no id, done_reason stop) in a choice."""
    ollama = body("ollama_16_native_api_chat_tool_call_DOCS.json")
    data: dict[str, Any] = {
        "model": ollama["model"],
        "choices": [{"index": 0, "message": ollama["message"], "finish_reason": "stop"}],
    }
    response = parse_chat_completion(data, "openai")
    assert response.stop_reason == "tool_use"
    call = response.tool_calls[0]
    assert json.loads(call.arguments) == {"city": "Tokyo"}
    assert call.id.startswith("call_")


def test_rule_repeated_call_ids_are_made_unique() -> None:
    data = copy.deepcopy(body("openai_10_parallel_tool_calls.json"))
    calls = data["choices"][0]["message"]["tool_calls"]
    calls[1]["id"] = calls[0]["id"]
    response = parse_chat_completion(data, "openai")
    assert len({c.id for c in response.tool_calls}) == 2


def test_rule_in_band_error_midstream_chunk() -> None:
    with pytest.raises(ProviderUnavailable, match="Rate limit exceeded"):
        parse_chat_completion(
            body("openrouter_15f_midstream_error_chunk_SSE_DOCS.json"), "openrouter"
        )


def test_rule_in_band_error_in_a_choice() -> None:
    data = copy.deepcopy(body("openai_09_stop_DOCS.json"))
    data["choices"][0]["finish_reason"] = "error"
    data["choices"][0]["error"] = {"code": 400, "message": "context too long"}
    with pytest.raises(ProviderRejected, match="context too long"):
        parse_chat_completion(data, "openrouter")


def test_unknown_finish_reason_is_kept_raw() -> None:
    data = copy.deepcopy(body("openai_09_stop_DOCS.json"))
    data["choices"][0]["finish_reason"] = "unload"  # Ollama passes its done reasons through
    assert parse_chat_completion(data, "openai").stop_reason == "unload"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("choices"),
        lambda d: d["choices"][0].pop("message"),
        lambda d: d["choices"][0].pop("finish_reason"),
        lambda d: d["choices"][0].update(finish_reason="tool_calls"),
        lambda d: d["choices"][0]["message"].update(tool_calls="nope"),
    ],
)
def test_malformed_bodies_fail_loudly(mutate: Any) -> None:
    data = copy.deepcopy(body("openai_09_stop_DOCS.json"))
    mutate(data)
    with pytest.raises(MalformedModelResponse):
        parse_chat_completion(data, "openai")


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -1_000_000, "completion_tokens": 5, "total_tokens": -999_995},
        {"prompt_tokens": 10, "completion_tokens": "5", "total_tokens": 15},
        {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": -3}},
        {"prompt_tokens": True},
    ],
)
def test_usage_that_is_not_a_count_is_a_protocol_error(usage: dict[str, Any]) -> None:
    answer = {**body("openai_09_stop_DOCS.json"), "usage": usage}
    with pytest.raises(ImplausibleUsage, match="a token count is a non-negative integer") as error:
        parse_chat_completion(answer, "openai")
    assert error.value.non_retryable


@pytest.mark.parametrize(
    "details",
    [{"cached_tokens": 5_000_000}, {"cached_tokens": 600, "cache_write_tokens": 400}],
)
def test_more_cached_tokens_than_input_is_a_protocol_error_never_a_discount(
    details: dict[str, Any],
) -> None:
    """The attack: ``cached_tokens: 5000000`` of ``prompt_tokens: 900`` priced a call at -44
    USD, and a loop capped at 0.05 USD ran all its calls. Cached tokens are part of the input."""
    usage = {"prompt_tokens": 900, "completion_tokens": 5, "prompt_tokens_details": details}
    answer = {**body("openai_09_stop_DOCS.json"), "usage": usage}
    parsed = parse_chat_completion(answer, "openai")  # the wire format itself is kept
    with pytest.raises(ImplausibleUsage, match="cached tokens are part of the input") as error:
        check_usage(parsed.usage, 10_000, "openai")
    assert error.value.non_retryable


def test_a_total_below_its_parts_charges_the_parts() -> None:
    usage = {"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1}
    answer = {**body("openai_09_stop_DOCS.json"), "usage": usage}
    assert parse_chat_completion(answer, "openai").usage.total_tokens == 1_000
    usage = {"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1_400}
    answer = {**body("openai_09_stop_DOCS.json"), "usage": usage}  # reasoning outside the parts
    assert parse_chat_completion(answer, "openai").usage.total_tokens == 1_400


def test_request_rendering() -> None:
    tool = ToolDefinition(name="add", description="Add.", parameters={"type": "object"})
    messages = [
        Message(role="system", content="sys"),
        Message(role="user", content="q"),
        Message(
            role="assistant",
            content="thinking aloud",
            tool_calls=[ToolCall(id="c1", name="add", arguments='{"a":1}')],
        ),
        Message(
            role="tool",
            tool_results=[ToolResult(call_id="c1", name="add", content="bad", is_error=True)],
        ),
        Message(role="assistant", content=""),
    ]
    request = build_chat_request(messages, [tool], model="m", max_output_tokens=50, temperature=0)
    assert request["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "thinking aloud",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ERROR: bad"},
        {"role": "assistant", "content": ""},
    ]
    assert request["tools"][0]["function"]["name"] == "add"
    assert request["max_tokens"] == 50 and request["temperature"] == 0


def test_request_matches_openrouter_documented_followup_shape() -> None:
    documented = body("openrouter_14c_tool_result_followup_request_DOCS.request.json")
    assistant = next(m for m in documented["messages"] if m["role"] == "assistant")
    call = assistant["tool_calls"][0]
    tool_message = next(m for m in documented["messages"] if m["role"] == "tool")
    ours = build_chat_request(
        [
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(
                        id=call["id"],
                        name=call["function"]["name"],
                        arguments=call["function"]["arguments"],
                    )
                ],
            ),
            Message(
                role="tool",
                tool_results=[
                    ToolResult(
                        call_id=tool_message["tool_call_id"],
                        name=call["function"]["name"],
                        content=tool_message["content"],
                    )
                ],
            ),
        ],
        [],
        model=documented["model"],
    )
    assert ours["messages"][0]["content"] is None
    assert ours["messages"][0]["tool_calls"][0] == {k: call[k] for k in ("id", "type", "function")}
    assert {k: ours["messages"][1][k] for k in ("role", "tool_call_id", "content")} == {
        k: tool_message[k] for k in ("role", "tool_call_id", "content")
    }
