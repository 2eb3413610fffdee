"""The idempotency ledger: one effect per key, across threads and processes."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from orga.runtime.ledger import Ledger


def test_once_per_key(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db")
    runs: list[str] = []

    def effect(db: sqlite3.Connection) -> dict[str, int]:
        runs.append("ran")
        return {"n": len(runs)}

    assert ledger.once("k1", effect) == {"n": 1}
    assert ledger.once("k1", effect) == {"n": 1}
    assert ledger.once("k2", effect) == {"n": 2}
    assert runs == ["ran", "ran"]
    assert Ledger(tmp_path / "l.db").recorded("k1") == {"n": 1}  # another process would see it


def test_a_failed_effect_records_nothing_and_can_run_again(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db")
    with ledger.connect() as db:
        db.execute("CREATE TABLE effects (key TEXT)")

    def failing(db: sqlite3.Connection) -> str:
        db.execute("INSERT INTO effects VALUES ('half-done')")
        raise RuntimeError("crashed mid-effect")

    with pytest.raises(RuntimeError):
        ledger.once("k", failing)
    assert ledger.recorded("k") is None
    assert ledger.connect().execute("SELECT count(*) FROM effects").fetchone()[0] == 0

    def works(db: sqlite3.Connection) -> str:
        db.execute("INSERT INTO effects VALUES ('done')")
        return "ok"

    assert ledger.once("k", works) == "ok"
    assert ledger.connect().execute("SELECT count(*) FROM effects").fetchone()[0] == 1


def test_concurrent_attempts_run_the_effect_once(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db")
    runs: list[int] = []
    barrier = threading.Barrier(8)

    def effect(db: sqlite3.Connection) -> int:
        runs.append(1)
        return 7

    def attempt() -> None:
        barrier.wait()
        assert ledger.once("same", effect) == 7

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert runs == [1]
