"""One model call over HTTP: build the provider's request, send it, normalise the answer.

What differs between providers is their wire format's (``orga.providers.wire``); this module
sends, streams and classifies errors the same way for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from orga.contracts.conversation import Message
from orga.contracts.errors import InvalidConfig
from orga.contracts.inference import InferenceResponse
from orga.contracts.tools import ToolDefinition
from orga.providers.http_errors import (
    parse_json_body,
    raise_for_provider_status,
    transport_error,
)
from orga.providers.streaming import OnText, server_sent_events
from orga.providers.usage import check_usage
from orga.providers.wire import CallOptions, wire_format
from orga.runtime.settings import ProviderSettings

__all__ = ["complete", "request_headers"]


def request_headers(provider: ProviderSettings) -> dict[str, str]:
    key = provider.api_key.get_secret_value() if provider.api_key is not None else None
    if key is None and provider.official:
        raise InvalidConfig(
            f"{provider.api_key_env} is not set in the worker's environment, and "
            f"{provider.base_url} needs it. Set it (or point the provider's base URL at a "
            "local server) and restart the worker."
        )
    headers = {"content-type": "application/json", **wire_format(provider).auth(key)}
    if provider.name == "openrouter":
        headers["x-title"] = "orga"
    return headers


async def complete(
    http: httpx.AsyncClient,
    provider: ProviderSettings,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    *,
    model: str,
    max_output_tokens: int | None,
    temperature: float | None,
    timeout: float,
    on_text: OnText | None = None,
    prompt_cache: bool = False,
    output_schema: dict[str, Any] | None = None,
) -> InferenceResponse:
    """Send one model call and normalise the answer. With ``on_text``, the answer is streamed
    (server-sent events) and ``on_text`` gets each piece of text as it arrives; the answer
    returned is the one the same call without streaming gives.

    The request goes to ``<provider>:<model>`` (the answer's ``source``): turns it wrote keep
    their wire ids and reasoning, others are translated (``orga.core.ids``). ``prompt_cache``:
    mark the stable prefix for the provider's cache (Anthropic; others cache by themselves).
    ``output_schema``: ask for an answer that matches it (the provider's structured output).

    Raises:
        ProviderError: the call failed (each subclass says whether Temporal should retry);
            ``ImplausibleUsage`` when the answer reports usage no answer to it can have.
        InvalidConfig: the worker has no key for a provider that needs one.
    """
    wire = wire_format(provider)
    source = f"{provider.name}:{model}"
    url = wire.url(provider)
    call = CallOptions(model, max_output_tokens, temperature, source, prompt_cache, output_schema)
    body = wire.request(messages, tools, call)
    headers = request_headers(provider)
    # Encoded once, as httpx would: its size bounds the input tokens the answer may report.
    content = json.dumps(
        wire.streaming(body) if on_text is not None else body,
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    ).encode("utf-8")
    if on_text is not None:
        parsed = await _streamed(http, provider, url, content, headers, timeout, on_text)
    else:
        try:
            response = await http.post(url, content=content, headers=headers, timeout=timeout)
        except httpx.TransportError as error:
            raise transport_error(error, provider) from error
        raise_for_provider_status(response, provider)
        parsed = parse_json_body(response, provider)
    answer = wire.response(parsed, provider)
    check_usage(answer.usage, len(content), provider.name)
    return answer.model_copy(update={"source": source})


async def _streamed(
    http: httpx.AsyncClient,
    provider: ProviderSettings,
    url: str,
    content: bytes,
    headers: dict[str, str],
    timeout: float,
    on_text: OnText,
) -> dict[str, Any]:
    """The body a streamed call adds up to (a server that does not stream answers as usual)."""
    wire = wire_format(provider)
    assembler = wire.assembler(provider, on_text)
    try:
        async with http.stream(
            "POST", url, content=content, headers=headers, timeout=timeout
        ) as response:
            if response.status_code >= 400 or "text/event-stream" not in response.headers.get(
                "content-type", ""
            ):
                await response.aread()
                raise_for_provider_status(response, provider)
                return parse_json_body(response, provider)
            async for event in server_sent_events(response.aiter_lines()):
                assembler.feed(event)
                if assembler.done:
                    break
    except httpx.TransportError as error:
        raise transport_error(error, provider) from error
    return assembler.body()
