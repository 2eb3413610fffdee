"""Worker memory per loop waiting for a person: N loops, each with a call awaiting approval.

    uv run python bench/waiting_loops.py [--loops 300]

One worker (this process), the tuned embedded server, an instant scripted model. Starts N loops
whose first call needs approval, waits until every one is waiting, and prints the growth of
this process's resident memory per waiting loop (the worker keeps each one's workflow in its
cache, up to 1,000, and its conversation in the conversation cache). Then approves them all and
prints how long the worker took to finish them. Not a test: memory numbers depend on the
allocator and vary by ±15 %.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.setup import Bench, bench
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.state import LoopState
from orga.testing.scripted_model import RecordedRequest, Turn
from orga.tools.sdk import tool

PROMPT = "Pay the invoice of 12 euros to ann."


@tool(requires_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay someone (a person approves each payment).

    Args:
        amount: euros.
        to: who is paid.
    """
    return f"paid {amount} to {to}"


def paying_model(request: RecordedRequest) -> Turn:
    if request.tool_results() == 0:
        return Turn(tool_calls=[("pay", {"amount": 12, "to": "ann"})])
    return Turn(text="paid")


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def waiting(b: Bench, workflow_id: str) -> LoopState:
    handle = b.client.get_workflow_handle(workflow_id)
    while True:
        state = await handle.query("state", result_type=LoopState)
        if state.pending_approvals:
            return state
        await asyncio.sleep(0.2)


async def main(loops: int) -> None:
    async with bench(paying_model, tools=[pay]) as b:
        for _ in range(3):  # warm up: sandbox modules, connections, caches
            first = await start(b)
            await approve(b, first, await waiting(b, first))
        gc.collect()
        before = rss_kib()
        ids = [await start(b) for _ in range(loops)]
        states = await asyncio.gather(*(waiting(b, workflow_id) for workflow_id in ids))
        gc.collect()
        after = rss_kib()
        print(f"{loops} loops waiting for approval: resident memory {before} KiB -> {after} KiB")
        print(f"  {(after - before) / loops:.0f} KiB per waiting loop")
        started = time.perf_counter()
        await asyncio.gather(*(approve(b, i, s) for i, s in zip(ids, states, strict=True)))
        print(f"  all approved and finished in {time.perf_counter() - started:.1f} s")


async def start(b: Bench) -> str:
    from orga.contracts.config import LoopConfig, LoopInput
    from orga.contracts.conversation import Message

    workflow_id = f"waiting-{os.urandom(5).hex()}"
    await b.client.start_workflow(
        "ReasoningLoop",
        LoopInput(
            messages=[Message(role="user", content=PROMPT)],
            config=LoopConfig(model="bench-pay", tools=["pay"], policy="default"),
        ),
        id=workflow_id,
        task_queue="bench-orga",
    )
    return workflow_id


async def approve(b: Bench, workflow_id: str, state: LoopState) -> None:
    handle = b.client.get_workflow_handle(workflow_id)
    call = state.pending_approvals[0].call_id
    await handle.execute_update(
        "approve", ApprovalDecision(call_id=call, approved=True, approver="bench")
    )
    await handle.result()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="worker memory per waiting loop")
    parser.add_argument("--loops", type=int, default=300)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.loops))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
