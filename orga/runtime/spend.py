"""The spend ledger: what each user and tenant spent per UTC day and month, in the shared store.

Every worker of a deployment keeps one ledger through orga's store (``orga.runtime.store``):
SQLite on one machine, PostgreSQL in a cluster. A model call goes through it in two steps:

* ``reserve`` before it is sent: its worst case is *held* against every limit of its user and
  tenant (settled spend of the period plus every other call still held, plus this one), or the
  call is refused (``SpendRefused``). One transaction, serialised per holder — by SQLite's one
  writer (``BEGIN IMMEDIATE``) or PostgreSQL advisory locks — so concurrent workers cannot
  both pass the last dollar.
* ``settle`` once it was served: the hold becomes the served cost, added to the holders'
  period totals; ``release`` when it failed unserved: the hold stops counting.

Both are keyed by the call (a retried activity keeps its key): a retry's reserve does not hold
twice, and a repeated settle charges the difference, never the call twice. A hold whose worker
died stops counting at its ``expires_at``. A store that cannot be reached raises
``LedgerUnavailable``: callers fail closed (a call is never made uncounted).

Synchronous (SQLAlchemy's sync engine, like the store): callers run it in a thread.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlalchemy import Connection, and_
from sqlalchemy.exc import SQLAlchemyError

from orga.contracts.principals import Period, Scope, SpendLimits, SpendLine
from orga.runtime._spend_tables import (
    HOLDS,
    add_total,
    create_tables,
    held_by,
    lock,
    periods,
    read_hold,
    spent_by,
    store_now,
    write_hold,
)
from orga.runtime.store import Store

__all__ = ["Cost", "Holder", "LedgerUnavailable", "SpendLedger", "SpendRefused"]

_EPSILON: Final = 1e-9
"""USD below which sums of floats are equal: twenty calls of 0.05 fit a limit of 1.00."""


class SpendRefused(Exception):
    """A reservation that does not fit a limit; ``budget`` names it (``user ann's
    day_usd=1 USD``), the message says what was spent and held, asked, and the period."""

    def __init__(self, message: str, budget: str) -> None:
        super().__init__(message)
        self.budget = budget


class LedgerUnavailable(Exception):
    """The store cannot be reached or failed: callers fail closed, and retry."""


@dataclass(frozen=True)
class Cost:
    """What a model call costs, or may cost at worst."""

    usd: float | None
    """``None``: the model's price is unknown."""
    tokens: int


@dataclass(frozen=True)
class Holder:
    """Whose spend a call counts in: a user or a tenant, with the operator's limits for it."""

    scope: Scope
    name: str
    limits: SpendLimits


def _limit(limits: SpendLimits, period: Period, unit: Literal["usd", "tokens"]) -> float | None:
    value: float | None = getattr(limits, f"{period}_{unit}")
    return value


def _lock_name(scope: str, name: str) -> str:
    return f"orga-spend/{scope}/{name}"


