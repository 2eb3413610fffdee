"""Exactly-once side effects for tool authors: an embedded SQLite ledger keyed by the call's
idempotency key (``ToolContext.idempotency_key``, the same on every retry, on any worker).

Temporal may run a tool more than once (a worker dies after the effect but before it reports
back; a timeout fires while the first attempt is still running). ``Ledger.once`` makes the
effect happen once: it takes the write lock, returns the recorded result if the key is known,
and otherwise runs the effect and records its result **in the same transaction** — so the
effect and the record commit together or not at all. Effects that live in this database are
exactly-once; for an effect elsewhere (an HTTP call), pass the key on as that system's own
idempotency key and record its answer here::

    ledger = Ledger(".orga/ledger.db")

    @tool(serial=True)
    def pay(amount: int, to: str, ctx: ToolContext) -> str:
        return ledger.once(ctx.idempotency_key, lambda db: _insert_payment(db, amount, to))
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from orga.runtime.files import private_file

__all__ = ["Ledger"]

T = TypeVar("T")


class Ledger:
    """A SQLite file of (idempotency key → result). Safe across threads and processes."""

    def __init__(self, path: Path | str, *, timeout: float = 30.0) -> None:
        self.path = private_file(Path(path))  # SQLite's -wal and -shm files follow its mode
        self._timeout = timeout
        self._local = threading.local()
        with self.connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS orga_ledger ("
                " key TEXT PRIMARY KEY, result TEXT NOT NULL, recorded_at REAL NOT NULL)"
            )

    def connect(self) -> sqlite3.Connection:
        """This thread's connection (autocommit off; ``once`` manages the transaction)."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            self._local.db = db
        return db

    def once(self, key: str, effect: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``effect`` once per ``key`` and return its (JSON-serialisable) result; a repeat
        returns the recorded result without running it again."""
        db = self.connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT result FROM orga_ledger WHERE key = ?", (key,)).fetchone()
            if row is not None:
                db.execute("ROLLBACK")
                recorded: Any = json.loads(row[0])
                return recorded
            value = effect(db)
            db.execute(
                "INSERT INTO orga_ledger (key, result, recorded_at) VALUES (?, ?, ?)",
                (key, json.dumps(value), time.time()),
            )
            db.execute("COMMIT")
            return value
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def recorded(self, key: str) -> Any | None:
        """The result recorded for ``key``, if any."""
        row = (
            self.connect()
            .execute("SELECT result FROM orga_ledger WHERE key = ?", (key,))
            .fetchone()
        )
        return None if row is None else json.loads(row[0])
