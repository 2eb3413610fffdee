"""Both wire formats end to end over real HTTP, provider errors, and keys that never leak."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any, cast

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHistory
from temporalio.exceptions import ActivityError, ApplicationError

from orga.contracts.conversation import Message
from orga.contracts.journal import Journal
from orga.contracts.state import LoopState
from orga.scripted.server import Raw, Turn
from tests.fixtures import body as fixture
from tests.harness import API_KEYS, Harness
from tests.helpers import conversation


@pytest.mark.parametrize("provider", ["openai", "openrouter", "anthropic"])
async def test_each_provider_runs_a_tool_loop(harness: Harness, provider: str) -> None:
    model = harness.new_model(
        [
            Turn(text="Let me add.", tool_calls=[("add", {"a": 2, "b": 3})]),
            Turn(text="It is 5."),
        ]
    )
    async with harness.worker():
        result = await harness.run(
            [
                Message(role="system", content="You are terse."),
                Message(role="user", content="What is 2+3?"),
            ],
            provider=provider,
            model=model,
            tools=["add"],
            system_prompt="Always use tools for arithmetic.",
        )
    assert result.output == "It is 5."
    first, second = harness.model.requests_for(model)
    if provider == "anthropic":
        assert first.path == "/v1/messages"
        assert first.headers["x-api-key"] == API_KEYS["anthropic"]
        assert first.body["system"] == [  # one block, marked for the prompt cache
            {
                "type": "text",
                "text": "Always use tools for arithmetic.\n\nYou are terse.",
                "cache_control": {"type": "ephemeral"},
            }
        ]
        assert first.body["tools"][0]["input_schema"]["required"] == ["a", "b"]
        assert [m["role"] for m in second.body["messages"]] == ["user", "assistant", "user"]
        assistant = second.body["messages"][1]["content"]
        assert [b["type"] for b in assistant] == ["text", "tool_use"]
        assert second.body["messages"][2]["content"][0]["type"] == "tool_result"
        assert second.body["messages"][2]["content"][0]["content"] == "5"
    else:
        assert first.path == "/v1/chat/completions"
        assert first.headers["authorization"] == f"Bearer {API_KEYS[provider]}"  # type: ignore[index]
        assert first.body["tools"][0]["function"]["name"] == "add"
        roles = [m["role"] for m in second.body["messages"]]
        assert roles == ["system", "system", "user", "assistant", "tool"]
        assert second.body["messages"][3]["content"] == "Let me add."


async def model_failure(handle: Any) -> tuple[ApplicationError, ApplicationError]:
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    outer = caught.value.cause
    assert isinstance(outer, ApplicationError)
    activity_error = outer.cause
    assert isinstance(activity_error, ActivityError)
    inner = activity_error.cause
    assert isinstance(inner, ApplicationError)
    return outer, inner


async def test_401_fails_fast_naming_the_key_variable(harness: Harness) -> None:
    body = fixture("openai_13_error_401_invalid_api_key_THIRDPARTY_CAPTURE.json")
    model = harness.new_model([Raw(401, body)] * 3)
    async with harness.worker():
        handle = await harness.start("go", model=model, provider="openai")
        outer, inner = await model_failure(handle)
    assert outer.type == "ModelCallFailed"
    assert inner.type == "ProviderAuthError" and inner.non_retryable
    assert "OPENAI_API_KEY" in outer.message and "invalid_api_key" in outer.message
    assert len(harness.model.requests_for(model)) == 1


async def test_429_honours_retry_after(harness: Harness) -> None:
    body = fixture("openai_13b_error_429_rate_limit_THIRDPARTY_CAPTURE.json")
    model = harness.new_model([Raw(429, body, {"retry-after": "2"}), Turn(text="after the wait")])
    async with harness.worker():
        result = await harness.run("go", model=model, provider="openai")
    first, second = harness.model.requests_for(model)
    assert result.output == "after the wait"
    # Temporal's own first retry would come after 1 s; the provider asked for 2.
    assert second.at - first.at >= 1.9


async def test_500_then_success(harness: Harness) -> None:
    model = harness.new_model(
        [
            Raw(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
            Raw(529, fixture("anthropic_08c_error_overloaded_SSE_event_DOCS.json")),
            Turn(text="third time lucky"),
        ]
    )
    async with harness.worker():
        handle = await harness.start("go", model=model, provider="anthropic")
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "third time lucky"
    assert len(harness.model.requests_for(model)) == 3
    assert [e.kind for e in journal.entries].count("ReasoningComplete") == 1


async def test_400_is_not_retried(harness: Harness) -> None:
    body = fixture("openrouter_15c_error_400_provider_raw_LIVE.json")
    model = harness.new_model([Raw(400, body)] * 2)
    async with harness.worker():
        handle = await harness.start("go", model=model, provider="openrouter")
        outer, inner = await model_failure(handle)
    assert inner.type == "ProviderRejected"
    assert "media_type" in outer.message  # the upstream message from metadata.raw
    assert len(harness.model.requests_for(model)) == 1


async def test_malformed_body_is_a_typed_error_and_retried(harness: Harness) -> None:
    model = harness.new_model([Raw(200, "<html>gateway</html>"), Turn(text="ok now")])
    async with harness.worker():
        result = await harness.run("go", model=model, provider="openai")
    assert result.output == "ok now"


def answer_reporting(provider: str, usage: dict[str, Any]) -> dict[str, Any]:
    """A tool-use answer of ``provider``'s wire format that reports ``usage``."""
    if provider == "anthropic":
        return {
            "id": "msg_lying",
            "type": "message",
            "role": "assistant",
            "model": "lying-proxy",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 1}}
            ],
            "stop_reason": "tool_use",
            "usage": usage,
        }
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    return {
        "id": "chatcmpl-lying",
        "model": "lying-proxy",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": usage,
    }


