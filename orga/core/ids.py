"""Ids that cannot collide: a loop's own call ids, and idempotency keys across reused ids.

Providers choose tool-call ids, and some repeat them (``call_0`` every turn). Approvals, the
journal and idempotency keys must tell calls apart, so a loop renames each call when the model's
turn arrives: ``i<iteration>_<provider id>`` (letters, digits, ``_`` and ``-`` only, which every
provider accepts back; ``_2``, ``_3``… after an id the same turn already used). The provider
then sees the loop's ids in the conversation it is sent.
"""

from __future__ import annotations

import re

from orga.contracts.conversation import ToolCall
from orga.contracts.inference import InferenceResponse

__all__ = ["internal_call_id", "with_internal_ids"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def internal_call_id(iteration: int, provider_id: str) -> str:
    """The loop's id for the call the provider named ``provider_id`` at ``iteration``."""
    safe = _UNSAFE.sub("-", provider_id)[:48] or "call"
    return f"i{iteration}_{safe}"


def with_internal_ids(response: InferenceResponse, iteration: int) -> InferenceResponse:
    """``response`` with every tool call renamed by ``internal_call_id``."""
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
