"""Every instant of a tool call's life, for every kind of tool: its worker SIGKILLed there, or
its loop cancelled there, with the effects counted outside the worker (issue 63).

A bank outside the worker (``tests.instant_tools``) counts what each call paid. Killed mid-call,
each call of a tool with effects ends with exactly one payment — rerun only where the tool is
idempotent, reconciled by its key where it can be, otherwise ``unknown`` until a person, who
looks at the bank, says what happened — and a pure tool simply runs again; ``orga receipts``
says so for each. Cancelled mid-call, nothing new runs and no receipt claims more than the bank
knows: ``delivered`` only if it paid, ``failed`` only if it did not, ``unknown`` where nobody
can say. Before the fix, a worker killed right after the payment (or inside a blocking call)
left no mark of the begun effect, and the next attempt paid again.

Two instants of the list in the issue are not cells here: "before the mark" cannot be held
without freezing the whole worker (nothing of a tool runs before its mark: the unit tests of
``mark_began`` show that a call whose mark is not stored does not run), and "after the result"
is, from the worker's side, the tool holding after its effect (a returned value reaches the SDK
only as the tool returns).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from orga.contracts.approvals import ApprovalDecision, EscalationResolution
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.state import LoopState
from orga.scripted.server import Turn
from tests import instant_tools
from tests.harness import TEST_STORE, Harness
from tests.helpers import ForkedProcess, eventually, host_env, loop_state, on, orga, worker_process
from tests.instant_tools import KINDS
from tests.local_http import Reply, serve

T = TypeVar("T")
Cell = tuple[str, str, str]
"""(kind, form, instant)."""

ON_ONE_WORKER: list[Cell] = [
    *[(kind, "async", "after_mark") for kind in KINDS],
    *[(kind, "async", "after_effect") for kind in KINDS],
    *[(kind, "sync", "in_thread") for kind in KINDS],
]
BLOCKING: list[Cell] = [(kind, "async", "in_blocking") for kind in KINDS]
"""A blocking call freezes its worker's event loop: one such call a worker."""
IN_RECONCILE: Cell = ("reconcile", "async", "in_reconcile")

PEOPLE = ("serial", "approval")
"""Kinds whose lost call only a person can settle (neither idempotent nor reconcilable)."""


def name(cell: Cell) -> str:
    return "-".join(cell)


@pytest.fixture
def instants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """The bank's folder (this process reads it too) and the bank's HTTP door, which pays and
    then holds its answer until the test releases it."""
    folder = tmp_path / "instants"
    folder.mkdir()
    monkeypatch.setenv("INSTANT_DIR", str(folder))

    def bank(method: str, target: str, raw: bytes) -> Reply:
        asked = json.loads(raw)
        said = instant_tools.record(asked["kind"], asked["cell"], asked["key"])
        instant_tools.arrive(asked["cell"], 1)
        while not instant_tools.released():
            threading.Event().wait(0.05)
        return 200, "text/plain", said.encode()

    with serve(bank) as url:
        try:
            yield folder, url
        finally:
            (folder / "released").touch()


