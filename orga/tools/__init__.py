"""Tools: the ``@tool`` SDK, the tools every worker has, and MCP servers as tool sources.

Modules:

* ``sdk`` — the ``@tool`` decorator, ``ToolContext``, ``Tool`` and the worker's registry
* ``ledger`` — ``Ledger``: exactly-once side effects for tool authors (``ToolContext.ledger``)
* ``mcp`` — MCP servers as tool sources (a package; internal)

Private modules, used by the worker: ``_loading`` (the modules ``ORGA_TOOL_MODULES`` names; how
a return value reads), ``_builtin`` (``add``, ``delegate`` and the built-in tools a worker is
given), ``_web_fetch`` and ``_file_read`` (the built-in network and file tools), ``_egress``
(the egress guard of the network tools), ``_outcomes`` (a call whose attempt was lost after
its effect began: settled before it runs again), ``_run_python`` and ``_sandbox`` (code the
model writes, run behind walls). ``recall_knowledge`` and ``store_knowledge`` are
``orga.knowledge.tools``.

Tool authors import from ``orga`` (``from orga import tool, ToolContext``).
"""

__all__: list[str] = []
