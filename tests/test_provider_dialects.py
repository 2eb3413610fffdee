"""Each provider's dialect, spoken exactly: recorded bodies from the providers' documentation
(tests/fixtures/providers/INDEX.md) replayed through a loop with a tool call and back, and
the next request checked byte for byte — the provider's own call ids (Mistral's nine
characters, Gemini's ``function-call-<uuid>``, Ollama's, vLLM's, DeepSeek's, Anthropic's), the
extras and reasoning a provider requires back, and never that reasoning as the answer. The
loop keeps its own ids inside (approvals, journal, state); a conversation that moves to another
provider or model gets translated ids, for that request only."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from orga.contracts.conversation import Message, ToolResult
from orga.contracts.journal import Journal, ReasoningComplete
from orga.contracts.state import LoopState
from orga.core.ids import internal_call_id, translated_id, wire_ids, with_internal_ids
from orga.providers.anthropic import build_messages_request, parse_message
from orga.providers.openai import build_chat_request, parse_chat_completion
from orga.scripted.server import Raw, Turn
from orga.tools.sdk import tool
from tests.fixtures import body
from tests.harness import Harness
from tests.sample_tools import get_weather


@tool
def retrieve_payment_status(transaction_id: str) -> str:
    """Get payment status of a transaction."""
    return json.dumps({"status": "Paid", "transaction_id": transaction_id})


@tool
def get_current_temperature(location: str) -> str:
    """Gets the current temperature for a given location."""
    return json.dumps({"temp": {"Paris": "15C", "London": "12C"}.get(location, "?")})


@tool
def calculate(x: str, y: str, operation: str) -> str:
    """Calculate."""
    return str(int(x) + int(y)) if operation == "+" else "unsupported"


@tool
def get_current_weather(location: str, unit: str = "celsius") -> str:
    """Get the current weather in a given location."""
    return f"Sunny in {location} ({unit})"


@tool
def get_date() -> str:
    """Get the current date."""
    return "2026-04-19"


TOOLS = [
    retrieve_payment_status,
    get_current_temperature,
    calculate,
    get_current_weather,
    get_date,
    get_weather,
]


def chat_envelope(message: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat completion around a message the docs print alone (a DOCS_FRAGMENT)."""
    return {
        "id": f"chatcmpl-{model}-fragment",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
    }


def anthropic_thinking_body() -> dict[str, Any]:
    """The docs' thinking + text + tool_use content, in a message envelope."""
    return {
        "id": "msg_thinking_fragment",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": body("anthropic_07_thinking_then_tool_use_DOCS_FRAGMENT.json")["content"],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 20},
    }


@dataclass
class Dialect:
    name: str
    provider: str
    first: dict[str, Any]
    tools: list[str]
    results: list[str]
    """What the tool results say, in the calls' order."""
    reasoning: str | None = None
    """The reasoning the body carries (never the answer, sent back where required)."""
    extras: list[Any] = field(default_factory=list[Any])
    """Each call's ``extra_content`` (``None``: the call has none)."""

    def calls(self) -> list[dict[str, Any]]:
        if self.provider == "anthropic":
            return [b for b in self.first["content"] if b["type"] == "tool_use"]
        return self.first["choices"][0]["message"]["tool_calls"]


DIALECTS = [
    Dialect(
        "mistral",
        "openai",
        body("mistral_18_tool_call_nine_char_id_DOCS.json"),
        ["retrieve_payment_status"],
        ['{"status": "Paid", "transaction_id": "T1001"}'],
    ),
    Dialect(
        "gemini",
        "openai",
        chat_envelope(
            body("gemini_19_openai_compat_parallel_thought_signature_DOCS_FRAGMENT.json"),
            "gemini-3-pro-preview",
        ),
        ["get_current_temperature"],
        ['{"temp": "15C"}', '{"temp": "12C"}'],
        extras=[{"google": {"thought_signature": "<Signature A>"}}, None],
    ),
    Dialect(
        "ollama",
        "openai",
        body("ollama_20_openai_compat_tool_call_LIVE.json"),
        ["calculate"],
        ["8"],
    ),
    Dialect(
        "vllm",
        "openai",
        body("vllm_21_tool_call_DOCS.json"),
        ["get_current_weather"],
        ["Sunny in Boston, MA (fahrenheit)"],
    ),
    Dialect(
        "deepseek",
        "openai",
        chat_envelope(
            {"role": "assistant", **body("deepseek_22_thinking_tool_call_DOCS_FRAGMENT.json")},
            "deepseek-v4-pro",
        ),
        ["get_date"],
        ["2026-04-19"],
        reasoning=body("deepseek_22_thinking_tool_call_DOCS_FRAGMENT.json")["reasoning_content"],
    ),
    Dialect(
        "anthropic-thinking",
        "anthropic",
        anthropic_thinking_body(),
        ["get_weather"],
        ["Cloudy 7~13 in Paris (c)"],
        reasoning=anthropic_thinking_body()["content"][0]["thinking"],
    ),
]


