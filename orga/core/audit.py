"""The audit chain's arithmetic (pure): canonical JSON, entry hashes, and checks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from orga.contracts.audit import GENESIS, AuditChain, AuditEntry

__all__ = [
    "AuditLog",
    "canonical",
    "entry_hash",
    "first_broken_link",
    "first_difference",
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
    """A run's chain as it grows (appending is O(1); ``chain()`` is the snapshot)."""

    def __init__(self, base_index: int = 0, base: str = GENESIS) -> None:
        self.base_index = base_index
        self.base = base
        self.entries: list[AuditEntry] = []

    @property
    def head(self) -> str:
        return self.entries[-1].hash if self.entries else self.base

    @property
    def count(self) -> int:
        """Entries in the whole chain so far (earlier runs' included)."""
        return self.base_index + len(self.entries)

    def add(self, kind: str, record: dict[str, Any]) -> None:
        index, prev = self.count, self.head
        self.entries.append(
            AuditEntry(
                index=index,
                kind=kind,
                record=record,
                prev=prev,
                hash=entry_hash(prev, index, kind, record),
            )
        )

    def chain(self) -> AuditChain:
        return AuditChain(base_index=self.base_index, base=self.base, entries=list(self.entries))
