"""The store and its idempotency ledger, on SQLite and on a real PostgreSQL: one effect per key,
across threads and processes (and, for PostgreSQL, across hosts)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from orga.contracts.errors import InvalidConfig
from orga.runtime.store import PAYLOADS, Store
from orga.tools.ledger import Ledger


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        opened = Store(f"sqlite:///{tmp_path / 'store.db'}")
    else:
        opened = Store(request.getfixturevalue("postgres_url"))
    yield opened
    opened.close()


def table(ledger: Ledger) -> str:
    """A table of effects of this test's own (the PostgreSQL server is shared)."""
    name = f"effects_{uuid.uuid4().hex[:8]}"
    ledger.prepare(f"CREATE TABLE IF NOT EXISTS {name} (key TEXT)")
    return name


def count(ledger: Ledger, name: str) -> int:
    with ledger.store.engine.connect() as db:
        return int(db.execute(text(f"SELECT count(*) FROM {name}")).scalar_one())


def test_once_per_key(store: Store) -> None:
    ledger = Ledger(store)
    runs: list[str] = []
    prefix = uuid.uuid4().hex

    def effect(db: Connection) -> dict[str, int]:
        runs.append("ran")
        return {"n": len(runs)}

    assert ledger.once(f"{prefix}/k1", effect) == {"n": 1}
    assert ledger.once(f"{prefix}/k1", effect) == {"n": 1}
    assert ledger.once(f"{prefix}/k2", effect) == {"n": 2}
    assert runs == ["ran", "ran"]
    with Store(store.url) as other:  # another process would see it
        assert Ledger(other).recorded(f"{prefix}/k1") == {"n": 1}


def test_a_failed_effect_records_nothing_and_can_run_again(store: Store) -> None:
    ledger = Ledger(store)
    name = table(ledger)
    key = uuid.uuid4().hex

    def failing(db: Connection) -> str:
        db.execute(text(f"INSERT INTO {name} VALUES ('half-done')"))
        raise RuntimeError("crashed mid-effect")

    with pytest.raises(RuntimeError):
        ledger.once(key, failing)
    assert ledger.recorded(key) is None
    assert count(ledger, name) == 0  # the effect rolled back with the record

    def works(db: Connection) -> str:
        db.execute(text(f"INSERT INTO {name} VALUES ('done')"))
        return "ok"

    assert ledger.once(key, works) == "ok"
    assert count(ledger, name) == 1


def test_concurrent_attempts_run_the_effect_once(store: Store) -> None:
    """Eight attempts at once — on PostgreSQL through separate connections, as separate workers
    would — run the effect once and all get its result."""
    runs: list[int] = []
    barrier = threading.Barrier(8)
    key = uuid.uuid4().hex

    def effect(db: Connection) -> int:
        runs.append(1)
        return 7

    results: list[int] = []

    def attempt() -> None:
        with Store(store.url) as own:
            barrier.wait()
            results.append(Ledger(own).once(key, effect))

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert runs == [1] and results == [7] * 8


def test_payloads_are_kept_by_content(store: Store) -> None:
    key = f"payload:sha256:{uuid.uuid4().hex}"
    store.put(key, b"first")
    store.put(key, b"second")  # content-addressed: the first write stands
    assert store.get(key) == b"first"
    assert store.get("payload:sha256:missing") is None


def test_retention(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.put("blob:sha256:old", b"x")
        assert store.prune(older_than_days=1) == 0
        assert store.prune(older_than_days=0) == 1
        assert store.get("blob:sha256:old") is None


def test_retention_counts_from_the_newest_write(store: Store) -> None:
    """A payload written again (a new history refers to the same content) is new again."""
    key = f"payload:sha256:{uuid.uuid4().hex}"
    store.put(key, b"same")
    with store.engine.begin() as db:  # written ten days ago
        db.execute(PAYLOADS.update().where(PAYLOADS.c.key == key).values(created_at=1.0))
    store.put(key, b"same")
    assert store.prune(older_than_days=5) == 0 and store.get(key) == b"same"


def test_bad_store_urls(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="not a store orga knows"):
        Store("mysql://x")
    with pytest.raises(InvalidConfig, match="absolute path"):
        Store("sqlite:///relative/store.db")
    with pytest.raises(InvalidConfig) as refused:
        Store("postgresql://orga:secret@127.0.0.1:1/orga")
    assert "postgresql://orga:***@127.0.0.1:1/orga cannot be used" in refused.value.message
    assert "secret" not in refused.value.message  # a password never shows in a message


def test_a_compensation_fences_a_step_that_has_not_paid_yet(tmp_path: Path) -> None:
    """The refund runs before the payment (its worker lost contact, the task moved on): the
    payment that arrives late finds the fence under its key and never pays; a payment that
    did land is refunded once."""
    from sqlalchemy import text

    from examples.payments import FENCED, record_payment, refund_payment
    from orga.tools.ledger import Ledger
    from orga.tools.sdk import ToolContext

    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        ledger = Ledger(store)

        def step(key: str) -> ToolContext:
            return ToolContext(call_id="pay", workflow_id="t", idempotency_key=key, ledger=ledger)

        def compensation(key: str) -> ToolContext:
            return ToolContext(
                call_id="pay.compensate",
                workflow_id="t",
                idempotency_key=f"{key}.compensate",
                ledger=ledger,
                step_key=key,
            )

        pay, refund = record_payment.fn, refund_payment.fn
        assert refund(compensation("t/r/late")) == "nothing to refund: the payment was never made"
        assert pay(100, "ann", step("t/r/late")) == FENCED  # arrives after its compensation
        assert pay(100, "ann", step("t/r/paid")).startswith("paid 100 to ann")
        assert refund(compensation("t/r/paid")).startswith("refunded 100 to ann")
        with store.engine.connect() as db:
            paid = db.execute(text("SELECT idempotency_key FROM payments")).scalars().all()
            refunded = db.execute(text("SELECT count(*) FROM refunds")).scalar_one()
    assert paid == ["t/r/paid"] and refunded == 1
