"""The spend ledger (``orga.runtime.spend``) on SQLite and on a real PostgreSQL: holds checked
against every limit of a user and its tenant, settled once per call, released, expired; exact
under many reservers at once; fail-closed when the store cannot be reached."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from orga.contracts.principals import Period, Scope, SpendLimits
from orga.runtime.spend import Cost, Holder, LedgerUnavailable, SpendLedger, SpendRefused
from orga.runtime.store import Store
from tests.helpers import free_port

NOON: float = datetime(2026, 12, 4, 12, tzinfo=UTC).timestamp()
"""2026-12-04 12:00 UTC: the day ``2026-12-04``, the month ``2026-12``."""
DAY = 86_400.0


class Clock:
    """A clock the test moves (expiry and periods without sleeping)."""

    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        opened = Store(f"sqlite:///{tmp_path / 'store.db'}")
    else:
        opened = Store(request.getfixturevalue("postgres_url"))
    yield opened
    opened.close()


def _name(prefix: str = "ann") -> str:
    """A name of this test's own (the PostgreSQL server is shared by the session)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _user(name: str, **limits: float) -> Holder:
    return Holder("user", name, SpendLimits.model_validate(limits))


def _tenant(name: str, **limits: float) -> Holder:
    return Holder("tenant", name, SpendLimits.model_validate(limits))


def _usd(usd: float | None, tokens: int = 100) -> Cost:
    return Cost(usd, tokens)


def test_a_call_is_held_then_settled_for_its_user_and_tenant(store: Store) -> None:
    clock = Clock()
    ledger = SpendLedger(store, clock=clock)
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    user, tenant = _user(_name()), _tenant(_name("acme"))  # no limits: counted all the same
    ledger.reserve(f"{p}/k1", [user, tenant], _usd(0.5, 1_000), ttl=60, workflow_id="loop-1")
    [held] = ledger.lines("day", scope="user", name=user.name)
    assert (held.reserved_usd, held.reserved_tokens, held.calls) == (0.5, 1_000, 0)
    ledger.settle(f"{p}/k1", _usd(0.2, 300))
    owners: list[tuple[Scope, str]] = [("user", user.name), ("tenant", tenant.name)]
    periods: list[tuple[Period, str]] = [("day", "2026-12-04"), ("month", "2026-12")]
    for scope, name in owners:
        for period, key in periods:
            [line] = ledger.lines(period, scope=scope, name=name)
            assert (line.scope, line.name, line.period, line.key) == (scope, name, period, key)
            assert (line.spent_usd, line.spent_tokens, line.calls) == (0.2, 300, 1)
            assert (line.reserved_usd, line.reserved_tokens) == (0, 0)


def test_a_call_that_does_not_fit_is_refused_naming_the_budget(store: Store) -> None:
    ledger = SpendLedger(store, clock=Clock())
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    name = _name()
    ann = _user(name, day_usd=1.0)
    ledger.reserve(f"{p}/a", [ann], _usd(0.6), ttl=60)
    with pytest.raises(SpendRefused) as refused:
        ledger.reserve(f"{p}/b", [ann], _usd(0.6), ttl=60)
    assert refused.value.budget == f"user {name}'s day_usd=1 USD"
    message = str(refused.value)
    assert "0.6 USD spent and held in 2026-12-04" in message and "the limit is 1 USD" in message
    [line] = ledger.lines("day", scope="user", name=name)
    assert line.reserved_usd == 0.6  # the refused call holds nothing
    ledger.settle(f"{p}/a", _usd(0.3))  # served less than its worst case: room again
    ledger.reserve(f"{p}/b", [ann], _usd(0.6), ttl=60)
    with pytest.raises(SpendRefused):
        ledger.reserve(f"{p}/c", [ann], _usd(0.2), ttl=60)


