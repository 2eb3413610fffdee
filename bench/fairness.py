"""Fair shares per tenant: a few loops of tenant B while tenant A floods the same worker.

    uv run python bench/fairness.py [--flood 200] [--tenant-b 5] [--slots 4] [--rounds 2]
        [--delay 0.1] [--single 40]

Two tuned embedded dev servers run side by side, alike but for Temporal's task-queue fairness
(``matching.enableFairness``, ``orga.server.devserver.FAIRNESS_ARGS``): one without it, one
with it. Each has an orga worker in this process with only ``--slots`` activity slots, so a
flood saturates it, and both call one scripted model over HTTP on 127.0.0.1 that waits
``--delay`` seconds per call (0.1 s: long enough that the flood is held up by the slots, not by
the CPU of a 2-core machine; with 0.02 s the worker's CPU is the bottleneck, which fairness
does not share out). Every loop makes two model calls and one tool call (``add``): three
activities, one after the other. A loop is started as orga's client starts one for a
principal: ``principal=PrincipalClaim(user=…, tenant=…)`` in its input and
``priority=Priority(fairness_key=<tenant>)`` on the start. Each of its activity tasks then
carries the tenant's fairness key: orga's workflow sets it from the resolved principal, and an
activity that sets none inherits the workflow's (checked with the plain loop of
``bench/minimal.py``, whose activities set no priority: B's loops gained there too).

Per round, on each server in turn (the order alternates round by round):

* **B alone** — tenant B starts ``--tenant-b`` loops at once on the idle worker;
* **B during A's flood** — tenant A starts ``--flood`` loops at once; when they have made
  ``--flood`` / 2 model calls (every loop started, the activity queue full), B starts its
  loops again. The round waits for A's last loop before it goes on.

Printed: the median and p90 of B's loop latency (start to result) in each case, with the ratio
to B alone on the same server (with equal weights B's fair share is half the slots, so the
best to expect during the flood is about twice its time alone); how long A's whole flood took
(fairness's cost under load); and, last, ``--single`` loops one at a time on each server,
alternating, with an instant model: what fairness costs one loop on an idle server. Not a
test: numbers vary ±20 % on shared machines; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.client import Client
from temporalio.common import Priority
from temporalio.worker import Worker

from bench.setup import bench_settings
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.principals import PrincipalClaim
from orga.plugin import OrgaPlugin, http_client
from orga.runtime.connect import connect, ensure_search_attributes
from orga.scripted.server import RecordedRequest, ScriptedModelServer, Turn
from orga.server.devserver import DevServer
from orga.worker.conversation_cache import CACHED_CONVERSATIONS

# Measure what a deployed worker does: it reads its modules' bytecode from __pycache__
# (bench/setup.py says what compiling them again for every loop costs).
sys.dont_write_bytecode = False

TASK_QUEUE = "bench-fairness"
PROMPT = "Add 1 and 2 with the tool, then say the sum."


class Model:
    """The scripted model: ``fair-<tenant>-<ms>`` asks for one ``add``, then answers, each
    after ``<ms>`` milliseconds; it counts each tenant's calls."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()  # the server answers each connection in its own thread

    def __call__(self, request: RecordedRequest) -> Turn:
        _, tenant, ms = request.model.split("-")
        with self._lock:
            self.calls[tenant] += 1
        delay = int(ms) / 1000
        if request.tool_results() == 0:
            return Turn(tool_calls=[("add", {"a": 1, "b": 2})], delay=delay)
        return Turn(text="3", delay=delay)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Side:
    """One dev server (with or without fairness) and the client of its worker."""

    fairness: bool
    client: Client

    @property
    def name(self) -> str:
        return "on" if self.fairness else "off"

    async def loop(self, tenant: str, user: str, model: str) -> float:
        """Start one loop for ``user`` of ``tenant`` and wait for its result; seconds taken."""
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content=PROMPT)],
                config=LoopConfig(model=model, tools=["add"], max_iterations=3),
                principal=PrincipalClaim(user=user, tenant=tenant),
            ),
            id=f"fair-{tenant}-{uuid.uuid4().hex[:10]}",
            task_queue=TASK_QUEUE,
            priority=Priority(fairness_key=tenant),
        )
        await handle.result()
        return time.perf_counter() - started


@asynccontextmanager
async def side(
    root: Path, model: ScriptedModelServer, fairness: bool, slots: int
) -> AsyncIterator[Side]:
    """A tuned dev server, with or without fairness, and an orga worker of ``slots`` activity
    slots on it; torn down afterwards."""
    data = root / ("fair" if fairness else "plain")
    server = DevServer(data, port=_free_port(), headless=True, quiet=True, fairness=fairness)
    await server.start()
    try:
        settings = bench_settings(server.address, model, data)
        client = await connect(settings)
        await ensure_search_attributes(client)
        async with http_client() as http:
            plugin = OrgaPlugin(settings=settings, http=http, tracing=False)
            worker = Worker(
                client,
                task_queue=TASK_QUEUE,
                plugins=[plugin],
                max_cached_workflows=CACHED_CONVERSATIONS,
                max_concurrent_activities=slots,  # few: the flood saturates them
            )
            async with worker:
                yield Side(fairness, client)
    finally:
        await server.stop()


