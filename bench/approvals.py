"""Loops that wait for a person, approved: the part of ``bench/loop_vs_bare.py`` that measures
them (its ``--waiting`` and ``--rounds``).

A thousand workflows wait for an approval; the resident memory each adds; approving them all at
once, until every approved payment ran and every workflow finished; and one approval at a time.
Four ways: orga's loop approved by its ``approve`` update and by its ``approval`` signal, and
the minimal workflow that waits for a decision (``bench/minimal.py``) approved by a signal (the
baseline) and by an update.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.minimal_activities import PAYMENTS
from bench.setup import Bench
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.messages import APPROVAL_SIGNAL, APPROVE_UPDATE
from orga.contracts.state import LoopState

__all__ = ["Approvals", "approvals", "children_cpu", "one_at_a_time", "print_approvals", "rss_kib"]


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def start_waiting(b: Bench) -> str:
    workflow_id = f"waiting-{os.urandom(5).hex()}"
    await b.client.start_workflow(
        "ReasoningLoop",
        LoopInput(
            messages=[Message(role="user", content="Pay the invoice of 12 euros to ann.")],
            config=LoopConfig(model="bench-pay", tools=["pay"]),
        ),
        id=workflow_id,
        task_queue="bench-orga",
    )
    return workflow_id


_QUERIES = asyncio.Semaphore(20)
"""Queries in flight at once while waiting for loops to ask: a thousand loops polled together
would swamp the worker with queries and measure that instead."""


async def waiting_call(b: Bench, workflow_id: str) -> str:
    handle = b.client.get_workflow_handle(workflow_id)
    while True:
        async with _QUERIES:
            state = await handle.query("state", result_type=LoopState)
        if state.pending_approvals:
            return state.pending_approvals[0].call_id
        await asyncio.sleep(0.5)


def children_cpu() -> float:
    """CPU seconds of this process's children so far (the Temporal dev server)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # after the command's closing parenthesis: state, ppid, … utime (14th), stime (15th)
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


async def missed_sticky(client: Client, ids: list[str]) -> int:
    """Workflow tasks of these workflows that timed out before a worker took them."""
    missed = 0
    for workflow_id in ids:
        async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
            missed += event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
    return missed


async def approve(b: Bench, workflow_id: str, call_id: str) -> None:
    handle = b.client.get_workflow_handle(workflow_id)
    decision = ApprovalDecision(call_id=call_id, approved=True, approver="bench")
    await handle.execute_update(APPROVE_UPDATE, decision)
    await handle.result()


async def approve_by_signal(b: Bench, workflow_id: str, call_id: str) -> None:
    handle = b.client.get_workflow_handle(workflow_id)
    decision = ApprovalDecision(call_id=call_id, approved=True, approver="bench")
    await handle.signal(APPROVAL_SIGNAL, decision)
    await handle.result()


@dataclass
class Approvals:
    memory_kib: float
    """Growth of this process's resident memory per waiting loop."""
    decided: float
    """From approving them all at once until every approved payment has run."""
    seconds: float
    """From approving them all at once until every loop has finished."""
    worker_cpu: float
    """CPU seconds of this process (workers, clients, model server) meanwhile."""
    server_cpu: float
    """CPU seconds of the Temporal dev server meanwhile."""
    half_paid: float
    """From approving them all at once until half the payments had run."""
    replayed: int
    """Workflow tasks that missed their sticky timeout: each replays its workflow from history."""


CALL = {"name": "add", "arguments": '{"a": 12, "b": 0}'}


async def start_bare_waiting(b: Bench) -> str:
    workflow_id = f"minimal-waiting-{os.urandom(5).hex()}"
    await b.plain.start_workflow(
        "MinimalApproval", CALL, id=workflow_id, task_queue="bench-minimal"
    )
    return workflow_id


async def bare_waiting(b: Bench, workflow_id: str) -> None:
    """Until the workflow waits for its decision (it has run its first task)."""
    async with _QUERIES:
        assert await b.plain.get_workflow_handle(workflow_id).query("waiting", result_type=bool)


async def bare_signal(b: Bench, workflow_id: str, _: None) -> None:
    handle = b.plain.get_workflow_handle(workflow_id)
    await handle.signal("approve", {"approved": True, "approver": "bench"})
    await handle.result()


