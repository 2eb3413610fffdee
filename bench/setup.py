"""What every benchmark needs: the tuned embedded server, a scripted model, an orga worker and
two baselines side by side — the minimal loop a Temporal user writes (``bench/minimal.py``:
plain dicts, the default converter, nothing of orga) and the old "bare" loop that reuses orga's
provider code and types (``bench/bare.py``) — and helpers to run and measure loops."""

from __future__ import annotations

import socket
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bare import BareInput, BareLoopWorkflow
from bench.bare_activities import BareActivities
from bench.minimal import MinimalApprovalWorkflow, MinimalLoopWorkflow
from bench.minimal_activities import MinimalActivities
from orga.cli.worker import build_workers, settle_heap
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.plugin import OrgaPlugin, http_client
from orga.plugin import _build_registry as build_registry  # the plugin's own, for a bench worker
from orga.runtime.connect import connect, ensure_search_attributes
from orga.runtime.settings import ProviderSettings, Settings
from orga.scripted.server import RecordedRequest, ScriptedModelServer, Turn
from orga.server.devserver import DevServer
from orga.tools.sdk import Tool

__all__ = ["Bench", "bench", "bench_settings", "history_size"]

# Measure what a deployed worker does: it reads its modules' bytecode from __pycache__. With
# PYTHONDONTWRITEBYTECODE=1 (set on this project's machines) the sandbox would compile every
# workflow module's source again for every loop it starts — ~14 ms of CPU per loop, measured.
sys.dont_write_bytecode = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Bench:
    """A running benchmark environment."""

    client: Client
    plain: Client
    """A client with Temporal's default converter: the minimal loop's."""
    settings: Settings
    """The orga worker's settings (its server, store and model)."""

    async def minimal(self, prompt: str, model: str, tools: list[str]) -> str:
        """Run one minimal loop to completion; its workflow id."""
        workflow_id = f"minimal-{uuid.uuid4().hex[:10]}"
        await self.plain.execute_workflow(
            MinimalLoopWorkflow.run,
            {"messages": [{"role": "user", "content": prompt}], "model": model, "tools": tools},
            id=workflow_id,
            task_queue="bench-minimal",
            request_eager_start=True,
        )
        return workflow_id

    async def orga(self, prompt: str, model: str, tools: list[str], **config: Any) -> str:
        """Run one orga loop to completion; its workflow id."""
        workflow_id = f"orga-{uuid.uuid4().hex[:10]}"
        await self.client.execute_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content=prompt)],
                config=LoopConfig(model=model, tools=tools, **config),
            ),
            id=workflow_id,
            task_queue="bench-orga",
            request_eager_start=True,
        )
        return workflow_id

    async def bare(self, prompt: str, model: str, tools: list[str]) -> str:
        """Run one bare loop to completion; its workflow id."""
        workflow_id = f"bare-{uuid.uuid4().hex[:10]}"
        await self.client.execute_workflow(
            BareLoopWorkflow.run,
            BareInput(messages=[Message(role="user", content=prompt)], model=model, tools=tools),
            id=workflow_id,
            task_queue="bench-bare",
            request_eager_start=True,
        )
        return workflow_id


async def history_size(client: Client, workflow_id: str) -> tuple[int, int]:
    """Events and bytes of a workflow's history."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return len(history.events), sum(e.ByteSize() for e in history.events)


def bench_settings(address: str, model: ScriptedModelServer, data: Path) -> Settings:
    """A bench worker's settings: the dev server at ``address``, every model call to the
    scripted ``model`` over HTTP, its data in ``data``."""
    return Settings(
        temporal_address=address,
        providers={
            "openai": ProviderSettings(
                name="openai",
                base_url=model.openai_base_url,
                api_key=SecretStr("bench"),
                api_key_env="OPENAI_API_KEY",
                default_model="bench",
                official=False,
            )
        },
        default_provider="openai",
        data_dir=data,
    )


@asynccontextmanager
async def bench(
    responder: Callable[[RecordedRequest], Turn], tools: Iterable[Tool] = ()
) -> AsyncIterator[Bench]:
    """Server, model, both workers; torn down afterwards."""
    with tempfile.TemporaryDirectory() as data, ScriptedModelServer() as model:
        model.fallback(responder)
        server = DevServer(Path(data), port=_free_port(), headless=True)
        await server.start()
        try:
            settings = bench_settings(server.address, model, Path(data))
            client = await connect(settings)
            await ensure_search_attributes(client)
            async with http_client() as http:
                extra = list(tools)
                registry = build_registry(settings, extra)
                bare = BareActivities(settings, http, registry)
                plugin = OrgaPlugin(tools=extra, settings=settings, http=http, tracing=False)
                [orga_worker] = build_workers(  # no model task queue here: one worker
                    client, settings, plugin, task_queue="bench-orga"
                )
                bare_worker = Worker(
                    client,
                    task_queue="bench-bare",
                    workflows=[BareLoopWorkflow],
                    activities=[bare.call_model, bare.run_tool],
                )
                plain = await Client.connect(server.address)
                minimal = MinimalActivities(http, model.openai_base_url)
                minimal_worker = Worker(
                    plain,
                    task_queue="bench-minimal",
                    workflows=[MinimalLoopWorkflow, MinimalApprovalWorkflow],
                    activities=[minimal.call_model, minimal.run_tool, minimal.pay],
                )
                async with orga_worker, bare_worker, minimal_worker:
                    settle_heap()  # as `orga worker` does once its workers run
                    yield Bench(client, plain, settings)
        finally:
            await server.stop()
