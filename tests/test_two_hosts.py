"""Two workers that share nothing but Temporal and one PostgreSQL store — two hosts, as far as
they can tell (separate processes and data directories) — run one loop between them."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.journal import Journal, ObservationsCollected
from orga.contracts.state import LoopResult
from orga.plugin import replayer
from orga.runtime.converter import data_converter
from orga.runtime.store import Store
from orga.scripted.server import Turn
from orga.worker.blobs import BlobStore
from tests.harness import Harness
from tests.helpers import ORGA, eventually, host_env, started_tool, worker_process

ROOT = Path(__file__).resolve().parent.parent


def host(
    env: WorkflowEnvironment, harness: Harness, name: str, tmp_path: Path, store: str
) -> dict[str, str]:
    """One host's worker environment: its own data directory, the shared store."""
    return host_env(env, harness, name, tmp_path, store, ORGA_TOOL_MODULES="tests.sample_tools")


async def test_a_loop_between_two_hosts_and_one_store(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path, postgres_url: str
) -> None:
    model = harness.new_model(
        [
            Turn(tool_calls=[("dump", {"kib": 400})]),  # a result kept out of history by host A
            Turn(tool_calls=[("pay_then_hang", {"amount": 900, "to": "bo", "hang": 30})]),
            Turn(text="paid bo"),
        ]
    )
    with Store(postgres_url) as store:
        client = await Client.connect(
            env.client.service_client.config.target_host,
            data_converter=data_converter(lambda: store),
        )
        loop_id = f"two-hosts-{uuid.uuid4().hex[:8]}"
        handle = await client.start_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content="pay bo")],
                config=LoopConfig(model=model, tools=["dump", "pay_then_hang"]),
            ),
            id=loop_id,
            task_queue=harness.task_queue,
            result_type=LoopResult,
        )
        async with worker_process(host(env, harness, "a", tmp_path, postgres_url)) as first:
            await started_tool(client, loop_id)
            await paid(store, "bo")  # host A committed the payment …
            first.send_signal(signal.SIGKILL)  # … and died before it could report it
            await first.wait()
        # Host B has never seen this loop: it replays A's history, reading back the 400 KB
        # result A kept in the store, and retries the payment — which the ledger has.
        async with worker_process(host(env, harness, "b", tmp_path, postgres_url)):
            result = await asyncio.wait_for(handle.result(), 120)
            journal = await handle.query("journal", result_type=Journal)
        assert result.output == "paid bo"
        assert await paid(store, "bo") == 1  # paid once, on two hosts
        await replayer(store).replay_workflow(await handle.fetch_history())
        # The payload guard's full text, written by host A, read by a third party.
        [cut] = [
            o
            for e in journal.entries
            if isinstance(e, ObservationsCollected)
            for o in e.outcomes
            if o.tool == "dump"
        ]
        assert cut.blob_ref is not None
        assert len(BlobStore(store).get(cut.blob_ref).encode()) > 400 * 1024
        process = await asyncio.create_subprocess_exec(
            ORGA,
            "blob",
            "get",
            cut.blob_ref,
            cwd=ROOT,
            env={
                **os.environ,
                "ORGA_STORE_URL": postgres_url,
                "ORGA_DATA_DIR": str(tmp_path / "c"),
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err
        assert len(out) > 400 * 1024 and out.startswith(b"0123456789abcdef")


async def paid(store: Store, recipient: str, at_least: int = 1) -> int:
    """How many payments ``recipient`` got, once there is at least ``at_least``."""

    async def count() -> int | None:
        found = await asyncio.to_thread(_count, store, recipient)
        return found if found >= at_least else None

    return await eventually(count, f"{recipient} paid {at_least} time(s)")


def _count(store: Store, recipient: str) -> int:
    with store.engine.connect() as db:
        exists: Any = db.execute(
            text("SELECT count(*) FROM information_schema.tables WHERE table_name = 'payments'")
        ).scalar_one()
        if not exists:
            return 0
        return int(
            db.execute(
                text("SELECT count(*) FROM payments WHERE recipient = :to"), {"to": recipient}
            ).scalar_one()
        )
