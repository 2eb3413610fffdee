"""``orga demo``: from a fresh clone to a loop's history in the Web UI, with one command.

Starts an embedded Temporal dev server if nothing answers at ``TEMPORAL_ADDRESS``, a worker in
this process, and — when no API key is configured — an offline scripted model on 127.0.0.1,
clearly labelled as such. Runs a loop that calls the ``add`` tool, prints the answer, the
workflow id and the Web UI link, and stops everything it started.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from pathlib import Path

from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.state import LoopResult
from orga.runtime.connect import connect, ensure_search_attributes
from orga.runtime.settings import Settings
from orga.scripted.offline import OFFLINE_MODEL, serve_offline_model
from orga.server.devserver import DevServer, address_answers

__all__ = ["DEMO_PROMPT", "DemoOutcome", "run_demo"]

DEMO_PROMPT = "What is 17 + 25? Use the add tool, then answer in one sentence."


@dataclass(frozen=True)
class DemoOutcome:
    """What the demo ran, for printing and for tests."""

    result: LoopResult
    workflow_id: str
    ui_url: str
    model_label: str
    started_server: bool


def _has_key(settings: Settings) -> bool:
    return any(p.api_key is not None for p in settings.providers.values())


async def run_demo(settings: Settings, data_dir: Path, *, ui_url: str) -> DemoOutcome:
    """Run the demo loop end to end and stop everything it started."""
    from orga.cli.worker import build_workers
    from orga.plugin import OrgaPlugin  # the workflow code, loaded only when the demo runs

    async with contextlib.AsyncExitStack() as stack:
        started = False
        if not address_answers(settings.temporal_address):
            host, _, port = settings.temporal_address.rpartition(":")
            server = DevServer(
                data_dir,
                ip=host or "127.0.0.1",
                port=int(port),
                ui_port=int(port) + 1000,
                quiet=True,
            )
            await server.start()
            stack.push_async_callback(server.stop)
            started = True
            ui_url = server.ui_url
        client = await connect(settings)
        await ensure_search_attributes(client)
        offline = not _has_key(settings)
        if offline:
            settings = stack.enter_context(serve_offline_model(settings))
        provider = settings.provider(None)
        label = (
            f"offline scripted model ({OFFLINE_MODEL}, no API key configured)"
            if offline
            else f"{provider.name} {provider.default_model}"
        )
        task_queue = f"orga-demo-{uuid.uuid4().hex[:8]}"
        plugin = OrgaPlugin(settings=settings)
        for worker in build_workers(client, settings, plugin, task_queue=task_queue):
            await stack.enter_async_context(worker)
        workflow_id = f"orga-demo-{uuid.uuid4().hex[:8]}"
        handle = await client.start_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content=DEMO_PROMPT)],
                config=LoopConfig(agent_id="demo", tools=["add"], max_iterations=6),
            ),
            id=workflow_id,
            task_queue=task_queue,
            result_type=LoopResult,
            static_summary="orga demo: add two numbers with a tool",
            request_eager_start=True,
        )
        result = await handle.result()
        return DemoOutcome(
            result=result,
            workflow_id=workflow_id,
            ui_url=f"{ui_url}/namespaces/{settings.temporal_namespace}/workflows/{workflow_id}",
            model_label=label,
            started_server=started,
        )
    raise AssertionError("unreachable")  # pragma: no cover - the stack always exits above
