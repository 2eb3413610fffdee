"""orga: durable, governed agent reasoning loops on Temporal.

The public surface for tool authors, clients and workers:

    import orga

    @orga.tool
    def lookup(sku: str) -> str: ...                      # a tool (``ToolContext`` for keys)

    plugin = orga.OrgaPlugin(tools=[lookup])              # in any Temporal worker
    client = await orga.connect()                         # orga's converter, from the env
    loop = await orga.start_loop(client, "What is 2+3?", orga.LoopConfig(tools=["add"]))
    print((await loop.result()).output)

The public surface — what a release keeps stable, and the API reference documents — is the
names in the ``__all__`` of these modules (``docs/reference/stability.md``;
``tests/test_public_api.py`` pins each list):

``orga``
    the names below: tools, the client, the plugin and the types they take and give.
``orga.client``, ``orga.plugin``
    starting and answering loops (``connect``, ``start_loop``, ``LoopHandle``); ``OrgaPlugin``,
    orga in any Temporal worker.
``orga.contracts``
    the pydantic types that travel through Temporal (inputs, results, journal, the error tree
    in ``orga.contracts.errors``). Pure; passed through the workflow sandbox.
``orga.tools``, ``orga.testing``, ``orga.runtime.settings``
    the ``@tool`` SDK; test doubles (a scripted model server, the offline model); the
    settings a worker reads from its environment.

Everything else is orga's own house, free to change in any release; its rooms:

``orga.core``
    the deterministic decisions the workflows make (routing, phases, breakers, trackers,
    context fitting, tool profiles, ordering). Pure; passed through the workflow sandbox.
``orga.workflows``, ``orga.activities``
    the Temporal workflow definitions and their parts (orchestration only, sandboxed); the
    activities, the worker's side of every call the workflows make.
``orga.worker``, ``orga.server``, ``orga.runtime``
    the worker process and its infrastructure; the embedded Temporal dev server; what clients
    and workers share (the connection, the store, the converter, tracing).
``orga.providers``, ``orga.gates``, ``orga.knowledge``, ``orga.scripted``
    model calls over HTTP; the gate's engines (default, Cedar, OPA); agents' knowledge in the
    store; the scripted and offline models.
``orga.desk``, ``orga.cli``
    what waits for a person and answering it (the inbox, its text, its web page); the ``orga``
    command.

Workflow code imports only ``orga.contracts``, ``orga.core`` and ``orga.workflows`` (a lint
rule and ``tests/test_architecture.py`` hold it).

Importing ``orga`` imports nothing else: each name below loads its module on first use, so
code that only needs ``orga.contracts`` (workflows, in the sandbox) never loads the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orga.client import (
        LoopHandle,
        ThreadHandle,
        connect,
        load_approver_key,
        loop,
        start_loop,
        start_thread,
        thread,
    )
    from orga.contracts.config import LoopConfig, LoopInput
    from orga.contracts.conversation import Message, ToolCall, ToolResult
    from orga.contracts.evidence import Evidence
    from orga.contracts.inference import Usage
    from orga.contracts.journal import Journal, JournalEntry
    from orga.contracts.state import LoopResult, LoopState
    from orga.contracts.task import TaskInput, TaskResult
    from orga.contracts.threads import ThreadConfig, TurnResult
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
    "ThreadConfig",
    "ThreadHandle",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolResult",
    "TurnResult",
    "Usage",
    "connect",
    "load_approver_key",
    "loop",
    "start_loop",
    "start_thread",
    "thread",
    "tool",
]

_HOMES = {
    "Evidence": "orga.contracts.evidence",
    "Journal": "orga.contracts.journal",
    "JournalEntry": "orga.contracts.journal",
    "LoopConfig": "orga.contracts.config",
    "LoopHandle": "orga.client",
    "load_approver_key": "orga.client",
    "LoopInput": "orga.contracts.config",
    "LoopResult": "orga.contracts.state",
    "LoopState": "orga.contracts.state",
    "Message": "orga.contracts.conversation",
    "OrgaPlugin": "orga.plugin",
    "TaskInput": "orga.contracts.task",
    "TaskResult": "orga.contracts.task",
    "ThreadConfig": "orga.contracts.threads",
    "ThreadHandle": "orga.client",
    "TurnResult": "orga.contracts.threads",
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
    "start_thread": "orga.client",
    "thread": "orga.client",
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