class Cells:
    """The loops of one test, one per cell, each on the task queue of its worker."""

    def __init__(self, env: WorkflowEnvironment, harness: Harness, tmp_path: Path, bank: str):
        self.env, self.harness, self.tmp_path = env, harness, tmp_path
        self.bank = bank
        self.handles: dict[str, WorkflowHandle[Any, Any]] = {}
        self.queues: dict[str, str] = {}
        self.models: dict[str, str] = {}

    def worker_env(self, queue: str) -> dict[str, str]:
        return host_env(
            self.env, self.harness, f"worker-{queue}", self.tmp_path, TEST_STORE.url,
            ORGA_TOOL_MODULES="tests.instant_tools", ORGA_TASK_QUEUE=queue,
            INSTANT_DIR=str(instant_tools.folder()),
            INSTANT_BANK=self.bank,
            # A killed worker's loops wait out its sticky queue before another worker takes
            # their next task (and each query of them as long): 3 s, not the default 10.
            ORGA_STICKY_TIMEOUT="3",
        )  # fmt: skip

    async def start(self, cell: Cell, queue: str) -> None:
        kind, form, instant = cell
        tool = f"{kind}_{form}"
        model = self.harness.new_model(
            [Turn(tool_calls=[(tool, {"cell": name(cell), "instant": instant})]), Turn(text="ok")]
        )
        handle = await self.harness.client.start_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content=f"pay ({name(cell)})")],
                config=LoopConfig(model=model, tools=[tool]),
            ),
            id=f"instant-{name(cell)}-{uuid.uuid4().hex[:6]}",
            task_queue=queue,
        )
        self.harness.handles.append(handle)
        self.handles[name(cell)], self.queues[name(cell)] = handle, queue
        self.models[name(cell)] = model
        if kind == "approval":  # a person approves it first
            state = await eventually(lambda: _approval_waits(handle), f"{name(cell)} asks")
            [waiting] = state.pending_approvals
            decision = ApprovalDecision(call_id=waiting.call_id, approved=True, approver="kim")
            await handle.execute_update("approve", decision)

    async def arrived(self, cells: list[Cell], attempt: int = 1) -> None:
        folder = instant_tools.folder() / "arrived"

        def there() -> bool:
            return all((folder / f"{name(c)}.{attempt}").exists() for c in cells)

        await eventually(there, f"{len(cells)} call(s) at their instant", timeout=60)

    def paid(self, cell: Cell) -> list[dict[str, Any]]:
        return [e for e in instant_tools.entries() if e["cell"] == name(cell)]

    async def receipts(self, cell: Cell) -> list[str]:
        """What ``orga receipts`` says of the cell's loop, outcome by outcome."""
        env = {**on(self.env, self.harness), "ORGA_TASK_QUEUE": self.queues[name(cell)]}
        code, out, err = await orga("receipts", self.handles[name(cell)].id, "--json", env=env)
        assert code == 0, err
        return [json.loads(line)["outcome"] for line in out.splitlines() if line]


async def _kill(*processes: ForkedProcess) -> None:
    for process in processes:
        process.send_signal(signal.SIGKILL)
    for process in processes:
        await process.wait()


async def _each(
    act: Callable[[Cells, Cell], Awaitable[T]], cells: Cells, of: list[Cell]
) -> dict[str, T]:
    """``act`` on every cell at once: what it came to, by cell."""
    done = await asyncio.gather(*(act(cells, cell) for cell in of))
    return dict(zip(map(name, of), done, strict=True))


async def _approval_waits(handle: WorkflowHandle[Any, Any]) -> LoopState | None:
    state = await loop_state(handle)
    return state if state.pending_approvals else None


async def _answered(handle: WorkflowHandle[Any, Any], escalation_id: str) -> bool:
    state = await loop_state(handle)
    return all(e.escalation_id != escalation_id for e in state.pending_escalations)


async def _settle(cells: Cells, cell: Cell) -> bool:
    """The loop of ``cell`` to its end; where it asks a person what became of its call, the
    person looks at the bank and says. Whether a person was asked."""
    handle = cells.handles[name(cell)]

    async def ended_or_asking() -> LoopState | None:
        state = await loop_state(handle)
        return state if state.status == "completed" or state.pending_escalations else None

    asked = False
    while True:
        # Bounded with room: a call whose retry died with the second worker waits out its
        # heartbeat timeout once more, and while a loop's workflow task waits out a killed
        # worker's sticky queue each query takes ~10 s (seen: 60 s passed once in six runs).
        state = await eventually(ended_or_asking, f"{name(cell)} ends or asks", timeout=120)
        if state.status == "completed":
            break
        asked = True
        [waiting] = state.pending_escalations
        paid = [e for e in cells.paid(cell) if e["what"] == "paid"]
        resolution = EscalationResolution(
            escalation_id=waiting.escalation_id,
            action="result" if paid else "retry",
            result=f"paid ({name(cell)})" if paid else None,
            reason="the bank's statement" if paid else "the bank has no payment",
            operator="olu",
        )
        # The person answers what the query shows, at once: the query may answer from a
        # worker's memory an escalation whose workflow task is not recorded yet, and the signal
        # is then recorded before that task's start (test_answer_in_flight.py).
        await handle.signal("resolve_escalation", resolution)
        answered = functools.partial(_answered, handle, waiting.escalation_id)
        await eventually(answered, f"{name(cell)} took the answer")
    await handle.result()
    return asked