def test_a_tenant_limit_binds_every_user_and_a_month_limit_every_day(store: Store) -> None:
    clock = Clock()
    ledger = SpendLedger(store, clock=clock)
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    tenant = _name("acme")
    ann = [_user(_name()), _tenant(tenant, day_tokens=150, month_tokens=250)]
    bob = [_user(_name("bob")), _tenant(tenant, day_tokens=150, month_tokens=250)]
    ledger.reserve(f"{p}/ann-1", ann, _usd(0.0, 100), ttl=60)
    ledger.settle(f"{p}/ann-1", _usd(0.0, 100))
    with pytest.raises(SpendRefused) as refused:
        ledger.reserve(f"{p}/bob-1", bob, _usd(0.0, 100), ttl=60)
    assert refused.value.budget == f"tenant {tenant}'s day_tokens=150 tokens"
    clock.now += DAY  # a new day, the same month
    ledger.reserve(f"{p}/bob-1", bob, _usd(0.0, 100), ttl=60)
    ledger.settle(f"{p}/bob-1", _usd(0.0, 100))
    clock.now += DAY  # a third day: its 100 tokens fit the day, not the month
    with pytest.raises(SpendRefused) as refused:
        ledger.reserve(f"{p}/bob-2", bob, _usd(0.0, 100), ttl=60)
    assert refused.value.budget == f"tenant {tenant}'s month_tokens=250 tokens"
    [month] = ledger.lines("month", scope="tenant", name=tenant)
    assert (month.spent_tokens, month.calls, month.key) == (200, 2, "2026-12")
    assert ledger.lines("day", scope="tenant", name=tenant)[0].spent_tokens == 0
    [yesterday] = ledger.lines("day", scope="tenant", name=tenant, at=NOON)
    assert (yesterday.spent_tokens, yesterday.key) == (100, "2026-12-04")


def test_a_retried_call_holds_once_and_is_charged_once(store: Store) -> None:
    clock = Clock()
    ledger = SpendLedger(store, clock=clock)
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    name = _name()
    ann = [_user(name, day_usd=1.0)]
    ledger.reserve(f"{p}/k", ann, _usd(0.6), ttl=60)
    clock.now += 50
    ledger.reserve(
        f"{p}/k", ann, _usd(0.6), ttl=60
    )  # a retry: not held twice, its expiry refreshed
    clock.now += 50  # past the first expiry, within the refreshed one
    [line] = ledger.lines("day", scope="user", name=name)
    assert line.reserved_usd == 0.6
    ledger.settle(f"{p}/k", _usd(0.4, 40))
    ledger.reserve(f"{p}/k", ann, _usd(0.6), ttl=60)  # a retry after it was served: nothing
    ledger.settle(f"{p}/k", _usd(0.4, 40))  # settled again: charged once
    [line] = ledger.lines("day", scope="user", name=name)
    assert (line.spent_usd, line.spent_tokens, line.calls, line.reserved_usd) == (0.4, 40, 1, 0)
    ledger.settle(f"{p}/k", _usd(0.5, 50))  # a later settle replaces its charge
    [line] = ledger.lines("day", scope="user", name=name)
    assert (line.spent_usd, line.spent_tokens, line.calls) == (pytest.approx(0.5), 50, 1)


def test_a_released_call_stops_counting_and_a_settled_one_stays(store: Store) -> None:
    ledger = SpendLedger(store, clock=Clock())
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    name = _name()
    ann = [_user(name, day_usd=1.0)]
    ledger.reserve(f"{p}/failed", ann, _usd(0.9), ttl=60)
    ledger.release(f"{p}/failed")
    ledger.reserve(f"{p}/served", ann, _usd(0.9), ttl=60)
    ledger.settle(f"{p}/served", _usd(0.9))
    ledger.release(f"{p}/served")  # too late: it was served
    [line] = ledger.lines("day", scope="user", name=name)
    assert (line.spent_usd, line.reserved_usd, line.calls) == (0.9, 0, 1)
    with pytest.raises(SpendRefused):
        ledger.reserve(f"{p}/failed", ann, _usd(0.9), ttl=60)  # released: checked again as new


