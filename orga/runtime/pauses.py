"""Incident controls: a tool paused across every loop, in the store every worker shares.

``orga pause --tool issue_refund --reason …`` writes who paused it, why and since when;
``orga resume --tool issue_refund`` removes it. A worker's tool activity asks before it runs a
call (``PauseBook.held``; at most once a second per tool and process, so a busy worker does not
ask the store for every call): a call of a paused tool fails ``ToolPaused`` without running,
and its loop waits for the pause to end — durably, journaled, shown on the desk — keeping the
approvals already granted, then runs it once (``orga.workflows.reasoning.call_executor``).

Temporal's own workflow and activity pause are experimental on this server and pause one
execution at a time (``frontend.WorkflowPauseEnabled``); a tool across all loops is not a
Temporal notion, so orga keeps it here.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from sqlalchemy import Column, MetaData, String, Table, Text, delete, insert, select

from orga.runtime.store import Store

__all__ = ["Pause", "PauseBook"]

_METADATA = MetaData()
PAUSES: Final = Table(
    "orga_pauses",
    _METADATA,
    Column("tool", String(128), primary_key=True),
    Column("paused_by", String(200), nullable=False),
    Column("reason", Text, nullable=False),
    Column("since", String(40), nullable=False),
)
_FRESH: Final = 1.0
"""Seconds a worker trusts what it last read of a tool's pause."""


@dataclass(frozen=True)
class Pause:
    """A tool paused: by whom, why, since when."""

    tool: str
    by: str
    reason: str
    since: datetime

    def describe(self) -> str:
        return (
            f"tool {self.tool!r} is paused by {self.by} since "
            f"{self.since.isoformat(timespec='seconds')}: {self.reason}"
        )


class PauseBook:
    """The pauses of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._ready = False
        self._lock = threading.Lock()
        self._read: dict[str, tuple[float, Pause | None]] = {}

    def _tables(self) -> None:
        with self._lock:
            if not self._ready:
                _METADATA.create_all(self._store.engine)
                self._ready = True

    def pause(self, tool: str, by: str, reason: str) -> Pause:
        """Pause ``tool`` (again: who and why are replaced)."""
        self._tables()
        found = Pause(tool, by, reason, datetime.now(UTC))
        with self._store.engine.begin() as db:
            db.execute(delete(PAUSES).where(PAUSES.c.tool == tool))
            db.execute(
                insert(PAUSES).values(
                    tool=tool, paused_by=by, reason=reason, since=found.since.isoformat()
                )
            )
        return found

    def resume(self, tool: str) -> Pause | None:
        """End ``tool``'s pause; the pause that ended (None: it was not paused)."""
        found = self.of(tool)
        with self._store.engine.begin() as db:
            db.execute(delete(PAUSES).where(PAUSES.c.tool == tool))
        return found

    def of(self, tool: str) -> Pause | None:
        """``tool``'s pause, read now."""
        self._tables()
        with self._store.engine.connect() as db:
            row = db.execute(select(PAUSES).where(PAUSES.c.tool == tool)).first()
        if row is None:
            return None
        return Pause(row.tool, row.paused_by, row.reason, datetime.fromisoformat(row.since))

    def all(self) -> list[Pause]:
        self._tables()
        with self._store.engine.connect() as db:
            rows = db.execute(select(PAUSES).order_by(PAUSES.c.tool)).all()
        return [Pause(r.tool, r.paused_by, r.reason, datetime.fromisoformat(r.since)) for r in rows]

    def held(self, tool: str) -> Pause | None:
        """``tool``'s pause as this process last read it, read again after ``_FRESH`` s."""
        now = time.monotonic()
        cached = self._read.get(tool)
        if cached is not None and now - cached[0] < _FRESH:
            return cached[1]
        found = self.of(tool)
        self._read[tool] = (now, found)
        return found
