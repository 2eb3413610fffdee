"""The ``orga`` command: ``orga demo``, ``orga server`` and the everyday verbs.

Modules:

* ``app`` — the Typer application and its help; each verb's module imported when it runs
* ``verbs``, ``help_text`` — which module holds each verb; the help's list of verbs and
  variables, written from the code (``orga --help`` imports no verb)
* ``leave`` — leaving the process, output flushed, without the interpreter's finalisation
* ``common`` — what verbs share: settings, the client, errors and exit codes, JSON, serving
* ``views`` — how states, results and lists of loops are printed
* ``journal_text`` — how a journal entry reads on one line
* ``waiting`` — waiting on a worker without hanging in silence
* ``desk`` — ``orga desk``: the inbox as a local web page (``orga.desk.page`` builds it)
* ``run`` — ``orga run``: start a loop or a thread and print its answer as it comes
* ``loops`` — ``state``, ``journal``, ``list``: watching loops
* ``conversations`` — ``say``, ``close``, ``fork``, ``cancel``: a person steering, answering,
  closing, forking or stopping a loop
* ``chat`` — ``orga chat``: an interactive session with a thread
* ``tasks`` — ``task start``, ``task state``, ``task list``
* ``decisions`` — ``pending``, ``approve``, ``deny``, ``resolve``, ``review`` (the desk's inbox,
  ``orga.desk``, answered from a terminal)
* ``approvers`` — ``orga approver keygen`` / ``show``: an approver's signing key
* ``http_guard`` — who may talk to an HTTP server the CLI runs (``orga desk``, ``orga codec``)
* ``schedule``, ``schedule_spec`` — ``orga schedule``; ``--cron`` and ``--every``
* ``knowledge`` — ``orga knowledge``
* ``policy``, ``policy_history`` — ``orga policy what-if``, ``test``, ``record``: a policy set
  tried before it ships; what the gates were asked, read back from histories record by record
* ``judges``, ``judge_history`` — ``orga judge what-if``, ``record``, ``test``: a judge tried
  on the calls people decided before it decides any; those calls, read back by replaying
* ``audit``, ``audit_runs``, ``audit_chains``, ``audit_verify``, ``audit_text``, ``capture`` —
  ``orga audit``; every run of a workflow id, resets included; each run's chain, held or
  replayed; ``--verify``; how its entries read; the workflow instance a replay builds
* ``codec`` — ``orga codec``, the Web UI's codec endpoint
* ``store`` — ``orga blob``
* ``spend`` — ``orga spend``: each user's and tenant's spend against their limits
* ``receipts`` — ``orga receipts``: what became of each effect of a loop or task
* ``incidents`` — ``orga pause``, ``orga resume``: a tool, an agent's loops or one loop stopped
* ``api`` — ``orga api``: the AG-UI endpoint web apps drive threads through; ``orga api-token``
* ``mcp``, ``mcp_decisions`` — ``orga mcp``, orga as an MCP server; its approve and deny
  (``--decisions``), which ask the person by elicitation and record the answer as the MCP
  client's claim (unverified, never signed)
* ``server``, ``demo`` — ``orga server`` and ``orga demo``
* ``worker`` — ``orga worker`` / ``worker.py``: a worker process (``OrgaPlugin`` and the process
  around it: the offline model, worker versioning, the tuner, graceful stop)
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """The ``orga`` command (``orga.cli.app``, imported when it runs: the desk's page imports
    the CLI's helpers, and the application imports the page)."""
    from orga.cli.app import main as run

    run(argv)
