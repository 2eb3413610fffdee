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

What a pause names is checked here once for every surface (``orga pause``, the desk):
``split_target`` reads a key, and ``Pause.target_in`` reads a ``describe()`` text back — the
reason a held call shows in its loop's state — so the desk offers the command that ends it.

Temporal's own workflow and activity pause are experimental on this server and pause one
execution at a time (``frontend.WorkflowPauseEnabled``); a tool or an agent across all loops is
not a Temporal notion, so orga keeps all three here.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from sqlalchemy import Column, MetaData, String, Table, Text, delete, insert, select

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

PauseKind = Literal["tool", "agent", "loop"]
PAUSE_KINDS: Final[tuple[PauseKind, ...]] = ("tool", "agent", "loop")
PAUSE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,199}")
"""A tool's or agent's name or a loop's id, as a pause names it (``fullmatch``): plain, so
``describe`` quotes it the same way every time and a command needs no escape for it."""
_DESCRIBED: Final = re.compile(
    rf"({'|'.join(PAUSE_KINDS)}) '([^']*)' is paused by .*? since "
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d): ",
    re.DOTALL,
)
"""The start of ``Pause.describe()``'s text: the kind, the name and since when."""

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


@dataclass(frozen=True)
class Pause:
    """Something paused (``tool:NAME``, ``agent:NAME``, ``loop:ID``): by whom, why, since when."""

    target: str
    by: str
    reason: str
    since: datetime

    def describe(self) -> str:
        """``tool 'x' is paused by olu since 2025-05-01T09:14:02+00:00: why`` (``target_in``
        reads it back)."""
        kind, _, name = self.target.partition(":")
        return (
            f"{kind} {name!r} is paused by {self.by} since "
            f"{self.since.isoformat(timespec='seconds')}: {self.reason}"
        )

    @staticmethod
    def target_in(text: str) -> str | None:
        """The target a ``describe()`` text names (``tool:x``); None for any other text, or a
        name that is not plain — it comes back from a workflow's state: nothing is guessed."""
        found = _DESCRIBED.match(text)
        if found is None:
            return None
        target = f"{found[1]}:{found[2]}"
        return target if split_target(target) is not None else None

    @staticmethod
    def since_in(text: str) -> datetime | None:
        """Since when the pause a ``describe()`` text names holds; None for any other text (or
        a time that is not one ``describe`` writes)."""
        found = _DESCRIBED.match(text)
        if found is None or Pause.target_in(text) is None:
            return None
        try:
            since = datetime.fromisoformat(found[3])
        except ValueError:
            return None
        return since if since.tzinfo is not None else None


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


def split_target(target: str) -> tuple[PauseKind, str] | None:
    """``target``'s kind and name (``tool:x`` → ``("tool", "x")``); None unless the kind is one
    of ``PAUSE_KINDS`` and the name is plain (``PAUSE_NAME``)."""
    kind, colon, name = target.partition(":")
    if not colon or not PAUSE_NAME.fullmatch(name):
        return None
    return next(((known, name) for known in PAUSE_KINDS if known == kind), None)


def _pause(row: Any) -> Pause:
    return Pause(row.target, row.paused_by, row.reason, datetime.fromisoformat(row.since))