@pytest.mark.parametrize("dialect", DIALECTS, ids=[d.name for d in DIALECTS])
async def test_each_recorded_body_runs_a_loop_and_its_ids_go_back_byte_for_byte(
    harness: Harness, dialect: Dialect
) -> None:
    model = harness.new_model([Raw(body=dialect.first), Turn(text="All done.")])
    async with harness.worker(tools=TOOLS):
        handle = await harness.start(
            "Use the tools.", provider=dialect.provider, model=model, tools=dialect.tools
        )
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
        conversation = await handle.query("conversation", result_type=list[Message])
    assert result.output == "All done."  # the answer, never the reasoning
    assert dialect.reasoning is None or dialect.reasoning not in (state.output or "")
    wire = [c["id"] for c in dialect.calls()]
    # Inside, the loop's own ids (approvals, keys, journal, state); on the wire, the provider's.
    [assistant] = [m for m in conversation if m.tool_calls]
    assert [c.id for c in assistant.tool_calls] == [internal_call_id(1, i) for i in wire]
    assert [c.wire_id for c in assistant.tool_calls] == wire
    completed = [e for e in journal.entries if isinstance(e, ReasoningComplete)]
    assert [e.stop_reason for e in completed] == ["tool_use", "end_turn"]
    first, second = harness.model.requests_for(model)
    assert first.body["messages"][-1]["content"] != []  # the question went out
    sent = second.body["messages"]
    if dialect.provider == "anthropic":
        [turn] = [t for t in sent if t["role"] == "assistant"]
        fragment = body("anthropic_07_thinking_then_tool_use_DOCS_FRAGMENT.json")["content"]
        # The thinking block goes back first and verbatim: signature and all.
        assert turn["content"][0] == fragment[0]
        assert [b["type"] for b in turn["content"]] == ["thinking", "text", "tool_use"]
        assert [b["id"] for b in turn["content"] if b["type"] == "tool_use"] == wire
        results = [b for t in sent for b in t["content"] if b["type"] == "tool_result"]
        assert [b["tool_use_id"] for b in results] == wire
        assert [b["content"] for b in results] == dialect.results
        return
    [turn] = [m for m in sent if m["role"] == "assistant"]
    assert [c["id"] for c in turn["tool_calls"]] == wire
    assert [c.get("extra_content") for c in turn["tool_calls"]] == (
        dialect.extras or [None] * len(wire)
    )
    assert turn.get("reasoning_content") == dialect.reasoning
    assert dialect.reasoning is None or dialect.reasoning not in str(turn["content"])
    tools = [m for m in sent if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == wire
    assert [m["content"] for m in tools] == dialect.results


def test_the_id_rules_hold_for_every_translated_id() -> None:
    """Nine letters and digits (Mistral), which Anthropic's ``^[a-zA-Z0-9_-]+$`` and OpenAI's
    40 characters accept; the same loop id gives the same one in every request."""
    for call_id in ["i1_call_fdNz3vOBKYgOIpMdWotB9MjY", "i3_toolu_01A09q90qw90lq917835lq9", "x"]:
        translated = translated_id(call_id)
        assert re.fullmatch(r"[a-zA-Z0-9]{9}", translated), translated
        assert translated == translated_id(call_id)
    assert translated_id("i1_a") != translated_id("i1_b")


def mistral_turn(source: str) -> list[Message]:
    """The Mistral docs' tool call, as a loop holds it after its turn, and its result."""
    parsed = parse_chat_completion(body("mistral_18_tool_call_nine_char_id_DOCS.json"), "openai")
    response = with_internal_ids(parsed.model_copy(update={"source": source}), 1)
    [call] = response.tool_calls
    return [
        Message(role="user", content="What's the status of my transaction T1001?"),
        response.as_message(),
        Message(
            role="tool",
            tool_results=[ToolResult(call_id=call.id, name=call.name, content="Paid")],
        ),
    ]


def test_a_conversation_moved_to_another_provider_gets_translated_ids() -> None:
    """A turn written by one provider and model goes to another (a fallback, a delegation, a
    critic) under translated ids, paired with its results; back at its own source, its own."""
    messages = mistral_turn("openai:mistral-large-latest")
    same = build_chat_request(messages, [], model="mistral-large-latest", source=messages[1].source)
    assert same["messages"][1]["tool_calls"][0]["id"] == "D681PevKs"
    assert same["messages"][2]["tool_call_id"] == "D681PevKs"

    anthropic = build_messages_request(
        messages, [], model="claude-sonnet-4-5", source="anthropic:claude-sonnet-4-5"
    )
    [use] = [b for b in anthropic["messages"][1]["content"] if b["type"] == "tool_use"]
    [result] = anthropic["messages"][2]["content"]
    assert use["id"] == result["tool_use_id"] == translated_id("i1_D681PevKs")
    assert re.fullmatch(r"^[a-zA-Z0-9_-]+$", use["id"])

    other = build_chat_request(messages, [], model="gpt-4o", source="openai:gpt-4o")
    assert other["messages"][1]["tool_calls"][0]["id"] == translated_id("i1_D681PevKs")
    assert other["messages"][2]["tool_call_id"] == translated_id("i1_D681PevKs")


def test_reasoning_and_extras_go_back_only_to_their_source() -> None:
    gemini = chat_envelope(
        body("gemini_19_openai_compat_parallel_thought_signature_DOCS_FRAGMENT.json"), "gemini"
    )
    deepseek = chat_envelope(
        {"role": "assistant", **body("deepseek_22_thinking_tool_call_DOCS_FRAGMENT.json")}, "ds"
    )
    for recorded, key in ((gemini, "extra_content"), (deepseek, "reasoning_content")):
        parsed = parse_chat_completion(recorded, "openai").model_copy(update={"source": "a:m"})
        messages = [Message(role="user", content="q"), parsed.as_message()]
        home = build_chat_request(messages, [], model="m", source="a:m")["messages"][1]
        away = build_chat_request(messages, [], model="n", source="a:n")["messages"][1]
        assert key in json.dumps(home) and key not in json.dumps(away)
    thinking = parse_message(anthropic_thinking_body()).model_copy(update={"source": "b:c"})
    assert thinking.text.startswith("I can help") and not thinking.text.startswith("The user")
    messages = [Message(role="user", content="q"), thinking.as_message()]
    home = build_messages_request(messages, [], model="c", source="b:c")["messages"][1]
    away = build_messages_request(messages, [], model="d", source="b:d")["messages"][1]
    assert home["content"][0]["type"] == "thinking"
    assert [b["type"] for b in away["content"]] == ["text", "tool_use"]


def test_a_repeated_wire_id_is_translated_so_each_call_has_its_own() -> None:
    """A provider that names two calls of one request alike (``call_0`` every turn) gets its id
    back for the first; the repeat goes under a translated one."""
    first, second = mistral_turn("s:m"), mistral_turn("s:m")
    second = [
        m.model_copy(
            update={
                "tool_calls": [c.model_copy(update={"id": "i2_D681PevKs"}) for c in m.tool_calls],
                "tool_results": [
                    r.model_copy(update={"call_id": "i2_D681PevKs"}) for r in m.tool_results
                ],
            }
        )
        for m in second
    ]
    ids = wire_ids([*first, *second], "s:m")
    assert ids == {"i1_D681PevKs": "D681PevKs", "i2_D681PevKs": translated_id("i2_D681PevKs")}


def test_streamed_reasoning_and_signatures_add_up_to_the_same_answer() -> None:
    """Streamed, the reasoning (DeepSeek's ``reasoning_content`` deltas, Anthropic's
    ``thinking_delta`` and ``signature_delta``) and Gemini's ``extra_content`` are assembled as
    the whole body has them, and never reach the text shown as it arrives."""
    from orga.providers.streaming import ChatStream, MessageStream, ServerSentEvent

    shown: list[str] = []
    fragment = body("deepseek_22_thinking_tool_call_DOCS_FRAGMENT.json")
    signature = {"google": {"thought_signature": "<Signature A>"}}
    chunks: list[dict[str, Any]] = [
        {
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "reasoning_content": "The user "}}
            ]
        },
        {"choices": [{"index": 0, "delta": {"reasoning_content": "asks."}}]},
        {"choices": [{"index": 0, "delta": {"content": "Let me check."}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": fragment["tool_calls"][0]["id"],
                                "extra_content": signature,
                                "function": {"name": "get_date", "arguments": "{}"},
                            }
                        ]
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        },
    ]
    chat = ChatStream("openai", shown.append)
    for chunk in chunks:
        chat.feed(ServerSentEvent(None, json.dumps(chunk)))
    chat.feed(ServerSentEvent(None, "[DONE]"))
    parsed = parse_chat_completion({**chat.body(), "model": "m"}, "openai")
    assert shown == ["Let me check."] and parsed.text == "Let me check."
    assert [r.text for r in parsed.reasoning] == ["The user asks."]
    [call] = parsed.tool_calls
    assert call.wire_id == "call_00_kw66qNnNto11bSfJVIdlV5Oo"
    assert call.wire_extra is not None and json.loads(call.wire_extra) == signature

    shown.clear()
    thinking = anthropic_thinking_body()["content"][0]
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "m", "content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": thinking["thinking"]},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": thinking["signature"]},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Sunny."},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    stream = MessageStream(shown.append)
    for event in events:
        stream.feed(ServerSentEvent(event["type"], json.dumps(event)))
    answer = parse_message(stream.body())
    assert shown == ["Sunny."] and answer.text == "Sunny."
    [kept] = answer.reasoning
    assert (kept.text, kept.signature) == (thinking["thinking"], thinking["signature"])
