"""Things killed for real: a worker SIGKILLed mid-tool, the dev server killed and restarted on
its SQLite file, a worker stopped gracefully. Every loop completes; no side effect twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import stat
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from orga.runtime.connect import connect
from orga.runtime.settings import Settings
from orga.scripted.server import Turn
from orga.server.devserver import DevServer
from orga.workflows.shared.options import TOOL_HEARTBEAT_TIMEOUT
from tests.harness import Harness, scripted_settings
from tests.helpers import (
    aborted,
    conversation,
    eventually,
    pending,
    port_is_free,
    reusable_port,
    started_tool,
    worker_process,
)

ROOT = Path(__file__).resolve().parent.parent
NOTICED = TOOL_HEARTBEAT_TIMEOUT.total_seconds()
"""Seconds until a SIGKILLed worker's call runs elsewhere: its heartbeats stop. The loop's next
workflow task does not wait out the sticky timeout (``Settings().sticky_timeout``, 10 s) on
the dead worker's queue: by then nobody has polled that queue for 10 s, and Temporal sends the
task to the task queue at once (measured: 13.1 s with a 3 s sticky timeout, 13.2 s with 10 s)."""


def payments(ledger: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(ledger) as db:
        return db.execute("SELECT idempotency_key, amount, recipient FROM payments").fetchall()


async def test_worker_sigkilled_mid_tool(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    ledger = tmp_path / "store.db"  # the worker's store: the ledger and the payments
    model = harness.new_model(
        [
            Turn(tool_calls=[("record_payment", {"amount": 700, "to": "ann", "seconds": 2})]),
            Turn(text="paid"),
        ]
    )
    worker_env = {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ORGA_TASK_QUEUE": harness.task_queue,
        "ORGA_PROVIDER": "openai",
        "OPENAI_BASE_URL": harness.model.openai_base_url,
        "OPENAI_API_KEY": "sk-test",
        "ORGA_TOOL_MODULES": "examples.payments",
        "ORGA_STORE_URL": f"sqlite:///{ledger}",
    }
    async with worker_process(worker_env) as first:
        handle = await harness.start("pay ann", model=model, tools=["record_payment"])
        await started_tool(env.client, handle.id)
        first.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        await first.wait()
    async with worker_process(worker_env):
        result = await asyncio.wait_for(handle.result(), 60)
        recovered = time.monotonic() - killed
    print(f"\nworker SIGKILL → loop completed in {recovered:.1f} s")
    assert result.output == "paid"
    rows = payments(ledger)
    [(key, amount, recipient)] = rows  # one payment, though the tool ran twice
    assert key.startswith(f"{handle.id}/") and (amount, recipient) == (700, "ann")
    assert recovered < NOTICED + 2 + 5  # noticed, the 2 s payment again, slack for the rest


async def test_worker_sigkilled_mid_compensation(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """Two paid steps are undone, newest first. The first refund has committed when its worker
    dies (SIGKILL, before it could answer): another worker runs it again — and it refunds
    nothing twice — then runs the second. Each payment is refunded exactly once."""
    from orga.contracts.task import TaskState

    store = tmp_path / "store.db"
    calls = tmp_path / "calls.log"
    calls.touch()
    worker_env = {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ORGA_TASK_QUEUE": harness.task_queue,
        "ORGA_TOOL_MODULES": "examples.payments,examples.shop,tests.crash_tools",
        "ORGA_STORE_URL": f"sqlite:///{store}",
        "ORGA_TEST_CALLS": str(calls),
    }

    def pay(step: str, to: str) -> dict[str, Any]:
        return {
            "id": step,
            "action": {
                "kind": "tool",
                "tool": "record_payment",
                "arguments": {"amount": 500, "to": to},
            },
            "compensation": {"tool": "refund_then_hang", "arguments": {}},
        }

    steps = [
        pay("pay-ann", "ann"),
        pay("pay-bob", "bob"),
        {
            "id": "notify",
            "action": {
                "kind": "tool",
                "tool": "notify",
                "arguments": {"email": "ann@example.invalid", "message": "paid"},
            },
            "depends_on": ["pay-ann", "pay-bob"],
        },
    ]

    def refunded() -> list[tuple[Any, ...]]:
        with sqlite3.connect(store) as db:
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'refunds'").fetchone():
                return []
            return db.execute("SELECT receipt, amount, idempotency_key FROM refunds").fetchall()

    async with worker_process({**worker_env, "ORGA_TEST_HANG": "1"}) as first:
        handle = await harness.start_task(steps, policy={"max_reattempts_per_step": 0})
        # Bob's refund (newest first) has committed, and hangs.
        await eventually(refunded, "bob's refund committed")
        state = await handle.query("state", result_type=TaskState)
        assert {s.id: s.status for s in state.steps}["pay-bob"] == "compensating"
        first.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        await first.wait()
    async with worker_process(worker_env):
        report = await asyncio.wait_for(aborted(handle), 60)
        recovered = time.monotonic() - killed
    print(f"\nworker SIGKILL mid-compensation → task settled in {recovered:.1f} s")
    with sqlite3.connect(store) as db:
        paid = dict(db.execute("SELECT idempotency_key, receipt FROM payments").fetchall())
    ran = calls.read_text().splitlines()
    bob = [line for line in ran if "/pay-bob " in line]
    ann = [line for line in ran if "/pay-ann " in line]
    assert [line.split(":")[0].split()[-1] for line in bob] == ["1", "2"]  # ran twice…
    assert len(ann) == 1 and "attempt 1" in ann[0]
    receipts = sorted(receipt for receipt, _, _ in refunded())
    assert receipts == sorted(paid.values()) and len(receipts) == 2  # …refunded once each
    assert {key.rsplit("/", 1)[-1] for _, _, key in refunded()} == {
        "pay-ann.compensate",
        "pay-bob.compensate",
    }
    statuses = {s["id"]: s["status"] for s in report["steps"]}
    assert statuses["pay-ann"] == statuses["pay-bob"] == "compensated"
    assert report["outcome"] == "compensated"
    assert recovered < NOTICED + 10  # noticed, then both refunds and the rest


async def test_dev_server_killed_and_restarted_on_its_sqlite_file(
    model_server: Any, tmp_path: Path
) -> None:
    port = reusable_port()
    server = DevServer(tmp_path / "data", port=port, headless=True)
    await server.start()
    try:
        client = await connect(Settings(temporal_address=server.address))
        harness = Harness(client=client, model=model_server)
        model = harness.new_model(
            [
                Turn(tool_calls=[("wait", {"label": "during-outage", "seconds": 2.0})]),
                Turn(text="survived"),
            ]
        )
        from tests.sample_tools import Probe, probe_tools

        probe = Probe()
        async with harness.worker(
            tools=probe_tools(probe), settings=scripted_settings(model_server)
        ):
            handle = await harness.start(
                "wait", model=model, tools=["wait"], workflow_id=f"outage-{uuid.uuid4().hex[:6]}"
            )
            await eventually(lambda: "during-outage" in probe.order, "the tool started")
            assert server._process is not None
            os.killpg(server._process.pid, signal.SIGKILL)  # no clean shutdown
            await server.wait()
            await eventually(lambda: port_is_free(port), "the killed server's port is free")
            restarted = DevServer(tmp_path / "data", port=port, headless=True)
            await restarted.start()
            server = restarted
            result = await asyncio.wait_for(handle.result(), 90)
        assert result.output == "survived"
        harness.handles.clear()  # replayed below with this server's client
        from tests.harness import replay

        await replay(handle, client)
        # Every history is in this directory: only the worker's user may read it.
        data = tmp_path / "data"
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        written = [p for p in data.iterdir() if p.name.startswith("temporal.db")]
        assert written and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in written)
    finally:
        await server.stop()


async def test_worker_stopped_gracefully_mid_loop(harness: Harness) -> None:
    from tests.sample_tools import Probe, probe_tools

    probe = Probe()
    tools = probe_tools(probe)
    model = harness.new_model(
        [Turn(tool_calls=[("wait", {"label": "slow", "seconds": 1.0})]), Turn(text="done")]
    )
    async with harness.worker(tools=tools):
        handle = await harness.start("go", model=model, tools=["wait"])
        await eventually(lambda: "slow" in probe.order, "the tool started")
    stopped = time.monotonic()  # the first worker has stopped, after finishing the call
    async with harness.worker(tools=tools):
        result = await handle.result()
        elapsed = time.monotonic() - stopped
    print(f"\ngraceful stop → loop completed {elapsed:.2f} s after the first worker finished")
    assert result.output == "done"
    assert probe.order == ["slow"]  # the graceful worker finished the call; it did not rerun


async def test_worker_sigkilled_while_an_approval_is_pending(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    from orga.contracts.approvals import ApprovalDecision, ApprovalRecord

    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 8, "to": "kim"})]), Turn(text="sent to kim")]
    )
    worker_env = {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ORGA_TASK_QUEUE": harness.task_queue,
        "ORGA_PROVIDER": "openai",
        "OPENAI_BASE_URL": harness.model.openai_base_url,
        "OPENAI_API_KEY": "sk-test",
        "ORGA_TOOL_MODULES": "tests.sample_tools",
    }
    async with worker_process(worker_env) as first:
        handle = await harness.start("pay kim", model=model, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
        first.send_signal(signal.SIGKILL)
        await first.wait()
    async with worker_process(worker_env):
        # The new worker rebuilds the wait from history: the approval is still pending.
        [still] = (await pending(handle)).pending_approvals
        assert still.call_id == waiting.call_id
        assert abs((still.since - waiting.since).total_seconds()) < 1
        record = await handle.execute_update(
            "approve",
            ApprovalDecision(call_id=waiting.call_id, approved=True, approver="lee"),
            result_type=ApprovalRecord,
        )
        assert record.approved and record.approver == "lee"
        result = await asyncio.wait_for(handle.result(), 60)
        messages = await conversation(handle)
    assert result.output == "sent to kim"
    assert messages[2].tool_results[0].content == "sent 8 to kim"
