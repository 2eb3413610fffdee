"""What a typed loop's model is told of its answer's shape (pure).

A loop with ``output_schema`` always shows the schema to its model — in every call, as a
system message after the loop's own, and in every message that sends a non-matching answer
back — whether or not the provider is also asked to constrain the answer (structured output).
The provider is asked only where the model is to answer (``constrains``): a model held to a
JSON answer on every call could never call a tool (llama.cpp's server constrains the whole
reply), so a loop that offers tools leaves its first answers free and constrains only the
retry after one that did not match.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orga.contracts.conversation import Message
from orga.core.context import leading_system

__all__ = ["constrains", "schema_text", "with_schema"]


def schema_text(schema: dict[str, Any]) -> str:
    """The schema as the model reads it (compact JSON, keys as given)."""
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def with_schema(messages: Sequence[Message], schema: dict[str, Any] | None) -> list[Message]:
    """``messages`` with the answer's schema shown after their opening system messages."""
    if schema is None:
        return list(messages)
    opening = leading_system(messages)
    notice = Message(
        role="system",
        content=(
            "[orga] When you give your final answer (after any tools you need), it must be "
            "only a JSON value that matches this JSON Schema, with no other text around it: "
            + schema_text(schema)
        ),
    )
    return [*messages[:opening], notice, *messages[opening:]]


def constrains(*, structured_output: bool, tools_offered: bool, misses: int) -> bool:
    """Whether a model call asks the provider to constrain its answer to the schema: where the
    loop allows it (``structured_output``) and the model is to answer — it is offered no
    tools, or its last answer did not match (``misses``)."""
    return structured_output and (not tools_offered or misses > 0)
