"""orga: durable, governed agent reasoning loops on Temporal.

The public surface for tool authors and clients::

    from orga import tool, ToolContext, LoopConfig, LoopInput, LoopResult, Message

The package is split by what workflow code may import:

``orga.contracts``
    the pydantic types that travel through Temporal (inputs, results, journal, activity
    requests, the error tree). Pure; passed through the workflow sandbox.
``orga.core``
    the deterministic decisions the workflows make (routing, phases, breakers, trackers,
    context fitting, tool profiles, ordering). Pure; passed through the workflow sandbox.
``orga.runtime``
    settings, the Temporal connection, stores, the ``@tool`` registry, MCP servers, the
    embedded dev server and the scripted model server: I/O, used by workers and clients,
    never imported by workflows.
``orga.cli``
    the ``orga`` command (one module per group of verbs) and the demo.

Importing ``orga`` imports nothing else: each name below loads its module on first use, so
code that only needs ``orga.contracts`` (workflows, in the sandbox) never loads the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orga.contracts.config import LoopConfig, LoopInput
    from orga.contracts.conversation import Message, ToolCall, ToolResult
    from orga.contracts.evidence import Evidence
    from orga.contracts.inference import Usage
    from orga.contracts.journal import Journal, JournalEntry
    from orga.contracts.state import LoopResult, LoopState
    from orga.contracts.task import TaskInput, TaskResult
    from orga.contracts.tools import ToolDefinition
    from orga.runtime.tools import Tool, ToolContext, tool

__all__ = [
    "Evidence",
    "Journal",
    "JournalEntry",
    "LoopConfig",
    "LoopInput",
    "LoopResult",
    "LoopState",
    "Message",
    "TaskInput",
    "TaskResult",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolResult",
    "Usage",
    "tool",
]

_HOMES = {
    "Evidence": "orga.contracts.evidence",
    "Journal": "orga.contracts.journal",
    "JournalEntry": "orga.contracts.journal",
    "LoopConfig": "orga.contracts.config",
    "LoopInput": "orga.contracts.config",
    "LoopResult": "orga.contracts.state",
    "LoopState": "orga.contracts.state",
    "Message": "orga.contracts.conversation",
    "TaskInput": "orga.contracts.task",
    "TaskResult": "orga.contracts.task",
    "Tool": "orga.runtime.tools",
    "ToolCall": "orga.contracts.conversation",
    "ToolContext": "orga.runtime.tools",
    "ToolDefinition": "orga.contracts.tools",
    "ToolResult": "orga.contracts.conversation",
    "Usage": "orga.contracts.inference",
    "tool": "orga.runtime.tools",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'orga' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
