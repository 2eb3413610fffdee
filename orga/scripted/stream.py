"""The scripted model server's streamed answers: server-sent events, as each provider sends them.

``stream_events`` turns a whole answer body into the events a provider would stream for it:
OpenAI-style chunks (a keep-alive comment, text a word at a time, tool arguments in two
fragments, a usage chunk, ``[DONE]``) or Anthropic's typed events. It works on recorded real
bodies too, so the tests can compare a stream with the answer it adds up to.

Used by ``orga.scripted.server`` (tests, the benchmark and the offline demo).
"""

from __future__ import annotations

import json
from typing import Any, Literal

__all__ = ["Wire", "stream_events"]

Wire = Literal["openai", "anthropic"]


def stream_events(
    wire: Wire, whole: dict[str, Any], input_tokens: int = 0
) -> list[tuple[str, bool]]:
    """A whole answer body as the provider streams it: SSE events (each with whether it
    carries a piece of text), text a word at a time, tool arguments in two fragments. Works
    on recorded bodies too, so a stream and the answer it adds up to can be compared."""
    events = _Events()
    if wire == "anthropic":
        _message_events(events, whole, input_tokens)
    else:
        _chunk_events(events, whole)
    return events.sent


class _Events:
    """The SSE events of one answer, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bool]] = []

    def data(self, value: Any, event: str | None = None, text: bool = False) -> None:
        head = f"event: {event}\n" if event else ""
        self.sent.append((f"{head}data: {json.dumps(value)}\n\n", text))

    def raw(self, line: str) -> None:
        self.sent.append((line, False))


def _message_events(events: _Events, whole: dict[str, Any], input_tokens: int) -> None:
    """The Anthropic Messages stream of ``whole``."""
    usage = {
        "input_tokens": input_tokens or whole["usage"].get("input_tokens", 0),
        "output_tokens": 1,
    }
    started: dict[str, Any] = {**whole, "content": [], "stop_reason": None, "usage": usage}
    events.data({"type": "message_start", "message": started}, "message_start")
    events.raw('event: ping\ndata: {"type": "ping"}\n\n')
    for index, block in enumerate(whole["content"]):
        _block_events(events, index, block)
        events.data({"type": "content_block_stop", "index": index}, "content_block_stop")
    events.data(
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": whole["usage"].get("output_tokens", 0)},
        },
        "message_delta",
    )
    events.data({"type": "message_stop"}, "message_stop")


def _block_events(events: _Events, index: int, block: dict[str, Any]) -> None:
    """One content block of a Messages stream: text a word at a time, a tool's input in two
    fragments, anything else (a server tool's result) whole."""

    def start(content: dict[str, Any]) -> None:
        events.data(
            {"type": "content_block_start", "index": index, "content_block": content},
            "content_block_start",
        )

    def delta(value: dict[str, Any], *, text: bool = False) -> None:
        events.data(
            {"type": "content_block_delta", "index": index, "delta": value},
            "content_block_delta",
            text,
        )

    if block["type"] == "text":
        start({"type": "text", "text": ""})
        for piece in _pieces(str(block.get("text", ""))):
            delta({"type": "text_delta", "text": piece}, text=True)
    elif "input" not in block:
        start(block)
    else:
        start({**block, "input": {}})
        for part in _halves(json.dumps(block["input"])):
            delta({"type": "input_json_delta", "partial_json": part})


def _chunk_events(events: _Events, whole: dict[str, Any]) -> None:
    """The chat-completions stream of ``whole`` (with OpenRouter's comment line first)."""
    choice = whole["choices"][0]
    head = {
        "id": whole["id"],
        "object": "chat.completion.chunk",
        "model": str(whole.get("model", "")),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, *, text: bool = False) -> None:
        events.data(
            {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}, text=text
        )

    events.raw(": OPENROUTER PROCESSING\n\n")
    chunk({"role": "assistant", "content": ""})
    for piece in _pieces(str(choice["message"].get("content") or "")):
        chunk({"content": piece}, text=True)
    for index, call in enumerate(choice["message"].get("tool_calls") or []):
        function = {"name": call["function"]["name"], "arguments": ""}
        chunk(
            {
                "tool_calls": [
                    {"index": index, "id": call["id"], "type": "function", "function": function}
                ]
            }
        )
        for part in _halves(call["function"]["arguments"]):
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    chunk({}, choice["finish_reason"])
    events.data({**head, "choices": [], "usage": whole["usage"]})
    events.raw("data: [DONE]\n\n")


def _halves(text: str) -> tuple[str, str]:
    """``text`` in two fragments, as a tool's arguments stream."""
    return text[: len(text) // 2], text[len(text) // 2 :]


def _pieces(text: str) -> list[str]:
    """``text`` a word at a time (the spaces kept, so the pieces add up to it)."""
    words = text.split(" ")
    return [p for i, w in enumerate(words) if (p := w + (" " if i < len(words) - 1 else ""))]
