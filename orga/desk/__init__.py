"""The operator's desk: what waits for a person, across loops and tasks, and answering it.

Modules:

* ``facts`` — what Temporal records of a workflow, its ``state`` query, and the desk's
  ``DeskError``
* ``inbox`` — what waits for a person (approvals, escalations, reviews, messages), with the
  commands that act on it
* ``inbox_text`` — the inbox as text for a terminal (``orga pending``)
* ``approvals`` — who decides, and approving a waiting call: the decision built and signed in
  one place
* ``sender`` — the one sender of people's decisions and messages, for ``orga.client``'s handles
  and, checked first, for the CLI, the page and ``orga mcp``
* ``updates`` — the one way an update is sent: with one update id, resent with it while its
  answer is lost on the way
* ``releases`` — after a pause ends, the loops it held are told (``pause_lifted``)
* ``page`` — the inbox as a small local web page (``page.html``), the app ``orga desk`` serves

The CLI's verbs (``orga pending``, ``approve``, ``deny``, ``review``, ``resolve``) are
``orga.cli.decisions``, ``orga desk`` is ``orga.cli.desk``; ``orga mcp`` serves the same inbox
to an MCP client.
"""

__all__: list[str] = []
