"""The provider-neutral conversation: messages, tool calls and tool results.

This is the durable record of a loop: it lives in workflow state, is carried across
continue-as-new and is rendered into each provider's wire format by the inference activity.
Models stored in history are a wire format: add fields with defaults, never rename or remove.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Final, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from orga.contracts.wire import Compact, Contract

__all__ = [
    "USER_MESSAGE_LIMIT",
    "Message",
    "MessageAccepted",
    "Reasoning",
    "ReasoningKind",
    "Role",
    "ToolCall",
    "ToolResult",
    "ToolStatus",
    "UserMessage",
    "chain_digest",
    "render_tool_result",
]

Role = Literal["system", "user", "assistant", "tool"]
"""Who speaks. ``tool`` is the user turn that carries the results of one tool-use turn."""

ToolStatus = Literal[
    "ok",
    "recovered",
    "failed",
    "timed_out",
    "denied",
    "invalid_arguments",
    "unknown_tool",
    "skipped",
    "refused",
    "circuit_open",
    "not_run",
    "unknown",
    "paused",
]
"""How a call ended. ``ok`` ran and succeeded; ``recovered`` failed but a recovery strategy
answered (fallback tool, cached result, operator); ``failed`` ran and raised; ``timed_out`` ran
out of time; ``denied`` was stopped by the gate or a person; ``invalid_arguments`` and
``unknown_tool`` never reached a tool; ``skipped`` waited on a call that failed (or an operator
skipped it); ``refused`` broke the evidence protocol (duplicate scope, missing judgement, stop
required); ``circuit_open`` was refused by the tool's breaker; ``not_run`` was dropped
because the loop ended; ``unknown``: the attempt that ran it was lost after it began (its
worker died, or it timed out), and the tool can neither run again safely nor tell what
happened — a person settles it; ``paused``: its tool is paused (``orga pause --tool``), the call
has not run and waits for the pause to end."""


class ToolCall(Contract):
    """One call the model asked for."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The call's id in the loop: the provider's id as the adapter read it (synthesised when
    the provider gave none), then the loop's own (``orga.core.ids``) once the turn arrived.
    Approvals, idempotency keys, the journal and state use it; the wire uses ``wire_id``."""
    name: str
    """The tool's name, as the model wrote it (it may name a tool that does not exist)."""
    arguments: str = "{}"
    """The arguments as JSON text, exactly as the model produced them (possibly invalid)."""
    wire_id: str | None = None
    """The id the provider gave the call, byte for byte, sent back to the same provider and
    model (``Message.source``) in the assistant turn and the tool result. ``None``: the
    provider gave none (or repeated one), or the call was recorded before orga kept it; such a
    call goes on the wire under an id translated from ``id`` (``orga.core.ids.wire_ids``)."""
    wire_extra: str | None = None
    """Fields the provider attached to the call that must go back unchanged, as JSON text:
    Gemini's ``extra_content`` with its thought signature. Sent only to the same source."""


