"""Streamed model answers (server-sent events), assembled into the body the provider would have
sent without streaming, so one parser normalises both and the answer is the same either way.

Both wire formats: OpenAI-style chat-completion chunks (``data: {...}`` lines, ``data: [DONE]``
at the end, usage in a last chunk with no choices, tool-call arguments in fragments by index,
OpenRouter's mid-stream ``error`` chunk and ``: OPENROUTER PROCESSING`` keep-alive comments) and
Anthropic's Messages events (``message_start``, ``content_block_*``, ``message_delta`` with the
stop reason and output tokens, ``ping``, and ``error`` events such as ``overloaded_error``).
A stream that ends before its end marker, or reports an error, raises a provider error: the
activity fails and Temporal retries the whole call. Reasoning (``reasoning_content`` and
``reasoning`` deltas, Anthropic's ``thinking_delta`` and ``signature_delta``) and Gemini's
``extra_content`` are assembled into the body like the rest, and never passed to ``on_text``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from orga.contracts.errors import (
    MalformedModelResponse,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
)
from orga.contracts.vocabulary import ProviderName
from orga.providers.openai import in_band_error

__all__ = ["ChatStream", "MessageStream", "OnText", "ServerSentEvent", "server_sent_events"]

OnText = Callable[[str], None]


@dataclass(frozen=True)
class ServerSentEvent:
    event: str | None
    data: str


async def server_sent_events(lines: AsyncIterator[str]) -> AsyncIterator[ServerSentEvent]:
    """Events of an SSE stream: ``event:`` and ``data:`` fields up to each blank line; comment
    lines (``: keep-alive``) are skipped."""
    event: str | None = None
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield ServerSentEvent(event, "\n".join(data))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield ServerSentEvent(event, "\n".join(data))


def _json(data: str, provider: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except json.JSONDecodeError as error:
        raise MalformedModelResponse(
            f"{provider} streamed an event that is not JSON ({error.msg}): {data[:200]!r}"
        ) from error
    except RecursionError as error:
        raise MalformedModelResponse(
            f"{provider} streamed an event nested too deeply to read: {data[:200]!r}"
        ) from error
    if not isinstance(value, dict):
        raise MalformedModelResponse(f"{provider} streamed an event that is not an object")
    return cast(dict[str, Any], value)


@dataclass
class _ToolCallParts:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list[str])
    extra_content: Any = None
    """Gemini's thought signature, which arrives whole in one delta."""


class ChatStream:
    """Chat-completion chunks → one chat-completion body."""

    def __init__(self, provider: ProviderName, on_text: OnText) -> None:
        self.provider: ProviderName = provider
        self.on_text = on_text
        self.done = False
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._reasoning: dict[str, list[str]] = {}
        """Reasoning deltas by field (``reasoning_content``, ``reasoning``): never shown."""
        self._calls: dict[int, _ToolCallParts] = {}
        self._finish: str | None = None
        self._meta: dict[str, Any] = {}
        self._usage: dict[str, Any] | None = None

    def feed(self, event: ServerSentEvent) -> None:
        if event.data.strip() == "[DONE]":
            self.done = True
            return
        chunk = _json(event.data, self.provider)
        if "error" in chunk:  # OpenRouter's mid-stream error chunk
            raise in_band_error(chunk["error"], self.provider)
        for key in ("id", "model"):
            if chunk.get(key) is not None:
                self._meta[key] = chunk[key]
        if isinstance(chunk.get("usage"), dict):
            self._usage = cast(dict[str, Any], chunk["usage"])
        for raw in cast(list[Any], chunk.get("choices") or []):
            choice = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
            delta = cast(dict[str, Any], choice.get("delta") or {})
            if isinstance(delta.get("content"), str) and delta["content"]:
                self._text.append(delta["content"])
                self.on_text(delta["content"])
            if isinstance(delta.get("refusal"), str):
                self._refusal.append(delta["refusal"])
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str) and delta[key]:
                    self._reasoning.setdefault(key, []).append(delta[key])
            for part in cast(list[Any], delta.get("tool_calls") or []):
                self._tool_part(cast(dict[str, Any], part) if isinstance(part, dict) else {})
            if isinstance(choice.get("finish_reason"), str):
                self._finish = choice["finish_reason"]

    def _tool_part(self, part: dict[str, Any]) -> None:
        index = part.get("index", len(self._calls))
        parts = self._calls.setdefault(int(index), _ToolCallParts())
        if isinstance(part.get("id"), str) and part["id"]:
            parts.id = part["id"]
        function = cast(dict[str, Any], part.get("function") or {})
        if isinstance(function.get("name"), str) and function["name"]:
            parts.name = function["name"]
        if isinstance(function.get("arguments"), str):
            parts.arguments.append(function["arguments"])
        if part.get("extra_content") is not None:
            parts.extra_content = part["extra_content"]

    def body(self) -> dict[str, Any]:
        """The chat-completion body the chunks add up to."""
        if not self.done and self._finish is None:
            raise ProviderUnavailable(
                f"{self.provider}'s stream ended before the answer did (no finish_reason); "
                "retrying the call"
            )
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text)}
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        for key, pieces in self._reasoning.items():
            message[key] = "".join(pieces)
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": parts.id,
                    "type": "function",
                    "function": {"name": parts.name, "arguments": "".join(parts.arguments)},
                    **(
                        {}
                        if parts.extra_content is None
                        else {"extra_content": parts.extra_content}
                    ),
                }
                for _, parts in sorted(self._calls.items())
            ]
        body: dict[str, Any] = {
            **self._meta,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
        }
        if self._usage is not None:
            body["usage"] = self._usage
        return body


