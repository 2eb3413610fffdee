"""Prompt caching: Anthropic requests mark their stable prefix with ``cache_control`` (at most
four breakpoints), a loop can turn that off, and the cache reads and writes both formats report
reach ``Usage``, the journal, ``orga state``, the metrics and the model span — counted at face
value against ``max_total_tokens``."""

from __future__ import annotations

import json
from typing import Any

import httpx
from temporalio.testing import WorkflowEnvironment

from orga.activities.inference import _cache_attributes  # pyright: ignore[reportPrivateUsage]
from orga.contracts.conversation import Message, Reasoning, ToolCall, ToolResult
from orga.contracts.inference import Usage
from orga.contracts.journal import Journal, ReasoningComplete
from orga.contracts.knowledge import KNOWLEDGE_MARKER
from orga.contracts.state import LoopState
from orga.contracts.tools import ToolDefinition
from orga.providers.anthropic import CACHE_BREAKPOINTS, build_messages_request
from orga.providers.openai import parse_chat_completion
from orga.scripted.server import Raw, Turn
from tests.fixtures import body, raw_text
from tests.harness import Harness
from tests.helpers import measured_harness, scrape, total
from tests.sample_tools import get_weather

EPHEMERAL = {"type": "ephemeral"}
USAGE_WRITE, USAGE_READ = (
    json.loads(line) for line in raw_text("anthropic_23_prompt_caching_usage_DOCS.jsonl").split()
)


