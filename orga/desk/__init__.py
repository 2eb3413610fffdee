"""The operator's desk: what waits for a person, across loops and tasks, and answering it.

Modules:

* ``inbox`` — what waits (approvals, escalations, reviews), who decides, and answering safely
* ``inbox_text`` — the inbox as text for a terminal (``orga pending``)
* ``page`` — the inbox as a small local web page (``page.html``), the app ``orga desk`` serves

The CLI's verbs (``orga pending``, ``approve``, ``deny``, ``review``, ``resolve``) are
``orga.cli.decisions``, ``orga desk`` is ``orga.cli.desk``; ``orga mcp`` serves the same inbox
to an MCP client.
"""

__all__: list[str] = []