_ANTHROPIC_RETRYABLE = {"overloaded_error", "rate_limit_error", "api_error", "timeout_error"}


class MessageStream:
    """Anthropic Messages events → one message body."""

    def __init__(self, on_text: OnText) -> None:
        self.on_text = on_text
        self.done = False
        self._message: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json_parts: dict[int, list[str]] = {}
        self._usage: dict[str, Any] = {}

    def feed(self, event: ServerSentEvent) -> None:
        payload = _json(event.data, "anthropic")
        kind = payload.get("type") or event.event
        if kind == "error":
            raise self._error(cast(dict[str, Any], payload.get("error") or {}))
        if kind == "message_start":
            self._message = dict(cast(dict[str, Any], payload.get("message") or {}))
            self._usage.update(cast(dict[str, Any], self._message.get("usage") or {}))
        elif kind == "content_block_start":
            index = int(payload.get("index", len(self._blocks)))
            self._blocks[index] = dict(cast(dict[str, Any], payload.get("content_block") or {}))
        elif kind == "content_block_delta":
            self._delta(int(payload.get("index", 0)), cast(dict[str, Any], payload["delta"]))
        elif kind == "content_block_stop":
            self._close(int(payload.get("index", 0)))
        elif kind == "message_delta":
            delta = cast(dict[str, Any], payload.get("delta") or {})
            for key in ("stop_reason", "stop_sequence", "stop_details"):
                if delta.get(key) is not None:
                    self._message[key] = delta[key]
            self._usage.update(cast(dict[str, Any], payload.get("usage") or {}))
        elif kind == "message_stop":
            self.done = True
        # ping, and event types newer than this code: nothing to assemble

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        if delta.get("type") == "text_delta":
            text = str(delta.get("text", ""))
            block["text"] = str(block.get("text", "")) + text
            if text:
                self.on_text(text)
        elif delta.get("type") == "input_json_delta":
            self._json_parts.setdefault(index, []).append(str(delta.get("partial_json", "")))
        elif delta.get("type") == "thinking_delta":  # reasoning: assembled, never shown
            block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
        elif delta.get("type") == "signature_delta":
            block["signature"] = str(block.get("signature", "")) + str(delta.get("signature", ""))

    def _close(self, index: int) -> None:
        block = self._blocks.get(index)
        if block is None or block.get("type") not in ("tool_use", "server_tool_use"):
            return
        text = "".join(self._json_parts.pop(index, [])).strip()
        if not text:
            return  # no input streamed: the start event's (usually {})
        try:
            block["input"] = json.loads(text)
        except json.JSONDecodeError as error:
            raise MalformedModelResponse(
                f"anthropic streamed tool input that is not JSON ({error.msg}): {text[:200]!r}"
            ) from error
        except RecursionError:
            # Nested past what the decoder reads: kept as text, so the gate refuses the call
            # with an error result the model reads (orga.core.arguments), not a crash here.
            block["input_text"] = text

    def _error(self, error: dict[str, Any]) -> ProviderError:
        kind = str(error.get("type") or "error")
        message = f"anthropic reported {kind} mid-stream: {error.get('message') or error}"
        if kind in _ANTHROPIC_RETRYABLE:
            return ProviderUnavailable(message, {"provider": "anthropic", "error": kind})
        return ProviderRejected(message, {"provider": "anthropic", "error": kind})

    def body(self) -> dict[str, Any]:
        """The message body the events add up to."""
        if not self.done:
            raise ProviderUnavailable(
                "anthropic's stream ended before message_stop; retrying the call"
            )
        return {
            **self._message,
            "content": [block for _, block in sorted(self._blocks.items())],
            "usage": self._usage,
        }
