"""Incident controls: a tool, an agent or one loop paused, in the store every worker shares.

``orga pause --tool issue_refund --reason …`` (or ``--agent NAME``, or a loop's id) writes who
paused it, why and since when, keyed ``tool:NAME``, ``agent:NAME`` or ``loop:ID``;
``orga resume …`` removes it. A worker asks before it runs a tool call (``tool:``, and its
loop's or task's ``loop:`` and its agent's ``agent:``; a compensation: ``tool:`` only) or a
loop's model call (``agent:``, ``loop:``) — ``PauseBook.held``, which reads them all at most
once a second per process, so a busy worker does not ask the store for every call (a pause it
found is read again before it holds one, so a resume counts at once): a held tool
call fails ``ToolPaused`` unrun — an approved one too —, a paused loop's model call
``LoopPaused``, and the loop (or task) waits for the pause to end — durably, journaled, shown
on the desk — keeping the approvals already granted, then goes on
(``orga.workflows.reasoning.call_executor``, ``model_call``, ``orga.workflows.saga.holds``).

What a pause names, and its text read back, are in ``orga.runtime.pause_targets`` (no store
imported: ``orga pending`` reads them without SQLAlchemy); this module gives them on.

Temporal's own workflow and activity pause are experimental on this server and pause one
execution at a time (``frontend.WorkflowPauseEnabled``); a tool or an agent across all loops is
not a Temporal notion, so orga keeps all three here.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import Column, MetaData, String, Table, Text, delete, insert, select

from orga.runtime.pause_targets import PAUSE_KINDS, PAUSE_NAME, Pause, PauseKind, split_target
from orga.runtime.store import Store

__all__ = [
    "HELD_WITHIN",
    "LOOP_PAUSED",
    "PAUSE_KINDS",
    "PAUSE_NAME",
    "Pause",
    "PauseBook",
    "PauseKind",
    "split_target",
]

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
HELD_WITHIN: Final = 1.0
"""Seconds a worker trusts what it last read of the pauses: a pause holds every call it names
that begins this long after it was written (``orga pause`` answers then)."""


class PauseBook:
    """The pauses of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._ready = False
        self._lock = threading.Lock()
        self._read: tuple[float, dict[str, Pause]] | None = None
        """Every pause, as this process last read them (``held``), and when."""

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
        self._read = None
        return found

    def resume(self, target: str) -> Pause | None:
        """End ``target``'s pause; the pause that ended (None: it was not paused)."""
        found = self.of(target)
        with self._store.engine.begin() as db:
            db.execute(delete(PAUSES).where(PAUSES.c.target == target))
        self._read = None
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
        """The first of ``targets`` paused, as this process last read the pauses (all of them
        at once — a few rows an operator wrote — and again after ``HELD_WITHIN`` seconds, or when
        this book paused or resumed something): a worker's every new loop asks for its own
        ``loop:ID`` without a query of its own, and keeps nothing per loop. A pause found in
        an earlier read is read again before it holds a call: a resume counts at once (the
        loop it signals asks again at once, and would otherwise be held again, then wait for
        a resume already spent)."""
        now = time.monotonic()
        read = self._read
        if read is None or now - read[0] >= HELD_WITHIN:
            read = self._read = (now, {pause.target: pause for pause in self.all()})
        found = next((read[1][t] for t in targets if t in read[1]), None)
        if found is None or read[0] == now:
            return found
        read = self._read = (now, {pause.target: pause for pause in self.all()})
        return next((read[1][t] for t in targets if t in read[1]), None)


def _pause(row: Any) -> Pause:
    return Pause(row.target, row.paused_by, row.reason, datetime.fromisoformat(row.since))