class SpendLedger:
    """The ledger in ``store`` (see the module docstring). Thread-safe. The time that periods
    and expiries are read from is the store's, asked inside each transaction (``store_now``):
    every worker counts a call in the same day and lets a dead worker's hold go at the same
    moment, whatever its own clock says. ``clock`` (epoch seconds) replaces it in tests."""

    def __init__(self, store: Store, *, clock: Callable[[], float] | None = None) -> None:
        self._store = store
        self._clock = clock

    def _now(self, db: Connection) -> float:
        """Now, by the store's clock (or the one given)."""
        return self._clock() if self._clock is not None else store_now(db)

    def reserve(
        self,
        key: str,
        holders: Sequence[Holder],
        worst: Cost,
        *,
        ttl: float,
        workflow_id: str = "",
    ) -> None:
        """Hold ``worst`` for the call ``key`` against every limit of ``holders`` (a user,
        and its tenant if any), for ``ttl`` seconds at most. A retry of a call still held
        refreshes its expiry; of a call settled, does nothing.

        Raises:
            SpendRefused: it does not fit a limit, or its price is unknown and a holder has a
                USD limit.
            LedgerUnavailable: the store cannot be reached.
        """
        user, tenant = _names(holders)
        with self._transaction(key, holders) as db:
            now = self._now(db)
            found = read_hold(db, key)
            if found is not None and found.state == "held" and found.expires_at > now:
                db.execute(
                    HOLDS.update()
                    .where(HOLDS.c.key == key)
                    .values(expires_at=now + ttl, updated_at=now)
                )
                return
            if found is not None and found.state == "settled":  # its settle charges it
                return
            day, month = periods(now)
            for holder in holders:
                _check(db, key, holder, worst, (day, month), now)
            values: dict[str, Any] = {
                "user": user,
                "tenant": tenant,
                "day": day,
                "month": month,
                "state": "held",
                "usd": worst.usd or 0.0,
                "tokens": worst.tokens,
                "expires_at": now + ttl,
                "workflow_id": workflow_id,
                "updated_at": now,
            }
            write_hold(db, key, values)

    def settle(self, key: str, served: Cost, *, holders: Sequence[Holder] = ()) -> None:
        """Charge what the call ``key`` was served: its hold becomes ``served``, added to its
        holders' totals (once per key: a repeat charges the difference). ``holders`` name whom
        to charge when nothing was reserved under ``key`` (a served call is always counted).
        An unknown price (``usd`` None) counts its tokens and no USD.

        Raises:
            ValueError: nothing was reserved under ``key`` and no ``holders`` were given.
            LedgerUnavailable: the store cannot be reached.
        """
        usd, tokens = served.usd or 0.0, served.tokens
        with self._transaction(key, holders, from_hold=True) as db:
            now = self._now(db)
            found = read_hold(db, key)
            if found is None:
                if not holders:
                    raise ValueError(
                        f"nothing was reserved under {key!r} and no holders were given: "
                        "whom to charge is unknown (reserve before the call)"
                    )
                user, tenant = _names(holders)
                day, month = periods(now)
            else:  # charged to the day and month it was held in, as its check counted it
                user, tenant, day, month = found.user, found.tenant, found.day, found.month
            old = found if found is not None and found.state == "settled" else None
            owners: list[tuple[Scope, str]] = [("user", user)]
            if tenant is not None:
                owners.append(("tenant", tenant))
            for owner in owners:
                for period_key in (day, month):
                    add_total(
                        db,
                        owner,
                        period_key,
                        usd - (old.usd if old else 0.0),
                        tokens - (old.tokens if old else 0),
                        0 if old else 1,
                    )
            values: dict[str, Any] = {
                "user": user,
                "tenant": tenant,
                "day": day,
                "month": month,
                "state": "settled",
                "usd": usd,
                "tokens": tokens,
                "expires_at": now,
                "updated_at": now,
            }
            write_hold(db, key, values)

    def release(self, key: str) -> None:
        """The call ``key`` failed before it was served: its hold stops counting (a settled
        call stays charged).

        Raises:
            LedgerUnavailable: the store cannot be reached.
        """
        with self._transaction(key, (), from_hold=True) as db:
            now = self._now(db)
            db.execute(
                HOLDS.update()
                .where(and_(HOLDS.c.key == key, HOLDS.c.state == "held"))
                .values(state="released", updated_at=now)
            )

    def lines(
        self,
        period: Period,
        *,
        scope: Scope | None = None,
        name: str | None = None,
        limits: Callable[[Scope, str], SpendLimits] | None = None,
        at: float | None = None,
    ) -> list[SpendLine]:
        """Each user's and tenant's spend in the ``period`` (day or month) that holds ``at``
        (default: now), with what is held now, sorted by scope and name; ``scope`` and
        ``name`` filter (both given: one line, even when nothing was spent); ``limits`` gives
        each one's limits.

        Raises:
            LedgerUnavailable: the store cannot be reached.
        """
        found: dict[tuple[Scope, str], dict[str, Any]] = {}
        with self._connection() as db:
            now = self._now(db)
            day, month = periods(now if at is None else at)
            period_key = day if period == "day" else month
            for owner, (usd, tokens, calls) in spent_by(db, period_key, scope, name).items():
                found[owner] = {"spent_usd": usd, "spent_tokens": tokens, "calls": calls}
            scopes: tuple[Scope, ...] = ("user", "tenant") if scope is None else (scope,)
            for each in scopes:
                held = held_by(db, each, period, period_key, now, name=name)
                for holder, (usd, tokens) in held.items():
                    line = found.setdefault((each, holder), {})
                    line |= {"reserved_usd": usd, "reserved_tokens": tokens}
        if not found and scope is not None and name is not None:  # asked of one: its limits
            found[scope, name] = {}
        result: list[SpendLine] = []
        for (each, holder), values in sorted(found.items()):
            own = limits(each, holder) if limits is not None else SpendLimits()
            tokens_limit = _limit(own, period, "tokens")
            result.append(
                SpendLine(
                    scope=each,
                    name=holder,
                    period=period,
                    key=period_key,
                    limit_usd=_limit(own, period, "usd"),
                    limit_tokens=None if tokens_limit is None else int(tokens_limit),
                    **values,
                )
            )
        return result

    def prune(self, older_than_days: float) -> int:
        """Forget the calls settled, released or expired more than ``older_than_days`` ago
        (a retry of one would be refused by its workflow's end long before); the totals —
        the ledger itself — stay. How many.

        Raises:
            LedgerUnavailable: the store cannot be reached.
        """
        with self._connection(begin=True) as db:
            now = self._now(db)
            cutoff = now - older_than_days * 86_400
            done = HOLDS.c.updated_at < cutoff
            gone = (HOLDS.c.state != "held") | (HOLDS.c.expires_at < now)
            return db.execute(HOLDS.delete().where(and_(done, gone))).rowcount

    @contextmanager
    def _transaction(
        self, key: str, holders: Sequence[Holder], *, from_hold: bool = False
    ) -> Generator[Connection]:
        """One transaction that owns ``key`` and its holders' ledgers. SQLite's are
        ``BEGIN IMMEDIATE`` (the store's: one writer). On PostgreSQL the key's lock comes
        first, then the holders' in sorted order: a transaction takes one key, so no two wait
        on each other in a cycle. ``from_hold``: the holders ``key`` was reserved for too."""
        with self._connection(begin=True) as db:
            if db.dialect.name == "postgresql":
                lock(db, [f"orga-spend-key/{key}"])
                names = {_lock_name(h.scope, h.name) for h in holders}
                found = read_hold(db, key) if from_hold else None
                if found is not None:
                    names.add(_lock_name("user", found.user))
                    if found.tenant is not None:
                        names.add(_lock_name("tenant", found.tenant))
                lock(db, sorted(names))
            yield db

    @contextmanager
    def _connection(self, *, begin: bool = False) -> Generator[Connection]:
        """A connection to the ledger's tables (made on first use); a store that fails is
        ``LedgerUnavailable``."""
        engine = self._store.engine
        try:
            create_tables(engine, self._store.url)
            with engine.begin() if begin else engine.connect() as db:
                yield db
        except SQLAlchemyError as error:
            raise LedgerUnavailable(
                f"the spend ledger in the store at {self._store.safe_url} cannot be used: "
                f"{error.__class__.__name__}: {str(error).splitlines()[0]}"
            ) from error


