"""Tools used by the integration tests. They run in the test process's worker, so they can
record what happened (start and end times) for the tests to assert on."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, text

from examples.payments import PAYMENTS
from orga.contracts.evidence import Evidence
from orga.tools.sdk import Tool, ToolContext, tool


@dataclass
class Running:
    """A tool that works until it is cancelled, and what became of its calls."""

    tool: Tool
    started: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    """It was told to stop (its cancellation reached it)."""
    calls: list[str] = field(default_factory=list[str])
    """The call ids it ran for (one per attempt)."""


def running(name: str, *, raise_on_cancel: bool = False, **options: Any) -> Running:
    """A tool ``name`` that works until it is cancelled (``options``: ``tool``'s);
    ``raise_on_cancel``: then it raises an error of its own, as a tool that tidies up does —
    which Temporal hands the workflow instead of a cancel."""
    made: list[Running] = []

    async def work(table: str, ctx: ToolContext) -> str:
        """Work through a table (until stopped).

        Args:
            table: which one.
        """
        made[0].calls.append(ctx.call_id)
        made[0].started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            made[0].stopped.set()
            if raise_on_cancel:
                raise RuntimeError("interrupted: the table was left half done") from None
            raise
        return "never"

    made.append(Running(tool(name=name, **options)(work)))
    return made[0]


@dataclass
class Probe:
    """Start/end times of calls, by label."""

    spans: dict[str, tuple[float, float]] = field(default_factory=dict[str, tuple[float, float]])
    order: list[str] = field(default_factory=list[str])
    contexts: list[ToolContext] = field(default_factory=list[ToolContext])
    running: int = 0
    peak: int = 0

    def overlapping(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.spans[a], self.spans[b]
        return a0 < b1 and b0 < a1


def probe_tools(probe: Probe) -> list[Tool]:
    """``wait`` (parallel), ``write`` (serial) and ``touch`` (serial per path) tools."""

    async def record(label: str, seconds: float) -> str:
        start = time.monotonic()
        probe.order.append(label)
        probe.running += 1
        probe.peak = max(probe.peak, probe.running)
        try:
            await asyncio.sleep(seconds)
        finally:
            probe.running -= 1
        probe.spans[label] = (start, time.monotonic())
        return f"{label} done"

    @tool
    async def wait(label: str, seconds: float = 0.3) -> str:
        """Wait a while (read-only, runs in parallel).

        Args:
            label: a name for this call.
            seconds: how long to wait.
        """
        return await record(label, seconds)

    @tool(serial=True)
    async def write(label: str, seconds: float = 0.2) -> str:
        """Pretend to write something (side effect: calls run one at a time, in order).

        Args:
            label: a name for this call.
            seconds: how long the write takes.
        """
        return await record(label, seconds)

    @tool(resource_arg="path")
    async def touch(
        path: str, label: str, fail: bool = False, ctx: ToolContext | None = None
    ) -> str:
        """Touch a file (calls on the same path run in order).

        Args:
            path: the file.
            label: a name for this call.
            fail: raise instead of succeeding.
        """
        if ctx is not None:
            probe.contexts.append(ctx)
        await record(label, 0.05)
        if fail:
            raise OSError(f"cannot touch {path}")
        return f"touched {path}"

    return [wait, write, touch]


@tool
def explode(reason: str) -> str:
    """Always raises.

    Args:
        reason: the message of the exception.
    """
    raise ValueError(reason)


@tool
def get_weather(location: str, units: str = "c") -> str:
    """Get the weather."""
    return f"Cloudy 7~13 in {location} ({units})"


@tool
def whoami(ctx: ToolContext) -> str:
    """Tell the call's context."""
    return f"{ctx.workflow_id}|{ctx.call_id}|{ctx.idempotency_key}|{ctx.attempt}"


@tool(timeout=0.5)
async def sleepy(seconds: float) -> str:
    """Sleep longer than its own timeout allows.

    Args:
        seconds: how long to sleep.
    """
    await asyncio.sleep(seconds)
    return "woke up"


@tool(requires_approval=True, serial=True)
def transfer(amount: int, to: str) -> str:
    """Move money (needs a person's approval under the default gate).

    Args:
        amount: how much.
        to: to whom.
    """
    return f"sent {amount} to {to}"


class Flaky:
    """Tools that fail a set number of times per call (counted by idempotency key)."""

    def __init__(
        self, failures: int, lookups_before_outage: int | None = None, lookups_down: int = 0
    ) -> None:
        self.failures = failures
        self.attempts: dict[str, int] = {}
        self.broken = False
        self.lookups = 0
        self.lookups_before_outage = lookups_before_outage
        """``lookup`` goes down by itself after this many calls (no test timing involved)."""
        self.lookups_down = lookups_down
        """``lookup`` is down for its first this many calls, then works."""
        self.tools = [self._make_flaky(), self._make_backup(), self._make_lookup()]

    def _make_flaky(self) -> Tool:
        @tool(name="flaky")
        def flaky(query: str, ctx: ToolContext) -> str:
            """Answer, after failing a few times.

            Args:
                query: what to answer.
            """
            seen = self.attempts.get(ctx.idempotency_key, 0) + 1
            self.attempts[ctx.idempotency_key] = seen
            if seen <= self.failures:
                raise ConnectionError(f"flaky attempt {seen} failed")
            return f"flaky answer to {query} (attempt {seen})"

        return flaky

    def _make_backup(self) -> Tool:
        @tool(name="backup")
        def backup(query: str) -> str:
            """A second source.

            Args:
                query: what to answer.
            """
            return f"backup answer to {query}"

        return backup

    def _make_lookup(self) -> Tool:
        @tool(name="lookup")
        def lookup(query: str) -> str:
            """Works until broken.

            Args:
                query: what to look up.
            """
            self.lookups += 1
            outage = self.lookups_before_outage
            down = self.lookups <= self.lookups_down or (
                outage is not None and self.lookups > outage
            )
            if self.broken or down:
                raise ConnectionError("lookup service is down")
            return f"looked up {query}"

        return lookup


@tool(serial=True, timeout=120, idempotent=True)
def pay_then_hang(amount: int, to: str, ctx: ToolContext, hang: float = 0.0) -> str:
    """Pay (exactly once, through the worker's ledger), then, on the first attempt, take ``hang``
    seconds to answer: a worker killed in that time has paid but not reported it; the retry on
    another worker finds the payment in the ledger and answers at once.

    Args:
        amount: cents.
        to: who is paid.
        hang: seconds to wait after paying.
    """
    assert ctx.ledger is not None
    ctx.ledger.prepare(PAYMENTS)

    def pay(db: Connection) -> str:
        receipt = f"rcpt-{uuid.uuid4().hex[:10]}"
        db.execute(
            text(
                "INSERT INTO payments (receipt, idempotency_key, amount, recipient)"
                " VALUES (:receipt, :key, :amount, :to)"
            ),
            {"receipt": receipt, "key": ctx.idempotency_key, "amount": amount, "to": to},
        )
        return receipt

    receipt = ctx.ledger.once(ctx.idempotency_key, pay)
    if ctx.attempt == 1:
        time.sleep(hang)
    return f"paid {amount} to {to}, receipt {receipt}"


@tool
def dump(kib: int) -> str:
    """Return a very large text.

    Args:
        kib: how many KiB of text.
    """
    line = "0123456789abcdef" * 4 + "é\n"  # a multi-byte character on every line
    text = line * (kib * 1024 // len(line.encode()) + 1)
    return text


def log_search_tools(seen: list[dict[str, object]]) -> list[Tool]:
    """An evidence tool over a tiny fake log, recording the arguments it was given."""
    logs = {"timeout": "12:01 db timeout", "disk": "12:05 disk full", "oom": ""}

    @tool(evidence=True)
    def search_logs(query: str) -> Evidence:
        """Search the logs.

        Args:
            query: a word to look for.
        """
        seen.append({"query": query})
        hit = logs.get(query, "")
        return Evidence(found=bool(hit), observation=hit or f"no log lines match {query!r}")

    return [search_logs]


class Shop:
    """reserve → charge → notify, with release and refund to undo them; every call recorded."""

    def __init__(self, *, notify_fails: bool = True, refund_fails: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, object], str]] = []
        self.notify_fails = notify_fails
        self.refund_fails = refund_fails
        self.slow: float = 0.0
        self.tools = self._make()

    def _make(self) -> list[Tool]:
        shop = self

        def record(name: str, arguments: dict[str, object], ctx: ToolContext) -> None:
            shop.calls.append((name, arguments, ctx.idempotency_key))

        @tool
        async def reserve(item: str, ctx: ToolContext) -> dict[str, object]:
            """Reserve an item.

            Args:
                item: what to reserve.
            """
            record("reserve", {"item": item}, ctx)
            await asyncio.sleep(shop.slow)
            return {"reservation": f"R-{item}", "item": item}

        @tool
        def charge(amount: int, ctx: ToolContext) -> str:
            """Charge the customer.

            Args:
                amount: cents.
            """
            record("charge", {"amount": amount}, ctx)
            return f"CH-{amount}"

        @tool
        def notify(message: str, ctx: ToolContext) -> str:
            """Tell the customer.

            Args:
                message: what to say.
            """
            record("notify", {"message": message}, ctx)
            if shop.notify_fails:
                raise ConnectionError("mail server refused the connection")
            return "sent"

        @tool
        def release(reservation: str, ctx: ToolContext) -> str:
            """Undo a reservation.

            Args:
                reservation: the reservation id.
            """
            record("release", {"reservation": reservation}, ctx)
            return f"released {reservation}"

        @tool
        def refund(charge_id: str, ctx: ToolContext) -> str:
            """Undo a charge.

            Args:
                charge_id: the charge to refund.
            """
            record("refund", {"charge_id": charge_id}, ctx)
            if shop.refund_fails:
                raise RuntimeError("refunds are down")
            return f"refunded {charge_id}"

        return [reserve, charge, notify, release, refund]

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]