# 13 worker processes started and 7 killed, each kill waited out by heartbeat and sticky-queue
# timeouts: a load test of its own, run while no other test runs (beside seven others, in CI,
# one loop neither ended nor asked within 120 s once, and the test once ran past 120 s).
@pytest.mark.alone
@pytest.mark.timeout(240)
async def test_a_worker_killed_at_every_instant_of_every_kind_of_call_pays_once(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path, instants: tuple[Path, str]
) -> None:
    _, bank = instants
    cells = Cells(env, harness, tmp_path, bank)
    main = f"{harness.task_queue}-main"
    blocking = {name(c): f"{harness.task_queue}-{c[0]}" for c in BLOCKING}
    everything = [*ON_ONE_WORKER, IN_RECONCILE, *BLOCKING]
    queues = [main, *blocking.values()]
    async with contextlib.AsyncExitStack() as first:
        started = [
            await first.enter_async_context(worker_process(cells.worker_env(q))) for q in queues
        ]
        for cell in [*ON_ONE_WORKER, IN_RECONCILE]:
            await cells.start(cell, main)
        await cells.arrived([*ON_ONE_WORKER, IN_RECONCILE])
        for cell in BLOCKING:  # each freezes its own worker
            await cells.start(cell, blocking[name(cell)])
        await cells.arrived(BLOCKING)
        await _kill(*started)  # every call at its instant: the workers die
    async with worker_process(cells.worker_env(main)) as second:
        await cells.arrived([IN_RECONCILE], attempt=2)  # held inside its reconcile: it dies
        await _kill(second)
    (instant_tools.folder() / "released").touch()  # the bank answers what it still holds
    async with contextlib.AsyncExitStack() as last:
        for queue in queues:
            await last.enter_async_context(worker_process(cells.worker_env(queue)))
        asked = await _each(_settle, cells, everything)
        receipts = await _each(Cells.receipts, cells, everything)
    for cell in everything:
        kind = cell[0]
        paid = [e for e in cells.paid(cell) if e["what"] == "paid"]
        read = [e for e in cells.paid(cell) if e["what"] == "read"]
        said = (name(cell), receipts[name(cell)], asked[name(cell)])
        if kind == "pure":  # no effect of its own: it ran again (read again if it had), and
            # said it delivered. The second worker of the main queue may take the retry and
            # die in it (killed for the reconcile cell): then it ran once more.
            reads = 1 if cell[2] == "after_mark" else 2
            assert reads <= len(read) <= reads + 1, (name(cell), read)
            assert said == (name(cell), ["delivered"], False), said
            continue
        assert len(paid) == 1, (name(cell), paid)  # never twice, never lost
        # The lost attempt is on the record, then how it was settled: by a person where
        # only a person could, else by the tool's key.
        assert said == (name(cell), ["unknown", "delivered"], kind in PEOPLE), said


async def test_a_cancel_at_every_instant_of_every_kind_of_call_runs_nothing_new(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path, instants: tuple[Path, str]
) -> None:
    _, bank = instants
    cells = Cells(env, harness, tmp_path, bank)
    main = f"{harness.task_queue}-main"
    blocking: list[Cell] = [("serial", "async", "in_blocking")]
    everything = [*ON_ONE_WORKER, *blocking]
    async with (
        worker_process(cells.worker_env(main)),
        worker_process(cells.worker_env(f"{main}-blocking")),
    ):
        for cell in ON_ONE_WORKER:
            await cells.start(cell, main)
        await cells.start(blocking[0], f"{main}-blocking")
        await cells.arrived(everything)
        await asyncio.gather(*(cells.handles[name(c)].cancel() for c in everything))
        (instant_tools.folder() / "released").touch()  # what still runs may go on
        for cell in everything:
            with pytest.raises(WorkflowFailureError):
                await cells.handles[name(cell)].result()
        receipts = await _each(Cells.receipts, cells, everything)
    for cell in everything:
        kind = cell[0]
        assert len(harness.model.requests_for(cells.models[name(cell)])) == 1  # nothing new
        entries = cells.paid(cell)
        assert len(entries) <= 1, (name(cell), entries)  # never run twice
        [receipt] = receipts[name(cell)]
        if kind == "pure":
            assert receipt in ("failed", "delivered"), (name(cell), receipt)
        elif entries:  # it paid: said delivered, or unknown — never that it did not
            assert receipt in ("delivered", "unknown"), (name(cell), receipt)
        else:  # it did not pay: never said delivered
            assert receipt in ("failed", "unknown"), (name(cell), receipt)
