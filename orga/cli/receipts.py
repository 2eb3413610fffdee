"""``orga receipts ID``: what became of each effect of a loop or task.

Each tool call ends with a receipt on the journal and the audit chain (``CallReceipt``):
``delivered`` (with the SHA-256 of the result the model read), ``denied`` (by a rule or a
person), ``failed``, ``compensated``, or ``unknown`` — its attempt was lost after it began, and
a person settles it (then a second receipt says how). ``orga audit ID --verify`` checks them
with the rest of the chain.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from temporalio.service import RPCError

from orga.cli.common import CliError, client_for, console, execute, settings
from orga.cli.waiting import ensure_answering
from orga.contracts.journal import CallReceipt, Journal
from orga.contracts.messages import JOURNAL_QUERY
from orga.desk.facts import DeskError, describe
from orga.runtime.safe_text import json_text, one_line

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``receipts`` to ``app``."""
    app.command("receipts", epilog="Example: orga receipts loop-3f2a9c1b7d4e")(receipts)


def receipts(
    workflow_id: Annotated[str, typer.Argument(help="The loop's (or task's) workflow id.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per receipt, one per line.")
    ] = False,
) -> None:
    """What became of each effect: delivered, denied, failed, compensated or unknown."""

    async def body() -> int:
        client = await client_for(settings())
        try:
            facts = await describe(client, workflow_id)
        except DeskError as error:
            raise CliError(str(error)) from error
        await ensure_answering(client, workflow_id, facts.task_queue, held="the receipts")
        try:
            journal = await client.get_workflow_handle(workflow_id).query(
                JOURNAL_QUERY, result_type=Journal
            )
        except RPCError as error:
            raise CliError(f"no worker answers for {workflow_id!r} ({error.message})") from error
        found = [e for e in journal.entries if isinstance(e, CallReceipt)]
        out = console()
        if as_json:
            for receipt in found:
                sys.stdout.write(json_text(receipt.model_dump_json()) + "\n")
            return 0
        if journal.dropped:
            out.print(f"({journal.dropped} older journal entries dropped: their receipts too)")
        if not found:
            out.print(f"{workflow_id}: no receipts (no tool call has ended)", markup=False)
        for receipt in found:
            digest = f" sha256:{receipt.digest[:16]}…" if receipt.digest else ""
            by = f" by {receipt.by}" if receipt.by else ""
            line = f"{receipt.outcome:<11} {receipt.call_id}  {receipt.tool}{by}{digest}"
            out.print(one_line(line), markup=False, highlight=False)
            if receipt.note:
                out.print(one_line(f"            {receipt.note}"), markup=False, highlight=False)
        return 0

    execute(body)
