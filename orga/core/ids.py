"""Ids that cannot collide: a loop's own call ids, the ids its requests put on the wire, and
idempotency keys across reused ids.

Providers choose tool-call ids, and some repeat them (``call_0`` every turn). Approvals, the
journal and idempotency keys must tell calls apart, so a loop renames each call when the model's
turn arrives: ``i<iteration>_<provider id>`` (``_2``, ``_3``… after an id the same turn already
used). That id stays inside orga.

The wire keeps the provider's own ids: a request sends each call back under the ``wire_id`` the
provider gave it, byte for byte, in the assistant turn and in its tool result, when the request
goes to the provider and model that wrote the turn (``Message.source``). Every other call — a
turn written by another provider or model (a delegation, a fallback, a conversation moved to a
critic), a call the provider gave no id, a turn recorded before orga kept wire ids — goes under
an id translated from the loop's id, for that request only: nine letters and digits from a hash
of it (``wire_ids``). Nine alphanumerics is what Mistral's API (and Mistral models behind vLLM
or llama.cpp) requires, and it fits Anthropic's ``^[a-zA-Z0-9_-]+$`` and OpenAI's 40
characters, so one translation serves every provider; the same id gives the same translation
in every request, so the prefix a provider caches does not change from one call to the next.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Sequence

from orga.contracts.conversation import Message, ToolCall
from orga.contracts.inference import InferenceResponse

__all__ = [
    "a2a_context",
    "internal_call_id",
    "translated_id",
    "wire_id_of",
    "wire_ids",
    "with_internal_ids",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_ALPHANUMERIC = string.ascii_letters + string.digits
_TRANSLATED_LENGTH = 9


def internal_call_id(iteration: int, provider_id: str) -> str:
    """The loop's id for the call the provider named ``provider_id`` at ``iteration``."""
    safe = _UNSAFE.sub("-", provider_id)[:48] or "call"
    return f"i{iteration}_{safe}"


def with_internal_ids(response: InferenceResponse, iteration: int) -> InferenceResponse:
    """``response`` with every tool call renamed by ``internal_call_id`` (its ``wire_id``, the
    provider's own, is kept)."""
    if not response.tool_calls:
        return response
    calls: list[ToolCall] = []
    taken: set[str] = set()
    for call in response.tool_calls:
        new_id = base = internal_call_id(iteration, call.id)
        copy = 1
        while new_id in taken:  # the same id twice in one turn, or two that read alike
            copy += 1
            new_id = f"{base}_{copy}"
        taken.add(new_id)
        calls.append(call.model_copy(update={"id": new_id}))
    return response.model_copy(update={"tool_calls": calls})


def translated_id(call_id: str, attempt: int = 0) -> str:
    """Nine letters and digits derived from ``call_id`` (``attempt`` > 0 after a collision)."""
    seed = call_id if attempt == 0 else f"{call_id}#{attempt}"
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big")
    letters: list[str] = []
    for _ in range(_TRANSLATED_LENGTH):
        number, digit = divmod(number, len(_ALPHANUMERIC))
        letters.append(_ALPHANUMERIC[digit])
    return "".join(letters)


def wire_ids(messages: Sequence[Message], source: str) -> dict[str, str]:
    """The id each call of ``messages`` goes under in a request to ``source``
    (``<provider>:<model>``), by the call's loop id: its ``wire_id`` when its turn came from
    ``source``, else ``translated_id`` of the loop id. No two calls of the request share one.
    """
    chosen: dict[str, str] = {}
    used: set[str] = set()
    translated: list[str] = []
    for message in messages:
        for call in message.tool_calls:
            if call.id in chosen:
                continue
            if message.source == source and call.wire_id and call.wire_id not in used:
                chosen[call.id] = call.wire_id
                used.add(call.wire_id)
            else:
                chosen[call.id] = ""
                translated.append(call.id)
    for call_id in translated:  # after every verbatim id is known, so none is taken twice
        attempt = 0
        candidate = translated_id(call_id)
        while candidate in used:
            attempt += 1
            candidate = translated_id(call_id, attempt)
        chosen[call_id] = candidate
        used.add(candidate)
    return chosen


def wire_id_of(ids: dict[str, str], call_id: str) -> str:
    """The wire id of a result's ``call_id`` (translated when no call of the request has it)."""
    return ids.get(call_id) or translated_id(call_id)


def a2a_context(workflow_id: str, call_id: str) -> str:
    """The A2A context id of a loop's ``delegate`` call to a remote agent: the same for every
    attempt of the call (what a retry asks the remote about), another for any other call."""
    digest = hashlib.sha256(f"{workflow_id}\x00{call_id}".encode()).hexdigest()
    return f"orga-{digest[:31]}"  # 36 characters: what a2a-sdk's task tables hold
