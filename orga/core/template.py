"""Compensation arguments that refer to the step's result: ``"${result}"``, ``"${result.a.b}"``
(pure)."""

from __future__ import annotations

import json
import re
from typing import Any, cast

from orga.core.arguments import MAX_ARGUMENT_DEPTH, json_depth

__all__ = ["fill_template"]

_REFERENCE = re.compile(r"^\$\{result(?:\.([\w.]+))?\}$")


def _lookup(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = cast(dict[str, Any], value)[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(cast(list[Any], value)):
            value = cast(list[Any], value)[int(part)]
        else:
            raise KeyError(part)
    return value


def fill_template(arguments: dict[str, Any], result: str | None) -> dict[str, Any]:
    """Replace ``"${result…}"`` values with the step's result — every one of them with null
    when the step has none (it never completed: the compensation must tell, by the step's
    idempotency key, whether its effect happened).

    Raises:
        ValueError: a path does not exist in the result.
    """
    filled: dict[str, Any] = {}
    for key, value in arguments.items():
        match = _REFERENCE.match(value) if isinstance(value, str) else None
        if match is None:
            filled[key] = value
            continue
        if match.group(1) is None or result is None:
            filled[key] = result
            continue
        try:
            parsed = json.loads(result or "null")
            too_deep = json_depth(parsed) > MAX_ARGUMENT_DEPTH
        except RecursionError:
            parsed, too_deep = None, True
        except json.JSONDecodeError as error:
            raise ValueError(
                f"compensation argument {key!r}: the step's result has no {match.group(1)!r}"
            ) from error
        if too_deep:  # a tool's result is untrusted: never walked past this depth
            raise ValueError(
                f"compensation argument {key!r}: the step's result nests more than "
                f"{MAX_ARGUMENT_DEPTH} levels deep, so {match.group(1)!r} is not read from it"
            )
        try:
            filled[key] = _lookup(parsed, match.group(1))
        except KeyError as error:
            raise ValueError(
                f"compensation argument {key!r}: the step's result has no {match.group(1)!r}"
            ) from error
    return filled