@pytest.mark.parametrize(
    ("provider", "usage", "said"),
    [
        ("openai", {"prompt_tokens": -1_000_000, "completion_tokens": 5}, "prompt_tokens=-1000000"),
        ("anthropic", {"input_tokens": -1_000_000, "output_tokens": 5}, "input_tokens=-1000000"),
        ("openai", {"prompt_tokens": 10**9, "completion_tokens": 5}, "1000000000 input tokens"),
    ],
)
async def test_usage_no_request_could_have_is_a_protocol_error_never_a_credit(
    harness: Harness, provider: str, usage: dict[str, Any], said: str
) -> None:
    """The attack: a self-hosted server (or a proxy) answers every call with
    ``prompt_tokens: -1000000``, and a loop capped at 100 000 tokens ran ~280 000 with its
    usage at -720 000. Now the first such answer fails the call, typed and not retried, and
    the loop's usage keeps what it was honestly charged."""
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 2, "b": 3})]),
            Raw(200, answer_reporting(provider, usage)),
            Turn(text="must not be asked"),
        ]
    )
    async with harness.worker():
        handle = await harness.start(
            "go", model=model, provider=provider, tools=["add"], max_total_tokens=100_000
        )
        outer, inner = await model_failure(handle)
        state = await handle.query("state", result_type=LoopState)
    assert outer.type == "ModelCallFailed" and inner.type == "ImplausibleUsage"
    assert inner.non_retryable and said in inner.message
    assert len(harness.model.requests_for(model)) == 2  # not asked again: each ask is served
    assert state.usage.total_tokens == 15  # the first call, as reported; nothing credited
    assert harness.model.remaining(model) == 1


def readable(history: WorkflowHistory) -> str:
    """A history as text with every payload decoded: in history JSON they are base64, so a
    key inside one would not show up in a plain search of the JSON."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            entries = cast(dict[str, object], node)
            data = entries.get("data")
            if isinstance(data, str) and "metadata" in entries:
                found.append(base64.b64decode(data).decode("utf-8", errors="replace"))
            for value in entries.values():
                walk(value)
        elif isinstance(node, list):
            for value in cast(list[object], node):
                walk(value)

    text = history.to_json()
    walk(json.loads(text))
    return "\n".join([text, *found])


async def test_keys_never_leave_the_worker(
    harness: Harness, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    collected: list[str] = []
    async with harness.worker():
        for provider in ("openai", "openrouter", "anthropic"):
            model = harness.new_model(
                [Turn(tool_calls=[("add", {"a": 1, "b": 1})]), Turn(text="two")]
            )
            handle = await harness.start("go", model=model, provider=provider, tools=["add"])
            collected.append((await handle.result()).model_dump_json())
            collected.append((await handle.query("state", result_type=LoopState)).model_dump_json())
            collected.append((await handle.query("journal", result_type=Journal)).model_dump_json())
            messages = await conversation(handle)
            collected.append(json.dumps([m.model_dump(mode="json") for m in messages]))
            collected.append(readable(await handle.fetch_history()))
            sent = harness.model.requests_for(model)[0].headers
            assert API_KEYS[provider] in (sent.get("authorization", "") + sent.get("x-api-key", ""))  # type: ignore[index]
        # A refused key: the error path must not echo it either.
        model = harness.new_model(
            [Raw(401, {"error": {"message": f"bad key {API_KEYS['openai']}"}})]
        )
        handle = await harness.start("go", model=model, provider="openai")
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        collected.append(str(failed.value.cause))
        collected.append(readable(await handle.fetch_history()))
        collected.append((await handle.query("journal", result_type=Journal)).model_dump_json())
    out, err = capfd.readouterr()
    collected += [out, err, caplog.text]
    everything = "\n".join(collected)
    # The payloads were read, not just their base64 (the journal's entries, the model's reply).
    assert "ReasoningComplete" in everything and "OPENAI_API_KEY" in everything
    assert '"content":"two"' in everything.replace(" ", "")
    for key in API_KEYS.values():
        assert key not in everything
        assert key[:12] not in everything
