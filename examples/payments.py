"""Example side-effecting tools that happen exactly once per call, whatever crashes.

Run a worker with them: ``ORGA_TOOL_MODULES=examples.payments uv run worker.py``. Payments are
written to the worker's store (``ORGA_STORE_URL``: SQLite on one machine, PostgreSQL for a
cluster) in the same transaction as the ledger's record, so a retried call — the worker died,
a timeout fired, the retry landed on another worker — finds its payment already made and
returns the same receipt.

``refund_payment`` is ``record_payment``'s compensation in a task. It finds the payment by the
step's idempotency key (``ctx.step_key``), in the same transaction that records the refund: a
step that failed or was cancelled before paying leaves nothing to refund, and a refund retried
after a crash refunds once.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, text

from orga import ToolContext, tool
from orga.contracts.errors import ToolInputError

PAYMENTS = (
    "CREATE TABLE IF NOT EXISTS payments ("
    " receipt TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL,"
    " amount INTEGER NOT NULL, recipient TEXT NOT NULL)"
)
REFUNDS = (
    "CREATE TABLE IF NOT EXISTS refunds ("
    " receipt TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL, amount INTEGER NOT NULL)"
)


@tool(serial=True, timeout=60, idempotent=True)
def record_payment(amount: int, to: str, ctx: ToolContext, seconds: float = 0.0) -> str:
    """Pay someone. Exactly once per call, even when the worker crashes and the call is retried.

    Args:
        amount: how much, in cents.
        to: who is paid.
        seconds: how long the payment provider takes to answer (for demonstrations).
    """
    assert ctx.ledger is not None, "tools run by an orga worker always get its ledger"
    ctx.ledger.prepare(PAYMENTS)
    if ctx.cancelled.wait(seconds):  # the slow part, before anything is committed
        return f"the payment of {amount} to {to} was stopped before it was sent"

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


FENCED = "not paid: the step's compensation ran first, so it will never pay"


@tool(serial=True, timeout=60, idempotent=True)
def refund_payment(ctx: ToolContext, seconds: float = 0.0) -> str:
    """Refund the payment of the task step this compensates, if it was made. Exactly once.

    Args:
        seconds: how long the payment provider takes to answer (for demonstrations).
    """
    assert ctx.ledger is not None, "tools run by an orga worker always get its ledger"
    if ctx.step_key is None:
        raise ToolInputError(
            "refund_payment undoes a task's payment step: use it as its compensation"
        )
    paid_under = ctx.step_key
    ctx.ledger.prepare(PAYMENTS, REFUNDS)
    ctx.cancelled.wait(seconds)  # the slow part, before anything is committed
    # Fence the step first: if it has not paid by now, it never will — a late attempt (its
    # worker lost contact but went on) finds this record under its key and does nothing. If it
    # has paid, this returns its result and the payment is refunded below.
    ctx.ledger.once(paid_under, lambda db: FENCED)

    def refund(db: Connection) -> str:
        payment = db.execute(
            text("SELECT receipt, amount, recipient FROM payments WHERE idempotency_key = :key"),
            {"key": paid_under},
        ).first()
        if payment is None:
            return "nothing to refund: the payment was never made"
        receipt, amount, recipient = payment
        db.execute(
            text(
                "INSERT INTO refunds (receipt, idempotency_key, amount)"
                " VALUES (:receipt, :key, :amount)"
            ),
            {"receipt": receipt, "key": ctx.idempotency_key, "amount": amount},
        )
        return f"refunded {amount} to {recipient}, receipt {receipt}"

    return ctx.ledger.once(ctx.idempotency_key, refund)
