"""The provider seam: what differs between wire formats, behind one small protocol.

``client.complete`` speaks to every provider the same way; a ``WireFormat`` says where the
request goes, how it is built and authenticated, how a streamed answer is asked for and
assembled, and how the answer reads. Two formats exist: OpenAI-compatible chat completions
(OpenAI, OpenRouter, vLLM, Ollama, llama.cpp, Mistral, Gemini's endpoint, DeepSeek) and the
Anthropic Messages API. A provider's format is chosen once, by ``wire_format``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from orga.contracts.conversation import Message
from orga.contracts.inference import InferenceResponse
from orga.contracts.tools import ToolDefinition
from orga.providers.anthropic import ANTHROPIC_VERSION, build_messages_request, parse_message
from orga.providers.openai import build_chat_request, parse_chat_completion
from orga.providers.streaming import ChatStream, MessageStream, OnText
from orga.runtime.settings import ProviderSettings

__all__ = ["CallOptions", "ChatCompletions", "Messages", "WireFormat", "wire_format"]


@dataclass(frozen=True)
class CallOptions:
    """What one call asks of the model besides the conversation and the tools."""

    model: str
    max_output_tokens: int | None
    temperature: float | None
    source: str
    """``<provider>:<model>``: turns it wrote keep their wire ids and reasoning."""
    prompt_cache: bool = False
    """Mark the stable prefix for the provider's cache (Anthropic; others cache by themselves)."""
    output_schema: dict[str, Any] | None = None
    """Ask for an answer that matches it (the provider's structured output)."""


class WireFormat(Protocol):
    """One wire format of model calls."""

    def url(self, provider: ProviderSettings) -> str:
        """Where a call goes."""
        ...

    def auth(self, key: str | None) -> dict[str, str]:
        """The headers that carry the key (and the format's own)."""
        ...

    def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], call: CallOptions
    ) -> dict[str, Any]:
        """The JSON body of a call."""
        ...

    def streaming(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body of the same call, streamed."""
        ...

    def assembler(self, provider: ProviderSettings, on_text: OnText) -> ChatStream | MessageStream:
        """What adds a streamed answer's events up to its body."""
        ...

    def response(self, body: dict[str, Any], provider: ProviderSettings) -> InferenceResponse:
        """The answer, normalised (``stop_reason`` from structured fields only)."""
        ...


class ChatCompletions:
    """OpenAI-compatible ``POST <base>/chat/completions``."""

    def url(self, provider: ProviderSettings) -> str:
        return f"{provider.base_url}/chat/completions"

    def auth(self, key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key is not None else {}

    def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], call: CallOptions
    ) -> dict[str, Any]:
        options = dataclasses.asdict(call)
        del options["prompt_cache"]  # these providers cache a stable prefix by themselves
        return build_chat_request(messages, tools, **options)

    def streaming(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True, "stream_options": {"include_usage": True}}

    def assembler(self, provider: ProviderSettings, on_text: OnText) -> ChatStream | MessageStream:
        return ChatStream(provider.name, on_text)

    def response(self, body: dict[str, Any], provider: ProviderSettings) -> InferenceResponse:
        return parse_chat_completion(body, provider.name)


class Messages:
    """The Anthropic Messages API, ``POST <base>/v1/messages``."""

    def url(self, provider: ProviderSettings) -> str:
        return f"{provider.base_url}/v1/messages"

    def auth(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key is not None:
            headers["x-api-key"] = key
        return headers

    def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], call: CallOptions
    ) -> dict[str, Any]:
        return build_messages_request(messages, tools, **dataclasses.asdict(call))

    def streaming(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def assembler(self, provider: ProviderSettings, on_text: OnText) -> ChatStream | MessageStream:
        return MessageStream(on_text)

    def response(self, body: dict[str, Any], provider: ProviderSettings) -> InferenceResponse:
        return parse_message(body)


_FORMATS: dict[str, WireFormat] = {"anthropic": Messages()}
_DEFAULT: WireFormat = ChatCompletions()


def wire_format(provider: ProviderSettings) -> WireFormat:
    """The wire format ``provider`` speaks (chat completions unless it is Anthropic)."""
    return _FORMATS.get(provider.name, _DEFAULT)
