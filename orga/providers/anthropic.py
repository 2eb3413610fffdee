"""The Anthropic Messages API (``POST /v1/messages``).

Anthropic's ``stop_reason`` values are orga's vocabulary, so they pass through unchanged and
only ``tool_use`` and ``end_turn`` continue the loop. Named rules:

* ``REFUSAL_WITH_TOOL_USE`` — a ``refusal`` can come with ``tool_use`` blocks; the calls are
  reported (as not run) but the turn routes to failure, so no tool runs.
* ``EMPTY_CONTENT`` — a refusal may have ``content: []``; nothing indexes into it.
* ``SERVER_TOOLS`` — ``server_tool_use``, ``web_search_tool_result`` and other server-side
  blocks are not client tool calls; only ``text``, ``tool_use`` and reasoning are read.
* ``THINKING_BLOCKS`` — ``thinking`` (with its ``signature``) and ``redacted_thinking`` blocks
  are reasoning, never the answer; they go back verbatim, first in their assistant turn, to
  the same model (Anthropic requires them unchanged in a tool-use turn).

Building the request: every system message goes to the top-level ``system``; tool results
become ``tool_result`` blocks of a user turn (first in that turn, as the API requires); text
that came with tool calls is kept; consecutive same-role messages merge into one turn; each
call goes under its wire id (``orga.core.ids.wire_ids``).

Prompt caching (``prompt_cache``): ``cache_control: {"type": "ephemeral"}`` marks the stable
prefix, at most four breakpoints as the API allows: the last tool definition, the system
prompt, the last block of the previous turn, and the last block before this call's
``[KNOWLEDGE_CONTEXT]`` (which changes every call and is sent last for that reason). The next
call's prefix up to those marks is the same, so the provider reads it from its cache.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, cast

from orga.contracts.conversation import Message, Reasoning, ToolCall
from orga.contracts.errors import MalformedModelResponse
from orga.contracts.inference import InferenceResponse, Usage
from orga.contracts.knowledge import KNOWLEDGE_MARKER
from orga.contracts.tools import ToolDefinition
from orga.core.arguments import try_parse_arguments
from orga.core.context import injected
from orga.core.ids import wire_id_of, wire_ids
from orga.providers.usage import token_count

__all__ = [
    "ANTHROPIC_VERSION",
    "CACHE_BREAKPOINTS",
    "DEFAULT_MAX_TOKENS",
    "EPHEMERAL",
    "build_messages_request",
    "parse_message",
]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires ``max_tokens``; this is used when the loop sets none."""
EPHEMERAL: Final = {"type": "ephemeral"}
"""The ``cache_control`` of a breakpoint (the default five-minute cache)."""
CACHE_BREAKPOINTS: Final = 4
"""The most ``cache_control`` marks one request may carry."""
_REASONING_BLOCKS = ("thinking", "redacted_thinking")


def _input_object(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object Anthropic wants (invalid JSON is kept, wrapped)."""
    value = try_parse_arguments(arguments)
    return {"_unparsed_arguments": arguments} if value is None else value


def _reasoning_block(reasoning: Reasoning) -> dict[str, Any] | None:
    if reasoning.kind == "thinking":
        block: dict[str, Any] = {"type": "thinking", "thinking": reasoning.text}
        if reasoning.signature is not None:
            block["signature"] = reasoning.signature
        return block
    if reasoning.kind == "redacted_thinking" and reasoning.data is not None:
        return {"type": "redacted_thinking", "data": reasoning.data}
    return None  # another format's reasoning: nothing Anthropic reads


def _blocks(message: Message, ids: dict[str, str], same: bool) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": wire_id_of(ids, r.call_id),
                "content": r.content,
                "is_error": r.is_error,
            }
            for r in message.tool_results
        ]
    blocks: list[dict[str, Any]] = []
    if same:  # RULE THINKING_BLOCKS: verbatim, first in the turn, to the model that wrote them
        blocks.extend(b for r in message.reasoning if (b := _reasoning_block(r)) is not None)
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {"type": "tool_use", "id": ids[c.id], "name": c.name, "input": _input_object(c.arguments)}
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
    source: str | None = None,
    prompt_cache: bool = False,
    output_schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages``.

    ``source`` (``<provider>:<model>``): where the request goes; turns from the same source
    keep their wire ids and thinking blocks, every other call gets a translated id
    (``orga.core.ids.wire_ids``). Without it, every call goes under its own id, as given.
    ``prompt_cache``: mark the stable prefix with ``cache_control`` (module docstring).
    ``output_schema``: the answer's JSON Schema, as structured output (``output_config.format``).
    """
    ids = (
        wire_ids(messages, source)
        if source is not None
        else {c.id: c.wire_id or c.id for m in messages for c in m.tool_calls}
    )
    system = [m.content for m in messages if m.role == "system" and m.content]
    turns: list[dict[str, Any]] = []
    volatile: list[dict[str, Any]] = []  # blocks that change every call: never marked
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message, ids, source is None or message.source == source)
        if not blocks:
            continue
        if injected(message, KNOWLEDGE_MARKER):
            volatile.extend(blocks)
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
        joined = "\n\n".join(system)
        body["system"] = (
            [{"type": "text", "text": joined, "cache_control": dict(EPHEMERAL)}]
            if prompt_cache
            else joined
        )
    if tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
        if prompt_cache:
            body["tools"][-1]["cache_control"] = dict(EPHEMERAL)
    if prompt_cache:
        for block in _conversation_breakpoints(turns, volatile):
            block["cache_control"] = dict(EPHEMERAL)
    if temperature is not None:
        body["temperature"] = temperature
    if output_schema is not None:
        body["output_config"] = {"format": {"type": "json_schema", "schema": output_schema}}
    return body


def _conversation_breakpoints(
    turns: list[dict[str, Any]], volatile: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The blocks that end the stable conversation: the previous turn's last, and the last
    before the volatile ones (two, with the tools' and the system's: the API's four)."""

    def markable(turn: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            b
            for b in cast(list[dict[str, Any]], turn["content"])
            if b["type"] not in _REASONING_BLOCKS and not any(b is v for v in volatile)
        ]

    chosen: list[dict[str, Any]] = []
    for turn in turns[-2:]:
        stable = markable(turn)
        if stable:
            chosen.append(stable[-1])
    return chosen


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    usage = cast(dict[str, Any], raw)

    def count(field: str) -> int:
        return token_count(usage.get(field), f"usage.{field}", "anthropic")

    read, written = count("cache_read_input_tokens"), count("cache_creation_input_tokens")
    prompt = count("input_tokens") + read + written
    output = count("output_tokens")
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        total_tokens=prompt + output,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=written,
    )


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
    reasoning: list[Reasoning] = []
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
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments, wire_id=call_id))
        elif kind == "thinking":  # RULE THINKING_BLOCKS
            signature = block.get("signature")
            reasoning.append(
                Reasoning(
                    kind="thinking",
                    text=str(block.get("thinking", "")),
                    signature=signature if isinstance(signature, str) else None,
                )
            )
        elif kind == "redacted_thinking" and isinstance(block.get("data"), str):
            reasoning.append(Reasoning(kind="redacted_thinking", data=str(block["data"])))
        # RULE SERVER_TOOLS: every other block type is server-side; not ours to run.
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
        reasoning=reasoning,
    )
