"""MCP servers as tool sources (``ORGA_MCP_SERVERS``).

Modules:

* ``config`` — the servers file: which servers, how to reach them, the operator's rules
* ``hub`` — connecting, listing tools, calling them, reconnecting
* ``names`` — which name each tool holds in orga; collisions; the operator's marks
* ``results`` — what the model reads of a tool's result
"""

__all__: list[str] = []