async def bare_update(b: Bench, workflow_id: str, _: None) -> None:
    handle = b.plain.get_workflow_handle(workflow_id)
    await handle.execute_update("decide", {"approved": True, "approver": "bench"})
    await handle.result()


@dataclass(frozen=True)
class Way:
    """One way of approving a workflow that waits for a person."""

    client: Callable[[Bench], Client]
    start: Callable[[Bench], Awaitable[str]]
    """Start one; its workflow id."""
    ready: Callable[[Bench, str], Awaitable[Any]]
    """Until it waits; what approving it needs (the call id)."""
    approve: Callable[[Bench, str, Any], Awaitable[None]]
    """Approve it, and wait until it has finished."""


WAYS: dict[str, Way] = {
    "orga, update": Way(lambda b: b.client, start_waiting, waiting_call, approve),
    "orga, signal": Way(lambda b: b.client, start_waiting, waiting_call, approve_by_signal),
    "minimal, signal": Way(lambda b: b.plain, start_bare_waiting, bare_waiting, bare_signal),
    "minimal, update": Way(lambda b: b.plain, start_bare_waiting, bare_waiting, bare_update),
}
"""orga's loop approved by its ``approve`` update and by its ``approval`` signal, the issue's
baseline (a bare workflow that waits for a signal, then runs one activity), and the same
workflow approved by an update. orga goes first: its memory per waiting loop is measured in the
first round, before the process reuses memory that workflows which have finished freed (the
later ways' figure is lower for that reason)."""


async def approve_all(b: Bench, way: Way, loops: int) -> Approvals:
    """Start ``loops`` workflows that wait for an approval; the resident memory each adds; what
    approving all at once takes until every one has paid and finished, in time and in CPU."""
    for _ in range(3):  # warm up
        first = await way.start(b)
        await way.approve(b, first, await way.ready(b, first))
    gc.collect()
    before = rss_kib()
    ids = [await way.start(b) for _ in range(loops)]
    needs = await asyncio.gather(*(way.ready(b, i) for i in ids))
    gc.collect()
    per_loop = (rss_kib() - before) / loops
    PAYMENTS.clear()
    started, cpu, server = time.perf_counter(), time.process_time(), children_cpu()
    await asyncio.gather(*(way.approve(b, i, n) for i, n in zip(ids, needs, strict=True)))
    wall, worker_cpu, server_cpu = (
        time.perf_counter() - started,
        time.process_time() - cpu,
        children_cpu() - server,
    )
    assert len(PAYMENTS) == len(ids)
    return Approvals(
        per_loop,
        max(PAYMENTS) - started,
        wall,
        worker_cpu,
        server_cpu,
        statistics.median(PAYMENTS) - started,
        await missed_sticky(way.client(b), ids),
    )


ALONE = 40
"""Approvals made one at a time, per way, for the decision path's own cost."""


async def approve_alone(b: Bench, way: Way) -> tuple[float, float, float]:
    """Start one workflow, wait until it waits, approve it: the time from the approval until
    its payment ran, and the worker's and the server's CPU meanwhile (seconds)."""
    workflow_id = await way.start(b)
    need = await way.ready(b, workflow_id)
    PAYMENTS.clear()
    started, cpu, server = time.perf_counter(), time.process_time(), children_cpu()
    approving = asyncio.ensure_future(way.approve(b, workflow_id, need))
    # The payment is noted by a tool that may run in a worker thread: polled, every 0.5 ms.
    while not PAYMENTS:  # noqa: ASYNC110
        await asyncio.sleep(0.0005)
    paid = PAYMENTS[0] - started
    figures = (paid, time.process_time() - cpu, children_cpu() - server)
    await approving  # the workflow finishes (not timed)
    return figures


async def one_at_a_time(b: Bench) -> dict[str, tuple[float, float, float]]:
    """``ALONE`` approvals per way, one at a time, alternating ways: the median time from an
    approval to its payment, and the mean worker and server CPU until then."""
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in WAYS}
    for _ in range(ALONE):
        for name, way in WAYS.items():
            found[name].append(await approve_alone(b, way))
    return {
        name: (
            statistics.median(r[0] for r in results),
            statistics.mean(r[1] for r in results),
            statistics.mean(r[2] for r in results),
        )
        for name, results in found.items()
    }


