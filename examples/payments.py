"""An example side-effecting tool that happens exactly once per call, whatever crashes.

Run a worker with it: ``ORGA_TOOL_MODULES=examples.payments uv run worker.py``. Payments are
written to the SQLite file ``ORGA_LEDGER_PATH`` (default ``.orga/ledger.db``) in the same
transaction as the ledger record, so a retried call (the worker died, a timeout fired) finds
its payment already made and returns the same receipt.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid

from orga import ToolContext, tool
from orga.runtime.ledger import Ledger

_ledger: Ledger | None = None


def ledger() -> Ledger:
    """The worker's ledger (opened on first use, from ``ORGA_LEDGER_PATH``)."""
    global _ledger
    if _ledger is None:
        _ledger = Ledger(os.environ.get("ORGA_LEDGER_PATH") or ".orga/ledger.db")
        with _ledger.connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS payments ("
                " receipt TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL,"
                " amount INTEGER NOT NULL, recipient TEXT NOT NULL)"
            )
    return _ledger


@tool(serial=True, timeout=60)
def record_payment(amount: int, to: str, ctx: ToolContext, seconds: float = 0.0) -> str:
    """Pay someone. Exactly once per call, even when the worker crashes and the call is retried.

    Args:
        amount: how much, in cents.
        to: who is paid.
        seconds: how long the payment provider takes to answer (for demonstrations).
    """
    time.sleep(seconds)  # the slow part, before anything is committed

    def pay(db: sqlite3.Connection) -> str:
        receipt = f"rcpt-{uuid.uuid4().hex[:12]}"
        db.execute(
            "INSERT INTO payments (receipt, idempotency_key, amount, recipient)"
            " VALUES (?, ?, ?, ?)",
            (receipt, ctx.idempotency_key, amount, to),
        )
        return f"paid {amount} to {to}, receipt {receipt}"

    return ledger().once(ctx.idempotency_key, pay)
