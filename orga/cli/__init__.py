"""The ``orga`` command: ``orga demo``, ``orga server`` and the everyday verbs.

Modules:

* ``app`` — the Typer application and its help
* ``common`` — what verbs share: settings, the client, errors and exit codes, JSON, serving
* ``safe_text`` — what a terminal may be shown of text from models, tools and clients
* ``views`` — how states, journals and results are printed
* ``waiting`` — waiting on a worker without hanging in silence
* ``loops`` — ``run``, ``state``, ``journal``, ``list``
* ``tasks`` — ``task start``, ``task state``, ``task list``
* ``decisions`` — ``pending``, ``approve``, ``deny``, ``resolve``, ``review`` (the desk's inbox,
  ``orga.desk``, answered from a terminal)
* ``http_guard`` — who may talk to an HTTP server the CLI runs (``orga desk``, ``orga codec``)
* ``schedule``, ``schedule_spec`` — ``orga schedule``; ``--cron`` and ``--every``
* ``knowledge`` — ``orga knowledge``
* ``audit``, ``audit_runs``, ``capture`` — ``orga audit``; every run of a workflow id, resets
  included; the workflow instance a replay builds
* ``codec`` — ``orga codec``, the Web UI's codec endpoint
* ``store`` — ``orga blob``
* ``mcp`` — ``orga mcp``, orga as an MCP server
* ``server``, ``demo`` — ``orga server`` and ``orga demo``
"""

from orga.cli.app import main

__all__ = ["main"]