def _check(
    db: Connection,
    key: str,
    holder: Holder,
    worst: Cost,
    days_and_months: tuple[str, str],
    now: float,
) -> None:
    """Refuse ``worst`` if it does not fit one of ``holder``'s limits: settled spend of the
    period, plus every other call held in it, plus ``worst``."""
    who = f"{holder.scope} {holder.name}"  # a plain name (NAME_PATTERN): nothing to quote
    for period, period_key in zip(("day", "month"), days_and_months, strict=True):
        limit_usd = _limit(holder.limits, period, "usd")
        limit_tokens = _limit(holder.limits, period, "tokens")
        if limit_usd is not None and worst.usd is None:
            budget = f"{who}'s {period}_usd={limit_usd:g} USD"
            raise SpendRefused(
                f"{budget}: the model's price is unknown, so its calls cannot be kept within "
                "a USD limit (price unknown): give it a price in ORGA_MODEL_PRICES",
                budget,
            )
        if limit_usd is None and limit_tokens is None:
            continue
        spent = spent_by(db, period_key, holder.scope, holder.name)
        usd, tokens, _ = spent.get((holder.scope, holder.name), (0.0, 0, 0))
        held = held_by(db, holder.scope, period, period_key, now, name=holder.name, besides=key)
        held_usd, held_tokens = held.get(holder.name, (0.0, 0))
        used_usd, used_tokens = usd + held_usd, tokens + held_tokens
        if limit_usd is not None and used_usd + (worst.usd or 0.0) > limit_usd + _EPSILON:
            budget = f"{who}'s {period}_usd={limit_usd:g} USD"
            raise SpendRefused(
                f"{budget}: {used_usd:.6g} USD spent and held in {period_key}, this call may "
                f"cost {worst.usd or 0.0:.6g} USD more, the limit is {limit_usd:g} USD",
                budget,
            )
        if limit_tokens is not None and used_tokens + worst.tokens > limit_tokens:
            budget = f"{who}'s {period}_tokens={int(limit_tokens)} tokens"
            raise SpendRefused(
                f"{budget}: {used_tokens} tokens spent and held in {period_key}, this call may "
                f"use {worst.tokens} more, the limit is {int(limit_tokens)} tokens",
                budget,
            )


def _names(holders: Sequence[Holder]) -> tuple[str, str | None]:
    """The user and the tenant (if any) of ``holders``."""
    users = [h.name for h in holders if h.scope == "user"]
    tenants = [h.name for h in holders if h.scope == "tenant"]
    if len(users) != 1 or len(tenants) > 1:
        raise ValueError(f"a call is held for one user and at most one tenant, not {holders!r}")
    return users[0], tenants[0] if tenants else None
