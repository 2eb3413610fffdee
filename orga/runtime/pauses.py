"""Incident controls: a tool, an agent or one loop paused, in the store every worker shares.

``orga pause --tool issue_refund --reason …`` (or ``--agent NAME``, or a loop's id) writes who
paused it, why and since when, keyed ``tool:NAME``, ``agent:NAME`` or ``loop:ID``;
``orga resume …`` removes it. A worker asks before it runs a tool call (``tool:``) or a loop's
model call (``agent:``, ``loop:``) — ``PauseBook.held``, at most once a second per key and
process, so a busy worker does not ask the store for every call: a call of a paused tool fails
``ToolPaused`` unrun, a paused loop's model call ``LoopPaused``, and the loop waits for the
pause to end — durably, journaled, shown on the desk — keeping the approvals already granted,
then goes on (``orga.workflows.reasoning.call_executor``, ``model_call``).

Temporal's own workflow and activity pause are experimental on this server and pause one
execution at a time (``frontend.WorkflowPauseEnabled``); a tool or an agent across all loops is
not a Temporal notion, so orga keeps all three here.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import Column, MetaData, String, Table, Text, delete, insert, select

from orga.runtime.store import Store

__all__ = ["LOOP_PAUSED", "Pause", "PauseBook"]

_METADATA = MetaData()
PAUSES: Final = Table(
    "orga_pauses",
    _METADATA,
    Column("target", String(300), primary_key=True),
    Column("paused_by", String(200), nullable=False),
    Column("reason", Text, nullable=False),
    Column("since", String(40), nullable=False),
)
LOOP_PAUSED: Final = "LoopPaused"
"""The error type of a paused loop's (or agent's) model call: it did not run."""
_FRESH: Final = 1.0
"""Seconds a worker trusts what it last read of a tool's pause."""


@dataclass(frozen=True)
class Pause:
    """Something paused (``tool:NAME``, ``agent:NAME``, ``loop:ID``): by whom, why, since when."""

    target: str
    by: str
    reason: str
    since: datetime

    def describe(self) -> str:
        kind, _, name = self.target.partition(":")
        return (
            f"{kind} {name!r} is paused by {self.by} since "
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

    def pause(self, target: str, by: str, reason: str) -> Pause:
        """Pause ``target`` (again: who and why are replaced)."""
        self._tables()
        found = Pause(target, by, reason, datetime.now(UTC))
        with self._store.engine.begin() as db:
            db.execute(delete(PAUSES).where(PAUSES.c.target == target))
            db.execute(
                insert(PAUSES).values(
                    target=target, paused_by=by, reason=reason, since=found.since.isoformat()
                )
            )
        return found

    def resume(self, target: str) -> Pause | None:
        """End ``target``'s pause; the pause that ended (None: it was not paused)."""
        found = self.of(target)
        with self._store.engine.begin() as db:
            db.execute(delete(PAUSES).where(PAUSES.c.target == target))
        return found

    def of(self, target: str) -> Pause | None:
        """``target``'s pause, read now."""
        self._tables()
        with self._store.engine.connect() as db:
            row = db.execute(select(PAUSES).where(PAUSES.c.target == target)).first()
        return None if row is None else _pause(row)

    def all(self) -> list[Pause]:
        self._tables()
        with self._store.engine.connect() as db:
            rows = db.execute(select(PAUSES).order_by(PAUSES.c.target)).all()
        return [_pause(row) for row in rows]

    def held(self, *targets: str) -> Pause | None:
        """The first of ``targets`` paused, as this process last read each (again after
        ``_FRESH`` seconds)."""
        now = time.monotonic()
        for target in targets:
            cached = self._read.get(target)
            if cached is None or now - cached[0] >= _FRESH:
                cached = (now, self.of(target))
                self._read[target] = cached
            if cached[1] is not None:
                return cached[1]
        return None


def _pause(row: Any) -> Pause:
    return Pause(row.target, row.paused_by, row.reason, datetime.fromisoformat(row.since))
