"""OpenAI-compatible chat completions: OpenAI, OpenRouter, vLLM, Ollama ``/v1``, llama.cpp.

``stop_reason`` is derived from structured fields only. ``finish_reason`` maps
``tool_calls``→``tool_use``, ``stop``→``end_turn``, ``length``→``max_tokens``,
``content_filter``→``refusal``; any other value is kept raw (and so ends the loop). Known
deviations of real servers are named rules, each with a test:

* ``REFUSAL_FIELD`` — OpenAI refuses with ``finish_reason: "stop"``, ``content: null`` and a
  ``refusal`` string: that is a ``refusal``, not an empty answer.
* ``TOOL_CALLS_WITH_STOP`` — OpenAI and vLLM answer ``stop`` when ``tool_choice`` names a
  function, Ollama's native API always does: non-empty ``tool_calls`` with ``stop`` is ``tool_use``.
* ``IN_BAND_ERROR`` — OpenRouter reports some provider failures inside HTTP 200, as a top-level
  ``error`` or ``finish_reason: "error"``: a provider error, retried like its code says.
* ``OBJECT_ARGUMENTS`` — Ollama's native API gives ``arguments`` as an object, not a string.
* ``MISSING_CALL_ID`` — a call without an id (Ollama native) or with a repeated id gets a fresh
  one, so every call has its own result (it has no ``wire_id``: the provider never said it).
* ``REASONING_FIELD`` — ``reasoning_content`` (DeepSeek, vLLM) and ``reasoning`` (vLLM, Ollama,
  OpenRouter) are the model's reasoning, never its answer: kept in ``Reasoning``; a turn with
  tool calls sends its ``reasoning_content`` back to the same model (DeepSeek's thinking mode
  rejects a tool loop without it).
* ``EXTRA_CONTENT`` — Gemini's OpenAI-compatible endpoint attaches ``extra_content`` (the
  thought signature) to a tool call and requires it back unchanged: kept on the call as
  ``wire_extra``.
* ``CACHED_TOKENS`` — ``prompt_tokens`` holds the cached tokens; ``prompt_tokens_details``
  says how many (``cached_tokens``, ``cache_write_tokens``), DeepSeek says
  ``prompt_cache_hit_tokens``.

The wire keeps the provider's ids: each call goes back under ``wire_ids`` (``orga.core.ids``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, Literal, cast

from orga.contracts.conversation import Message, Reasoning, ToolCall, render_tool_result
from orga.contracts.errors import (
    MalformedModelResponse,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
)
from orga.contracts.inference import InferenceResponse, Usage
from orga.contracts.tools import ToolDefinition
from orga.contracts.vocabulary import ProviderName
from orga.core.ids import wire_id_of, wire_ids
from orga.providers.usage import token_count

__all__ = ["ANSWER_SCHEMA_NAME", "build_chat_request", "in_band_error", "parse_chat_completion"]

ANSWER_SCHEMA_NAME = "answer"
"""The name a typed loop's answer schema goes under in ``response_format``."""

_FINISH_REASONS = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
}


_REASONING_KEYS: tuple[Literal["reasoning_content", "reasoning"], ...] = (
    "reasoning_content",
    "reasoning",
)


def _message_json(
    message: Message, ids: dict[str, str], source: str | None
) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "role": "tool",
                "tool_call_id": wire_id_of(ids, r.call_id),
                "content": render_tool_result(r),
            }
            for r in message.tool_results
        ]
    if message.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.content or None}
        same = source is None or message.source == source
        if message.tool_calls:
            out["tool_calls"] = [_call_json(c, ids, same) for c in message.tool_calls]
            # RULE REASONING_FIELD: the reasoning of a tool-use turn goes back to its model.
            reasoning = [r.text for r in message.reasoning if r.kind == "reasoning_content"]
            if same and reasoning:
                out["reasoning_content"] = "".join(reasoning)
        elif out["content"] is None:
            out["content"] = ""
        return [out]
    return [{"role": message.role, "content": message.content}]