async def approvals(b: Bench, loops: int, rounds: int) -> dict[str, Approvals]:
    """Every way, ``rounds`` times in turn; per way the median of each figure over the rounds
    (memory: the first round's, before freed workflows are reused)."""
    found: dict[str, list[Approvals]] = {name: [] for name in WAYS}
    for round_ in range(rounds):
        for name, way in WAYS.items():
            result = await approve_all(b, way, loops)
            found[name].append(result)
            print(
                f"round {round_ + 1}, {name}: every payment ran in {result.decided:.1f} s (half "
                f"in {result.half_paid:.1f} s), every workflow finished in {result.seconds:.1f} "
                f"s; {result.replayed} workflow tasks missed their sticky timeout",
                flush=True,
            )

    def median(results: list[Approvals]) -> Approvals:
        def of(field: str) -> float:
            return statistics.median(getattr(r, field) for r in results)

        return Approvals(
            memory_kib=results[0].memory_kib,
            decided=of("decided"),
            seconds=of("seconds"),
            worker_cpu=of("worker_cpu"),
            server_cpu=of("server_cpu"),
            half_paid=of("half_paid"),
            replayed=round(of("replayed")),
        )

    return {name: median(results) for name, results in found.items()}


def print_approvals(
    alone: dict[str, tuple[float, float, float]],
    found: dict[str, Approvals],
    waiting: int,
    rounds: int,
) -> None:
    """The approvals' figures: one at a time, then ``waiting`` at once, against the targets."""
    for name, (paid, worker, server) in alone.items():
        print(
            f"{name}, one approval at a time ({ALONE}): paid {paid * 1000:.1f} ms after the "
            f"approval (median), using {worker * 1000:.1f} ms of worker CPU and "
            f"{server * 1000:.1f} ms of Temporal server CPU (mean) until then"
        )
    for name, result in found.items():
        print(
            f"{waiting} workflows ({name}) waiting for approval: {result.memory_kib:.0f} "
            f"KiB of worker memory each; approving all at once, medians of {rounds} rounds: "
            f"every payment ran in {result.decided:.1f} s (half of them in "
            f"{result.half_paid:.1f} s) and every workflow finished in {result.seconds:.1f} "
            f"s, using {result.worker_cpu * 1000 / waiting:.1f} ms of worker CPU and "
            f"{result.server_cpu * 1000 / waiting:.1f} ms of Temporal server CPU per "
            f"approval; {result.replayed} workflow tasks missed their sticky timeout"
        )
    orga, signal, update = found["orga, update"], found["minimal, signal"], found["minimal, update"]
    memory = f"{orga.memory_kib:.0f} KiB"
    print(f"{'worker memory per waiting loop':<44} {memory:<28} ≤ 160 KiB")
    label = f"{waiting} approvals at once, until all paid"
    value = f"{orga.decided:.1f} s, {orga.decided / signal.decided:.2f}x"
    print(f"{label:<44} {value:<28} ≤ 1.2x the minimal by signal ({signal.decided:.1f} s)")
    value = f"{orga.decided:.1f} s, {orga.decided / update.decided:.2f}x"
    print(f"{'':<44} {value:<28} (the minimal by update: {update.decided:.1f} s)")
    by_signal = found["orga, signal"]
    value = f"{by_signal.decided:.1f} s, {by_signal.decided / signal.decided:.2f}x"
    print(f"{'':<44} {value:<28} (orga approved by its signal instead)")
    label = "one approval at a time, until it paid"
    paid = alone["orga, update"][0]
    value = f"{paid * 1000:.1f} ms, {paid / alone['minimal, signal'][0]:.2f}x"
    by_update = paid / alone["minimal, update"][0]
    print(f"{label:<44} {value:<28} (the minimal by signal; by update: {by_update:.2f}x)")
    label = f"{waiting} approvals at once, until all finished"
    value = f"{orga.seconds:.1f} s, {orga.seconds / signal.seconds:.2f}x"
    print(f"{label:<44} {value:<28} (the loop's model then reads the result)")


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}" if base else "-"
