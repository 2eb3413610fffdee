"""orga's loop against a bare Temporal workflow doing the same activities, in the same run.

    uv run python bench/loop_vs_bare.py [--runs 10] [--concurrent 20]

Both run on the tuned embedded dev server (SQLite file, WAL, transfer poll rate 1000/s) with
one in-process worker and an instant scripted model over HTTP on 127.0.0.1. For K tool calls
(one per turn, K+1 model calls) it prints, per loop: median wall time and its ratio to bare,
worker CPU (this process: worker, client and the model server), history events and history
bytes, and loops/s with N loops at once. Not a test: numbers vary ±20 % on shared machines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bare import BareInput, BareLoopWorkflow
from bench.bare_activities import BareActivities
from orga.config import LoopConfig, LoopInput
from orga.connect import connect, ensure_search_attributes
from orga.conversation import Message
from orga.devserver import DevServer
from orga.scripted_model import RecordedRequest, ScriptedModelServer, Turn
from orga.settings import ProviderSettings, Settings
from worker import build_registry, build_worker, http_client

PROMPT = "Add up the numbers, one tool call at a time."


def instant_model(request: RecordedRequest) -> Turn:
    """Model ``bench-k<K>``: one ``add`` call per turn until K results, then an answer."""
    k = int(request.model.removeprefix("bench-k"))
    done = request.tool_results()
    if done < k:
        return Turn(tool_calls=[("add", {"a": done, "b": 1})])
    return Turn(text=f"done after {done} calls")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Measured:
    wall: float
    cpu: float
    events: int
    history_bytes: int
    throughput: float


def row(k: int, name: str, m: Measured, bare: Measured) -> str:
    return (
        f"{k:>3} {name:<6} {m.wall * 1000:>8.1f} {m.wall / bare.wall:>6.2f} "
        f"{m.cpu * 1000:>7.1f} {m.events:>7} {m.history_bytes / 1024:>9.1f} "
        f"{m.history_bytes / bare.history_bytes:>11.2f} {m.throughput:>8.1f}"
    )


async def history_size(client: Client, workflow_id: str) -> tuple[int, int]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return len(history.events), sum(e.ByteSize() for e in history.events)


async def run_orga(client: Client, k: int) -> str:
    workflow_id = f"orga-{uuid.uuid4().hex[:10]}"
    await client.execute_workflow(
        "ReasoningLoop",
        LoopInput(
            messages=[Message(role="user", content=PROMPT)],
            config=LoopConfig(model=f"bench-k{k}", tools=["add"], max_iterations=k + 1),
        ),
        id=workflow_id,
        task_queue="bench-orga",
        request_eager_start=True,
    )
    return workflow_id


async def run_bare(client: Client, k: int) -> str:
    workflow_id = f"bare-{uuid.uuid4().hex[:10]}"
    await client.execute_workflow(
        BareLoopWorkflow.run,
        BareInput(
            messages=[Message(role="user", content=PROMPT)], model=f"bench-k{k}", tools=["add"]
        ),
        id=workflow_id,
        task_queue="bench-bare",
        request_eager_start=True,
    )
    return workflow_id


async def measure(client: Client, runner: Any, k: int, runs: int, concurrent: int) -> Measured:
    for _ in range(2):
        await runner(client, k)  # warm up: sticky cache, connections
    walls: list[float] = []
    cpu_start = time.process_time()
    last = ""
    for _ in range(runs):
        start = time.perf_counter()
        last = await runner(client, k)
        walls.append(time.perf_counter() - start)
    cpu = (time.process_time() - cpu_start) / runs
    events, size = await history_size(client, last)
    start = time.perf_counter()
    await asyncio.gather(*(runner(client, k) for _ in range(concurrent)))
    throughput = concurrent / (time.perf_counter() - start)
    return Measured(statistics.median(walls), cpu, events, size, throughput)


async def main(runs: int, concurrent: int, ks: list[int]) -> None:
    with tempfile.TemporaryDirectory() as data, ScriptedModelServer() as model:
        model.fallback(instant_model)
        port = free_port()
        server = DevServer(Path(data), port=port, headless=True)
        await server.start()
        try:
            settings = Settings(
                temporal_address=server.address,
                providers={
                    "openai": ProviderSettings(
                        name="openai",
                        base_url=model.openai_base_url,
                        api_key=SecretStr("bench"),
                        api_key_env="OPENAI_API_KEY",
                        default_model="bench-k1",
                        official=False,
                    )
                },
                default_provider="openai",
            )
            client = await connect(settings)
            await ensure_search_attributes(client)
            async with http_client() as http:
                registry = build_registry(settings, http)
                bare = BareActivities(settings, http, registry)
                orga_worker = build_worker(client, settings, http, task_queue="bench-orga")
                bare_worker = Worker(
                    client,
                    task_queue="bench-bare",
                    workflows=[BareLoopWorkflow],
                    activities=[bare.call_model, bare.run_tool],
                )
                async with orga_worker, bare_worker:
                    print(
                        f"{'K':>3} {'variant':<6} {'wall ms':>8} {'ratio':>6} {'cpu ms':>7} "
                        f"{'events':>7} {'hist KiB':>9} {'bytes ratio':>11} {'loops/s':>8}"
                    )
                    for k in ks:
                        b = await measure(client, run_bare, k, runs, concurrent)
                        o = await measure(client, run_orga, k, runs, concurrent)
                        for name, m in (("bare", b), ("orga", o)):
                            print(row(k, name, m, b))
        finally:
            await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="orga loop against a bare Temporal workflow")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--k", type=int, nargs="+", default=[10, 25])
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.concurrent, arguments.k))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
