"""An example side-effecting tool that happens exactly once per call, whatever crashes.

Run a worker with it: ``ORGA_TOOL_MODULES=examples.payments uv run worker.py``. Payments are
written to the worker's store (``ORGA_STORE_URL``: SQLite on one machine, PostgreSQL for a
cluster) in the same transaction as the ledger's record, so a retried call — the worker died,
a timeout fired, the retry landed on another worker — finds its payment already made and
returns the same receipt.
"""

from __future__ import annotations

import time
import uuid

from sqlalchemy import Connection, text

from orga import ToolContext, tool

PAYMENTS = (
    "CREATE TABLE IF NOT EXISTS payments ("
    " receipt TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL,"
    " amount INTEGER NOT NULL, recipient TEXT NOT NULL)"
)


@tool(serial=True, timeout=60)
def record_payment(amount: int, to: str, ctx: ToolContext, seconds: float = 0.0) -> str:
    """Pay someone. Exactly once per call, even when the worker crashes and the call is retried.

    Args:
        amount: how much, in cents.
        to: who is paid.
        seconds: how long the payment provider takes to answer (for demonstrations).
    """
    assert ctx.ledger is not None, "tools run by an orga worker always get its ledger"
    ctx.ledger.prepare(PAYMENTS)
    time.sleep(seconds)  # the slow part, before anything is committed

    def pay(db: Connection) -> str:
        receipt = f"rcpt-{uuid.uuid4().hex[:12]}"
        db.execute(
            text(
                "INSERT INTO payments (receipt, idempotency_key, amount, recipient)"
                " VALUES (:receipt, :key, :amount, :to)"
            ),
            {"receipt": receipt, "key": ctx.idempotency_key, "amount": amount, "to": to},
        )
        return f"paid {amount} to {to}, receipt {receipt}"

    return ctx.ledger.once(ctx.idempotency_key, pay)
