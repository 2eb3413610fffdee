"""How the calls of one turn may run: contracts of the tool activities and the ordering rules.

Independent calls run in parallel. A call of a ``serial`` tool waits for the previous serial
call of the turn (side effects happen in the model's order). Calls that name the same resource
(through their tool's ``resource_arg``) wait for each other, and a call after a *failed* call
on the same resource is skipped: the model asked for them in that order for a reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from orga.conversation import ToolCall
from orga.tools import ToolDefinition

__all__ = [
    "DESCRIBE_TOOLS",
    "RUN_TOOL",
    "DescribeToolsRequest",
    "Predecessor",
    "ToolInvocation",
    "idempotency_key",
    "predecessors",
]

RUN_TOOL = "run_tool"
"""Name of the tool activity."""
DESCRIBE_TOOLS = "describe_tools"
"""Name of the activity that resolves tool names into definitions."""


class ToolInvocation(BaseModel):
    """The input of the ``run_tool`` activity."""

    model_config = ConfigDict(frozen=True)

    call: ToolCall
    workflow_id: str
    retry_tool_errors: bool = False
    """Let Temporal retry when the tool raises (otherwise the error goes to the model)."""
    max_result_bytes: int = 256 * 1024
    """Longer results are cut, with a marker the model can read; the worker keeps the full
    text in its blob directory."""


class DescribeToolsRequest(BaseModel):
    """The input of the ``describe_tools`` activity: tool names to resolve."""

    model_config = ConfigDict(frozen=True)

    names: list[str] = Field(default_factory=list[str])


def idempotency_key(workflow_id: str, call_id: str) -> str:
    """The key a tool uses to make its side effect happen once: same on every retry."""
    return f"{workflow_id}/{call_id}"


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
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return None
    if not isinstance(arguments, dict) or definition.resource_arg not in arguments:
        return None
    value: object = arguments[definition.resource_arg]  # pyright: ignore[reportUnknownVariableType]
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
