"""Tools: the ``@tool`` SDK, the tools every worker has, and MCP servers as tool sources.

Modules:

* ``sdk`` — the ``@tool`` decorator, ``ToolContext``, ``Tool`` and the worker's registry
* ``loading`` — the modules ``ORGA_TOOL_MODULES`` names; how a return value reads
* ``builtin`` — ``add`` and ``delegate``, and the built-in tools a worker is given
* ``web_fetch``, ``file_read`` — the built-in network and file tools
* ``egress`` — the egress guard of the network tools
* ``knowledge`` — ``recall_knowledge`` and ``store_knowledge``
* ``mcp`` — MCP servers as tool sources (a package)

Tool authors import from ``orga`` (``from orga import tool, ToolContext``).
"""

__all__: list[str] = []
