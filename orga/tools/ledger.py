"""Exactly-once side effects for tool authors: a ledger keyed by the call's idempotency key.

Temporal may run a tool more than once (a worker dies after the effect but before it reports
back; a timeout fires while the first attempt still runs; the retry lands on another worker).
``ctx.ledger.once(ctx.idempotency_key, effect)`` makes the effect happen once: it returns the
recorded result if the key is known, and otherwise runs the effect and records its result **in
the same transaction** — the effect and the record commit together or not at all. The ledger
lives in the worker's store (``ORGA_STORE_URL``), so a retry on another worker of a cluster
finds what the first one recorded. Effects in that database are exactly-once; for an effect
elsewhere (an HTTP call), pass the key on as that system's own idempotency key and record its
answer here:

    @tool(serial=True, idempotent=True)  # the ledger makes a run again harmless
    def pay(amount: int, to: str, ctx: ToolContext) -> str:
        ctx.ledger.prepare(PAYMENTS_TABLE)
        return ctx.ledger.once(ctx.idempotency_key, lambda db: insert_payment(db, amount, to))

``effect`` receives a SQLAlchemy ``Connection`` (write portable SQL with ``text()`` and named
parameters: it runs on SQLite and PostgreSQL alike).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, text

from orga.runtime.store import Store

__all__ = ["Ledger"]

T = TypeVar("T")


class Ledger:
    """The idempotency ledger of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._prepared: set[str] = set()
        self._lock = threading.Lock()

    def prepare(self, *statements: str) -> None:
        """Run idempotent setup SQL (``CREATE TABLE IF NOT EXISTS …``) once per process."""
        with self._lock:
            missing = [s for s in statements if s not in self._prepared]
            if not missing:
                return
            with self.store.engine.begin() as connection:
                for statement in missing:
                    connection.execute(text(statement))
            self._prepared.update(missing)

    def once(self, key: str, effect: Callable[[Connection], T]) -> T:
        """Run ``effect`` once per ``key`` and return its (JSON-serialisable) result."""
        return self.store.once(key, effect)

    def recorded(self, key: str) -> Any | None:
        """The result recorded for ``key``, if any."""
        return self.store.recorded(key)