class Unreliable:
    """A step that fails every attempt, with the same error or with a different one each time."""

    def __init__(self, same_error: bool, succeed_after: int | None = None) -> None:
        self.same_error = same_error
        self.succeed_after = succeed_after
        self.attempts = 0

        @tool(name="unreliable")
        def unreliable() -> str:
            """Usually fails."""
            self.attempts += 1
            if self.succeed_after is not None and self.attempts > self.succeed_after:
                return "finally"
            if self.same_error:
                raise TimeoutError("upstream timed out after 30 s")
            distinct = [
                "DNS lookup failed for api.example.com",
                "TLS handshake aborted by peer",
                "HTTP 502 from the upstream gateway",
                "quota exceeded for project 7",
                "reply is missing the field 'items'",
                "disk full on /var/tmp",
            ]
            raise ValueError(distinct[(self.attempts - 1) % len(distinct)])

        self.tool = unreliable


class Guarded:
    """A tool that raises errors no retry can fix, counting its attempts."""

    def __init__(self) -> None:
        self.attempts = 0
        from orga.contracts.errors import ToolInputError, ToolPermissionError

        @tool(name="guarded")
        def guarded(kind: str) -> str:
            """Refuse in the way asked.

            Args:
                kind: "permission" or "input".
            """
            self.attempts += 1
            if kind == "permission":
                raise ToolPermissionError("this agent may not read the payroll")
            raise ToolInputError("the date range is reversed")

        self.tool = guarded