def marked(value: Any) -> list[dict[str, Any]]:
    """Every object of a request body that carries ``cache_control``."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            found.append(value)  # pyright: ignore[reportUnknownArgumentType]
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]
            found += marked(item)
    elif isinstance(value, list):
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            found += marked(item)
    return found


def a_tool_loop_conversation() -> list[Message]:
    call = ToolCall(id="i1_t", name="get_weather", arguments='{"location": "Paris"}')
    return [
        Message(role="system", content="You are terse."),
        Message(role="user", content="Weather in Paris?"),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=[call],
            reasoning=[Reasoning(kind="thinking", text="Use the tool.", signature="sig")],
            source="anthropic:m",
        ),
        Message(
            role="tool",
            tool_results=[ToolResult(call_id="i1_t", name="get_weather", content="18C")],
        ),
        Message(role="user", content=f"{KNOWLEDGE_MARKER}\nnotes that change every call"),
    ]


TOOLS = [ToolDefinition(name=n, description=n, parameters={"type": "object"}) for n in ("a", "b")]


def test_anthropic_marks_tools_system_and_the_conversation_before_the_knowledge() -> None:
    request = build_messages_request(
        a_tool_loop_conversation(), TOOLS, model="m", source="anthropic:m", prompt_cache=True
    )
    assert "cache_control" not in request["tools"][0]
    assert request["tools"][-1]["cache_control"] == EPHEMERAL
    assert request["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}
    ]
    user, assistant, results = request["messages"]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use"]
    # The previous turn ends marked (thinking blocks are never marked: the API refuses it) ...
    assert [("cache_control" in b) for b in assistant["content"]] == [False, False, True]
    # ... and so does the last block before this call's knowledge, which is never marked.
    assert [b["type"] for b in results["content"]] == ["tool_result", "text"]
    assert results["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in results["content"][1]
    assert "cache_control" not in user["content"][0]
    assert len(marked(request)) == CACHE_BREAKPOINTS


def test_without_knowledge_the_last_turn_ends_the_prefix() -> None:
    messages = a_tool_loop_conversation()[:-1]
    request = build_messages_request(messages, [], model="m", prompt_cache=True)
    assert request["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert len(marked(request)) == 3  # system, previous turn, last turn: no tools
    assert len(marked(build_messages_request(messages[:2], [], model="m", prompt_cache=True))) == 2


def test_prompt_cache_off_sends_no_cache_control() -> None:
    request = build_messages_request(
        a_tool_loop_conversation(), TOOLS, model="m", prompt_cache=False
    )
    assert marked(request) == [] and request["system"] == "You are terse."


def test_usage_records_cache_reads_and_writes_in_both_formats() -> None:
    from orga.providers.anthropic import parse_message

    envelope = body("anthropic_01_end_turn_text.json")
    write = parse_message({**envelope, "usage": USAGE_WRITE}).usage
    read = parse_message({**envelope, "usage": USAGE_READ}).usage
    assert (write.input_tokens, write.cache_creation_input_tokens) == (188107, 188086)
    assert (read.input_tokens, read.cache_read_input_tokens) == (188107, 188086)
    assert read.total_tokens == 188107 + 393  # every input token, cached or not, counts
    both = write + read
    assert (both.cache_read_input_tokens, both.cache_creation_input_tokens) == (188086, 188086)
    assert both.total_tokens == 2 * 188500

    answer = body("openai_09_stop_DOCS.json")
    xai = parse_chat_completion(
        {**answer, **body("xai_24_cached_tokens_usage_DOCS.json")}, "openai"
    )
    assert (xai.usage.input_tokens, xai.usage.cache_read_input_tokens) == (125, 98)
    assert xai.usage.total_tokens == 173
    assert parse_chat_completion(answer, "openai").usage.cache_read_input_tokens == 0
    deepseek = {
        "prompt_tokens": 370,
        "completion_tokens": 87,
        "total_tokens": 457,
        "prompt_cache_hit_tokens": 320,
        "prompt_cache_miss_tokens": 50,
    }
    parsed = parse_chat_completion({**answer, "usage": deepseek}, "openai")
    assert parsed.usage.cache_read_input_tokens == 320


def test_the_span_shows_only_the_cache_counts_reported() -> None:
    assert _cache_attributes(Usage(input_tokens=5, total_tokens=5)) == {}
    assert _cache_attributes(Usage(cache_read_input_tokens=7, cache_creation_input_tokens=3)) == {
        "gen_ai.usage.cache_read.input_tokens": 7,
        "gen_ai.usage.cache_creation.input_tokens": 3,
    }


async def test_an_anthropic_loop_marks_its_prefix_and_can_turn_it_off(harness: Harness) -> None:
    def weather() -> str:
        return harness.new_model(
            [Turn(tool_calls=[("get_weather", {"location": "Paris"})]), Turn(text="Cloudy.")]
        )

    cached, plain = weather(), weather()
    async with harness.worker(tools=[get_weather]):
        for model, on in ((cached, True), (plain, False)):
            result = await harness.run(
                "Weather in Paris?",
                provider="anthropic",
                model=model,
                tools=["get_weather"],
                system_prompt="Be brief.",
                prompt_cache=on,
            )
            assert result.output == "Cloudy."
    first, second = harness.model.requests_for(cached)
    assert first.body["tools"][-1]["cache_control"] == EPHEMERAL
    assert second.body["system"][-1]["cache_control"] == EPHEMERAL
    assistant, results = second.body["messages"][1:]
    assert assistant["content"][-1]["type"] == "tool_use"
    assert assistant["content"][-1]["cache_control"] == EPHEMERAL  # the previous turn
    assert results["content"][-1]["cache_control"] == EPHEMERAL  # its result: the newest
    assert len(marked(second.body)) == CACHE_BREAKPOINTS
    assert all(marked(r.body) == [] for r in harness.model.requests_for(plain))


async def test_cache_reads_show_in_state_journal_and_metrics(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Two calls over the docs' cached prefix: the first writes it, the second reads it. The
    prefix is as long as the docs' usage says (a request could not hold more input tokens than
    its bytes: ``orga.providers.usage``)."""
    measured, address = await measured_harness(env, harness)
    prefix = "Forecasts on file. " * 10_000  # 190 000 bytes: room for 188 107 input tokens
    first = {**body("anthropic_03_parallel_tool_use.json"), "usage": USAGE_WRITE}
    second = {**body("anthropic_01_end_turn_text.json"), "usage": USAGE_READ}
    model = measured.new_model([Raw(body=first), Raw(body=second)])
    async with measured.worker(tools=[get_weather]):
        handle = await measured.start(
            "Weather in SF?",
            provider="anthropic",
            model=model,
            tools=["get_weather"],
            max_total_tokens=1_000_000,
            system_prompt=prefix,
            context_token_budget=100_000,
        )
        await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://{address}/metrics")).text
    harness.handles.extend(measured.handles)  # replayed at teardown, like every test's
    assert state.usage.cache_creation_input_tokens == 188086
    assert state.usage.cache_read_input_tokens == 188086
    assert state.usage.input_tokens == 2 * 188107  # the budget counts cached tokens fully
    assert state.usage.total_tokens == 2 * 188500
    calls = [e.usage for e in journal.entries if isinstance(e, ReasoningComplete)]
    assert [(u.cache_creation_input_tokens, u.cache_read_input_tokens) for u in calls] == [
        (188086, 0),
        (0, 188086),
    ]
    samples = scrape(text)
    cached = "orga_cached_input_tokens"
    assert total(samples, cached, provider="anthropic", cache="read") == 188086
    assert total(samples, cached, provider="anthropic", cache="write") == 188086
