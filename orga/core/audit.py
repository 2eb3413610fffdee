"""The audit chain's arithmetic (pure): canonical JSON, entry hashes, and checks; and what a
reset took off the surviving history (``reset_away``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from orga.contracts.audit import GENESIS, AuditChain, AuditEntry, Effect, ResetRun

__all__ = [
    "AuditLog",
    "RunFacts",
    "canonical",
    "entry_hash",
    "first_broken_link",
    "first_difference",
    "lineage",
    "reset_away",
]


def canonical(value: Any) -> str:
    """The one JSON text of ``value``: sorted keys, no spaces, UTF-8 as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def entry_hash(prev: str, index: int, kind: str, record: dict[str, Any]) -> str:
    """SHA-256 of the previous hash and the entry's canonical JSON."""
    body = canonical({"index": index, "kind": kind, "record": record})
    return hashlib.sha256(f"{prev}\n{body}".encode()).hexdigest()


def first_broken_link(entries: Sequence[AuditEntry], start: str = GENESIS) -> str | None:
    """Why the first entry whose hash or link is wrong is wrong; ``None`` when all hold."""
    prev = start
    for position, entry in enumerate(entries):
        if entry.prev != prev:
            return (
                f"entry {entry.index} (line {position + 1}): its prev does not match the "
                "entry before"
            )
        expected = entry_hash(entry.prev, entry.index, entry.kind, entry.record)
        if entry.hash != expected:
            return f"entry {entry.index} (line {position + 1}): its hash does not match its content"
        prev = entry.hash
    return None


def first_difference(rebuilt: Sequence[AuditEntry], claimed: Sequence[AuditEntry]) -> str | None:
    """Where ``claimed`` departs from the chain ``rebuilt`` from history; ``None`` if nowhere."""
    for position, (truth, given) in enumerate(zip(rebuilt, claimed, strict=False)):
        if truth != given:
            fields = [
                name
                for name in ("index", "kind", "record", "prev", "hash")
                if getattr(truth, name) != getattr(given, name)
            ]
            return (
                f"entry {truth.index} (line {position + 1}) differs from the history "
                f"({', '.join(fields)})"
            )
    if len(rebuilt) != len(claimed):
        return f"the history holds {len(rebuilt)} entries, the chain checked holds {len(claimed)}"
    return None


class AuditLog:
    """A run's chain as it grows (appending is O(1); ``chain()`` is the snapshot).

    A record added as a model (a frozen journal entry) is dumped and hashed
    only when the chain is read — its head, entries or snapshot —, which most runs never are
    before they end: the chain read is the one it would have been, link for link."""

    def __init__(self, base_index: int = 0, base: str = GENESIS) -> None:
        self.base_index = base_index
        self.base = base
        self._entries: list[AuditEntry] = []
        self._pending: list[tuple[str, BaseModel | dict[str, Any]]] = []

    @property
    def entries(self) -> list[AuditEntry]:
        """Every entry of this run, oldest first."""
        for kind, record in self._pending:
            index = self.base_index + len(self._entries)
            prev = self._entries[-1].hash if self._entries else self.base
            body = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
            self._entries.append(
                AuditEntry(
                    index=index,
                    kind=kind,
                    record=body,
                    prev=prev,
                    hash=entry_hash(prev, index, kind, body),
                )
            )
        self._pending.clear()
        return self._entries

    @property
    def head(self) -> str:
        entries = self.entries
        return entries[-1].hash if entries else self.base

    @property
    def count(self) -> int:
        """Entries in the whole chain so far (earlier runs' included)."""
        return self.base_index + len(self._entries) + len(self._pending)

    def add(self, kind: str, record: dict[str, Any] | BaseModel) -> None:
        """Add a record (a frozen model's JSON is taken when the chain is read)."""
        self._pending.append((kind, record))

    def chain(self) -> AuditChain:
        return AuditChain(base_index=self.base_index, base=self.base, entries=list(self.entries))


_EVERY_EVENT = 1 << 62
"""More events than any history holds: a surviving run keeps all of its own."""


@dataclass(frozen=True)
class RunFacts:
    """What a run's history says about where it came from and what it did."""

    run_id: str
    began: datetime
    """When the run's own events begin (a reset run's: when it was reset)."""
    continued_from: str | None = None
    """The run this one continued from (continue-as-new, retry, cron)."""
    reset_from: str | None = None
    """The run this one was reset from."""
    reset_event: int = 0
    """With ``reset_from``: the id of the reset's marker event; the events before it are
    ``reset_from``'s, copied."""
    reason: str = ""
    """The reset's reason."""
    effects: tuple[Effect, ...] = ()


def lineage(runs: Mapping[str, RunFacts], current: str) -> list[str]:
    """The surviving history's runs, oldest first: ``current`` and the runs it continued from."""
    chain = [current]
    before = runs[current].continued_from
    while before is not None and before in runs and before not in chain:
        chain.append(before)
        before = runs[before].continued_from
    return chain[::-1]


def reset_away(
    runs: Sequence[RunFacts], current: str, chains: Mapping[str, Sequence[AuditEntry]]
) -> list[ResetRun]:
    """Every run off the surviving history (``lineage``), oldest first, with what it holds that
    the surviving history does not: the entries of its chain that the surviving chain lacks
    (each reported once, by the earliest run holding it), and the effects recorded after the
    events the surviving history copied from it.
    """
    by_id = {run.run_id: run for run in runs}
    surviving = lineage(by_id, current)
    held = {entry.hash for run_id in surviving for entry in chains.get(run_id, ())}
    kept = _kept_events(by_id, surviving)
    reset_into = {run.reset_from: run.run_id for run in sorted(runs, key=lambda r: r.began)}
    report: list[ResetRun] = []
    for run in sorted(runs, key=lambda r: r.began):
        if run.run_id in surviving:
            continue
        own = max(run.reset_event - 1 if run.reset_from else 0, kept.get(run.run_id, 0))
        entries = [entry for entry in chains.get(run.run_id, ()) if entry.hash not in held]
        held.update(entry.hash for entry in entries)
        into = reset_into.get(run.run_id)
        report.append(
            ResetRun(
                run_id=run.run_id,
                reset_into=into,
                reset_event=by_id[into].reset_event if into else None,
                reason=by_id[into].reason if into else "",
                continued_from=run.continued_from,
                entries=entries,
                effects=[effect for effect in run.effects if effect.event_id > own],
            )
        )
    return report


def _kept_events(runs: Mapping[str, RunFacts], surviving: Sequence[str]) -> dict[str, int]:
    """For each run off the surviving history: how many of its first events the surviving
    history holds (copied by a reset, directly or through other resets)."""
    kept: dict[str, int] = {}
    reach = [(run_id, _EVERY_EVENT) for run_id in surviving]
    while reach:
        run_id, count = reach.pop()
        run = runs[run_id]
        if run.reset_from is None or run.reset_from not in runs:
            continue
        copied = min(count, run.reset_event - 1)
        if copied > kept.get(run.reset_from, 0):
            kept[run.reset_from] = copied
            reach.append((run.reset_from, copied))
    return kept
