"""orga: durable, governed agent reasoning loops on Temporal.

The public surface for tool authors, clients and workers::

    import orga

    @orga.tool
    def lookup(sku: str) -> str: ...                      # a tool (``ToolContext`` for keys)

    plugin = orga.OrgaPlugin(tools=[lookup])              # in any Temporal worker
    client = await orga.connect()                         # orga's converter, from the env
    loop = await orga.start_loop(client, "What is 2+3?", orga.LoopConfig(tools=["add"]))
    print((await loop.result()).output)

The package is split by what workflow code may import:

``orga.contracts``
    the pydantic types that travel through Temporal (inputs, results, journal, activity
    requests, the error tree). Pure; passed through the workflow sandbox.
``orga.core``
    the deterministic decisions the workflows make (routing, phases, breakers, trackers,
    context fitting, tool profiles, ordering). Pure; passed through the workflow sandbox.
``orga.runtime``
    infrastructure: settings, the Temporal connection, the store, the ledger, the embedded dev
    server, tracing, the desk's operations. I/O, used by workers and clients.
``orga.providers``
    model calls over HTTP, in each provider's wire format.
``orga.gates``
    the gate's engines: the default rules, Cedar, OPA.
``orga.tools``
    the ``@tool`` SDK, the built-in tools, MCP servers as tool sources.
``orga.knowledge``
    agents' knowledge in the store: full-text and hybrid search, conventions.
``orga.testing``
    test doubles: the scripted model server and the offline model.
``orga.cli``
    the ``orga`` command (one module per group of verbs) and the demo.
``orga.plugin``, ``orga.client``, ``orga.worker.serve``
    ``OrgaPlugin`` (orga in any Temporal worker); starting and answering loops
    (``connect``, ``start_loop``, ``LoopHandle``); the worker process (``orga worker``).

None of the packages after ``orga.core`` is ever imported by workflow code (a lint rule and
``tests/test_architecture.py`` hold it).

Importing ``orga`` imports nothing else: each name below loads its module on first use, so
code that only needs ``orga.contracts`` (workflows, in the sandbox) never loads the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orga.client import LoopHandle, connect, loop, start_loop
    from orga.contracts.config import LoopConfig, LoopInput
    from orga.contracts.conversation import Message, ToolCall, ToolResult
    from orga.contracts.evidence import Evidence
    from orga.contracts.inference import Usage
    from orga.contracts.journal import Journal, JournalEntry
    from orga.contracts.state import LoopResult, LoopState
    from orga.contracts.task import TaskInput, TaskResult
    from orga.contracts.tools import ToolDefinition
    from orga.plugin import OrgaPlugin
    from orga.tools.sdk import Tool, ToolContext, tool

__all__ = [
    "Evidence",
    "Journal",
    "JournalEntry",
    "LoopConfig",
    "LoopHandle",
    "LoopInput",
    "LoopResult",
    "LoopState",
    "Message",
    "OrgaPlugin",
    "TaskInput",
    "TaskResult",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolResult",
    "Usage",
    "connect",
    "loop",
    "start_loop",
    "tool",
]

_HOMES = {
    "Evidence": "orga.contracts.evidence",
    "Journal": "orga.contracts.journal",
    "JournalEntry": "orga.contracts.journal",
    "LoopConfig": "orga.contracts.config",
    "LoopHandle": "orga.client",
    "LoopInput": "orga.contracts.config",
    "LoopResult": "orga.contracts.state",
    "LoopState": "orga.contracts.state",
    "Message": "orga.contracts.conversation",
    "OrgaPlugin": "orga.plugin",
    "TaskInput": "orga.contracts.task",
    "TaskResult": "orga.contracts.task",
    "Tool": "orga.tools.sdk",
    "ToolCall": "orga.contracts.conversation",
    "ToolContext": "orga.tools.sdk",
    "ToolDefinition": "orga.contracts.tools",
    "ToolResult": "orga.contracts.conversation",
    "Usage": "orga.contracts.inference",
    "tool": "orga.tools.sdk",
    "connect": "orga.client",
    "loop": "orga.client",
    "start_loop": "orga.client",
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