class ToolResult(Compact):
    """The one result a call id gets, whatever happened to the call."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    name: str
    content: str
    """What the model sees."""
    is_error: bool = False
    """True when the call did not run or did not succeed; ``content`` says why."""
    status: ToolStatus = "ok"
    """How the call ended, for the runtime (the model reads only ``content``)."""
    blob_ref: str | None = None
    """When ``content`` was cut by the payload guard: where the worker keeps the full text."""
    evidence: Literal["found", "none"] | None = None
    """For evidence tools: did the call find anything (the tracker reads it, the model not)."""
    settled: str | None = None
    """A call whose earlier attempt was lost after its effect began: how its outcome was
    settled (``reconciled``: the tool's ``reconcile`` found the effect; ``ran again``); or
    ``cancelled``: the loop was cancelled while this call, a tool with effects, ran — its
    outcome is unknown."""


ReasoningKind = Literal["thinking", "redacted_thinking", "reasoning_content", "reasoning"]
"""Where the reasoning came from: Anthropic's ``thinking`` (with its ``signature``) and
``redacted_thinking`` (``data``) blocks; the ``reasoning_content`` (DeepSeek, vLLM) or
``reasoning`` (vLLM, Ollama, OpenRouter) field of an OpenAI-format message."""


class Reasoning(Contract):
    """Reasoning a model gave with its turn. Never the answer: kept so it can go back to the
    provider that requires it (Anthropic's thinking blocks, verbatim with their signature, in a
    tool-use turn; DeepSeek's ``reasoning_content`` in the turns of a tool loop)."""

    model_config = ConfigDict(frozen=True)

    kind: ReasoningKind
    text: str = ""
    """The reasoning as the provider gave it (empty for ``redacted_thinking``)."""
    signature: str | None = None
    """Anthropic's signature of a ``thinking`` block, sent back unchanged."""
    data: str | None = None
    """The encrypted ``data`` of a ``redacted_thinking`` block, sent back unchanged."""


class Message(Contract):
    """One turn of the conversation."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    """Text of the turn. For an assistant turn with tool calls, the text that came with them."""
    tool_calls: list[ToolCall] = Field(default_factory=list[ToolCall])
    """Calls the assistant asked for (assistant turns only)."""
    tool_results: list[ToolResult] = Field(default_factory=list[ToolResult])
    """One result per call id of the previous assistant turn, in its order (tool turns only)."""
    reasoning: list[Reasoning] = Field(default_factory=list[Reasoning])
    """Reasoning the model gave with this turn, in its order (assistant turns only)."""
    source: str | None = None
    """``<provider>:<model>`` that wrote this assistant turn (the model the loop asked for).
    Its calls' ``wire_id``, ``wire_extra`` and its ``reasoning`` go back verbatim only to the
    same source; another provider or model gets translated ids and no reasoning."""

    @model_validator(mode="after")
    def _check_shape(self) -> Self:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls, not {self.role!r} ones")
        if self.reasoning and self.role != "assistant":
            raise ValueError(f"only assistant messages carry reasoning, not {self.role!r} ones")
        if self.tool_results and self.role != "tool":
            raise ValueError(f"only tool messages carry tool_results, not {self.role!r} ones")
        if self.role == "tool" and not self.tool_results:
            raise ValueError("a tool message needs at least one tool result")
        return self


def render_tool_result(result: ToolResult) -> str:
    """The text a model sees for a result, on wire formats that have no error flag."""
    if result.is_error:
        return f"ERROR: {result.content}"
    return result.content


def chain_digest(previous: str, messages: Iterable[Message]) -> str:
    """Extend a rolling digest of a conversation with more messages.

    Lets a worker check cheaply that the conversation it holds in memory is the prefix the
    workflow means, without the workflow sending the whole conversation every turn. Fields at
    their default value are left out of the canonical form, so adding a field (with a default)
    to the message models does not change the digest of existing conversations.
    """
    digest = previous
    for message in messages:
        canonical = json.dumps(
            message.model_dump(mode="json", exclude_defaults=True),
            sort_keys=True,
            ensure_ascii=False,
        )
        digest = hashlib.sha256(f"{digest}\n{canonical}".encode()).hexdigest()
    return digest


USER_MESSAGE_LIMIT: Final = 100_000
"""Characters one message sent to a running loop may hold."""


class UserMessage(Contract):
    """A person's message to a running loop (the ``message`` update or signal)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = Field(max_length=USER_MESSAGE_LIMIT)
    sender: str | None = Field(default=None, max_length=200)
    """Who sent it (journaled; a claim, as an unsigned decision's name is)."""


class MessageAccepted(Contract):
    """What the loop says of a message it took: it joins the conversation at the next Observe,
    before the model's next call."""

    model_config = ConfigDict(frozen=True)

    seq: int
    """Its number among the messages the loop was sent (from 1; it goes on counting across
    continue-as-new, so a thread's ``turn`` update can find the turn that read it)."""
    at: datetime
    waiting: int
    """Messages (this one included) waiting for the next Observe."""
    turn: int | None = None
    """In a thread: the turn this message joins, whose answer the ``turn`` update returns
    (the next turn when the thread waits, the running one when it works)."""
