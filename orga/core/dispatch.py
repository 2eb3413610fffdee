"""How the calls of one turn may run: the ordering rules (pure).

Independent calls run in parallel. A call of a ``serial`` tool waits for the previous serial
call of the turn (side effects happen in the model's order). Calls that name the same resource
(through their tool's ``resource_arg``) wait for each other, and a call after a *failed* call
on the same resource is skipped: the model asked for them in that order for a reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orga.contracts.conversation import ToolCall
from orga.contracts.tools import ToolDefinition
from orga.core.arguments import try_parse_arguments

__all__ = ["Predecessor", "predecessors"]


@dataclass(frozen=True)
class Predecessor:
    """A call that must finish before another starts."""

    index: int
    """Position of the earlier call in the turn."""
    skip_if_failed: bool
    """True when both touch the same resource: if the earlier one failed, skip the later."""


def _resource(call: ToolCall, definition: ToolDefinition | None) -> str | None:
    if definition is None or definition.resource_arg is None:
        return None
    arguments = try_parse_arguments(call.arguments)
    if arguments is None or definition.resource_arg not in arguments:
        return None
    value: object = arguments[definition.resource_arg]
    return json.dumps(value, sort_keys=True)


def predecessors(
    calls: Sequence[tuple[int, ToolCall]],
    definitions: Mapping[str, ToolDefinition],
) -> dict[int, list[Predecessor]]:
    """For each call (by its index in the turn), the earlier calls it must wait for.

    Args:
        calls: the calls that will run, with their index in the turn, in the model's order.
        definitions: tool definitions by name.
    """
    waits: dict[int, list[Predecessor]] = {}
    last_serial: int | None = None
    last_on_resource: dict[str, int] = {}
    for index, call in calls:
        definition = definitions.get(call.name)
        found: list[Predecessor] = []
        resource = _resource(call, definition)
        if resource is not None and resource in last_on_resource:
            found.append(Predecessor(last_on_resource[resource], skip_if_failed=True))
        if definition is not None and definition.serial:
            if last_serial is not None and all(p.index != last_serial for p in found):
                found.append(Predecessor(last_serial, skip_if_failed=False))
            last_serial = index
        if resource is not None:
            last_on_resource[resource] = index
        waits[index] = found
    return waits
