"""A tool call's argument text as a JSON object, within bounds (pure).

Arguments are written by the model, so they are untrusted input read by workflow code (call
ordering, evidence, cached results), by the gate and by the tool activity. Every reader goes
through this module, so a call is judged the same way everywhere and no reader can be made to
do unbounded work: the text is refused before parsing when it is longer than
``MAX_ARGUMENT_CHARS``, and after parsing when it nests deeper than ``MAX_ARGUMENT_DEPTH``
(Python's JSON decoder recurses once per level; past about a thousand it raises
``RecursionError``, which is caught here too, so no depth reaches a caller). A refusal is a
``ToolInputError``, which the model reads as the call's error result; the conversation then
keeps the call with a short stand-in for the refused text (``elided``), so a 5 MB argument is
not sent back to the model with every later call (no budget could pay for that).
"""

from __future__ import annotations

import json
from typing import Any, cast

from orga.contracts.conversation import ToolCall
from orga.contracts.errors import ToolInputError

__all__ = [
    "ELIDED_KEY",
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "elided",
    "json_depth",
    "parse_arguments",
    "try_parse_arguments",
]

MAX_ARGUMENT_CHARS = 1_048_576
"""Characters of argument text read at most (1 Mi): past it a call is refused unread."""
MAX_ARGUMENT_DEPTH = 64
"""Nesting of arrays and objects allowed in arguments (the object itself is level 1)."""
ELIDED_KEY = "orga_refused_arguments"
"""The one key of the stand-in that replaces refused arguments in the conversation."""


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests arrays and objects, found without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: list[Any] = list(cast(dict[str, Any], item).values())
        elif isinstance(item, list):
            children = cast(list[Any], item)
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_ARGUMENT_DEPTH:
            break  # deep enough to refuse: the rest need not be walked
        stack.extend((child, level + 1) for child in children)
    return deepest


def parse_arguments(tool_name: str, raw: str) -> dict[str, Any]:
    """Parse a call's raw argument text into a JSON object.

    Raises:
        ToolInputError: the text is too long, not JSON, nested too deeply, or not a JSON
            object; the message says which and how to call again.
    """
    again = "Call it again with a JSON object."
    if len(raw) > MAX_ARGUMENT_CHARS:
        raise ToolInputError(
            f"arguments for tool {tool_name!r} are {len(raw)} characters long, more than the "
            f"{MAX_ARGUMENT_CHARS} allowed. Call it again with shorter arguments."
        )
    text = raw.strip() or "{}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        shown = raw if len(raw) <= 200 else raw[:200] + "…"
        raise ToolInputError(
            f"arguments for tool {tool_name!r} are not valid JSON ({error.msg} at position "
            f"{error.pos}): {shown!r}. {again}"
        ) from error
    except RecursionError:
        value = None
        depth = MAX_ARGUMENT_DEPTH + 1
    else:
        # Every level opens with a bracket, so text with few of them cannot nest too deep
        # (brackets inside strings only raise the count): the usual call is not walked.
        brackets = text.count("{") + text.count("[")
        depth = json_depth(value) if brackets > MAX_ARGUMENT_DEPTH else 0
    if depth > MAX_ARGUMENT_DEPTH:
        raise ToolInputError(
            f"arguments for tool {tool_name!r} nest arrays and objects more than "
            f"{MAX_ARGUMENT_DEPTH} levels deep. Call it again with flatter arguments."
        )
    if not isinstance(value, dict):
        shown = repr(value)
        shown = shown if len(shown) <= 200 else shown[:200] + "…"
        raise ToolInputError(
            f"arguments for tool {tool_name!r} must be a JSON object, not "
            f"{type(value).__name__} {shown}. {again}"
        )
    return cast(dict[str, Any], value)


def try_parse_arguments(raw: str) -> dict[str, Any] | None:
    """The arguments as an object, or ``None`` when ``parse_arguments`` would refuse them
    (the gate then explains why to the model)."""
    try:
        return parse_arguments("", raw)
    except ToolInputError:
        return None


def elided(call: ToolCall) -> ToolCall:
    """``call`` as the conversation keeps it: when ``parse_arguments`` refuses its arguments,
    they are replaced by a JSON object that says how much was refused (the call's error result
    says why); any other call is returned as it is."""
    if try_parse_arguments(call.arguments) is not None:
        return call
    size = len(call.arguments)
    note = f"{size} characters of arguments were refused and left out of the conversation"
    return call.model_copy(update={"arguments": json.dumps({ELIDED_KEY: note})})