@dataclass
class Found:
    """What one server measured over every round."""

    alone: list[float] = field(default_factory=list[float])
    """B's loop latencies with the worker idle (seconds)."""
    flooded: list[float] = field(default_factory=list[float])
    """B's loop latencies during A's flood (seconds)."""
    floods: list[float] = field(default_factory=list[float])
    """From A's first start to A's last result, per round (seconds)."""
    single: list[float] = field(default_factory=list[float])
    """One loop at a time, instant model (seconds)."""


async def tenant_b(s: Side, loops: int, delay_ms: int) -> list[float]:
    return list(
        await asyncio.gather(*(s.loop("b", "b1", f"fair-b-{delay_ms}") for _ in range(loops)))
    )


async def one_round(s: Side, model: Model, flood: int, loops: int, delay_ms: int, f: Found) -> None:
    f.alone += await tenant_b(s, loops, delay_ms)
    model.calls.clear()
    started = time.perf_counter()
    a = asyncio.gather(*(s.loop("a", "a1", f"fair-a-{delay_ms}") for _ in range(flood)))
    while model.calls["a"] < flood // 2:  # noqa: ASYNC110  # counted in the model's threads
        await asyncio.sleep(0.01)
    f.flooded += await tenant_b(s, loops, delay_ms)
    await a
    f.floods.append(time.perf_counter() - started)


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def report(found: dict[bool, Found], args: argparse.Namespace) -> None:
    print()
    print(
        f"tenant B's loops ({args.tenant_b} at once, {args.rounds} rounds), each 2 model calls "
        f"of {args.delay * 1000:.0f} ms and 1 tool call; worker of {args.slots} activity slots"
    )
    print(
        f"{'B':<22} {'fairness':<9} {'median ms':>10} {'x alone':>8} {'p90 ms':>8} {'x alone':>8}"
    )
    for label, attribute in (("alone", "alone"), (f"during A's {args.flood}", "flooded")):
        for fairness in (False, True):
            values: list[float] = getattr(found[fairness], attribute)
            base = found[fairness].alone
            median, high = statistics.median(values), p90(values)
            print(
                f"{label:<22} {'on' if fairness else 'off':<9} {median * 1000:>10.0f} "
                f"{median / statistics.median(base):>8.2f} {high * 1000:>8.0f} "
                f"{high / p90(base):>8.2f}"
            )
    print()
    off, on = found[False], found[True]
    flood_off, flood_on = statistics.median(off.floods), statistics.median(on.floods)
    print(
        f"A's flood of {args.flood} loops, until the last finished (median of rounds): "
        f"{flood_off:.1f} s off, {flood_on:.1f} s on ({flood_on / flood_off:.2f}x)"
    )
    if args.single:
        single_off, single_on = statistics.median(off.single), statistics.median(on.single)
        print(
            f"one loop at a time, instant model (median of {args.single}): "
            f"{single_off * 1000:.1f} ms off, {single_on * 1000:.1f} ms on "
            f"({single_on / single_off:.2f}x)"
        )
    print()
    print("x alone: the ratio to B alone on the same server. off: Temporal's FIFO dispatch;")
    print("on: matching.enableFairness=true, tasks dispatched round-robin across fairness keys.")


async def main(args: argparse.Namespace) -> None:
    delay_ms = round(args.delay * 1000)
    model = Model()
    found = {False: Found(), True: Found()}
    with tempfile.TemporaryDirectory() as data, ScriptedModelServer() as server:
        server.fallback(model)
        async with AsyncExitStack() as stack:
            sides = [
                await stack.enter_async_context(side(Path(data), server, fairness, args.slots))
                for fairness in (False, True)
            ]
            for s in sides:  # warm up: sticky cache, connections, the sandbox's modules
                await tenant_b(s, args.tenant_b, 0)
            for round_ in range(args.rounds):
                for s in sides if round_ % 2 == 0 else sides[::-1]:
                    f = found[s.fairness]
                    await one_round(s, model, args.flood, args.tenant_b, delay_ms, f)
                    print(
                        f"round {round_ + 1}, fairness {s.name}: B alone "
                        f"{statistics.median(f.alone[-args.tenant_b :]) * 1000:.0f} ms, B during "
                        f"the flood {statistics.median(f.flooded[-args.tenant_b :]) * 1000:.0f} "
                        f"ms, the flood {f.floods[-1]:.1f} s",
                        flush=True,
                    )
            for _ in range(args.single):
                for s in sides:
                    found[s.fairness].single.append(await s.loop("b", "b1", "fair-b-0"))
    report(found, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="tenant B's loops during tenant A's flood")
    parser.add_argument("--flood", type=int, default=200, help="tenant A's loops at once")
    parser.add_argument("--tenant-b", type=int, default=5, help="tenant B's loops at once")
    parser.add_argument("--slots", type=int, default=4, help="the worker's activity slots")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--delay", type=float, default=0.1, help="seconds per model call")
    parser.add_argument("--single", type=int, default=40, help="one-at-a-time loops per server")
    asyncio.run(main(parser.parse_args()))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
