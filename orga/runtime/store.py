"""The store every worker and client of one deployment shares: payloads, blobs and the ledger.

One transactional database, chosen by ``ORGA_STORE_URL``:

==========================================  =================================================
``sqlite:////abs/path/store.db``            the embedded default, ``<ORGA_DATA_DIR>/store.db``:
                                            one machine (workers on other hosts cannot see it)
``postgresql://user:pass@host:5432/orga``   a cluster: every worker and client reads the same
==========================================  =================================================

It holds, keyed by content (SHA-256), the payloads Temporal's External Storage keeps out of
history (``orga.runtime.converter``: continue-as-new inputs, large results and answers) and the
full texts the payload guard cut before the model saw them (``blob:sha256:…``); and the
idempotency ledger (``orga.tools.ledger``). Retention is opt-in (``ORGA_STORE_RETENTION`` in
days): keep payloads longer than the namespace keeps histories plus the longest run, since a
replay reads them back. SQLite files are 0600 in a 0700 directory; one another user owns or may
write, or in a directory another user can swap it in, is refused (``orga.runtime.files``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from orga.contracts.errors import InvalidConfig
from orga.runtime.files import SQLITE_COMPANIONS, private_file

__all__ = ["PAYLOADS", "Store"]

T = TypeVar("T")

_METADATA = MetaData()
PAYLOADS: Final = Table(
    "orga_payloads",
    _METADATA,
    Column("key", String(96), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("size", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
)
_LEDGER: Final = Table(
    "orga_ledger",
    _METADATA,
    Column("key", Text, primary_key=True),
    Column("result", Text, nullable=False),
    Column("recorded_at", Float, nullable=False),
)


def _engine(url: str, *, vectors: bool = False) -> Engine:
    """The engine of ``url``; with ``vectors``, SQLite connections load sqlite-vec (through
    sqlean.py, a build of SQLite that may load extensions: the standard library's may not)."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_absolute():
            raise InvalidConfig(
                f"ORGA_STORE_URL={url!r}: give an absolute path (sqlite:////abs/path/store.db)"
            )
        private_file(path, "ORGA_STORE_URL", SQLITE_COMPANIONS)
        driver: dict[str, Any] = {}
        extension: str | None = None
        if vectors:  # sqlean and sqlite-vec (with numpy): ~140 ms of import, only for vectors
            import sqlean  # pyright: ignore[reportMissingTypeStubs]
            import sqlite_vec  # pyright: ignore[reportMissingTypeStubs]

            driver["module"] = sqlean
            extension = sqlite_vec.loadable_path()
        engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 30}, **driver)

        @event.listens_for(engine, "connect")
        def _connect(connection: Any, _: Any) -> None:  # pyright: ignore[reportUnusedFunction]
            if extension is not None:
                connection.enable_load_extension(True)
                connection.load_extension(extension)
                connection.enable_load_extension(False)
            # Transactions are ours (BEGIN IMMEDIATE below), not the driver's implicit ones.
            connection.isolation_level = None
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")

        @event.listens_for(engine, "begin")
        def _begin(connection: Connection) -> None:  # pyright: ignore[reportUnusedFunction]
            connection.exec_driver_sql("BEGIN IMMEDIATE")  # one writer at a time, no upgrades

        return engine
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        rest = url.split("://", 1)[1]
        # A host that does not answer fails in seconds, not the OS's minutes: the spend
        # ledger fails closed on it, and the call is retried.
        return create_engine(
            f"postgresql+psycopg://{rest}", pool_pre_ping=True, connect_args={"connect_timeout": 10}
        )
    raise InvalidConfig(
        f"ORGA_STORE_URL={url!r} is not a store orga knows: use sqlite:////abs/path/store.db "
        "(one machine) or postgresql://user:password@host:5432/database (a cluster)"
    )


class Store:
    """The shared store (see the module docstring). Thread-safe; one per process is enough."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = _engine(url)
        self.dialect = self.engine.dialect.name
        self._vector_engine: Engine | None = None
        try:
            _METADATA.create_all(self.engine)
        except SQLAlchemyError as error:
            raise InvalidConfig(
                f"the store at {self.safe_url} cannot be used: {error.__class__.__name__}: "
                f"{str(error).splitlines()[0]}"
            ) from error

    @property
    def safe_url(self) -> str:
        """The URL without its password (for messages and logs)."""
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        return self.url.replace(f":{parts.password}@", ":***@", 1)

    @property
    def vector_engine(self) -> Engine:
        """An engine of the same database whose SQLite connections can use sqlite-vec's
        ``vec0`` tables (the knowledge store's vectors); PostgreSQL's own engine."""
        if self.dialect != "sqlite":
            return self.engine
        if self._vector_engine is None:
            self._vector_engine = _engine(self.url, vectors=True)
        return self._vector_engine

    def close(self) -> None:
        """Close its connections (a store is meant to live as long as its process)."""
        self.engine.dispose()
        if self._vector_engine is not None:
            self._vector_engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- content-addressed payloads and blobs ---------------------------------------------

    def put(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key`` (a key already kept keeps its data: content-addressed).
        Writing it again makes it new again: retention counts from the newest write, so a
        payload a new history refers to is not pruned for the age of its first writer."""
        self._write(key, data, replace=False)

    def replace(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key`` instead of what was kept there: for the few values that
        change (what a worker registers), never for content-addressed ones."""
        self._write(key, data, replace=True)

    def _write(self, key: str, data: bytes, *, replace: bool) -> None:
        now = time.time()
        values = {"key": key, "data": data, "size": len(data), "created_at": now}
        insert = (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(PAYLOADS)
        changed: dict[str, object] = {"created_at": now}
        if replace:
            changed |= {"data": data, "size": len(data)}
        with self.engine.begin() as connection:
            connection.execute(
                insert.values(**values).on_conflict_do_update(
                    index_elements=[PAYLOADS.c.key], set_=changed
                )
            )

    def get(self, key: str) -> bytes | None:
        """The data kept under ``key``, if any."""
        with self.engine.connect() as connection:
            row = connection.execute(select(PAYLOADS.c.data).where(PAYLOADS.c.key == key)).first()
        return None if row is None else bytes(row[0])

    def prune(self, older_than_days: float) -> int:
        """Forget payloads and blobs kept more than ``older_than_days`` ago; how many."""
        cutoff = time.time() - older_than_days * 86_400
        with self.engine.begin() as connection:
            result = connection.execute(PAYLOADS.delete().where(PAYLOADS.c.created_at < cutoff))
        return result.rowcount

    # ---- the idempotency ledger -----------------------------------------------------------

    def once(self, key: str, effect: Callable[[Connection], T]) -> T:
        """Run ``effect`` once per ``key``, in the transaction that records its result; a repeat
        (on this worker or another) returns the recorded result without running it again."""
        with self.engine.begin() as connection:
            if self.dialect == "postgresql":  # serialise the workers asking for this key
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": key}
                )
            found = connection.execute(select(_LEDGER.c.result).where(_LEDGER.c.key == key)).first()
            if found is not None:
                recorded: Any = json.loads(found[0])
                return recorded
            value = effect(connection)
            connection.execute(
                _LEDGER.insert().values(key=key, result=json.dumps(value), recorded_at=time.time())
            )
            return value

    def recorded(self, key: str) -> Any | None:
        """The result the ledger recorded for ``key``, if any."""
        with self.engine.connect() as connection:
            found = connection.execute(select(_LEDGER.c.result).where(_LEDGER.c.key == key)).first()
        return None if found is None else json.loads(found[0])