class Bank:
    """Charges and refunds, written as rows of a table in the worker's store, each once per
    idempotency key (the ledger). ``refund`` finds the charge it undoes by the step's key."""

    def __init__(self, *, refund_failures: int = 0) -> None:
        self.table = f"bank_{uuid.uuid4().hex[:10]}"
        self.started = threading.Event()
        """A charge's call has begun (its effect may or may not have landed)."""
        self.refund_failures = refund_failures
        """Refund calls that fail before one succeeds (``-1``: every one fails)."""
        self.refund_calls: list[str] = []
        self.tools = self._make()

    def rows(self) -> list[tuple[str, str, int]]:
        """(kind, idempotency key, amount) in the order they were written."""
        from tests.harness import TEST_STORE

        with TEST_STORE.engine.connect() as db:
            if not db.dialect.has_table(db, self.table):
                return []
            query = text(f"SELECT kind, key, amount FROM {self.table} ORDER BY seq")
            return [(str(k), str(key), int(a)) for k, key, a in db.execute(query)]

    def _make(self) -> list[Tool]:
        bank = self
        create = (
            f"CREATE TABLE IF NOT EXISTS {bank.table} (seq INTEGER PRIMARY KEY,"
            " kind TEXT NOT NULL, key TEXT NOT NULL, amount INTEGER NOT NULL)"
        )

        def write(ctx: ToolContext, kind: str, amount: int) -> str:
            assert ctx.ledger is not None
            ctx.ledger.prepare(create)

            def effect(db: Connection) -> str:
                db.execute(
                    text(f"INSERT INTO {bank.table} (kind, key, amount) VALUES (:k, :key, :a)"),
                    {"k": kind, "key": ctx.idempotency_key, "a": amount},
                )
                return f"{kind} {amount}"

            return ctx.ledger.once(ctx.idempotency_key, effect)

        @tool(timeout=30)
        async def charge_then_work(amount: int, seconds: float, ctx: ToolContext) -> str:
            """Charge, then go on working (an async call: cancellation stops the work).

            Args:
                amount: cents.
                seconds: how long the work after the charge takes.
            """
            receipt = write(ctx, "charge", amount)
            bank.started.set()
            await asyncio.sleep(seconds)
            return receipt

        @tool(timeout=30)
        def charge_when_done(
            amount: int, ctx: ToolContext, cooperative: bool = False, after: float = 0.0
        ) -> str:
            """Work until cancelled (at most 20 s), then charge — or, ``cooperative``, stop
            without charging. A sync call: nothing can stop its thread.

            Args:
                amount: cents.
                cooperative: return early, without charging, once the call is cancelled.
                after: seconds the charge takes, once the work is over.
            """
            bank.started.set()
            cancelled = ctx.cancelled.wait(20)
            if cooperative and cancelled:
                return "stopped before charging"
            time.sleep(after)
            return write(ctx, "charge", amount)

        @tool
        async def decline(reason: str) -> str:
            """Fail, once a charge has begun.

            Args:
                reason: why.
            """
            await asyncio.to_thread(bank.started.wait, 20)
            raise RuntimeError(reason)

        @tool
        def refund(ctx: ToolContext, receipt: str | None = None) -> str:
            """Undo the charge of the step this compensates, if it happened.

            Args:
                receipt: the charge's result, when the step completed.
            """
            bank.refund_calls.append(ctx.idempotency_key)
            failing = bank.refund_failures
            if failing < 0 or len(bank.refund_calls) <= failing:
                raise ConnectionError("the bank's refund service is down")
            assert ctx.ledger is not None and ctx.step_key is not None
            charged = ctx.ledger.recorded(ctx.step_key)
            if charged is None:
                return "nothing to refund: the charge never happened"
            amount = int(str(charged).split()[-1])
            return write(ctx, "refund", -amount)

        return [charge_then_work, charge_when_done, decline, refund]