def _call_json(call: ToolCall, ids: dict[str, str], same: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": ids[call.id],
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    if same and call.wire_extra is not None:  # RULE EXTRA_CONTENT
        out["extra_content"] = json.loads(call.wire_extra)
    return out


def build_chat_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    *,
    model: str,
    max_output_tokens: int | None = None,
    temperature: float | None = None,
    source: str | None = None,
    output_schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions``.

    ``output_schema``: the answer's JSON Schema, as ``response_format`` (``json_schema``, not
    strict: strict mode accepts only schemas whose every property is required).

    ``source`` (``<provider>:<model>``): where the request goes; calls of turns from the same
    source keep their wire ids and extras, every other call gets a translated id
    (``orga.core.ids.wire_ids``). Without it, every call goes under its own id, as given.
    """
    ids = (
        wire_ids(messages, source)
        if source is not None
        else {c.id: c.wire_id or c.id for m in messages for c in m.tool_calls}
    )
    body: dict[str, Any] = {
        "model": model,
        "messages": [item for m in messages for item in _message_json(m, ids, source)],
    }
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
    if max_output_tokens is not None:
        body["max_tokens"] = max_output_tokens
    if temperature is not None:
        body["temperature"] = temperature
    if output_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": ANSWER_SCHEMA_NAME, "schema": output_schema},
        }
    return body


def in_band_error(error: Any, provider: ProviderName) -> ProviderError:
    """RULE IN_BAND_ERROR: an error object inside a 200 answer."""
    info = cast(dict[str, Any], error) if isinstance(error, dict) else {"message": str(error)}
    code = info.get("code")
    status = code if isinstance(code, int) else info.get("http_status")
    message = f"{provider} reported an error inside HTTP 200: {info.get('message') or info}"
    details = {"provider": provider, "status": status, "error": str(info.get("message"))}
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 409, 429):
        return ProviderRejected(message, details)
    return ProviderUnavailable(message, details)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = cast(list[Any], content)
        return "".join(
            str(cast(dict[str, Any], p).get("text", ""))
            for p in parts
            if isinstance(p, dict) and cast(dict[str, Any], p).get("type") in ("text", None)
        )
    raise MalformedModelResponse(f"message.content is a {type(content).__name__}, not text")


def _tool_calls(raw: Any) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise MalformedModelResponse(f"message.tool_calls is a {type(raw).__name__}, not a list")
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for index, item in enumerate(cast(list[Any], raw)):
        if not isinstance(item, dict):
            raise MalformedModelResponse(f"tool_calls[{index}] is not an object")
        entry = cast(dict[str, Any], item)
        function = entry.get("function")
        if not isinstance(function, dict):
            raise MalformedModelResponse(
                f"tool_calls[{index}] has no 'function' object (type {entry.get('type')!r})"
            )
        function = cast(dict[str, Any], function)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise MalformedModelResponse(f"tool_calls[{index}].function has no name")
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):  # RULE OBJECT_ARGUMENTS
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = entry.get("id")
        wire_id: str | None = call_id if isinstance(call_id, str) else None
        if not isinstance(call_id, str) or not call_id or call_id in seen:  # RULE MISSING_CALL_ID
            call_id, wire_id = f"call_{uuid.uuid4().hex[:24]}", None
        seen.add(call_id)
        extra = entry.get("extra_content")  # RULE EXTRA_CONTENT
        calls.append(
            ToolCall(
                id=call_id,
                name=name,
                arguments=arguments,
                wire_id=wire_id,
                wire_extra=json.dumps(extra, ensure_ascii=False) if extra is not None else None,
            )
        )
    return calls


def _reasoning(message: dict[str, Any]) -> list[Reasoning]:
    """RULE REASONING_FIELD: the message's reasoning (vLLM sends the same text under both
    names: the first one given is kept)."""
    for key in _REASONING_KEYS:
        value = message.get(key)
        if isinstance(value, str) and value:
            return [Reasoning(kind=key, text=value)]
    return []


def _usage(raw: Any, provider: ProviderName) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    usage = cast(dict[str, Any], raw)

    def count(field: str, within: dict[str, Any] = usage) -> int:
        return token_count(within.get(field), f"usage.{field}", provider)

    prompt, completion = count("prompt_tokens"), count("completion_tokens")
    # A total above the parts is kept (some servers leave reasoning out of completion_tokens);
    # one below them would charge less than was served.
    total = max(count("total_tokens"), prompt + completion)
    details = usage.get("prompt_tokens_details")
    details = cast(dict[str, Any], details) if isinstance(details, dict) else {}
    # RULE CACHED_TOKENS
    cached = count("cached_tokens", details) or count("prompt_cache_hit_tokens")
    return Usage(
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=total,
        cache_read_input_tokens=cached,
        cache_creation_input_tokens=count("cache_write_tokens", details),
    )


def parse_chat_completion(body: dict[str, Any], provider: ProviderName) -> InferenceResponse:
    """Normalise a chat-completions response body.

    Raises:
        ProviderUnavailable, ProviderRejected: the body reports an error (IN_BAND_ERROR).
        MalformedModelResponse: the body does not follow the wire format.
    """
    choices = body.get("choices")
    if not choices:
        if "error" in body:
            raise in_band_error(body["error"], provider)
        raise MalformedModelResponse(f"{provider} answered without choices: {str(body)[:300]}")
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise MalformedModelResponse(f"{provider}: 'choices' is not a list of objects")
    choice = cast(dict[str, Any], cast(list[Any], choices)[0])
    finish = choice.get("finish_reason")
    if finish == "error" or ("error" in body and finish is None):
        raise in_band_error(choice.get("error") or body.get("error"), provider)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedModelResponse(f"{provider}: choices[0] has no 'message' object")
    message = cast(dict[str, Any], message)
    text = _content_text(message.get("content"))
    calls = _tool_calls(message.get("tool_calls"))
    refusal = message.get("refusal")
    refusal = refusal if isinstance(refusal, str) and refusal else None
    if not isinstance(finish, str) or not finish:
        raise MalformedModelResponse(f"{provider}: choices[0] has no finish_reason")

    if refusal is not None and finish in ("stop", "content_filter"):  # RULE REFUSAL_FIELD
        stop_reason = "refusal"
    elif finish == "stop" and calls:  # RULE TOOL_CALLS_WITH_STOP
        stop_reason = "tool_use"
    else:
        stop_reason = _FINISH_REASONS.get(finish, finish)
    if stop_reason == "tool_use" and not calls:
        raise MalformedModelResponse(
            f"{provider} answered finish_reason {finish!r} without any tool call"
        )
    return InferenceResponse(
        stop_reason=stop_reason,
        raw_stop_reason=finish,
        text=text,
        tool_calls=calls,
        usage=_usage(body.get("usage"), provider),
        provider=provider,
        model=str(body.get("model") or ""),
        response_id=str(body["id"]) if body.get("id") is not None else None,
        refusal=refusal,
        reasoning=_reasoning(message),
    )
