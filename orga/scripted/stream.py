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
    model = str(whole.get("model", ""))
    events: list[tuple[str, bool]] = []

    def data(value: Any, event: str | None = None, text: bool = False) -> None:
        head = f"event: {event}\n" if event else ""
        events.append((f"{head}data: {json.dumps(value)}\n\n", text))

    if wire == "anthropic":
        data(
            {
                "type": "message_start",
                "message": {
                    **whole,
                    "content": [],
                    "stop_reason": None,
                    "usage": {
                        "input_tokens": input_tokens or whole["usage"].get("input_tokens", 0),
                        "output_tokens": 1,
                    },
                },
            },
            "message_start",
        )
        events.append(('event: ping\ndata: {"type": "ping"}\n\n', False))
        for index, block in enumerate(whole["content"]):
            if block["type"] == "text":
                data(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                    "content_block_start",
                )
                for piece in _pieces(str(block.get("text", ""))):
                    data(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                        "content_block_delta",
                        True,
                    )
            elif "input" not in block:  # a server tool's result, say: sent whole
                data(
                    {"type": "content_block_start", "index": index, "content_block": block},
                    "content_block_start",
                )
            else:
                data(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    },
                    "content_block_start",
                )
                text = json.dumps(block["input"])
                for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                    data(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": part},
                        },
                        "content_block_delta",
                    )
            data({"type": "content_block_stop", "index": index}, "content_block_stop")
        data(
            {
                "type": "message_delta",
                "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": whole["usage"].get("output_tokens", 0)},
            },
            "message_delta",
        )
        data({"type": "message_stop"}, "message_stop")
        return events
    choice = whole["choices"][0]
    head = {"id": whole["id"], "object": "chat.completion.chunk", "model": model}
    events.append((": OPENROUTER PROCESSING\n\n", False))
    pieces = _pieces(str(choice["message"].get("content") or ""))
    data(
        {
            **head,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "finish_reason": None,
                }
            ],
        }
    )
    for piece in pieces:
        data(
            {
                **head,
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            },
            text=True,
        )
    for index, call in enumerate(choice["message"].get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        start = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        data(
            {
                **head,
                "choices": [{"index": 0, "delta": {"tool_calls": [start]}, "finish_reason": None}],
            }
        )
        for part in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
            fragment = {"index": index, "function": {"arguments": part}}
            data(
                {
                    **head,
                    "choices": [
                        {"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}
                    ],
                }
            )
    data(
        {
            **head,
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
        }
    )
    data({**head, "choices": [], "usage": whole["usage"]})
    events.append(("data: [DONE]\n\n", False))
    return events


def _pieces(text: str) -> list[str]:
    """``text`` a word at a time (the spaces kept, so the pieces add up to it)."""
    words = text.split(" ")
    return [p for i, w in enumerate(words) if (p := w + (" " if i < len(words) - 1 else ""))]
