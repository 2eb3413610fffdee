"""The tables behind ``orga.runtime.spend`` and the statements it runs on them.

``orga_spend_holds`` has a row per model call (its key): the worst case while it is *held*,
what was served once *settled*, or *released*. ``orga_spend_totals`` keeps each holder's
settled spend per period as it grows, so a month's check reads one row instead of a month of
calls. Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    func,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite

from orga.contracts.principals import Period, Scope

__all__ = [
    "HOLDS",
    "TOTALS",
    "Hold",
    "add_total",
    "create_tables",
    "held_by",
    "lock",
    "periods",
    "read_hold",
    "spent_by",
    "store_now",
    "write_hold",
]

HoldState = Literal["held", "settled", "released"]

_METADATA = MetaData()
HOLDS: Final = Table(
    "orga_spend_holds",
    _METADATA,
    Column("key", Text, primary_key=True),
    Column("user", String(128), nullable=False),
    Column("tenant", String(128), nullable=True),
    Column("day", String(10), nullable=False),
    Column("month", String(7), nullable=False),
    Column("state", String(8), nullable=False),
    Column("usd", Float, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("workflow_id", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("orga_spend_holds_user", "user", "state"),
    Index("orga_spend_holds_tenant", "tenant", "state"),
)
TOTALS: Final = Table(
    "orga_spend_totals",
    _METADATA,
    Column("scope", String(8), primary_key=True),
    Column("name", String(128), primary_key=True),
    Column("period_key", String(10), primary_key=True),
    Column("usd", Float, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("calls", Integer, nullable=False),
)

_created: set[str] = set()
_creating = threading.Lock()


@dataclass(frozen=True)
class Hold:
    """One call's row in ``orga_spend_holds``."""

    user: str
    tenant: str | None
    day: str
    month: str
    state: HoldState
    usd: float
    tokens: int
    expires_at: float


def store_now(db: Connection) -> float:
    """Now (epoch seconds) by the store's clock, asked in ``db``'s transaction: PostgreSQL's
    server clock, which every worker of a cluster shares; SQLite's is its machine's, which every
    worker sharing the file shares."""
    if db.dialect.name == "postgresql":
        query = "SELECT EXTRACT(EPOCH FROM clock_timestamp())"
    else:
        query = "SELECT (julianday('now') - 2440587.5) * 86400.0"
    return float(db.execute(text(query)).scalar_one())


def periods(now: float) -> tuple[str, str]:
    """The UTC day (``2026-12-04``) and month (``2026-12``) of ``now`` (epoch seconds)."""
    moment = datetime.fromtimestamp(now, UTC)
    return moment.strftime("%Y-%m-%d"), moment.strftime("%Y-%m")


def create_tables(engine: Engine, url: str) -> None:
    """Create the tables once per process and database (idempotent)."""
    if url in _created:
        return
    with _creating:
        if url in _created:
            return
        with engine.begin() as db:
            if engine.dialect.name == "postgresql":  # two processes creating them at once
                lock(db, ["orga-spend-tables"])
            _METADATA.create_all(db)
        _created.add(url)


def lock(db: Connection, names: list[str]) -> None:
    """PostgreSQL: hold the transaction's advisory locks of ``names``, in this order."""
    for name in names:
        db.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": name})


def read_hold(db: Connection, key: str) -> Hold | None:
    """The row of the call ``key``, if any."""
    c = HOLDS.c
    row = db.execute(
        select(c.user, c.tenant, c.day, c.month, c.state, c.usd, c.tokens, c.expires_at).where(
            c.key == key
        )
    ).first()
    if row is None:
        return None
    return Hold(
        user=row[0],
        tenant=row[1],
        day=row[2],
        month=row[3],
        state=row[4],
        usd=float(row[5]),
        tokens=int(row[6]),
        expires_at=float(row[7]),
    )


def write_hold(db: Connection, key: str, values: dict[str, Any]) -> None:
    """Insert or update the row of the call ``key`` with ``values``."""
    insert = _insert(db, HOLDS).values(key=key, **({"workflow_id": ""} | values))
    db.execute(insert.on_conflict_do_update(index_elements=[HOLDS.c.key], set_=values))


def add_total(
    db: Connection,
    owner: tuple[Scope, str],
    period_key: str,
    usd: float,
    tokens: int,
    calls: int,
) -> None:
    """Add to ``owner``'s settled spend in ``period_key``."""
    scope, name = owner
    insert = _insert(db, TOTALS).values(
        scope=scope, name=name, period_key=period_key, usd=usd, tokens=tokens, calls=calls
    )
    db.execute(
        insert.on_conflict_do_update(
            index_elements=[TOTALS.c.scope, TOTALS.c.name, TOTALS.c.period_key],
            set_={
                "usd": TOTALS.c.usd + usd,
                "tokens": TOTALS.c.tokens + tokens,
                "calls": TOTALS.c.calls + calls,
            },
        )
    )


def spent_by(
    db: Connection, period_key: str, scope: Scope | None = None, name: str | None = None
) -> dict[tuple[Scope, str], tuple[float, int, int]]:
    """Settled USD, tokens and calls of each owner in ``period_key``."""
    c = TOTALS.c
    query = select(c.scope, c.name, c.usd, c.tokens, c.calls).where(c.period_key == period_key)
    if scope is not None:
        query = query.where(c.scope == scope)
    if name is not None:
        query = query.where(c.name == name)
    found: dict[tuple[Scope, str], tuple[float, int, int]] = {}
    for row in db.execute(query):
        owner: Scope = "user" if row[0] == "user" else "tenant"
        found[owner, row[1]] = (float(row[2]), int(row[3]), int(row[4]))
    return found


def held_by(
    db: Connection,
    scope: Scope,
    period: Period,
    period_key: str,
    now: float,
    *,
    name: str | None = None,
    besides: str | None = None,
) -> dict[str, tuple[float, int]]:
    """USD and tokens each user (or tenant) holds in ``period_key`` at ``now``: calls held and
    not expired, but the call ``besides``."""
    column = HOLDS.c.user if scope == "user" else HOLDS.c.tenant
    query = (
        select(column, func.sum(HOLDS.c.usd), func.sum(HOLDS.c.tokens))
        .where(
            and_(
                column.is_not(None),
                HOLDS.c.state == "held",
                HOLDS.c.expires_at > now,
                (HOLDS.c.day if period == "day" else HOLDS.c.month) == period_key,
            )
        )
        .group_by(column)
    )
    if name is not None:
        query = query.where(column == name)
    if besides is not None:
        query = query.where(HOLDS.c.key != besides)
    return {row[0]: (float(row[1] or 0.0), int(row[2] or 0)) for row in db.execute(query)}


def _insert(db: Connection, table: Table) -> Any:
    # Any: the two dialects' Insert classes share on_conflict_do_update but no base type.
    dialect = postgresql if db.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)