def test_a_hold_whose_worker_died_expires(store: Store) -> None:
    clock = Clock()
    ledger = SpendLedger(store, clock=clock)
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    name = _name()
    ann = [_user(name, day_usd=1.0)]
    ledger.reserve(f"{p}/dead", ann, _usd(0.9), ttl=30)
    with pytest.raises(SpendRefused):
        ledger.reserve(f"{p}/other", ann, _usd(0.9), ttl=30)
    clock.now += 31
    assert ledger.lines("day", scope="user", name=name)[0].reserved_usd == 0
    ledger.reserve(f"{p}/other", ann, _usd(0.9), ttl=30)
    with pytest.raises(SpendRefused):
        ledger.reserve(f"{p}/dead", ann, _usd(0.9), ttl=30)  # its retry is checked again as new


def test_a_call_of_unknown_price_cannot_be_kept_within_a_usd_limit(store: Store) -> None:
    ledger = SpendLedger(store, clock=Clock())
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    name, tenant = _name(), _name("acme")
    with pytest.raises(SpendRefused) as refused:
        ledger.reserve(f"{p}/k", [_user(name), _tenant(tenant, month_usd=5.0)], _usd(None), ttl=60)
    assert "price unknown" in str(refused.value)
    assert refused.value.budget == f"tenant {tenant}'s month_usd=5 USD"
    tokens_only = [_user(name, day_tokens=1_000), _tenant(tenant)]
    ledger.reserve(f"{p}/k", tokens_only, _usd(None, 500), ttl=60)
    ledger.settle(f"{p}/k", _usd(None, 400))  # counts its tokens, no USD
    [line] = ledger.lines("day", scope="user", name=name)
    assert (line.spent_usd, line.spent_tokens, line.calls) == (0, 400, 1)


def test_a_served_call_without_a_reservation_is_counted(store: Store) -> None:
    ledger = SpendLedger(store, clock=Clock())
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    name = _name()
    ledger.settle(f"{p}/unreserved", _usd(0.1, 10), holders=[_user(name)])
    [line] = ledger.lines("day", scope="user", name=name)
    assert (line.spent_usd, line.calls) == (0.1, 1)
    with pytest.raises(ValueError, match="whom to charge is unknown"):
        ledger.settle(f"{p}/nobody", _usd(0.1, 10))


def test_lines_filter_sort_and_show_limits(store: Store) -> None:
    ledger = SpendLedger(store, clock=Clock())
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    tenant, ann, bob = _name("acme"), _name("ann"), _name("bob")
    for key, user in ((f"{p}/1", ann), (f"{p}/2", bob)):
        ledger.reserve(key, [_user(user), _tenant(tenant)], _usd(0.1, 10), ttl=60)
        ledger.settle(key, _usd(0.1, 10))
    ledger.reserve(f"{p}/3", [_user(bob), _tenant(tenant)], _usd(0.2, 20), ttl=60)  # in flight

    def limits(scope: str, name: str) -> SpendLimits:
        return SpendLimits(day_usd=5.0, month_tokens=9) if scope == "tenant" else SpendLimits()

    ours = {ann, bob, tenant}
    found = [line for line in ledger.lines("day", limits=limits) if line.name in ours]
    assert [(line.scope, line.name) for line in found] == sorted(
        [("tenant", tenant), ("user", ann), ("user", bob)]
    )
    by_name = {line.name: line for line in found}
    assert (by_name[tenant].spent_usd, by_name[tenant].calls) == (pytest.approx(0.2), 2)
    assert (by_name[tenant].reserved_usd, by_name[tenant].limit_usd) == (0.2, 5.0)
    assert by_name[tenant].limit_tokens is None  # the day's: only the month has one
    assert by_name[bob].reserved_tokens == 20 and by_name[ann].reserved_tokens == 0
    [month] = ledger.lines("month", scope="tenant", name=tenant, limits=limits)
    assert (month.limit_tokens, month.limit_usd) == (9, None)
    assert [line.name for line in ledger.lines("day", scope="user", name=ann)] == [ann]
    [nothing] = ledger.lines("day", scope="user", name=_name("nobody"), limits=limits)
    assert (nothing.spent_usd, nothing.calls, nothing.limit_usd) == (0, 0, None)
    [later] = ledger.lines("day", scope="user", name=ann, at=NOON + 40 * DAY)
    assert (later.key, later.spent_usd, later.calls) == ("2027-01-13", 0, 0)


