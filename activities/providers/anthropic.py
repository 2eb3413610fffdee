"""The Anthropic Messages API (``POST /v1/messages``).

Anthropic's ``stop_reason`` values are orga's vocabulary, so they pass through unchanged and
only ``tool_use`` and ``end_turn`` continue the loop. Named rules:

* ``REFUSAL_WITH_TOOL_USE`` — a ``refusal`` can come with ``tool_use`` blocks; the calls are
  reported (as not run) but the turn routes to failure, so no tool runs.
* ``EMPTY_CONTENT`` — a refusal may have ``content: []``; nothing indexes into it.
* ``SERVER_TOOLS`` — ``server_tool_use``, ``web_search_tool_result``, ``thinking`` and other
  server-side blocks are not client tool calls; only ``text`` and ``tool_use`` are read.

Building the request: every system message goes to the top-level ``system``; tool results
become ``tool_result`` blocks of a user turn (first in that turn, as the API requires); text
that came with tool calls is kept; consecutive same-role messages merge into one turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from orga.contracts.conversation import Message, ToolCall
from orga.contracts.errors import MalformedModelResponse
from orga.contracts.inference import InferenceResponse, Usage
from orga.contracts.tools import ToolDefinition
from orga.core.arguments import try_parse_arguments

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "build_messages_request", "parse_message"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires ``max_tokens``; this is used when the loop sets none."""


def _input_object(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object Anthropic wants (invalid JSON is kept, wrapped)."""
    value = try_parse_arguments(arguments)
    return {"_unparsed_arguments": arguments} if value is None else value


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": r.content,
                "is_error": r.is_error,
            }
            for r in message.tool_results
        ]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _input_object(c.arguments)}
        for c in message.tool_calls
    )
    return blocks


def build_messages_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    *,
    model: str,
    max_output_tokens: int | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages``."""
    system = [m.content for m in messages if m.role == "system" and m.content]
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # Tool results must open the user turn that answers a tool_use turn.
            content = cast(list[dict[str, Any]], turn["content"])
            turn["content"] = [b for b in content if b["type"] == "tool_result"] + [
                b for b in content if b["type"] != "tool_result"
            ]
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_output_tokens or DEFAULT_MAX_TOKENS,
        "messages": turns,
    }
    if system:
        body["system"] = "\n\n".join(system)
    if tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
    if temperature is not None:
        body["temperature"] = temperature
    return body


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    usage = cast(dict[str, Any], raw)
    prompt = sum(
        int(usage.get(key) or 0)
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    output = int(usage.get("output_tokens") or 0)
    return Usage(input_tokens=prompt, output_tokens=output, total_tokens=prompt + output)


def parse_message(body: dict[str, Any]) -> InferenceResponse:
    """Normalise a Messages API response body.

    Raises:
        MalformedModelResponse: the body does not follow the wire format.
    """
    stop_reason = body.get("stop_reason")
    if not isinstance(stop_reason, str) or not stop_reason:
        raise MalformedModelResponse(f"anthropic answered without a stop_reason: {body!s:.300}")
    content = body.get("content")
    if not isinstance(content, list):
        raise MalformedModelResponse("anthropic answered without a 'content' list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, item in enumerate(cast(list[Any], content)):
        if not isinstance(item, dict):
            raise MalformedModelResponse(f"content[{index}] is not an object")
        block = cast(dict[str, Any], item)
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise MalformedModelResponse(f"content[{index}] is a tool_use without id or name")
            raw = block.get("input_text")  # streamed input too deep to decode: kept as text
            arguments = (
                raw
                if isinstance(raw, str)
                else json.dumps(block.get("input", {}), ensure_ascii=False)
            )
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        # RULE SERVER_TOOLS: every other block type is server-side or reasoning; not ours to run.
    if stop_reason == "tool_use" and not calls:
        raise MalformedModelResponse("anthropic answered stop_reason 'tool_use' without tool_use")
    if stop_reason == "end_turn" and calls:
        raise MalformedModelResponse("anthropic answered stop_reason 'end_turn' with tool_use")
    refusal: str | None = None
    details = body.get("stop_details")
    if stop_reason == "refusal" and isinstance(details, dict):
        explanation = cast(dict[str, Any], details).get("explanation")
        refusal = explanation if isinstance(explanation, str) else None
    return InferenceResponse(
        stop_reason=stop_reason,
        raw_stop_reason=stop_reason,
        text="".join(texts),
        tool_calls=calls,
        usage=_usage(body.get("usage")),
        provider="anthropic",
        model=str(body.get("model") or ""),
        response_id=str(body["id"]) if body.get("id") is not None else None,
        refusal=refusal,
    )