def test_forty_reservers_at_once_stay_within_the_limit(store: Store) -> None:
    """40 threads over two stores (as two workers) each reserve 0.05 USD against a 1.00 USD
    day limit, then settle: exactly 20 fit; the others are refused."""
    name, tenant = _name(), _name("acme")
    clock = Clock()
    with Store(store.url) as other:
        ledgers = [SpendLedger(store, clock=clock), SpendLedger(other, clock=clock)]
        start = threading.Barrier(40)
        served: list[int] = []
        refused: list[SpendRefused] = []
        failed: list[BaseException] = []

        def call(n: int) -> None:
            ledger = ledgers[n % 2]
            holders = [_user(name, day_usd=1.0), _tenant(tenant, day_tokens=1_000_000)]
            start.wait()
            try:
                ledger.reserve(f"{name}/{n}", holders, _usd(0.05, 100), ttl=60)
                ledger.settle(f"{name}/{n}", _usd(0.05, 100))
                served.append(n)
            except SpendRefused as error:
                refused.append(error)
            except BaseException as error:
                failed.append(error)

        threads = [threading.Thread(target=call, args=(n,)) for n in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not failed, failed
    assert (len(served), len(refused)) == (20, 20)
    assert all("day_usd=1 USD" in r.budget for r in refused)
    [line] = SpendLedger(store, clock=clock).lines("day", scope="user", name=name)
    assert line.spent_usd <= 1.0 + 1e-9
    assert line.spent_usd == pytest.approx(1.0)
    assert (line.calls, line.spent_tokens, line.reserved_usd) == (20, 2_000, 0)


def test_an_unreachable_store_is_unavailable_without_its_password() -> None:
    """Fail closed and fast: a PostgreSQL store whose port nobody listens on."""
    url = f"postgresql://orga:s3cret@127.0.0.1:{free_port()}/orga"
    # A Store refuses an unreachable database when it opens; the ledger meets one that went
    # away after it opened: the same object, with an engine whose server is gone.
    store = Store.__new__(Store)
    store.url, store.dialect = url, "postgresql"
    store.engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    ledger = SpendLedger(store, clock=Clock())
    p = _name("call")  # keys of its own: the PostgreSQL server is shared
    try:
        for attempt in (
            lambda: ledger.reserve(f"{p}/k", [_user("ann")], _usd(0.1), ttl=60),
            lambda: ledger.settle(f"{p}/k", _usd(0.1)),
            lambda: ledger.release(f"{p}/k"),
            lambda: ledger.lines("day"),
        ):
            with pytest.raises(LedgerUnavailable) as unavailable:
                attempt()
            message = str(unavailable.value)
            assert "orga:***@127.0.0.1" in message and "s3cret" not in message
            assert unavailable.value.__cause__ is not None
    finally:
        store.engine.dispose()


async def test_orga_spend_prints_each_user_and_tenant_against_their_limits(
    tmp_path: Path,
) -> None:
    from tests.helpers import orga

    url = f"sqlite:///{tmp_path / 'store.db'}"
    principals = tmp_path / "principals.toml"
    principals.write_text(
        '[users.ann]\ntenant = "acme"\nday_usd = 5.0\n\n[tenants."*"]\nmonth_tokens = 9000\n'
    )
    env = {"ORGA_STORE_URL": url, "ORGA_PRINCIPALS": str(principals)}
    code, out, err = await orga("spend", env=env)
    assert (code, err) == (0, "")
    assert out.startswith("no spend recorded for anyone in ") and "(UTC day)" in out
    with Store(url) as store:
        ledger = SpendLedger(store)
        ann = [_user("ann", day_usd=5.0), _tenant("acme")]
        ledger.reserve("one", ann, _usd(0.25, 1_000), ttl=60)
        ledger.settle("one", _usd(0.125, 500))
        ledger.reserve("two", ann, _usd(0.5, 2_000), ttl=600)  # in flight
    code, out, err = await orga("spend", "--json", env=env)
    assert code == 0, err
    lines = json.loads(out)
    assert [(line["scope"], line["name"]) for line in lines] == [
        ("tenant", "acme"),
        ("user", "ann"),
    ]
    user = lines[1]
    assert (user["spent_usd"], user["reserved_usd"], user["limit_usd"]) == (0.125, 0.5, 5.0)
    assert (user["spent_tokens"], user["reserved_tokens"], user["calls"]) == (500, 2_000, 1)
    code, out, err = await orga("spend", "--principal", "ann", env=env)
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split()[:3] == ["SCOPE", "NAME", "PERIOD"]
    assert row.split() == [
        "user",
        "ann",
        row.split()[2],
        "0.1250",
        "0.5000",
        "5.0000",
        "500",
        "2,000",
        "-",
        "1",
    ]
    code, out, err = await orga("spend", "--tenant", "acme", "--period", "month", "--json", env=env)
    assert code == 0, err
    [tenant] = json.loads(out)
    assert (tenant["period"], tenant["limit_tokens"], tenant["calls"]) == ("month", 9000, 1)
    code, out, err = await orga("spend", "--principal", "bob", env=env)
    assert code == 0 and out.startswith("no spend recorded for user 'bob' in "), out


def test_prune_forgets_old_settled_calls_and_keeps_the_totals(store: Store) -> None:
    """``orga store prune`` forgets each call's record once it is long settled (or its hold
    long expired); what the users and tenants spent stays, and a hold still live stays."""
    clock = Clock()
    ledger = SpendLedger(store, clock=clock)
    p = _name("prune")
    user = _user(_name())
    ledger.reserve(f"{p}/settled", [user], _usd(0.5), ttl=60)
    ledger.settle(f"{p}/settled", _usd(0.25))
    ledger.reserve(f"{p}/live", [user], _usd(0.5), ttl=400 * 86_400)
    ledger.reserve(f"{p}/dead", [user], _usd(0.5), ttl=60)  # its worker died
    clock.now += 40 * 86_400
    assert ledger.prune(30) >= 2  # the settled and the dead (and other tests' old ones)
    [line] = ledger.lines("day", scope="user", name=user.name, at=NOON)
    assert (line.spent_usd, line.calls) == (0.25, 1)  # the totals stay
    assert line.reserved_usd == 0.5  # the live hold stays, counted
    with store.engine.connect() as db:
        from orga.runtime._spend_tables import HOLDS

        kept = {row.key for row in db.execute(HOLDS.select().where(HOLDS.c.key.like(f"{p}/%")))}
    assert kept == {f"{p}/live"}


@pytest.mark.parametrize("behind", [600.0, -DAY])
def test_workers_with_skewed_clocks_cannot_pass_one_limit_twice(
    store: Store, monkeypatch: pytest.MonkeyPatch, behind: float
) -> None:
    """One worker's clock 10 minutes behind (its hold expired at once by the others' clock),
    or a day ahead (its call counted in tomorrow): the ledger reads the store's clock inside
    each transaction, so two 0.80 USD calls never both fit a 1.00 USD day (issue 63: both
    were reserved)."""
    ledger = SpendLedger(store)  # the store's clock: what every worker of a deployment uses
    p = _name("call")
    ann = _user(_name(), day_usd=1.0)
    on_time = time.time
    monkeypatch.setattr(time, "time", lambda: on_time() - behind)  # the skewed worker
    ledger.reserve(f"{p}/skewed", [ann], _usd(0.8), ttl=60)
    monkeypatch.setattr(time, "time", on_time)  # the worker beside it
    with pytest.raises(SpendRefused):
        ledger.reserve(f"{p}/on-time", [ann], _usd(0.8), ttl=60)
    [line] = ledger.lines("day", scope="user", name=ann.name)
    assert line.reserved_usd == 0.8 and line.key == time.strftime("%Y-%m-%d", time.gmtime())
